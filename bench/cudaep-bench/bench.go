package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep"
)

// SimNotice is the banner of a run on the simulated device.
const SimNotice = "SIMULATED DEVICE: these timings measure a Go simulator, not a GPU; they are not performance numbers (sizes are tiny; the run only proves that every row works)"

// sizes are a run's problem sizes and repeat counts.
type sizes struct {
	reps          int // samples per series, after a warm-up
	steps         []int
	stepIters     map[int]int // replay steps per sample, by kernels per step
	b2bLaunches   int         // back-to-back replays per throughput sample
	enqCalls      int         // enqueue calls per sample
	syncEvery     int         // enqueue calls between off-the-clock synchronizations
	captureIters  map[int]int // captures per sample, by kernels per step
	seamIters     int         // steps per seam sample
	allocSteps    int         // replays between the allocation counters' readings
	mm            [3]int64    // M, K, N of the MatMul row
	mmPerSample   int         // GEMMs per MatMul sample
	pageBytes     []uint64    // paging layer sizes
	pageLayers    int         // layers per paging arm
	pageRuns      int         // samples per paging arm, after one warm-up run
	e2eLayers     int         // layers of the end-to-end paging file
	e2eLayerBytes uint64      // bytes per layer of the end-to-end paging file
	eagerElems    int64       // elements of the eager Add
	stepElems     int64       // elements of each graph-step Add
}

func fullSizes() sizes {
	return sizes{
		reps: 15, steps: []int{1, 4, 32},
		stepIters: map[int]int{1: 500, 4: 500, 32: 150}, b2bLaunches: 2000,
		enqCalls: 2000, syncEvery: 100,
		captureIters: map[int]int{1: 30, 4: 30, 32: 10},
		seamIters:    300, allocSteps: 2000,
		mm: [3]int64{2048, 4096, 4096}, mmPerSample: 10,
		pageBytes:  []uint64{4 << 20, 64 << 20, 256 << 20},
		pageLayers: 16, pageRuns: 5,
		e2eLayers: 64, e2eLayerBytes: 64 << 20,
		eagerElems: 4096, stepElems: 1024,
	}
}

func quickSizes() sizes {
	return sizes{
		reps: 5, steps: []int{1, 4, 32},
		stepIters: map[int]int{1: 20, 4: 20, 32: 5}, b2bLaunches: 50,
		enqCalls: 200, syncEvery: 50,
		captureIters: map[int]int{1: 4, 4: 4, 32: 2},
		seamIters:    20, allocSteps: 100,
		mm: [3]int64{64, 128, 128}, mmPerSample: 2,
		pageBytes:  []uint64{256 << 10, 1 << 20, 4 << 20},
		pageLayers: 4, pageRuns: 3,
		e2eLayers: 8, e2eLayerBytes: 1 << 20,
		eagerElems: 4096, stepElems: 1024,
	}
}

// benchCase is one group of rows measured together.
type benchCase struct {
	name string
	ids  func(sz sizes) []string // the row IDs the case can produce
	run  func(b *bench) ([]Row, error)
}

// cases are every case, in the order they run.
var cases = []benchCase{
	{"graph replay", replayIDs, (*bench).replayRows},
	{"replay wait modes", perStepIDs("wait"), (*bench).waitRows},
	{"back-to-back replays", perStepIDs("throughput"), (*bench).throughputRows},
	{"graph-launch enqueue", constIDs("enqueue/graph-launch"), (*bench).enqueueRows},
	{"eager execute", constIDs("eager/add"), (*bench).eagerRows},
	{"matmul", constIDs("matmul/sgemm"), (*bench).matmulRows},
	{"capture to ready", perStepIDs("capture"), (*bench).captureRows},
	{"update vs instantiate", perStepIDs("update"), (*bench).updateRows},
	{"seam price", constIDs("seam/monolithic", "seam/segmented", "seam/price"), (*bench).seamRows},
	{"allocations per replay", constIDs("allocs/heap", "allocs/device"), (*bench).allocRows},
	{"paging", pagingIDs, (*bench).pagingRows},
	{"paging end to end", pagingE2EIDs, (*bench).pagingE2ERows},
	{"diagnostics", constIDs("diag/ctx-bind", "diag/stream-sync-idle", "diag/ctx-sync-idle", "diag/force-sync-idle", "diag/replay32-poll"), (*bench).diagRows},
	// The C ABI rows are measured by bench/baselines/capi_replay_bench (see baselines.go).
	{"C ABI", capiIDs, nil},
}

