package main

import "fmt"

// diagRows are the costs a miss is explained with, each against its raw C counterpart: the
// context bind the ep entry points make (cuCtxSetCurrent; all but Replay, ReplaySegment,
// SynchronizeCompute and the deferred Synchronize, which bind only when refused), and the
// synchronizations with nothing queued — a stream's, the context's, and ep.ForceSynchronize,
// which is the context's behind the capture gate. They carry no goal.
func (b *bench) diagRows() ([]Row, error) {
	p, raw := b.p, b.raw
	calls := b.sz.enqCalls
	samples, err := interleave(b.sz.reps,
		arm{"Context.Bind", func() (float64, error) { return perCallMicros(calls, b.ctx.Bind) }},
		arm{"Stream.Synchronize idle", func() (float64, error) { return perCallMicros(calls, raw.stream.Synchronize) }},
		arm{"Context.Synchronize idle", func() (float64, error) { return perCallMicros(calls, b.ctx.Synchronize) }},
		arm{"ep.ForceSynchronize idle", func() (float64, error) { return perCallMicros(calls, p.ForceSynchronize) }},
	)
	if err != nil {
		return nil, err
	}
	row := func(id, title string, ours Measure) Row {
		return Row{ID: id, Group: "diagnostics", Title: title, Ours: ours}
	}
	rows := []Row{
		row("diag/ctx-bind", "bind the context (ep calls but replay and wait)", measure("Go cudadrv Context.Bind (cuCtxSetCurrent)", SourceGoRaw, UnitMicros, samples[0])),
		row("diag/stream-sync-idle", "stream sync, nothing queued", measure("Go cudadrv Stream.Synchronize", SourceGoRaw, UnitMicros, samples[1])),
		row("diag/ctx-sync-idle", "context sync, nothing queued", measure("Go cudadrv Context.Synchronize", SourceGoRaw, UnitMicros, samples[2])),
		row("diag/force-sync-idle", "ep drain, nothing queued", measure("ep.ForceSynchronize", SourceEP, UnitMicros, samples[3])),
	}
	if b.cfg.rows.MatchString("diag/replay32-poll") {
		row, err := b.pollRow()
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	rows[3].Notes = append(rows[3].Notes, fmt.Sprintf("ep.ForceSynchronize = bind + capture-gate drain + cuCtxSynchronize; compare diag/ctx-sync-idle (%d calls per sample)", calls))
	return rows, nil
}

// pollRow tests why a long blocking synchronization costs more from Go than from C: it replays
// the 32-kernel step on the raw stream and waits either with Stream.Synchronize (one driver
// call blocking about 40 µs, long enough for the Go scheduler to hand the thread's P to
// another thread, which the call must win back on return) or by polling Stream.Query (many
// short calls). If polling closes the gap to raw C, the gap is the scheduler's, not the
// driver call's.
func (b *bench) pollRow() (Row, error) {
	const kernels = 32
	raw := b.raw
	s, err := b.newStep(b.sz.stepElems)
	if err != nil {
		return Row{}, err
	}
	defer s.release()
	g, e, _, err := s.rawReady(kernels)
	if err != nil {
		return Row{}, err
	}
	defer s.destroyRaw(g, e)
	iters := b.sz.stepIters[kernels]
	poll := func() error {
		for {
			done, err := raw.stream.Query()
			if err != nil || done {
				return err
			}
		}
	}
	samples, err := interleave(b.sz.reps,
		arm{"poll", func() (float64, error) {
			return perCallMicros(iters, func() error {
				if err := e.Launch(raw.stream); err != nil {
					return err
				}
				return poll()
			})
		}},
		arm{"block", func() (float64, error) {
			return perCallMicros(iters, func() error {
				if err := e.Launch(raw.stream); err != nil {
					return err
				}
				return raw.stream.Synchronize()
			})
		}},
	)
	if err != nil {
		return Row{}, err
	}
	return Row{
		ID: "diag/replay32-poll", Group: "diagnostics", Title: "32-kernel replay, Go waits by polling",
		Ours: measure("Go cudadrv GraphExec.Launch + Stream.Query until done", SourceGoRaw, UnitMicros, samples[0]),
		Baselines: []Measure{
			measure("Go cudadrv GraphExec.Launch + Stream.Synchronize", SourceGoRaw, UnitMicros, samples[1]),
		},
	}, nil
}
