package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/capi/abi"
	"github.com/cudaep/cudaep/ep"
)

func TestSummarizeMedianQuartilesAndSpread(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		in                         []float64
		median, p25, p75, min, max float64
		mean                       float64
	}{
		{"one sample", []float64{7}, 7, 7, 7, 7, 7, 7},
		{"odd count, unsorted", []float64{5, 1, 3}, 3, 2, 4, 1, 5, 3},
		{"even count: mean of the middle two", []float64{4, 1, 3, 2}, 2.5, 1.75, 3.25, 1, 4, 2.5},
		{"an outlier moves the mean, not the median", []float64{10, 10, 10, 10, 1000}, 10, 10, 10, 10, 1000, 208},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			s, err := Summarize(in)
			require.NoError(t, err)
			assert.Equal(t, tc.in, in, "the input is not reordered")
			assert.Equal(t, tc.in, s.Samples, "the samples are kept in the order taken")
			assert.Equal(t, len(tc.in), s.N)
			assert.InDelta(t, tc.median, s.Median, 1e-12)
			assert.InDelta(t, tc.p25, s.P25, 1e-12)
			assert.InDelta(t, tc.p75, s.P75, 1e-12)
			assert.Equal(t, tc.min, s.Min)
			assert.Equal(t, tc.max, s.Max)
			assert.InDelta(t, tc.mean, s.Mean, 1e-12)
			assert.InDelta(t, (tc.max-tc.min)/tc.median, s.Spread(), 1e-12)
		})
	}
}

func TestSummarizeRefusesBrokenSeries(t *testing.T) {
	for _, in := range [][]float64{nil, {}, {1, math.NaN()}, {math.Inf(1)}} {
		_, err := Summarize(in)
		assert.Error(t, err, "%v", in)
	}
	m := measure("x", SourceEP, UnitMicros, []float64{1, math.NaN()})
	assert.False(t, m.Measured())
	assert.Contains(t, m.Note, "sample 1 is NaN")
}

func TestParseExternalPoolsSeriesAndKeepsInfoAndSkips(t *testing.T) {
	e := newExternal()
	first := `# raw C baseline
info device NVIDIA H200  (sm_90)
sample replay_stream/4 us 4.9 4.8 5.0

sample sgemm TFLOP/s 50.5
skip replay/1 torch not importable: No module named 'torch'
`
	require.NoError(t, e.Parse(strings.NewReader(first), "c."))
	require.NoError(t, e.Parse(strings.NewReader("sample replay_stream/4 us 5.1\n"), "c."))
	s := e.Series["c.replay_stream/4"]
	require.NotNil(t, s)
	assert.Equal(t, UnitMicros, s.Unit, "us is the ASCII spelling of µs")
	assert.Equal(t, []float64{4.9, 4.8, 5.0, 5.1}, s.Samples, "a second run's samples are pooled in order")
	assert.Equal(t, "NVIDIA H200  (sm_90)", e.Info["c.device"])
	assert.Equal(t, "torch not importable: No module named 'torch'", e.Skips["c.replay/1"])

	m := e.Measure("c.replay_stream/4", "raw", SourceCRaw, UnitMicros, "absent")
	require.True(t, m.Measured())
	assert.InDelta(t, 4.95, m.Summary.Median, 1e-12)
	assert.Equal(t, "torch not importable: No module named 'torch'",
		e.Measure("c.replay/1", "torch", SourceTorch, UnitMicros, "absent").Note)
	assert.Equal(t, "absent", e.Measure("c.nothing", "x", SourceCRaw, UnitMicros, "absent").Note)
	assert.Contains(t, e.Measure("c.sgemm", "x", SourceCRaw, UnitMicros, "").Note, "reported TFLOP/s, not µs")
}

func TestParseExternalRejectsMalformedLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"sample k us\n", "line 1: want"},
		{"sample k us 1 x\n", `sample "x" is not a number`},
		{"# ok\nhello world\n", `line 2: unknown record "hello"`},
		{"info k\n", "line 1: want"},
		{"sample k us 1\nsample k ms 2\n", "in ms, earlier in µs"},
	} {
		err := newExternal().Parse(strings.NewReader(tc.in), "c.")
		require.Error(t, err, tc.in)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// fakeReport is a report with one row of each shape the table prints.
func fakeReport() *Report {
	m := func(label, source, unit string, v ...float64) Measure { return measure(label, source, unit, v) }
	r := &Report{
		Tool: "cudaep-bench", EPVersion: "0.1.0", Date: "2026-12-01T00:00:00Z", Backend: "cuda",
		Device:  DeviceInfo{Name: "NVIDIA H200", ComputeCap: "9.0", Multiprocessors: 132, DriverVersion: 13000, DriverVersionText: "13.0"},
		Repeats: 3,
		Rows: []Row{
			{ID: "replay/4", Group: "graph replay", Title: "replay+sync 4-kernel step (ep, Go)",
				Ours: m(labelEPReplayWait, SourceEP, UnitMicros, 5.1, 5.0, 5.2),
				Baselines: []Measure{
					m("raw C cuGraphLaunch + cuStreamSynchronize", SourceCRaw, UnitMicros, 4.9, 5.0, 5.1),
					missing("PyTorch CUDAGraph.replay + stream sync", SourceTorch, UnitMicros, "torch not importable"),
				}},
			{ID: "matmul/sgemm", Group: "matmul", Title: "MatMul", HigherIsBetter: true,
				Ours:      m("ep MatMul Execute", SourceEP, UnitTFLOPS, 50),
				Baselines: []Measure{m("raw C cublasSgemm", SourceCRaw, UnitTFLOPS, 51)}},
			{ID: "paging/zero-copy/64MiB", Group: GroupPaging, Title: "paging",
				Ours: m("P", SourcePage, UnitMillis, 1.30),
				Baselines: []Measure{
					m("S", SourcePage, UnitMillis, 2.5), m("C", SourcePage, UnitMillis, 1.2),
					m("X", SourcePage, UnitMillis, 1.25), m("raw pinned H2D", SourceGoRaw, UnitMillis, 1.21),
				},
				Derived: map[string]float64{"layer_bytes": 64 << 20, "raw_h2d_gbps": 55.3,
					"p_over_max_cx": 1.04, "s_over_c_plus_x": 1.02, "link_efficiency": 0.968}},
		},
	}
	b := &bench{onGPU: true}
	for i := range r.Rows {
		b.setGoal(&r.Rows[i])
	}
	r.Rows[2].Goal = pagingGoal(&r.Rows[2], pagingModes[0], true)
	r.finish()
	return r
}

func TestReportRatiosAndGoals(t *testing.T) {
	r := fakeReport()
	replay := r.Rows[0]
	require.NotNil(t, replay.Baselines[0].Ratio)
	assert.InDelta(t, 5.1/5.0, *replay.Baselines[0].Ratio, 1e-12)
	assert.Nil(t, replay.Baselines[1].Ratio, "no ratio against a missing baseline")
	require.NotNil(t, replay.Goal.Met)
	assert.False(t, *replay.Goal.Met, "1.02× raw C is above issue 16's 0.97×")
	assert.Contains(t, replay.Goal.Detail, "ours/(raw C cuGraphLaunch + cuStreamSynchronize) = 1.020",
		"without an in-process series the raw C program's is the goal's base")

	mm := r.Rows[1]
	require.NotNil(t, mm.Goal.Met)
	assert.True(t, *mm.Goal.Met, "a rate: 50/51 = 0.9804 is at least 0.98")
}

func TestGoalEvaluation(t *testing.T) {
	row := func(ours float64) *Row {
		return &Row{Ours: measure("o", SourceEP, UnitMicros, []float64{ours})}
	}
	base := measure("raw C", SourceCRaw, UnitMicros, []float64{2.0})
	assert.True(t, *goalMargin(row(2.15), base, "", 0.15, true).Met)
	assert.False(t, *goalMargin(row(2.16), base, "", 0.15, true).Met)
	assert.True(t, *goalRatio(row(2.2), base, "", 1.10, true).Met)
	assert.False(t, *goalRatio(row(2.21), base, "", 1.10, true).Met)
	g := goalRatio(row(1), base, "", 1.10, false)
	assert.Nil(t, g.Met, "never judged on the simulator")
	assert.Contains(t, g.Detail, "simulated device")
	g = goalRatio(row(1), missing("raw C", SourceCRaw, UnitMicros, "not built"), "", 1.10, true)
	assert.Nil(t, g.Met)
	assert.Contains(t, g.Detail, "raw C was not measured (not built)")

	// The goal is judged against both raw C series, the one in ours' process and the raw C
	// program's, and met only when met against each.
	torch := measure("PyTorch", SourceTorch, UnitMicros, []float64{2.5})
	r := &Row{ID: "replay/1", Ours: measure("o", SourceEP, UnitMicros, []float64{1.9})}
	r.Baselines = []Measure{
		measure(labelRawCReplay, SourceCRaw, UnitMicros, []float64{2.0}),
		measure(labelInprocReplay, SourceCRaw, UnitMicros, []float64{2.1}),
		torch,
	}
	b := &bench{onGPU: true}
	b.setGoal(r)
	require.NotNil(t, r.Goal.Met)
	assert.True(t, *r.Goal.Met, "1.9/2.1 = 0.905 and 1.9/2.0 = 0.95 are both within 0.97")
	assert.Contains(t, r.Goal.Detail, labelInprocReplay+") = 0.905")
	assert.Contains(t, r.Goal.Detail, labelRawCReplay+") = 0.950")
	assert.Contains(t, r.Goal.Detail, "ours/PyTorch = 0.760")
	r.Baselines[0] = measure(labelRawCReplay, SourceCRaw, UnitMicros, []float64{1.8})
	b.setGoal(r)
	require.NotNil(t, r.Goal.Met)
	assert.False(t, *r.Goal.Met, "met against the in-process series (0.905) but not the raw C program's (1.9/1.8)")
	r.Baselines[1] = missing(labelInprocReplay, SourceCRaw, UnitMicros, "not built")
	r.Baselines[0] = measure(labelRawCReplay, SourceCRaw, UnitMicros, []float64{2.0})
	b.setGoal(r)
	require.NotNil(t, r.Goal.Met)
	assert.True(t, *r.Goal.Met, "only the raw C program's series was measured: 0.95")
	assert.NotContains(t, r.Goal.Detail, labelInprocReplay)

	// A C ABI row's in-process base is the C ABI client's series.
	c := &Row{ID: "throughput-capi/4", Ours: measure("o", SourceCABI, UnitMicros, []float64{5.1})}
	c.Baselines = []Measure{
		measure(labelCapiInprocB2B, SourceCRaw, UnitMicros, []float64{5.0}),
		measure(labelRawCB2B, SourceCRaw, UnitMicros, []float64{5.05}),
	}
	b.setGoal(c)
	require.NotNil(t, c.Goal.Met)
	assert.True(t, *c.Goal.Met, "5.1/5.0 = 1.02 and 5.1/5.05 = 1.01 ≤ 1.03")
	assert.Contains(t, c.Goal.Detail, labelCapiInprocB2B)
	assert.Contains(t, c.Goal.Detail, labelRawCB2B+")")
}

func TestReportJSONShape(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "r.json")
	require.NoError(t, fakeReport().SaveJSON(path))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	for _, k := range []string{"tool", "ep_version", "date", "backend", "device", "go_version", "repeats", "method", "rows"} {
		assert.Contains(t, doc, k)
	}
	dev := doc["device"].(map[string]any)
	assert.Equal(t, "NVIDIA H200", dev["name"])
	assert.Equal(t, 13000.0, dev["driver_version"])
	rows := doc["rows"].([]any)
	require.Len(t, rows, 3)
	row := rows[0].(map[string]any)
	assert.Equal(t, "replay/4", row["id"])
	ours := row["ours"].(map[string]any)
	assert.Equal(t, "µs", ours["unit"])
	sum := ours["summary"].(map[string]any)
	for _, k := range []string{"n", "median", "min", "max", "p25", "p75", "mean", "samples"} {
		assert.Contains(t, sum, k)
	}
	assert.Equal(t, []any{5.1, 5.0, 5.2}, sum["samples"])
	bl := row["baselines"].([]any)
	assert.Contains(t, bl[0].(map[string]any), "ratio")
	assert.Equal(t, "torch not importable", bl[1].(map[string]any)["note"])
	assert.NotContains(t, bl[1].(map[string]any), "summary")
	assert.Contains(t, row["goal"].(map[string]any), "met")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")
}

