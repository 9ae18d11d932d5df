package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep"
)

// Labels of the in-process measures, also used by bench/README.md.
const (
	labelEPReplayWait = "ep.Replay + ep.SynchronizeCompute"
	labelEPReplayCtx  = "ep.Replay + Context().Synchronize"
	labelGoReplay     = "Go cudadrv GraphExec.Launch + Stream.Synchronize"
	labelEPBackToBack = "ep.Replay × L, one ep.SynchronizeCompute"
	labelGoBackToBack = "Go cudadrv GraphExec.Launch × L, one Stream.Synchronize"
)

// replayRows: replay + sync per step of 1-, 4- and 32-kernel steps through ep, against the
// cudadrv wrappers alone on a stream of the same priority. Ours is ep.Replay followed by
// ep.SynchronizeCompute, the one-stream wait ep offers a host (Synchronize is deferred by
// design; ForceSynchronize drains the whole device behind the capture gate). The second ep line replaces the drain by a
// plain cuCtxSynchronize on the provider's context, which separates what the drain adds.
func (b *bench) replayRows() ([]Row, error) {
	rows, err := b.stepRows("replay", b.replayRow)
	return rows, errors.Join(err, b.p.ForceSynchronize())
}

// stepRows makes the row of every step size the row filter selects, named kind/N, with row
// over one shared step; a row that fails resets the step's slot and ends the list.
func (b *bench) stepRows(kind string, row func(*step, int) (Row, error)) ([]Row, error) {
	s, err := b.newStep(b.sz.stepElems)
	if err != nil {
		return nil, err
	}
	defer s.release()
	var rows []Row
	for _, n := range b.sz.steps {
		if !b.cfg.rows.MatchString(fmt.Sprintf("%s/%d", kind, n)) {
			continue
		}
		r, err := row(s, n)
		if err != nil {
			return rows, errors.Join(fmt.Errorf("%s/%d: %w", kind, n, err), b.resetSlot(stepSlot))
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (b *bench) replayRow(s *step, n int) (Row, error) {
	p, raw := b.p, b.raw
	if err := s.capture(stepSlot, 0, n); err != nil {
		return Row{}, err
	}
	defer b.resetSlot(stepSlot)
	g, e, _, err := s.rawReady(n)
	if err != nil {
		return Row{}, err
	}
	defer s.destroyRaw(g, e)
	iters := b.sz.stepIters[n]
	in := b.inproc()
	samples, err := interleave(b.sz.reps, append([]arm{
		{labelEPReplayWait, func() (float64, error) {
			return perCallMicros(iters, func() error {
				if err := p.Replay(stepSlot); err != nil {
					return err
				}
				return p.SynchronizeCompute()
			})
		}},
		{labelEPReplayCtx, func() (float64, error) {
			return perCallMicros(iters, func() error {
				if err := p.Replay(stepSlot); err != nil {
					return err
				}
				return b.ctx.Synchronize()
			})
		}},
		{labelGoReplay, func() (float64, error) {
			return perCallMicros(iters, func() error {
				if err := e.Launch(raw.stream); err != nil {
					return err
				}
				return raw.stream.Synchronize()
			})
		}},
	}, inprocArm(in, labelInprocReplay, func() (float64, error) { return in.replaySync(n, iters) })...)...)
	if err != nil {
		return Row{}, err
	}
	return Row{
		ID: fmt.Sprintf("replay/%d", n), Group: "graph replay",
		Title: fmt.Sprintf("replay+sync %d-kernel step (ep, Go)", n),
		Ours:  measure(labelEPReplayWait, SourceEP, UnitMicros, samples[0]),
		Baselines: []Measure{
			inprocMeasure(in, labelInprocReplay, samples, 3),
			measure(labelEPReplayCtx, SourceEP, UnitMicros, samples[1]),
			measure(labelGoReplay, SourceGoRaw, UnitMicros, samples[2]),
		},
		Notes: []string{fmt.Sprintf("ep.SynchronizeCompute waits with wait_mode=%s, the default (%s); wait/%d compares the modes", p.WaitMode(), p.WaitModeReason(), n)},
	}, nil
}

// throughputRows: back-to-back replays, the throughput of a host that queues many steps and
// waits once: b2bLaunches replays of the n-kernel step, then one wait, in µs per replay.
// Ours is ep.Replay each time and one ep.SynchronizeCompute; the baselines launch the same
// step with cudadrv (GraphExec.Launch, then Stream.Synchronize) and from raw C, in this
// process (bench/baselines/raw_inproc.c) and in the raw C program.
func (b *bench) throughputRows() ([]Row, error) {
	return b.stepRows("throughput", b.throughputRow)
}

func (b *bench) throughputRow(s *step, n int) (Row, error) {
	p, raw := b.p, b.raw
	if err := s.capture(stepSlot, 0, n); err != nil {
		return Row{}, err
	}
	defer b.resetSlot(stepSlot)
	g, e, _, err := s.rawReady(n)
	if err != nil {
		return Row{}, err
	}
	defer s.destroyRaw(g, e)
	launches := b.sz.b2bLaunches
	backToBack := func(launch, wait func() error) (float64, error) {
		start := time.Now()
		for range launches {
			if err := launch(); err != nil {
				return 0, err
			}
		}
		if err := wait(); err != nil {
			return 0, err
		}
		return micros(time.Since(start)) / float64(launches), nil
	}
	in := b.inproc()
	samples, err := interleave(b.sz.reps, append([]arm{
		{labelEPBackToBack, func() (float64, error) {
			return backToBack(func() error { return p.Replay(stepSlot) }, p.SynchronizeCompute)
		}},
		{labelGoBackToBack, func() (float64, error) {
			return backToBack(func() error { return e.Launch(raw.stream) }, raw.stream.Synchronize)
		}},
	}, inprocArm(in, labelInprocB2B, func() (float64, error) { return in.backToBack(n, launches) })...)...)
	if err != nil {
		return Row{}, err
	}
	return Row{
		ID: fmt.Sprintf("throughput/%d", n), Group: "throughput",
		Title: fmt.Sprintf("back-to-back replays, %d-kernel step (ep, Go)", n),
		Ours:  measure(labelEPBackToBack, SourceEP, UnitMicros, samples[0]),
		Baselines: []Measure{
			inprocMeasure(in, labelInprocB2B, samples, 2),
			measure(labelGoBackToBack, SourceGoRaw, UnitMicros, samples[1]),
		},
		Notes: []string{fmt.Sprintf("µs per replay: %d replays queued back to back, then one wait (ep.SynchronizeCompute, wait_mode=%s)", launches, p.WaitMode())},
	}, nil
}

// enqueueRows: the host cost of one graph launch, ep.Replay of a 1-kernel step against
// GraphExec.Launch, with the queue drained every syncEvery calls off the clock.
func (b *bench) enqueueRows() ([]Row, error) {
	s, err := b.newStep(b.sz.stepElems)
	if err != nil {
		return nil, err
	}
	defer s.release()
	if err := s.capture(stepSlot, 0, 1); err != nil {
		return nil, err
	}
	defer b.resetSlot(stepSlot)
	g, e, _, err := s.rawReady(1)
	if err != nil {
		return nil, err
	}
	defer s.destroyRaw(g, e)
	p, raw := b.p, b.raw
	calls, every := b.sz.enqCalls, b.sz.syncEvery
	in := b.inproc()
	// The diagnostic arm launches the raw step's executable on ep's compute stream through the
	// backend (no ep, no cudadrv checks): against GraphExec.Launch on the raw stream it shows
	// what the stream costs, against ep.Replay what ep's own path costs.
	be, compute := b.ctx.Backend(), cudadrv.RawStream(p.StreamHandle())
	samples, err := interleave(b.sz.reps, append([]arm{
		{"ep.Replay", func() (float64, error) {
			return enqueueMicros(calls, every, func() error { return p.Replay(stepSlot) }, p.SynchronizeCompute)
		}},
		{"GraphExec.Launch", func() (float64, error) {
			return enqueueMicros(calls, every, func() error { return e.Launch(raw.stream) }, raw.stream.Synchronize)
		}},
		{"backend GraphLaunch on ep's stream", func() (float64, error) {
			return enqueueMicros(calls, every, func() error { return be.GraphLaunch(e.Raw(), compute) }, p.SynchronizeCompute)
		}},
	}, inprocArm(in, labelInprocEnqueue, func() (float64, error) { return in.enqueueGraph(calls, every) })...)...)
	if err != nil {
		return nil, err
	}
	return []Row{{
		ID: "enqueue/graph-launch", Group: "enqueue",
		Title: "one graph-launch enqueue, host (ep, Go)",
		Ours:  measure("ep.Replay (1-kernel step)", SourceEP, UnitMicros, samples[0]),
		Baselines: []Measure{
			inprocMeasure(in, labelInprocEnqueue, samples, 3),
			measure("Go cudadrv GraphExec.Launch", SourceGoRaw, UnitMicros, samples[1]),
			measure("Go backend GraphLaunch of the raw step on ep's compute stream (diagnostic)", SourceGoRaw, UnitMicros, samples[2]),
		},
		Notes: []string{fmt.Sprintf("host time per call; the queue is drained every %d calls with the clock stopped", every)},
	}}, nil
}

// captureRows: capture → ready (begin, the launches, end, instantiate with node priority,
// upload) through ep against the same sequence on the cudadrv wrappers; teardown untimed.
func (b *bench) captureRows() ([]Row, error) {
	s, err := b.newStep(b.sz.stepElems)
	if err != nil {
		return nil, err
	}
	defer s.release()
	var rows []Row
	for _, n := range b.sz.steps {
		if !b.cfg.rows.MatchString(fmt.Sprintf("capture/%d", n)) {
			continue
		}
		iters := b.sz.captureIters[n]
		samples, err := interleave(b.sz.reps,
			arm{"ep capture", func() (float64, error) {
				return timedMicros(iters, func() (time.Duration, error) {
					start := time.Now()
					if err := s.capture(stepSlot, 0, n); err != nil {
						return 0, err
					}
					d := time.Since(start)
					return d, b.resetSlot(stepSlot)
				})
			}},
			arm{"raw capture", func() (float64, error) {
				return timedMicros(iters, func() (time.Duration, error) {
					g, e, d, err := s.rawReady(n)
					if err != nil {
						return 0, err
					}
					return d, s.destroyRaw(g, e)
				})
			}},
		)
		if err != nil {
			return rows, errors.Join(fmt.Errorf("capture/%d: %w", n, err), b.resetSlot(stepSlot))
		}
		rows = append(rows, Row{
			ID: fmt.Sprintf("capture/%d", n), Group: "capture",
			Title: fmt.Sprintf("capture→ready %d-kernel step (ep, Go)", n),
			Ours:  measure("ep BeginCapture…EndCapture", SourceEP, UnitMicros, samples[0]),
			Baselines: []Measure{
				measure("Go cudadrv capture+instantiate+upload", SourceGoRaw, UnitMicros, samples[1]),
			},
		})
	}
	return rows, nil
}

// updateRows: recapturing an installed step whose topology is unchanged, through ep.Recapture
// (cuGraphExecUpdate in place) against ResetGraph + BeginCapture (a new instantiation).
func (b *bench) updateRows() ([]Row, error) {
	return b.stepRows("update", b.updateRow)
}

func (b *bench) updateRow(s *step, n int) (Row, error) {
	if err := s.capture(stepSlot, 0, n); err != nil {
		return Row{}, err
	}
	defer b.resetSlot(stepSlot)
	before, err := b.p.GraphStats(stepSlot)
	if err != nil {
		return Row{}, err
	}
	iters := b.sz.captureIters[n]
	samples, err := interleave(b.sz.reps,
		arm{"ep Recapture", func() (float64, error) {
			return timedMicros(iters, func() (time.Duration, error) {
				start := time.Now()
				err := s.recapture(stepSlot, n)
				return time.Since(start), err
			})
		}},
		arm{"ep Reset+Begin", func() (float64, error) {
			return timedMicros(iters, func() (time.Duration, error) {
				start := time.Now()
				if err := b.resetSlot(stepSlot); err != nil {
					return 0, err
				}
				err := s.capture(stepSlot, 0, n)
				return time.Since(start), err
			})
		}},
	)
	if err != nil {
		return Row{}, err
	}
	after, err := b.p.GraphStats(stepSlot)
	if err != nil {
		return Row{}, err
	}
	row := Row{
		ID: fmt.Sprintf("update/%d", n), Group: "update",
		Title: fmt.Sprintf("recapture %d-kernel step: update (ep, Go)", n),
		Ours:  measure("ep Recapture…EndCapture (exec update)", SourceEP, UnitMicros, samples[0]),
		Baselines: []Measure{
			measure("ep ResetGraph+BeginCapture…EndCapture (instantiate)", SourceEP, UnitMicros, samples[1]),
		},
	}
	updates, refusals := after.Updates-before.Updates, after.UpdateRefusals-before.UpdateRefusals
	if updates == 0 || refusals > 0 {
		row.Notes = append(row.Notes, fmt.Sprintf("expected in-place updates: %d updates, %d refusals", updates, refusals))
	}
	return row, nil
}

// seamRows: the price of a host seam in a 4-kernel step. Monolithic: Replay, then read 4 bytes
// of the result (CopyToHost: a D2H copy and a stream synchronization). Segmented: replay the
// first two kernels, a host seam (read 4 bytes), replay the last two, read 4 bytes. The
// segmented step runs in the Verify slot so that both stay installed and the arms alternate;
// both produce bit-identical results (checked once, off the clock).
func (b *bench) seamRows() ([]Row, error) {
	const kernels = 4
	p := b.p
	s, err := b.newStep(b.sz.stepElems)
	if err != nil {
		return nil, err
	}
	defer s.release()
	mono, seg := stepSlot, ep.Verify
	if err := s.capture(mono, 0, kernels); err != nil {
		return nil, err
	}
	defer b.resetSlot(mono)
	if err := s.capture(seg, 0, kernels/2); err != nil {
		return nil, err
	}
	defer b.resetSlot(seg)
	if err := s.capture(seg, kernels/2, kernels/2); err != nil {
		return nil, err
	}
	if got := p.SegmentCount(seg); got != 2 {
		return nil, fmt.Errorf("segmented step has %d segments, want 2", got)
	}
	sink := make([]byte, 4)
	monoStep := func() error {
		if err := p.Replay(mono); err != nil {
			return err
		}
		return p.CopyToHost(sink, s.a, 0)
	}
	segStep := func() error {
		if err := p.ReplaySegment(seg, 0); err != nil {
			return err
		}
		if err := p.CopyToHost(sink, s.a, 0); err != nil { // the host seam
			return err
		}
		if err := p.ReplaySegment(seg, 1); err != nil {
			return err
		}
		return p.CopyToHost(sink, s.a, 0)
	}
	if err := b.checkSeamIdentity(s, monoStep, segStep); err != nil {
		return nil, err
	}
	iters := b.sz.seamIters
	samples, err := interleave(b.sz.reps,
		arm{"monolithic", func() (float64, error) { return perCallMicros(iters, monoStep) }},
		arm{"segmented", func() (float64, error) { return perCallMicros(iters, segStep) }},
		arm{"host seam alone", func() (float64, error) {
			return perCallMicros(iters, func() error { return p.CopyToHost(sink, s.a, 0) })
		}},
	)
	if err != nil {
		return nil, err
	}
	price := make([]float64, len(samples[0]))
	for i := range price {
		price[i] = samples[1][i] - samples[0][i]
	}
	return []Row{
		{ID: "seam/monolithic", Group: "seam", Title: "4-kernel step + 4 B read (ep, Go)",
			Ours: measure("ep Replay + CopyToHost 4 B", SourceEP, UnitMicros, samples[0])},
		{ID: "seam/segmented", Group: "seam", Title: "same step segmented at a host seam (ep, Go)",
			Ours: measure("ep ReplaySegment·2 + CopyToHost 4 B·2", SourceEP, UnitMicros, samples[1])},
		{ID: "seam/price", Group: "seam", Title: "seam price: segmented − monolithic (ep, Go)",
			Ours: measure("per-repeat difference", SourceEP, UnitMicros, price),
			Baselines: []Measure{
				measure("ep CopyToHost 4 B alone (host seam)", SourceEP, UnitMicros, samples[2]),
			}},
	}, nil
}

// checkSeamIdentity runs one monolithic and one segmented step from the same input and checks
// that both give the reference result bit for bit.
func (b *bench) checkSeamIdentity(s *step, monoStep, segStep func() error) error {
	out := func(run func() error) ([]byte, error) {
		if err := s.reset(); err != nil {
			return nil, err
		}
		if err := run(); err != nil {
			return nil, err
		}
		buf := make([]byte, 4*s.n)
		return buf, b.p.CopyToHost(buf, s.a, 0)
	}
	m, err := out(monoStep)
	if err != nil {
		return err
	}
	g, err := out(segStep)
	if err != nil {
		return err
	}
	want := chainReference(s.initial, floatPattern(s.n, 1.25), 4)
	if !bytes.Equal(m, want) {
		return fmt.Errorf("the monolithic step's result differs from the reference")
	}
	if !bytes.Equal(g, want) {
		return fmt.Errorf("the segmented step's result differs from the monolithic one")
	}
	return s.reset()
}

// chainReference computes, in float32 as the device does, a after kernels links of the chain
// c = a + b, a = c + b, … (when kernels is even the result is in a).
func chainReference(a, bb []byte, kernels int) []byte {
	n := len(a) / 4
	out := make([]byte, len(a))
	for i := range n {
		av := math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:]))
		bv := math.Float32frombits(binary.LittleEndian.Uint32(bb[4*i:]))
		cv := float32(0)
		for k := range kernels {
			if k%2 == 0 {
				cv = av + bv
			} else {
				av = cv + bv
			}
		}
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(av))
	}
	return out
}

