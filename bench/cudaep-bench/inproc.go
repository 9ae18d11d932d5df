package main

import (
	"fmt"
	"path/filepath"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The raw C baselines of the hot-path rows also run inside this process:
// bench/baselines/raw_inproc.c, built by bench/scripts/bench-gpu.sh into -bin as rawInprocLib,
// runs a whole timed loop of raw driver calls in C per call, so the one purego call per sample
// costs nothing measurable, and the loop runs on this process's thread between our arms,
// alternating with them. Separate processes differ by more than some goals' margins (the same
// graph-launch enqueue measured 1.30 and 2.12 µs from Go against 1.17 µs from C in two runs). The
// goals of those rows are judged against this in-process raw C arm and the raw C program's series
// both (goalBases): the process itself turned out to weigh on the driver (its cuStreamSynchronize
// was 0.3–0.5 µs slower per 1-kernel step inside the Go process than in the C program).

// rawInprocLib is the shared library's file name under -bin.
const rawInprocLib = "libcudaep_rawbench.so"

// The labels of the in-process raw C measures.
const (
	labelInprocReplay  = "raw C cuGraphLaunch + cuStreamSynchronize, in this process"
	labelInprocWord    = "raw C cuGraphLaunch + cuStreamWriteValue32 + spin on the mapped word, in this process"
	labelInprocB2B     = "raw C back-to-back cuGraphLaunch, one cuStreamSynchronize, in this process"
	labelInprocEnqueue = "raw C cuGraphLaunch, in this process"
	labelInprocEager   = "raw C cuLaunchKernel (same PTX), in this process"
)

// rawInproc is the loaded library. The zero value (or a nil pointer) is "not available", with
// why saying why.
type rawInproc struct {
	why string
	fn  struct {
		errMsg, replaySync, replayWord, backToBack, enqueueGraph, eager, close uintptr
	}
}

// inproc returns the in-process raw C baselines, loading and opening them on first use. They
// exist only on the GPU; on the simulated device, or when the library was not built, every
// sample of theirs fails with the reason and the row shows it.
func (b *bench) inproc() *rawInproc {
	if b.raw == nil {
		return &rawInproc{why: "the raw baselines are not open"}
	}
	if b.raw.inproc != nil {
		return b.raw.inproc
	}
	r := &rawInproc{}
	b.raw.inproc = r
	if !b.onGPU {
		r.why = "needs a GPU (this run is on the simulated device)"
		return r
	}
	path := filepath.Join(b.cfg.bin, rawInprocLib)
	if !fileExists(path) {
		r.why = fmt.Sprintf("not built: %s is missing (bench/scripts/bench-gpu.sh compiles it on the GPU machine)", path)
		return r
	}
	lib, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		r.why = "cannot load " + path + ": " + err.Error()
		return r
	}
	var open uintptr
	for name, dst := range map[string]*uintptr{
		"rawbench_open": &open, "rawbench_error": &r.fn.errMsg, "rawbench_replay_sync": &r.fn.replaySync,
		"rawbench_replay_word": &r.fn.replayWord, "rawbench_back_to_back": &r.fn.backToBack,
		"rawbench_enqueue_graph": &r.fn.enqueueGraph, "rawbench_eager": &r.fn.eager, "rawbench_close": &r.fn.close,
	} {
		if *dst, err = purego.Dlsym(lib, name); err != nil {
			r.why = fmt.Sprintf("%s lacks %s: %v", path, name, err)
			return r
		}
	}
	ptx := append([]byte(b.repoPath(addPTX)), 0)
	if rc, _, _ := purego.SyscallN(open, uintptr(unsafe.Pointer(&ptx[0]))); int64(rc) < 0 {
		r.why = "rawbench_open failed: " + r.lastError()
		return r
	}
	// The library bound the primary context on this thread, which is the provider's.
	if err := b.ctx.Bind(); err != nil {
		r.why = "rebind the provider's context: " + err.Error()
	}
	return r
}

// ok reports whether the library is loaded and open.
func (r *rawInproc) ok() bool { return r != nil && r.why == "" }

// lastError returns the library's message of its last failure.
func (r *rawInproc) lastError() string {
	p, _, _ := purego.SyscallN(r.fn.errMsg)
	return cString(p)
}

// cString copies the NUL-terminated C string at p (memory the C library owns, never Go's).
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	// A uintptr from C converted without a vet-visible uintptr→Pointer conversion: p is not a
	// Go pointer, so nothing can move it.
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}

// micros calls fn(a1, a2), which returns the nanoseconds its loop took (or < 0 on failure),
// and returns them in µs divided by per.
func (r *rawInproc) micros(fn uintptr, a1, a2, per int) (float64, error) {
	if !r.ok() {
		return 0, fmt.Errorf("the in-process raw C baselines: %s", r.why)
	}
	ns, _, _ := purego.SyscallN(fn, uintptr(a1), uintptr(a2))
	if int64(ns) < 0 {
		return 0, fmt.Errorf("the in-process raw C baselines: %s", r.lastError())
	}
	return float64(int64(ns)) / 1e3 / float64(per), nil
}

// replaySync is iters raw C steps of launch + stream synchronization of the n-kernel step, in
// µs per step.
func (r *rawInproc) replaySync(n, iters int) (float64, error) {
	return r.micros(r.fn.replaySync, n, iters, iters)
}

// replayWord is iters raw C steps of launch + word write + spin, in µs per step.
func (r *rawInproc) replayWord(n, iters int) (float64, error) {
	return r.micros(r.fn.replayWord, n, iters, iters)
}

// backToBack is launches raw C launches of the n-kernel step and one synchronization, in µs
// per launch.
func (r *rawInproc) backToBack(n, launches int) (float64, error) {
	return r.micros(r.fn.backToBack, n, launches, launches)
}

// enqueueGraph is the raw C host time of one graph launch, in µs.
func (r *rawInproc) enqueueGraph(calls, every int) (float64, error) {
	return r.micros(r.fn.enqueueGraph, calls, every, calls)
}

// eager is the raw C host time of one cuLaunchKernel of the Add over 4096 floats, in µs.
func (r *rawInproc) eager(calls, every int) (float64, error) {
	return r.micros(r.fn.eager, calls, every, calls)
}

// close releases what the library made; rawEnv.close calls it.
func (r *rawInproc) close() {
	if r.ok() {
		purego.SyscallN(r.fn.close)
		r.why = "closed"
	}
}

// inprocArm is an arm of interleave measuring an in-process raw C series, or nil when the
// library is not available (the row then lists the series as missing, with the reason).
func inprocArm(r *rawInproc, label string, sample func() (float64, error)) []arm {
	if !r.ok() {
		return nil
	}
	return []arm{{label, sample}}
}

// inprocMeasure is the Measure of an in-process raw C series: samples[i] when its arm ran
// (i < len(samples)), else missing with the library's reason.
func inprocMeasure(r *rawInproc, label string, samples [][]float64, i int) Measure {
	if !r.ok() || i >= len(samples) {
		return missing(label, SourceCRaw, UnitMicros, r.why)
	}
	return measure(label, SourceCRaw, UnitMicros, samples[i])
}
