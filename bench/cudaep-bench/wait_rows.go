package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep"
)

// Labels of the wait rows' in-process measures.
const (
	labelEPWaitSpin  = "ep.Replay + ep.SynchronizeCompute, wait_mode=spin"
	labelEPWaitBlock = "ep.Replay + ep.SynchronizeCompute, wait_mode=block"
	labelGoWordSpin  = "Go cudadrv GraphExec.Launch + CompletionWord Signal + Spin"
)

// rawSpinBudget is how long the Go raw arm spins before it synchronizes the stream, as ep's
// spin mode does.
const rawSpinBudget = time.Millisecond

// waitRows: replay + wait per step of 1-, 4- and 32-kernel steps, the wait made each way ep
// offers, side by side: two providers on the run's device, one with wait_mode=spin and one
// with wait_mode=block, each replaying its own copy of the step; and the same step on the raw
// stream, launched with the cudadrv wrappers and awaited by spinning on a completion word.
// The raw C counterparts (bench/baselines/raw_step_bench.c) are the driver's stream
// synchronization, the same word written by a cuStreamWriteValue32 queued after the launch,
// and a word written by a write-value node captured at the end of the graph.
func (b *bench) waitRows() ([]Row, error) {
	spin, err := b.openProvider(ep.WaitSpin)
	if err != nil {
		return nil, err
	}
	defer spin.Close()
	block, err := b.openProvider(ep.WaitBlock)
	if err != nil {
		return nil, err
	}
	defer block.Close()
	ss, err := b.newStepOn(spin, b.sz.stepElems)
	if err != nil {
		return nil, err
	}
	defer ss.release()
	sb, err := b.newStepOn(block, b.sz.stepElems)
	if err != nil {
		return nil, err
	}
	defer sb.release()
	if err := b.ctx.Bind(); err != nil { // the raw arm's calls run in the context as bound here
		return nil, err
	}
	word, err := b.raw.stream.NewCompletionWord()
	if err != nil {
		return nil, fmt.Errorf("the raw arm's completion word: %w", err)
	}
	defer func() {
		_ = b.raw.stream.Synchronize()
		_ = word.Free()
	}()
	var rows []Row
	for _, n := range b.sz.steps {
		if !b.cfg.rows.MatchString(fmt.Sprintf("wait/%d", n)) {
			continue
		}
		row, err := b.waitRow(ss, sb, word, n)
		if err != nil {
			return rows, fmt.Errorf("wait/%d: %w", n, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// openProvider opens a second provider on the run's backend with the given wait mode.
func (b *bench) openProvider(mode string) (*ep.Provider, error) {
	opts := b.p.Options()
	opts.WaitMode = mode
	p, err := ep.New(opts)
	if err != nil {
		return nil, fmt.Errorf("open a provider with wait_mode=%s: %w", mode, err)
	}
	if got := p.WaitMode(); got != mode {
		return nil, errors.Join(fmt.Errorf("wait_mode=%s gave %s", mode, got), p.Close())
	}
	return p, nil
}

func (b *bench) waitRow(ss, sb *step, word *cudadrv.CompletionWord, n int) (Row, error) {
	for _, s := range []*step{ss, sb} {
		if err := s.capture(stepSlot, 0, n); err != nil {
			return Row{}, err
		}
		defer func(p *ep.Provider) { _, _ = p.ResetGraph(stepSlot) }(s.p)
	}
	g, e, _, err := ss.rawReady(n)
	if err != nil {
		return Row{}, err
	}
	defer ss.destroyRaw(g, e)
	raw := b.raw
	replayWait := func(p *ep.Provider) func() error {
		return func() error {
			if err := p.Replay(stepSlot); err != nil {
				return err
			}
			return p.SynchronizeCompute()
		}
	}
	fallbacks := 0
	rawWord := func() error {
		if err := e.Launch(raw.stream); err != nil {
			return err
		}
		seq, err := word.Signal()
		if err != nil {
			return err
		}
		if word.Spin(seq, rawSpinBudget) {
			return nil
		}
		fallbacks++
		return raw.stream.Synchronize()
	}
	iters := b.sz.stepIters[n]
	in := b.inproc()
	arms := []arm{
		{labelEPWaitSpin, func() (float64, error) { return perCallMicros(iters, replayWait(ss.p)) }},
		{labelEPWaitBlock, func() (float64, error) { return perCallMicros(iters, replayWait(sb.p)) }},
		{labelGoWordSpin, func() (float64, error) { return perCallMicros(iters, rawWord) }},
	}
	arms = append(arms, inprocArm(in, labelInprocReplay, func() (float64, error) { return in.replaySync(n, iters) })...)
	arms = append(arms, inprocArm(in, labelInprocWord, func() (float64, error) { return in.replayWord(n, iters) })...)
	samples, err := interleave(b.sz.reps, arms...)
	if err != nil {
		return Row{}, err
	}
	row := Row{
		ID: fmt.Sprintf("wait/%d", n), Group: "replay wait",
		Title: fmt.Sprintf("replay+wait %d-kernel step, spin (ep, Go)", n),
		Ours:  measure(labelEPWaitSpin, SourceEP, UnitMicros, samples[0]),
		Baselines: []Measure{
			inprocMeasure(in, labelInprocReplay, samples, 3),
			inprocMeasure(in, labelInprocWord, samples, 4),
			measure(labelEPWaitBlock, SourceEP, UnitMicros, samples[1]),
			measure(labelGoWordSpin, SourceGoRaw, UnitMicros, samples[2]),
		},
	}
	if fallbacks > 0 {
		row.Notes = append(row.Notes, fmt.Sprintf("the raw word arm spun past %v and synchronized the stream %d times", rawSpinBudget, fallbacks))
	}
	row.Notes = append(row.Notes, fmt.Sprintf("one clock reading (time.Now) costs %.3f µs in this process: the spin reads none in its first 1024 polls", clockMicros()))
	return row, nil
}

// clockMicros is the mean cost of one time.Now in µs, over 10000 readings: a spin that reads
// the clock while the word lands sees the word only after the reading returns.
func clockMicros() float64 {
	const n = 10000
	start := time.Now()
	var last time.Time
	for range n {
		last = time.Now()
	}
	return micros(last.Sub(start)) / n
}
