package main

import (
	"fmt"
	"math"
	"slices"
)

// Summary condenses one series of samples. Each sample is already a per-operation figure (the
// mean of many calls, steps or layers in one repeat), so the median of the samples is the
// figure the table prints and the spread says how much repeats disagreed.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P25    float64 `json:"p25"` // first quartile, linear interpolation between order statistics
	P75    float64 `json:"p75"` // third quartile
	Mean   float64 `json:"mean"`
	// Samples are the raw samples in the order they were taken.
	Samples []float64 `json:"samples"`
}

// Summarize returns the summary of samples, which it does not modify. It returns an error for
// an empty series or one holding a NaN or an infinity: a broken measurement must not print as
// a number.
func Summarize(samples []float64) (Summary, error) {
	if len(samples) == 0 {
		return Summary{}, fmt.Errorf("no samples")
	}
	for i, v := range samples {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Summary{}, fmt.Errorf("sample %d is %v", i, v)
		}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	var sum float64
	for _, v := range sorted {
		sum += v
	}
	return Summary{
		N:       len(sorted),
		Median:  quantile(sorted, 0.5),
		Min:     sorted[0],
		Max:     sorted[len(sorted)-1],
		P25:     quantile(sorted, 0.25),
		P75:     quantile(sorted, 0.75),
		Mean:    sum / float64(len(sorted)),
		Samples: slices.Clone(samples),
	}, nil
}

// quantile returns the q-quantile of sorted (ascending, non-empty) by linear interpolation
// between the closest ranks (the "type 7" definition most tools use). For q = 0.5 it is the
// usual median: the middle sample, or the mean of the two middle ones.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	frac := pos - float64(lo)
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
}

// Spread is the relative width of the min–max range around the median, (max−min)/median: a
// quick way to see whether a row's repeats agree. It is 0 for a zero median.
func (s Summary) Spread() float64 {
	if s.Median == 0 {
		return 0
	}
	return (s.Max - s.Min) / math.Abs(s.Median)
}