func TestTableFormatting(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, fakeReport().WriteTable(&out))
	text := out.String()
	for _, want := range []string{
		"cudaep-bench 0.1.0 · backend cuda · NVIDIA H200 (sm_90, 132 SMs) · driver 13.0",
		"medians of 3 repeats",
		"replay+sync 4-kernel step (ep, Go)",
		"5.10 µs [5.00–5.20]",
		"raw C cuGraphLaunch + cuStreamSynchronize",
		"1.020",
		"≤ 0.97× raw C launch + stream sync: MISSED",
		"50.00 TFLOP/s",
		"≥ 0.98× raw cuBLAS: met",
		"not measured in this run (—):\n  PyTorch CUDAGraph.replay + stream sync [replay/4]: torch not importable",
		"paging: ms per layer",
		"64MiB  zero-copy",
		"55.3",
		"1.040",
		"0.968",
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "SIMULATED", "no sim banner on a GPU report")
	// Every line of the main table has its ratio column aligned: tabwriter pads cells.
	lines := strings.Split(text, "\n")
	var header string
	for _, l := range lines {
		if strings.HasPrefix(l, "row ") {
			header = l
		}
	}
	require.NotEmpty(t, header)
	runeIndex := func(s, sub string) int { return utf8.RuneCountInString(s[:strings.Index(s, sub)]) }
	col := runeIndex(header, "ratio")
	aligned := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "replay+sync") || strings.HasPrefix(l, "MatMul") {
			ratio := map[bool]string{true: "1.020", false: "0.980"}[strings.HasPrefix(l, "replay")]
			assert.Equal(t, col, runeIndex(l, ratio), "ratio column aligned in %q", l)
			aligned++
		}
	}
	assert.Equal(t, 2, aligned)
}