func constIDs(ids ...string) func(sizes) []string {
	return func(sizes) []string { return ids }
}

func perStepIDs(prefix string) func(sizes) []string {
	return func(sz sizes) []string {
		var ids []string
		for _, n := range sz.steps {
			ids = append(ids, fmt.Sprintf("%s/%d", prefix, n))
		}
		return ids
	}
}

func replayIDs(sz sizes) []string { return perStepIDs("replay")(sz) }

func capiIDs(sz sizes) []string {
	var ids []string
	for _, c := range capiRowSpecs(sz) {
		ids = append(ids, c.id)
	}
	return ids
}

func pagingIDs(sz sizes) []string {
	var ids []string
	for _, mode := range pagingModes {
		for _, n := range sz.pageBytes {
			ids = append(ids, pagingID(mode.name, n))
		}
	}
	return ids
}

// allRowIDs lists every row ID of both modes, for -rows and the usage text.
func allRowIDs() []string {
	seen := map[string]bool{}
	var ids []string
	for _, sz := range []sizes{fullSizes(), quickSizes()} {
		for _, c := range cases {
			for _, id := range c.ids(sz) {
				if !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
		}
	}
	return ids
}

func allRowIDsText() string { return strings.Join(allRowIDs(), " ") }

func anyRowMatches(re *regexp.Regexp) bool {
	for _, id := range allRowIDs() {
		if re.MatchString(id) {
			return true
		}
	}
	return false
}

// bench is one run: the provider, the in-process raw baselines' objects and what the external
// programs reported.
type bench struct {
	cfg   config
	sz    sizes
	p     *ep.Provider
	ctx   *cudadrv.Context
	onGPU bool
	ext   *External
	// extAbsent says, per external program, why it did not run (empty when it did).
	extAbsent map[string]string
	raw       *rawEnv
	rep       *Report
}

// progressf prints one progress line to the progress writer.
func (b *bench) progressf(format string, args ...any) {
	fmt.Fprintf(b.cfg.progress, "cudaep-bench: "+format+"\n", args...)
}

// runBench opens the device, runs the external baselines and every selected case, and
// returns the report. A case that fails is recorded in the report's errors and the run goes
// on; only a device that cannot be opened is fatal.
func runBench(cfg config) (*Report, error) {
	start := time.Now().UTC()
	opts := ep.DefaultOptions()
	opts.Backend = cfg.backend
	p, err := ep.New(opts)
	if err != nil {
		return nil, fmt.Errorf("open the device: %w", err)
	}
	defer p.Close()

	// Every driver call of the run is made from this goroutine, on this OS thread: the CUDA
	// context is current per thread, and thread-local stream capture must begin and end on
	// one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, releaseCtx, err := providerContext(p)
	if err != nil {
		return nil, fmt.Errorf("retain the provider's context: %w", err)
	}
	defer func() { _ = releaseCtx() }() // after p.Close: either order is safe
	if err := ctx.Bind(); err != nil {
		return nil, fmt.Errorf("bind the provider's context: %w", err)
	}

	onGPU := p.BackendName() == ep.BackendCUDA
	sz := fullSizes()
	if cfg.quick || !onGPU {
		sz = quickSizes()
	}
	if cfg.repeats > 0 {
		sz.reps = cfg.repeats
	}
	b := &bench{cfg: cfg, sz: sz, p: p, ctx: ctx, onGPU: onGPU, ext: newExternal(), extAbsent: map[string]string{}}
	b.rep = b.newReport(start)
	b.progressf("backend %s, device %s%s", p.BackendName(), b.rep.Device.Name, map[bool]string{true: "", false: " — " + SimNotice}[onGPU])

	b.raw, err = openRawEnv(b)
	if err != nil {
		return b.rep, fmt.Errorf("prepare the raw baselines: %w", err)
	}
	defer b.raw.close()

	b.runExternals("before")
	for _, c := range cases {
		ids := c.ids(sz)
		if !anyMatch(cfg.rows, ids) || c.run == nil {
			continue
		}
		b.progressf("%s …", c.name)
		t0 := time.Now()
		rows, err := c.run(b)
		if err != nil {
			b.rep.Errors = append(b.rep.Errors, fmt.Sprintf("%s: %v", c.name, err))
			b.progressf("%s: FAILED: %v", c.name, err)
		}
		for _, r := range rows {
			if cfg.rows.MatchString(r.ID) {
				b.rep.Rows = append(b.rep.Rows, r)
			}
		}
		b.progressf("%s: done in %.1fs", c.name, time.Since(t0).Seconds())
	}
	b.runExternals("after")
	b.attachExternal()
	b.rep.finish()
	if err := p.Close(); err != nil {
		b.rep.Errors = append(b.rep.Errors, fmt.Sprintf("close the provider: %v", err))
	}
	return b.rep, nil
}

// providerContext retains the context p runs in, for the raw baselines that run beside p on
// its buffers and its stream: the primary context of p's device, on the process's shared driver
// of p's backend (which p holds open). release gives both back.
func providerContext(p *ep.Provider) (ctx *cudadrv.Context, release func() error, err error) {
	drv, err := cudadrv.AcquireShared(p.BackendName(), nil, nil)
	if err != nil {
		return nil, nil, err
	}
	dev, err := drv.Device(p.Options().DeviceID)
	if err == nil {
		ctx, err = dev.RetainPrimaryContext()
	}
	if err != nil {
		return nil, nil, errors.Join(err, cudadrv.ReleaseShared(drv))
	}
	return ctx, func() error { return errors.Join(ctx.Release(), cudadrv.ReleaseShared(drv)) }, nil
}

func anyMatch(re *regexp.Regexp, ids []string) bool {
	for _, id := range ids {
		if re.MatchString(id) {
			return true
		}
	}
	return false
}

// newReport fills the report's header from the provider and the configuration.
func (b *bench) newReport(start time.Time) *Report {
	info := b.p.Device()
	dev := DeviceInfo{
		Name: info.Name, ComputeCap: fmt.Sprintf("%d.%d", info.Major, info.Minor),
		Multiprocessors: info.Multiprocessors, TotalMemory: info.TotalMemory,
	}
	if v, err := b.ctx.Device().Driver().Version(); err == nil {
		dev.DriverVersion = v
		dev.DriverVersionText = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	r := &Report{
		Tool: "cudaep-bench", EPVersion: ep.Version, Date: start.Format(time.RFC3339),
		Backend: b.p.BackendName(), AutoReason: b.p.AutoReason(), Device: dev,
		GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(),
		Quick: b.cfg.quick || !b.onGPU, Repeats: b.sz.reps, Args: publicArgs(b.cfg.args),
		Method: []string{
			"every series: a warm-up, then Repeats samples; each sample is the mean per call, step or layer over a batch; the table prints the median and [min–max]",
			"paired in-process arms alternate which runs first in each repeat, so drift favours neither",
			"device work is timed on the host clock around work that ends in a synchronization (or, for enqueue rows, with synchronizations every K calls taken off the clock)",
			"external programs (C, PyTorch) run before and after the Go rows; their samples are pooled",
		},
		External: map[string]string{},
	}
	if !b.onGPU {
		r.SimNotice = SimNotice
	}
	return r
}

// repoPath returns a path inside the repository root.
func (b *bench) repoPath(rel string) string {
	return filepath.Join(b.cfg.repo, filepath.FromSlash(rel))
}

// errJoin returns err joined with a failing cleanup's error.
func errJoin(err error, cleanup error) error {
	if cleanup == nil {
		return err
	}
	return errors.Join(err, cleanup)
}

// fileExists reports whether path names an existing regular file.
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// publicArgs returns the command line with the directories of absolute path flags dropped, so
// that a committed report names no machine's folders.
func publicArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if ok && filepath.IsAbs(value) && (name == "json" || name == "tmp" || name == "bin" || name == "repo") {
			out[i] = "-" + name + "=…/" + filepath.Base(value)
		}
	}
	return out
}
