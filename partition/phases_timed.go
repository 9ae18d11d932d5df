//go:build cudaep_phases

package partition

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// A measurement build's timing of Run: the duration of every phase of each run that
// replayed a graph captured earlier (the steady state of a decode loop), kept per partition
// (the last phaseRuns runs) and printed to stderr, medians and 90th percentiles, when the
// partition is released; also the host's copies through its data transfer (ORT's CopyTensors) between
// them.

const phaseRuns = 4096

type phaseClock struct {
	t  time.Time
	at [phases]time.Duration
	on phase
}

type phaseLog struct {
	mu    sync.Mutex
	runs  [][phases + 1]time.Duration // the phases, then the whole Run
	other int
}

var phaseLogs sync.Map // *Partition → *phaseLog

var copies struct {
	mu sync.Mutex
	d  [2][2][]time.Duration // by source, destination on the GPU
}

func startPhases() phaseClock { return phaseClock{t: time.Now()} }

func (c *phaseClock) mark(p phase) {
	now := time.Now()
	c.at[p] += now.Sub(c.t)
	c.t = now
}

func (c *phaseClock) done(pt *Partition, replayed bool) {
	v, _ := phaseLogs.LoadOrStore(pt, &phaseLog{})
	l := v.(*phaseLog)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !replayed {
		l.other++
		return
	}
	var r [phases + 1]time.Duration
	copy(r[:], c.at[:])
	for _, d := range c.at {
		r[phases] += d
	}
	if len(l.runs) == phaseRuns {
		l.runs = l.runs[1:]
	}
	l.runs = append(l.runs, r)
}

func (pt *Partition) reportPhases() {
	v, ok := phaseLogs.LoadAndDelete(pt)
	if !ok {
		return
	}
	l := v.(*phaseLog)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.runs) == 0 {
		return
	}
	fmt.Fprintf(os.Stderr, "PHASES partition %s: %d replaying runs (%d others); µs median / p90:", pt.name, len(l.runs), l.other)
	for p := range phases + 1 {
		name := "total"
		if p < phases {
			name = phaseNames[p]
		}
		med, p90 := quantiles(l.runs, p)
		fmt.Fprintf(os.Stderr, " %s %.1f/%.1f;", name, med, p90)
	}
	copies.mu.Lock()
	for from := range 2 {
		for to := range 2 {
			if d := slices.Clone(copies.d[from][to]); len(d) > 0 {
				slices.Sort(d)
				fmt.Fprintf(os.Stderr, " copy tensor %s->%s (%d) %.1f/%.1f;", [2]string{"host", "gpu"}[from], [2]string{"host", "gpu"}[to],
					len(d), us(d[len(d)/2]), us(d[len(d)*9/10]))
				copies.d[from][to] = copies.d[from][to][:0]
			}
		}
	}
	copies.mu.Unlock()
	fmt.Fprintln(os.Stderr)
}

func quantiles(runs [][phases + 1]time.Duration, p phase) (float64, float64) {
	d := make([]time.Duration, len(runs))
	for i, r := range runs {
		d[i] = r[p]
	}
	slices.Sort(d)
	return us(d[len(d)/2]), us(d[len(d)*9/10])
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// TimeCopy starts timing one of the host's copies between host and device memory (its data
// transfer, between runs); the returned func ends it. Free unless built with cudaep_phases.
func TimeCopy(from, to bool) func() {
	t := time.Now()
	return func() {
		d := time.Since(t)
		f, g := 0, 0
		if from {
			f = 1
		}
		if to {
			g = 1
		}
		copies.mu.Lock()
		if len(copies.d[f][g]) < phaseRuns {
			copies.d[f][g] = append(copies.d[f][g], d)
		}
		copies.mu.Unlock()
	}
}
