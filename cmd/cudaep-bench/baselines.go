package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// extProgram is one external baseline program.
type extProgram struct {
	prefix string // key prefix of its series ("c.", "s.", "a.", "t.")
	name   string // for messages
	phases []string
	argv   func(b *bench) ([]string, string) // the command, or "" and why it cannot run
	// fatal says a failure is an error of the run (the C programs must work on a GPU); a
	// failing PyTorch only leaves a note.
	fatal bool
}

// The external programs. Paths of compiled programs are under -bin; sources under ctests/bench.
var extPrograms = []extProgram{
	{prefix: "c.", name: "raw C driver baseline (ctests/bench/raw_step_bench.c)", phases: []string{"before", "after"}, fatal: true,
		argv: func(b *bench) ([]string, string) {
			return b.compiled("raw_step_bench", b.repoPath(addPTX), b.modeArg())
		}},
	{prefix: "s.", name: "raw cuBLAS baseline (ctests/bench/raw_sgemm_bench.c)", phases: []string{"before", "after"}, fatal: true,
		argv: func(b *bench) ([]string, string) {
			m := b.sz.mm
			return b.compiled("raw_sgemm_bench", strconv.FormatInt(m[0], 10), strconv.FormatInt(m[1], 10),
				strconv.FormatInt(m[2], 10), strconv.Itoa(b.sz.mmPerSample), strconv.Itoa(b.sz.reps))
		}},
	{prefix: "a.", name: "C ABI client (ctests/bench/capi_replay_bench.c)", phases: []string{"before", "after"}, fatal: true,
		argv: func(b *bench) ([]string, string) {
			return b.compiled("capi_replay_bench", b.modeArg())
		}},
	{prefix: "t.", name: "PyTorch baseline (ctests/bench/torch_graph_replay.py)", phases: []string{"after"},
		argv: func(b *bench) ([]string, string) {
			if b.cfg.python == "" {
				return nil, "skipped (-python is empty)"
			}
			script := b.repoPath("ctests/bench/torch_graph_replay.py")
			if !fileExists(script) {
				return nil, "missing " + script
			}
			return []string{b.cfg.python, script, b.modeArg()}, ""
		}},
}

// modeArg is the size argument every external program takes: "quick" or "full".
func (b *bench) modeArg() string {
	if b.rep.Quick {
		return "quick"
	}
	return "full"
}

// compiled returns the command line of a compiled baseline under -bin, or why it cannot run.
func (b *bench) compiled(name string, args ...string) ([]string, string) {
	path := filepath.Join(b.cfg.bin, name)
	if !fileExists(path) {
		return nil, fmt.Sprintf("not built: %s is missing (scripts/bench-gpu.sh compiles the C baselines on the GPU machine)", path)
	}
	return append([]string{path}, args...), ""
}

// extNeeded reports whether any selected row uses a program's series.
func (b *bench) extNeeded(prefix string) bool {
	for _, id := range allRowIDs() {
		if !b.cfg.rows.MatchString(id) {
			continue
		}
		for _, k := range extKeysFor(id) {
			if strings.HasPrefix(k.key, prefix) || (prefix == "a." && strings.HasPrefix(id, "replay-capi/")) {
				return true
			}
		}
	}
	return false
}

// runExternals runs the external programs of a phase ("before" or "after" the Go rows) and
// parses their output into b.ext. On the simulated device none runs.
func (b *bench) runExternals(phase string) {
	for _, prog := range extPrograms {
		if !contains(prog.phases, phase) || !b.extNeeded(prog.prefix) {
			continue
		}
		if !b.onGPU {
			b.extAbsent[prog.prefix] = "needs a GPU (this run is on the simulated device)"
			continue
		}
		if why, ok := b.extAbsent[prog.prefix]; ok && why != "" {
			continue // it failed or was missing in an earlier phase
		}
		argv, why := prog.argv(b)
		if why != "" {
			b.extAbsent[prog.prefix] = why
			continue
		}
		b.progressf("%s (%s) …", prog.name, phase)
		out, err := runProgram(argv, b.cfg.timeout, nil, b.cfg.progress)
		if err == nil {
			err = b.ext.Parse(bytes.NewReader(out), prog.prefix)
		}
		if err != nil {
			b.extAbsent[prog.prefix] = "failed: " + err.Error()
			if prog.fatal {
				b.rep.Errors = append(b.rep.Errors, fmt.Sprintf("%s: %v", prog.name, err))
			}
			b.progressf("%s: %v", prog.name, err)
			continue
		}
		b.extAbsent[prog.prefix] = ""
	}
}

// extKey maps a row to one external series.
type extKey struct {
	key, label, source, unit string
}