func TestFmtValue(t *testing.T) {
	assert.Equal(t, "4.88 µs", fmtValue(4.876, UnitMicros))
	assert.Equal(t, "319.4 µs", fmtValue(319.44, UnitMicros))
	assert.Equal(t, "12345 µs", fmtValue(12345.4, UnitMicros))
	assert.Equal(t, "0", fmtValue(0, UnitCount))
	assert.Equal(t, "51.23 TFLOP/s", fmtValue(51.234, UnitTFLOPS))
	assert.Equal(t, "0.00139 TFLOP/s", fmtValue(0.001389, UnitTFLOPS))
	assert.Equal(t, "4.800 ms", fmtValue(4.8, UnitMillis))
	assert.Equal(t, "256MiB", sizeLabel(256<<20))
	assert.Equal(t, "256KiB", sizeLabel(256<<10))
	assert.Equal(t, "1000B", sizeLabel(1000))
}

func TestFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"-backend=gpu"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), `-backend="gpu": want auto, cuda or sim`)
	stderr.Reset()
	assert.Equal(t, 2, run([]string{"-rows=nosuchrow"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "matches no row; row IDs: replay/1")
	stderr.Reset()
	assert.Equal(t, 2, run([]string{"-rows=("}, &stdout, &stderr))
	assert.Equal(t, 2, run([]string{"extra"}, &stdout, &stderr))
	assert.Empty(t, stdout.String())
}

func TestVersionAndHelpGoToStdoutAndSucceed(t *testing.T) {
	for _, arg := range []string{"-version", "--version"} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 0, run([]string{arg}, &stdout, &stderr), arg)
		assert.Equal(t, fmt.Sprintf("cudaep-bench %s (C ABI %d)\n", ep.Version, abi.Version), stdout.String(), arg)
		assert.Empty(t, stderr.String(), arg)
	}
	for _, arg := range []string{"-h", "-help", "--help"} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 0, run([]string{arg}, &stdout, &stderr), arg)
		assert.True(t, strings.HasPrefix(stdout.String(), "usage: cudaep-bench [flags]\n"), "%s: %q", arg, stdout.String())
		assert.Contains(t, stdout.String(), "Row IDs: replay/1", arg)
		assert.Regexp(t, `(?m)^  -version\b`, stdout.String(), arg)
		assert.Empty(t, stderr.String(), arg)
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"-bogus"}, &stdout, &stderr))
	assert.Empty(t, stdout.String())
	assert.Contains(t, stderr.String(), "flag provided but not defined: -bogus")
	assert.Contains(t, stderr.String(), "usage: cudaep-bench [flags]")
}

