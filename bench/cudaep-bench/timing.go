package main

import (
	"fmt"
	"time"
)

// arm is one side of a comparison: sample takes one sample (a per-operation figure).
type arm struct {
	name   string
	sample func() (float64, error)
}

// interleave warms every arm up with one discarded sample, then takes reps samples of each,
// rotating which arm goes first in each repeat so that drift on the machine (clocks, other
// load) favours none of them. It returns the samples per arm, in the arms' order.
func interleave(reps int, arms ...arm) ([][]float64, error) {
	for _, a := range arms {
		if _, err := a.sample(); err != nil {
			return nil, fmt.Errorf("%s (warm-up): %w", a.name, err)
		}
	}
	out := make([][]float64, len(arms))
	for rep := range reps {
		for i := range arms {
			k := (i + rep) % len(arms)
			v, err := arms[k].sample()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", arms[k].name, err)
			}
			out[k] = append(out[k], v)
		}
	}
	return out, nil
}

// perCallMicros runs op iters times and returns the mean wall time per call in µs. op must end
// in whatever synchronization makes its device work finished (a replay step includes its sync).
func perCallMicros(iters int, op func() error) (float64, error) {
	start := time.Now()
	for range iters {
		if err := op(); err != nil {
			return 0, err
		}
	}
	return micros(time.Since(start)) / float64(iters), nil
}

// enqueueMicros times only the enqueueing: op is called calls times, and every syncEvery calls
// the clock stops while sync drains the queue (so the queue never fills and the figure is the
// host's cost per call). It returns µs per call.
func enqueueMicros(calls, syncEvery int, op, sync func() error) (float64, error) {
	var spent time.Duration
	for done := 0; done < calls; {
		batch := min(syncEvery, calls-done)
		start := time.Now()
		for range batch {
			if err := op(); err != nil {
				return 0, err
			}
		}
		spent += time.Since(start)
		if err := sync(); err != nil {
			return 0, err
		}
		done += batch
	}
	return micros(spent) / float64(calls), nil
}

// timedMicros runs op iters times, where each call returns the part of its time that counts
// (setup and teardown left out), and returns the mean in µs.
func timedMicros(iters int, op func() (time.Duration, error)) (float64, error) {
	var total time.Duration
	for range iters {
		d, err := op()
		if err != nil {
			return 0, err
		}
		total += d
	}
	return micros(total) / float64(iters), nil
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
