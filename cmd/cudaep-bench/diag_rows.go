package main

import "fmt"

// diagRows are the costs a miss is explained with, each against its raw C counterpart: the
// context bind every ep entry point makes (cuCtxSetCurrent), and the synchronizations with
// nothing queued — a stream's, the context's, and ep.ForceSynchronize, which is the
// context's behind the capture gate. They carry no goal.
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
		row("diag/ctx-bind", "bind the context (every ep call)", measure("Go cudadrv Context.Bind (cuCtxSetCurrent)", SourceGoRaw, UnitMicros, samples[0])),
		row("diag/stream-sync-idle", "stream sync, nothing queued", measure("Go cudadrv Stream.Synchronize", SourceGoRaw, UnitMicros, samples[1])),
		row("diag/ctx-sync-idle", "context sync, nothing queued", measure("Go cudadrv Context.Synchronize", SourceGoRaw, UnitMicros, samples[2])),
		row("diag/force-sync-idle", "ep drain, nothing queued", measure("ep.ForceSynchronize", SourceEP, UnitMicros, samples[3])),
	}
	rows[3].Notes = append(rows[3].Notes, fmt.Sprintf("ep.ForceSynchronize = bind + capture-gate drain + cuCtxSynchronize; compare diag/ctx-sync-idle (%d calls per sample)", calls))
	return rows, nil
}