// TestRunOnSim runs the whole program on the simulated device, every row, and checks the
// table's banner and the JSON's rows. It asserts nothing about timings.
func TestRunOnSim(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "r.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"-backend=sim", "-quick", "-repeats=2", "-repo=../..", "-tmp=" + dir, "-json=" + jsonPath,
		"-bin=" + filepath.Join(dir, "no-such-dir")}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	text := stdout.String()
	assert.True(t, strings.HasPrefix(strings.SplitN(text, "\n", 3)[1], "*** SIMULATED DEVICE: these timings measure a Go simulator"), text)
	assert.True(t, strings.HasSuffix(text, "not performance numbers (sizes are tiny; the run only proves that every row works) ***\n"))

	raw, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var rep Report
	require.NoError(t, json.Unmarshal(raw, &rep))
	assert.Equal(t, "sim", rep.Backend)
	assert.True(t, rep.Quick)
	assert.Equal(t, SimNotice, rep.SimNotice)
	assert.Empty(t, rep.Errors)
	var ids []string
	for _, r := range rep.Rows {
		ids = append(ids, r.ID)
		assert.True(t, r.Ours.Measured(), "%s: ours measured (%s)", r.ID, r.Ours.Note)
		if r.Ours.Measured() {
			assert.Len(t, r.Ours.Summary.Samples, map[bool]int{true: 3, false: 2}[r.Group == GroupPaging || r.Group == "allocations"], r.ID)
		}
	}
	want := []string{"replay/1", "replay/4", "replay/32", "wait/1", "wait/4", "wait/32",
		"throughput/1", "throughput/4", "throughput/32", "enqueue/graph-launch", "eager/add", "matmul/sgemm",
		"capture/1", "capture/4", "capture/32", "update/1", "update/4", "update/32",
		"seam/monolithic", "seam/segmented", "seam/price", "allocs/heap", "allocs/device",
		"diag/ctx-bind", "diag/stream-sync-idle", "diag/ctx-sync-idle", "diag/force-sync-idle", "diag/replay32-poll"}
	for _, mode := range []string{"zero-copy", "staging"} {
		for _, size := range []string{"256KiB", "1MiB", "4MiB"} {
			want = append(want, "paging/"+mode+"/"+size)
		}
	}
	want = append(want, "paging-e2e/8MiB")
	assert.ElementsMatch(t, want, ids)
	for _, r := range rep.Rows {
		if r.ID == "allocs/device" {
			assert.Equal(t, 0.0, r.Ours.Summary.Max, "no device allocation during replays")
		}
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the paging weight files are removed; only the JSON remains")
}

