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
	// simOK says the program also runs on the simulated device (argv then selects it).
	simOK bool
}

// The external programs. Paths of compiled programs are under -bin; sources under bench/baselines.
var extPrograms = []extProgram{
	{prefix: "c.", name: "raw C driver baseline (bench/baselines/raw_step_bench.c)", phases: []string{"before", "after"}, fatal: true,
		argv: func(b *bench) ([]string, string) {
			return b.compiled("raw_step_bench", b.repoPath(addPTX), b.modeArg())
		}},
	{prefix: "s.", name: "raw cuBLAS baseline (bench/baselines/raw_sgemm_bench.c)", phases: []string{"before", "after"}, fatal: true,
		argv: func(b *bench) ([]string, string) {
			m := b.sz.mm
			return b.compiled("raw_sgemm_bench", strconv.FormatInt(m[0], 10), strconv.FormatInt(m[1], 10),
				strconv.FormatInt(m[2], 10), strconv.Itoa(b.sz.mmPerSample), strconv.Itoa(b.sz.reps))
		}},
	{prefix: "a.", name: "C ABI client (bench/baselines/capi_replay_bench.c)", phases: []string{"before", "after"}, fatal: true, simOK: true,
		argv: func(b *bench) ([]string, string) {
			args := []string{b.modeArg(), b.p.BackendName()}
			// With the in-process raw C library built, the client measures the raw C series
			// of its rows itself, between its own arms.
			if lib := filepath.Join(b.cfg.bin, rawInprocLib); b.onGPU && fileExists(lib) {
				if abs, err := filepath.Abs(lib); err == nil {
					args = append(args, abs, b.repoPath(addPTX))
				}
			}
			return b.compiled("capi_replay_bench", args...)
		}},
	{prefix: "t.", name: "PyTorch baseline (bench/baselines/torch_graph_replay.py)", phases: []string{"after"},
		argv: func(b *bench) ([]string, string) {
			if b.cfg.python == "" {
				return nil, "skipped (-python is empty)"
			}
			script := b.repoPath("bench/baselines/torch_graph_replay.py")
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
		return nil, fmt.Sprintf("not built: %s is missing (bench/scripts/bench-gpu.sh compiles the C baselines on the GPU machine)", path)
	}
	return append([]string{path}, args...), ""
}

// extNeeded reports whether any selected row uses a program's series.
func (b *bench) extNeeded(prefix string) bool {
	for _, id := range allRowIDs() {
		if !b.cfg.rows.MatchString(id) {
			continue
		}
		if prefix == "a." && strings.Contains(id, "-capi/") {
			return true
		}
		for _, k := range extKeysFor(id) {
			if strings.HasPrefix(k.key, prefix) {
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
		if !b.onGPU && !prog.simOK {
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
	capi := strings.HasSuffix(kind, "-capi")
	// inCapi is the C ABI client's in-process raw C series (bench/baselines/raw_inproc.c loaded
	// into capi_replay_bench), listed first on the C ABI rows: their goals are judged on it.
	inCapi := func(key, label string) []extKey {
		if !capi {
			return nil
		}
		return []extKey{{"a." + key, label, SourceCRaw, UnitMicros}}
	}
	switch strings.TrimSuffix(kind, "-capi") {
	case "replay":
		keys := append(inCapi("raw_replay/"+arg, labelCapiInprocReplay),
			extKey{"c.replay_stream/" + arg, "raw C cuGraphLaunch + cuStreamSynchronize", SourceCRaw, UnitMicros},
			extKey{"c.replay_ctx/" + arg, "raw C cuGraphLaunch + cuCtxSynchronize", SourceCRaw, UnitMicros},
			extKey{"t.replay/" + arg, "PyTorch CUDAGraph.replay + stream sync", SourceTorch, UnitMicros},
		)
		if capi {
			keys = append(keys, extKey{"a.replay_block/" + arg, "CudaEpReplay + CudaEpSynchronizeCompute, wait_mode=block (C, libcudaep.so)", SourceCABI, UnitMicros})
		}
		return keys
	case "throughput":
		return append(inCapi("raw_b2b/"+arg, labelCapiInprocB2B),
			extKey{"c.replay_b2b/" + arg, "raw C back-to-back cuGraphLaunch, one cuStreamSynchronize", SourceCRaw, UnitMicros})
	case "wait":
		return []extKey{
			{"c.replay_stream/" + arg, "raw C cuGraphLaunch + cuStreamSynchronize", SourceCRaw, UnitMicros},
			{"c.replay_word_op/" + arg, "raw C cuGraphLaunch + cuStreamWriteValue32 + spin on the mapped word", SourceCRaw, UnitMicros},
			{"c.replay_word_node/" + arg, "raw C graph ending in a write-value node + spin on the mapped word", SourceCRaw, UnitMicros},
		}
	case "enqueue":
		return append(inCapi("raw_enqueue_graph", labelCapiInprocEnqueue),
			extKey{"c.enqueue_graph", "raw C cuGraphLaunch", SourceCRaw, UnitMicros})
	case "eager":
		return append(inCapi("raw_eager", labelCapiInprocEager),
			extKey{"c.eager_launch", "raw C cuLaunchKernel (same PTX)", SourceCRaw, UnitMicros})
	case "matmul":
		return []extKey{{"s.sgemm", "raw C cublasSgemm", SourceCRaw, UnitTFLOPS}}
	case "capture":
		return []extKey{{"c.capture/" + arg, "raw C capture+instantiate+upload", SourceCRaw, UnitMicros}}
	case "update":
		return []extKey{
			{"c.update/" + arg, "raw C capture+cuGraphExecUpdate+upload", SourceCRaw, UnitMicros},
			{"c.capture/" + arg, "raw C capture+instantiate+upload", SourceCRaw, UnitMicros},
		}
	case "diag":
		switch arg {
		case "ctx-bind":
			return []extKey{{"c.diag_ctx_set", "raw C cuCtxSetCurrent", SourceCRaw, UnitMicros}}
		case "stream-sync-idle":
			return []extKey{{"c.diag_stream_sync_idle", "raw C cuStreamSynchronize", SourceCRaw, UnitMicros}}
		case "ctx-sync-idle", "force-sync-idle":
			return []extKey{{"c.diag_ctx_sync_idle", "raw C cuCtxSynchronize", SourceCRaw, UnitMicros}}
		case "replay32-poll":
			return []extKey{{"c.replay_stream/32", "raw C cuGraphLaunch + cuStreamSynchronize", SourceCRaw, UnitMicros}}
		case "export-noop":
			return []extKey{{"a.diag_export_version", "CudaEpGetVersion (no handle)", SourceCABI, UnitMicros}}
		case "replay-plain":
			return []extKey{
				{"c.diag_replay_add_plain", "raw C, default-priority stream, no node priority", SourceCRaw, UnitMicros},
				{"c.diag_replay_empty_plain", "raw C, an empty kernel instead, default stream, no node priority", SourceCRaw, UnitMicros},
			}
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
		b.rep.Method = append(b.rep.Method, "the raw C and PyTorch baselines need a GPU: on the simulated device they do not run (the C ABI client runs there with backend=sim when it is built)")
	}
	// Each C ABI row follows the Go row it mirrors, or ends the list when that row was not
	// selected.
	specs := capiRowSpecs(b.sz)
	var rows []Row
	placed := map[string]bool{}
	for _, row := range b.rep.Rows {
		rows = append(rows, row)
		for _, c := range specs {
			if c.after == row.ID && b.cfg.rows.MatchString(c.id) {
				rows = append(rows, b.capiRow(c))
				placed[c.id] = true
			}
		}
	}
	for _, c := range specs {
		if b.cfg.rows.MatchString(c.id) && !placed[c.id] {
			rows = append(rows, b.capiRow(c))
		}
	}
	// On the simulated device, rows of a C ABI client that did not run are dropped, and the
	// GPU-only baselines are left out rather than listed as missing on every row.
	if !b.onGPU {
		kept := rows[:0]
		for _, row := range rows {
			if (row.Ours.Source != SourceCABI && row.Ours.Source != SourceCRaw) || row.Ours.Measured() {
				kept = append(kept, row)
			}
		}
		rows = kept
	}
	for i := range rows {
		row := &rows[i]
		var ext []Measure
		for _, k := range extKeysFor(row.ID) {
			if !b.onGPU && !strings.HasPrefix(k.key, "a.") { // only the C ABI client runs on sim
				continue
			}
			ext = append(ext, b.ext.Measure(k.key, k.label, k.source, k.unit, b.absentWhy(k.key)))
		}
		row.Baselines = append(ext, row.Baselines...)
		b.setGoal(row)
	}
	b.rep.Rows = rows
}

// capiSpec is a row whose ours is an external program's series: the rows measured through
// the C ABI by bench/baselines/capi_replay_bench, and two C-only diagnostics.
type capiSpec struct {
	id, after   string // the row, and the Go row it follows
	key         string // its series
	title, unit string
	label       string
	source      string // SourceCABI unless set
}

// capiRowSpecs lists the C ABI rows.
func capiRowSpecs(sz sizes) []capiSpec {
	var specs []capiSpec
	for _, n := range sz.steps {
		specs = append(specs, capiSpec{
			id: fmt.Sprintf("replay-capi/%d", n), after: fmt.Sprintf("replay/%d", n), key: fmt.Sprintf("a.replay/%d", n),
			title: fmt.Sprintf("replay+sync %d-kernel step (C ABI)", n), unit: UnitMicros,
			label: "CudaEpReplay + CudaEpSynchronizeCompute",
		})
	}
	for _, n := range sz.steps {
		specs = append(specs, capiSpec{
			id: fmt.Sprintf("throughput-capi/%d", n), after: fmt.Sprintf("throughput/%d", n), key: fmt.Sprintf("a.b2b/%d", n),
			title: fmt.Sprintf("back-to-back replays, %d-kernel step (C ABI)", n), unit: UnitMicros,
			label: "CudaEpReplay × L, one CudaEpSynchronizeCompute",
		})
	}
	return append(specs,
		capiSpec{id: "enqueue-capi/graph-launch", after: "enqueue/graph-launch", key: "a.enqueue_graph",
			title: "one graph-launch enqueue, host (C ABI)", unit: UnitMicros, label: "CudaEpReplay (1-kernel step)"},
		capiSpec{id: "eager-capi/add", after: "eager/add", key: "a.eager_execute",
			title: "eager Add float32[4096], host (C ABI)", unit: UnitMicros, label: "CudaEpKernelExecute"},
		capiSpec{id: "allocs-capi/device", after: "allocs/device", key: "a.allocs_device",
			title: "device allocations per replay run (C ABI)", unit: UnitCount, label: "CudaEpProviderGetStats delta over the replay samples"},
		capiSpec{id: "diag/export-noop", after: "diag/replay32-poll", key: "a.diag_export_sync",
			title: "one C ABI call, no device work", unit: UnitMicros, label: "CudaEpSynchronize (handle lookup, returns)"},
		capiSpec{id: "diag/replay-plain", after: "diag/export-noop", key: "c.replay_stream/1", source: SourceCRaw,
			title: "raw C 1-kernel replay+sync, set-ups", unit: UnitMicros, label: "raw C, this suite's set-up (high-priority stream, node priority)"},
	)
}

// capiRow is a row whose ours is the C ABI client's series.
func (b *bench) capiRow(c capiSpec) Row {
	label, source := c.label, c.source
	if source == "" {
		label, source = label+" (C, libcudaep.so)", SourceCABI
	}
	group := strings.TrimSuffix(strings.SplitN(c.id, "/", 2)[0], "-capi")
	if group == "diag" {
		group = "diagnostics"
	}
	return Row{ID: c.id, Group: group, Title: c.title, Ours: b.ext.Measure(c.key, label, source, c.unit, b.absentWhy(c.key))}
}

// setGoal sets the goal of a row whose goal needs external baselines.
func (b *bench) setGoal(row *Row) {
	kind, _, _ := strings.Cut(row.ID, "/")
	kind = strings.TrimSuffix(kind, "-capi")
	first := func() Measure {
		if len(row.Baselines) > 0 {
			return row.Baselines[0]
		}
		return Measure{Label: "a baseline", Note: "none"}
	}
	inproc := func(goLabel, capiLabel string) string {
		if strings.HasSuffix(strings.SplitN(row.ID, "/", 2)[0], "-capi") {
			return capiLabel
		}
		return goLabel
	}
	ratio := func(text string, limit float64) func(Measure) *Goal {
		return func(m Measure) *Goal { return goalRatio(row, m, text, limit, b.onGPU) }
	}
	switch kind {
	case "replay":
		row.Goal = b.withPyTorch(row, judgeAgainstEach(goalBases(row, inproc(labelInprocReplay, labelCapiInprocReplay), labelRawCReplay),
			ratio("≤ 0.97× raw C launch + stream sync", 0.97)))
	case "wait":
		row.Goal = judgeAgainstEach(goalBases(row, labelInprocReplay, labelRawCReplay), ratio("≤ 0.97× raw C launch + stream sync", 0.97))
	case "throughput":
		row.Goal = judgeAgainstEach(goalBases(row, inproc(labelInprocB2B, labelCapiInprocB2B), labelRawCB2B), ratio("≤ 1.03× raw C back to back", 1.03))
	case "enqueue":
		row.Goal = judgeAgainstEach(goalBases(row, inproc(labelInprocEnqueue, labelCapiInprocEnqueue), labelRawCEnqueue),
			func(m Measure) *Goal { return goalMargin(row, m, "≤ raw C + 0.15 µs", 0.15, b.onGPU) })
	case "eager":
		row.Goal = judgeAgainstEach(goalBases(row, inproc(labelInprocEager, labelCapiInprocEager), labelRawCEager), ratio("≤ 1.10× raw C", 1.10))
	case "matmul":
		row.Goal = goalRatio(row, first(), "≥ 0.98× raw cuBLAS", 0.98, b.onGPU)
	case "allocs":
		if row.Goal == nil {
			row.Goal = goalZero(row, b.onGPU)
		}
	}
}

// The labels of the raw C program's series the goals fall back on, and of the C ABI
// client's in-process raw C series.
const (
	labelRawCReplay        = "raw C cuGraphLaunch + cuStreamSynchronize"
	labelRawCB2B           = "raw C back-to-back cuGraphLaunch, one cuStreamSynchronize"
	labelRawCEnqueue       = "raw C cuGraphLaunch"
	labelRawCEager         = "raw C cuLaunchKernel (same PTX)"
	labelCapiInprocReplay  = "raw C cuGraphLaunch + cuStreamSynchronize, in the C ABI client's process"
	labelCapiInprocB2B     = "raw C back-to-back cuGraphLaunch, one cuStreamSynchronize, in the C ABI client's process"
	labelCapiInprocEnqueue = "raw C cuGraphLaunch, in the C ABI client's process"
	labelCapiInprocEager   = "raw C cuLaunchKernel (same PTX), in the C ABI client's process"
)

// goalBases are the raw C series a row's goal is judged against: the one measured in the same
// process as ours (label inproc) and the raw C program's (label ext). Both are kept because
// neither is the truth alone: the in-process one shares ours' process and thread (the same
// enqueue measured 1.30 and 2.12 µs from Go in two runs against 1.17 µs from the C program),
// but the Go runtime's process also slows the driver's own cuStreamSynchronize (measured
// 7.11–7.21 µs per 1-kernel step there against 6.63–6.77 µs in the C program).
func goalBases(row *Row, inproc, ext string) []Measure {
	var out []Measure
	for _, label := range []string{inproc, ext} {
		if m, ok := row.Baseline(SourceCRaw, label); ok {
			out = append(out, m)
		} else {
			out = append(out, Measure{Label: label, Note: "not listed"})
		}
	}
	return out
}

// judgeAgainstEach judges a goal against every base that was measured and calls it met only
// when it is met against each, so that no verdict rests on picking the friendlier baseline.
// With no base measured, the goal says why (judge's verdict on the first).
func judgeAgainstEach(bases []Measure, judge func(Measure) *Goal) *Goal {
	var goals []*Goal
	for _, m := range bases {
		if m.Measured() {
			goals = append(goals, judge(m))
		}
	}
	if len(goals) == 0 {
		return judge(bases[0])
	}
	g := &Goal{Text: goals[0].Text, Met: boolPtr(true)}
	var details []string
	for _, x := range goals {
		if x.Met == nil {
			return x
		}
		g.Met = boolPtr(*g.Met && *x.Met)
		details = append(details, x.Detail)
	}
	g.Detail = strings.Join(details, "; ")
	return g
}

// withPyTorch adds ours over PyTorch's replay, when measured, to a replay goal's detail.
func (b *bench) withPyTorch(row *Row, g *Goal) *Goal {
	if g.Met == nil {
		return g
	}
	if torch, _ := row.Baseline(SourceTorch, ""); torch.Measured() {
		g.Detail += fmt.Sprintf("; ours/PyTorch = %.3f", row.Ours.Summary.Median/torch.Summary.Median)
	}
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