// allocRows: Go heap allocations (runtime mallocs) and device allocations (the provider's
// counters) over allocSteps replays of a 4-kernel step, each followed by a synchronization of
// the provider's context. Both must be 0.
func (b *bench) allocRows() ([]Row, error) {
	const kernels = 4
	p := b.p
	s, err := b.newStep(b.sz.stepElems)
	if err != nil {
		return nil, err
	}
	defer s.release()
	if err := s.capture(stepSlot, 0, kernels); err != nil {
		return nil, err
	}
	defer b.resetSlot(stepSlot)
	replayCtx := func() error {
		if err := p.Replay(stepSlot); err != nil {
			return err
		}
		return b.ctx.Synchronize()
	}
	replayForce := func() error {
		if err := p.Replay(stepSlot); err != nil {
			return err
		}
		return p.ForceSynchronize()
	}
	// A collection empties every sync.Pool (purego's and cudadrv/cuda's argument pools among
	// them), and the first calls after it refill them: a few steps run between the collection
	// and the first reading so that the count is the steady state's, not the refill's.
	count := func(step func() error) (heap, dev uint64, err error) {
		var m0, m1 runtime.MemStats
		runtime.GC()
		for range 16 {
			if err := step(); err != nil {
				return 0, 0, err
			}
		}
		runtime.ReadMemStats(&m0)
		d0 := p.Stats().Allocs
		for range b.sz.allocSteps {
			if err := step(); err != nil {
				return 0, 0, err
			}
		}
		d1 := p.Stats().Allocs
		runtime.ReadMemStats(&m1)
		return m1.Mallocs - m0.Mallocs, d1 - d0, nil
	}
	for range b.sz.allocSteps / 10 { // warm-up
		if err := replayCtx(); err != nil {
			return nil, err
		}
	}
	var heap, dev []float64
	for range 3 {
		h, d, err := count(replayCtx)
		if err != nil {
			return nil, err
		}
		heap, dev = append(heap, float64(h)), append(dev, float64(d))
	}
	fh, _, err := count(replayForce)
	if err != nil {
		return nil, err
	}
	label := fmt.Sprintf("over %d × (ep.Replay + Context().Synchronize)", b.sz.allocSteps)
	rows := []Row{
		{ID: "allocs/heap", Group: "allocations", Title: "Go heap allocations per replay run (ep, Go)",
			Ours: measure(label, SourceEP, UnitCount, heap)},
		{ID: "allocs/device", Group: "allocations", Title: "device allocations per replay run (ep, Go)",
			Ours: measure(label, SourceEP, UnitCount, dev)},
	}
	if maxHeap := slices.Max(heap); float64(fh) > maxHeap {
		rows[0].Notes = append(rows[0].Notes, fmt.Sprintf(
			"with ep.ForceSynchronize as the per-step drain instead of Context().Synchronize: %d allocations over %d steps (%.0f with Context().Synchronize), %.2f more per step — ep.ForceSynchronize itself allocates",
			fh, b.sz.allocSteps, maxHeap, (float64(fh)-maxHeap)/float64(b.sz.allocSteps)))
		sites, err := allocSites(func() error {
			for range b.sz.allocSteps {
				if err := p.ForceSynchronize(); err != nil {
					return err
				}
			}
			return nil
		}, 2)
		if err != nil {
			return nil, err
		}
		rows[0].Notes = append(rows[0].Notes, fmt.Sprintf("ep.ForceSynchronize's allocations over %d calls, by site: %s",
			b.sz.allocSteps, strings.Join(sites, "; ")))
	}
	if slices.Max(heap) > 0 {
		sites, err := allocSites(func() error {
			for range b.sz.allocSteps {
				if err := replayCtx(); err != nil {
					return err
				}
			}
			return nil
		}, 4)
		if err != nil {
			return nil, err
		}
		rows[0].Notes = append(rows[0].Notes, fmt.Sprintf("where the heap allocations of %d more steps right after a collection came from (every allocation profiled; refilling the sync.Pools the collection emptied is included): %s",
			b.sz.allocSteps, strings.Join(sites, "; ")))
	}
	for i := range rows {
		rows[i].Goal = goalZero(&rows[i], b.onGPU)
	}
	return rows, nil
}

// goalZero is the goal "must print 0" of the allocation rows. On the simulated device the
// simulator's own worker goroutines share the process's heap counters, so a non-zero heap
// figure there is reported but not judged.
func goalZero(row *Row, onGPU bool) *Goal {
	g := &Goal{Text: "= 0"}
	if !row.Ours.Measured() {
		g.Detail = "not evaluated: not measured"
		return g
	}
	v := row.Ours.Summary.Max
	if !onGPU && row.ID == "allocs/heap" && v != 0 {
		g.Detail = fmt.Sprintf("max %.0f on the simulated device, whose stream workers run in this process and allocate there", v)
		return g
	}
	g.Met = boolPtr(v == 0)
	g.Detail = fmt.Sprintf("max over repeats %.0f", v)
	return g
}