// TestRunOnSimSelectsRows checks -rows: only matching rows are measured and reported.
func TestRunOnSimSelectsRows(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-backend=sim", "-rows=^(enqueue|eager)/", "-repeats=2", "-repo=../.."}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), "one graph-launch enqueue")
	assert.Contains(t, stdout.String(), "eager Add")
	assert.NotContains(t, stdout.String(), "replay+sync")
	assert.NotContains(t, stdout.String(), "paging:")
}

// TestAttachExternalOnGPU feeds the attach step the output of every external program, as a
// GPU run would, and checks where each series lands, the C ABI rows' places and the goals.
func TestAttachExternalOnGPU(t *testing.T) {
	rows := regexpAll(t)
	b := &bench{cfg: config{rows: rows}, sz: fullSizes(), onGPU: true, ext: newExternal(),
		extAbsent: map[string]string{"t.": "failed: boom"}, rep: &Report{External: map[string]string{}}}
	m := func(id, label string, unit string, v ...float64) Row {
		return Row{ID: id, Ours: measure(label, SourceEP, unit, v)}
	}
	b.rep.Rows = []Row{
		m("replay/4", "ep", UnitMicros, 5.0),
		m("wait/4", "ep", UnitMicros, 4.8),
		m("enqueue/graph-launch", "ep", UnitMicros, 2.6),
		m("eager/add", "ep", UnitMicros, 3.0),
		{ID: "matmul/sgemm", HigherIsBetter: true, Ours: measure("ep", SourceEP, UnitTFLOPS, []float64{50})},
		m("update/4", "ep", UnitMicros, 30),
		m("seam/price", "ep", UnitMicros, 9),
		m("allocs/device", "ep", UnitCount, 0),
	}
	for prefix, out := range map[string]string{
		"c.": `info device NVIDIA H200
sample replay_stream/4 us 4.9
sample replay_ctx/4 us 5.0
sample replay_word_op/4 us 4.7
sample replay_word_node/4 us 4.6
sample enqueue_graph us 2.4
sample eager_launch us 2.5
sample capture/4 us 300
sample update/4 us 20
sample seam_price us 9.5
sample seam_host us 9.4
`,
		"s.": "sample sgemm TFLOP/s 51\n",
		"a.": "sample replay/4 us 5.2\nsample replay_block/4 us 5.4\nsample raw_replay/4 us 5.5\nsample enqueue_graph us 2.7\n" +
			"sample raw_enqueue_graph us 2.6\nsample eager_execute us 3.1\nsample allocs_device count 0 0 0\n",
	} {
		require.NoError(t, b.ext.Parse(strings.NewReader(out), prefix))
	}
	b.attachExternal()
	b.rep.finish()

	byID := map[string]Row{}
	var order []string
	for _, r := range b.rep.Rows {
		byID[r.ID] = r
		order = append(order, r.ID)
	}
	assert.Equal(t, []string{"replay/4", "replay-capi/4", "wait/4", "enqueue/graph-launch", "enqueue-capi/graph-launch",
		"eager/add", "eager-capi/add", "matmul/sgemm", "update/4", "seam/price", "allocs/device", "allocs-capi/device",
		"replay-capi/1", "replay-capi/32", "throughput-capi/1", "throughput-capi/4", "throughput-capi/32",
		"diag/export-noop", "diag/replay-plain"}, order,
		"a C ABI row follows the Go row it mirrors; the others end the list")
	assert.Equal(t, "NVIDIA H200", b.rep.External["c.device"])

	replay := byID["replay/4"]
	require.Len(t, replay.Baselines, 3)
	assert.Equal(t, "raw C cuGraphLaunch + cuStreamSynchronize", replay.Baselines[0].Label)
	assert.Equal(t, "raw C cuGraphLaunch + cuCtxSynchronize", replay.Baselines[1].Label)
	assert.Equal(t, "failed: boom", replay.Baselines[2].Note, "PyTorch's failure is the note")
	require.NotNil(t, replay.Goal.Met)
	assert.False(t, *replay.Goal.Met, "5.0/4.9 = 1.020 is over 0.97×")
	assert.Contains(t, replay.Goal.Detail, "raw C cuGraphLaunch + cuStreamSynchronize) = 1.020",
		"no in-process series in this run: the raw C program's is the base")

	capi := byID["replay-capi/4"]
	assert.Equal(t, SourceCABI, capi.Ours.Source)
	assert.InDelta(t, 5.2, capi.Ours.Summary.Median, 1e-12)
	require.Len(t, capi.Baselines, 5)
	assert.Equal(t, labelCapiInprocReplay, capi.Baselines[0].Label, "the client's in-process raw C first")
	assert.InDelta(t, 5.2/5.5, *capi.Baselines[0].Ratio, 1e-12)
	assert.InDelta(t, 5.2/4.9, *capi.Baselines[1].Ratio, 1e-12)
	require.NotNil(t, capi.Goal.Met)
	assert.False(t, *capi.Goal.Met, "5.2/5.5 = 0.945 of the in-process raw C, but 5.2/4.9 = 1.061 of the raw C program's")
	assert.Contains(t, capi.Goal.Detail, labelCapiInprocReplay+") = 0.945")
	assert.Equal(t, "not reported by the program", byID["replay-capi/1"].Ours.Note)
	assert.Contains(t, capi.Baselines[4].Label, "wait_mode=block")
	assert.InDelta(t, 5.2/5.4, *capi.Baselines[4].Ratio, 1e-12)

	wait := byID["wait/4"]
	require.Len(t, wait.Baselines, 3)
	assert.Equal(t, "raw C cuGraphLaunch + cuStreamSynchronize", wait.Baselines[0].Label)
	assert.InDelta(t, 4.8/4.7, *wait.Baselines[1].Ratio, 1e-12, "the raw C word written by a stream op")
	assert.InDelta(t, 4.8/4.6, *wait.Baselines[2].Ratio, 1e-12, "the raw C word written by a graph node")
	require.NotNil(t, wait.Goal.Met)
	assert.False(t, *wait.Goal.Met, "4.8/4.9 = 0.980 is over 0.97×")

	assert.False(t, *byID["enqueue/graph-launch"].Goal.Met, "2.6 − 2.4 = 0.2 µs is over the 0.15 µs margin")
	assert.False(t, *byID["enqueue-capi/graph-launch"].Goal.Met, "2.7 − 2.6 = 0.1 µs over the client's in-process raw C, but 0.3 µs over the raw C program's")
	assert.False(t, *byID["eager/add"].Goal.Met, "3.0/2.5 = 1.2 is over 1.10×")
	assert.Equal(t, "not reported by the program", byID["eager-capi/add"].Baselines[0].Note)
	assert.Contains(t, byID["eager-capi/add"].Goal.Detail, "raw C cuLaunchKernel (same PTX))",
		"the client's in-process series is missing: the raw C program's is the base")
	assert.True(t, *byID["matmul/sgemm"].Goal.Met, "50/51 = 0.980 is at least 0.98×")
	assert.True(t, *byID["allocs-capi/device"].Goal.Met)

	update := byID["update/4"]
	require.Len(t, update.Baselines, 2)
	assert.Equal(t, "raw C capture+cuGraphExecUpdate+upload", update.Baselines[0].Label)
	assert.Equal(t, "raw C capture+instantiate+upload", update.Baselines[1].Label)
	price := byID["seam/price"]
	require.Len(t, price.Baselines, 2)
	assert.InDelta(t, 9.0/9.5, *price.Baselines[0].Ratio, 1e-12)
}

// regexpAll is a -rows regexp that matches every row.
func regexpAll(t *testing.T) *regexp.Regexp {
	t.Helper()
	return regexp.MustCompile("")
}

func TestPublicArgsDropAbsoluteDirectories(t *testing.T) {
	assert.Equal(t, []string{"-backend=cuda", "-json=…/bench.json", "-tmp=…/x", "-bin=build/bench", "-rows=/abs"},
		publicArgs([]string{"-backend=cuda", "-json=/root/out/bench.json", "--tmp=/var/tmp/x", "-bin=build/bench", "-rows=/abs"}))
}