// extKeysFor returns the external series that belong to a row, in the order they print.
func extKeysFor(id string) []extKey {
	kind, arg, _ := strings.Cut(id, "/")
	switch kind {
	case "replay", "replay-capi":
		return []extKey{
			{"c.replay_stream/" + arg, "raw C cuGraphLaunch + cuStreamSynchronize", SourceCRaw, UnitMicros},
			{"c.replay_ctx/" + arg, "raw C cuGraphLaunch + cuCtxSynchronize", SourceCRaw, UnitMicros},
			{"t.replay/" + arg, "PyTorch CUDAGraph.replay + stream sync", SourceTorch, UnitMicros},
		}
	case "enqueue":
		return []extKey{{"c.enqueue_graph", "raw C cuGraphLaunch", SourceCRaw, UnitMicros}}
	case "eager":
		return []extKey{{"c.eager_launch", "raw C cuLaunchKernel (same PTX)", SourceCRaw, UnitMicros}}
	case "matmul":
		return []extKey{{"s.sgemm", "raw C cublasSgemm", SourceCRaw, UnitTFLOPS}}
	case "capture":
		return []extKey{{"c.capture/" + arg, "raw C capture+instantiate+upload", SourceCRaw, UnitMicros}}
	case "update":
		return []extKey{
			{"c.update/" + arg, "raw C capture+cuGraphExecUpdate+upload", SourceCRaw, UnitMicros},
			{"c.capture/" + arg, "raw C capture+instantiate+upload", SourceCRaw, UnitMicros},
		}
	case "seam":
		switch arg {
		case "monolithic":
			return []extKey{{"c.seam_mono", "raw C launch + 4 B D2H + sync", SourceCRaw, UnitMicros}}
		case "segmented":
			return []extKey{{"c.seam_segmented", "raw C 2 launches, 2 × (4 B D2H + sync)", SourceCRaw, UnitMicros}}
		case "price":
			return []extKey{
				{"c.seam_price", "raw C segmented − monolithic", SourceCRaw, UnitMicros},
				{"c.seam_host", "raw C host seam alone (4 B D2H + sync)", SourceCRaw, UnitMicros},
			}
		}
	}
	return nil
}

// absentWhy says why a program's series is missing from this run.
func (b *bench) absentWhy(key string) string {
	prefix, _, _ := strings.Cut(key, ".")
	if why := b.extAbsent[prefix+"."]; why != "" {
		return why
	}
	return "not reported by the program"
}

// attachExternal puts the external series into their rows (first the C baselines, then the
// in-process ones), adds the C ABI replay rows, records the programs' info lines and sets the
// goals that depend on external baselines.
func (b *bench) attachExternal() {
	for k, v := range b.ext.Info {
		b.rep.External[k] = v
	}
	if !b.onGPU {
		b.rep.Method = append(b.rep.Method, "the external baselines (raw C, C ABI, PyTorch) need a GPU: on the simulated device only the in-process baselines run")
		for i := range b.rep.Rows {
			b.setGoal(&b.rep.Rows[i])
		}
		return
	}
	// Each C ABI row follows the Go row of the same step, or ends the list when that row
	// was not selected.
	var rows []Row
	placed := map[string]bool{}
	for _, row := range b.rep.Rows {
		rows = append(rows, row)
		if n, ok := strings.CutPrefix(row.ID, "replay/"); ok {
			if id := "replay-capi/" + n; b.cfg.rows.MatchString(id) {
				rows = append(rows, b.capiRow(id, n))
				placed[id] = true
			}
		}
	}
	for _, n := range b.sz.steps {
		if id := fmt.Sprintf("replay-capi/%d", n); b.cfg.rows.MatchString(id) && !placed[id] {
			rows = append(rows, b.capiRow(id, strconv.Itoa(n)))
		}
	}
	for i := range rows {
		row := &rows[i]
		var ext []Measure
		for _, k := range extKeysFor(row.ID) {
			ext = append(ext, b.ext.Measure(k.key, k.label, k.source, k.unit, b.absentWhy(k.key)))
		}
		row.Baselines = append(ext, row.Baselines...)
		b.setGoal(row)
	}
	b.rep.Rows = rows
}

// capiRow is graph replay through the C ABI: ours is the C client's series.
func (b *bench) capiRow(id, n string) Row {
	key := "a.replay/" + n
	label := "CudaEp graph replay + sync (C, libcudaep.so)"
	if l, ok := b.ext.Info["a.replay_label"]; ok {
		label = l
	}
	return Row{
		ID: id, Group: "graph replay",
		Title: fmt.Sprintf("replay+sync %s-kernel step (C ABI)", n),
		Ours:  b.ext.Measure(key, label, SourceCABI, UnitMicros, b.absentWhy(key)),
	}
}

// setGoal sets the goal of a row whose goal needs external baselines.
func (b *bench) setGoal(row *Row) {
	kind, _, _ := strings.Cut(row.ID, "/")
	first := func() Measure {
		if len(row.Baselines) > 0 {
			return row.Baselines[0]
		}
		return Measure{Label: "a baseline", Note: "none"}
	}
	switch kind {
	case "replay", "replay-capi":
		row.Goal = b.replayGoal(row)
	case "enqueue":
		row.Goal = goalMargin(row, first(), "≤ raw C + 0.15 µs", 0.15, b.onGPU)
	case "eager":
		row.Goal = goalRatio(row, first(), "≤ 1.10× raw C", 1.10, b.onGPU)
	case "matmul":
		row.Goal = goalRatio(row, first(), "≥ 0.98× raw cuBLAS", 0.98, b.onGPU)
	}
}

// replayGoal is "≤ 1.03× raw C and faster than PyTorch". Without a PyTorch series only the
// first half is judged, and the detail says so.
func (b *bench) replayGoal(row *Row) *Goal {
	rawC, _ := row.Baseline(SourceCRaw, "raw C cuGraphLaunch + cuStreamSynchronize")
	g := goalRatio(row, rawC, "≤ 1.03× raw C, < PyTorch", 1.03, b.onGPU)
	if g.Met == nil {
		return g
	}
	torch, _ := row.Baseline(SourceTorch, "")
	if !torch.Measured() {
		g.Detail += "; PyTorch not measured (" + torch.Note + "), so only the raw C half is judged"
		return g
	}
	faster := row.Ours.Summary.Median < torch.Summary.Median
	g.Detail += fmt.Sprintf("; ours/PyTorch = %.3f", row.Ours.Summary.Median/torch.Summary.Median)
	g.Met = boolPtr(*g.Met && faster)
	return g
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
