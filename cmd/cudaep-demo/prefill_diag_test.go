package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

// TestPrefillDiagnostics times the demo's prefill loop with its kernels taken apart, to find
// which of them keeps the copies from overlapping the compute on a GPU. It runs only with
// CUDAEP_PREFILL_DIAG=1 (the device machine), on the backend of CUDAEP_PREFILL_BACKEND
// (default cuda), at CUDAEP_PREFILL_LAYERS x CUDAEP_PREFILL_WIDTH (default 8 x 2048) with
// CUDAEP_PREFILL_ROWS rows (default 128), the weight file in CUDAEP_PREFILL_DATA (reused when
// the demo wrote it there; default a temporary directory) and the provider options of
// CUDAEP_PREFILL_OPTIONS (k=v,k=v), and prints one table; it asserts no timing.
//
// Every arm pages every layer through the provider's residency as the demo does and is timed
// from the first prefetch to the device drained (median of 5 runs); only its kernels differ:
//
//	paging        no kernels
//	matmul        MatMul only (cuBLAS)
//	add+relu      Add and Relu only (PTX kernels)
//	matmul+add    MatMul and Add
//	all           MatMul, Add and Relu: the demo's layer
//	all, locked   the same, with the loop's goroutine locked to one OS thread
//	compute       the demo's layer over resident weights, no paging
//	serial        all, each layer's compute waited for before the next prefetch (no overlap)
//
// and the output read-back (pageable) is timed alone. Ratios: raw = the paged bytes at raw
// pinned H2D rate (same run) over the arm's time; ovl = (paging + compute) / arm: 1 means no
// overlap at all, paging+compute over max(paging, compute) is perfect overlap.
func TestPrefillDiagnostics(t *testing.T) {
	if os.Getenv("CUDAEP_PREFILL_DIAG") != "1" {
		t.Skip("set CUDAEP_PREFILL_DIAG=1 to run (on the GPU machine)")
	}
	env := func(k string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v
		}
		return def
	}
	backend := os.Getenv("CUDAEP_PREFILL_BACKEND")
	if backend == "" {
		backend = ep.BackendCUDA
	}
	cfg := config{layers: env("CUDAEP_PREFILL_LAYERS", 8), width: env("CUDAEP_PREFILL_WIDTH", 2048),
		prefill: env("CUDAEP_PREFILL_ROWS", 128), tokens: 1, dataDir: os.Getenv("CUDAEP_PREFILL_DATA"), tolerance: 1e-4}
	if cfg.dataDir == "" {
		cfg.dataDir = t.TempDir()
	}
	opts := ep.DefaultOptions()
	opts.PrefillDoubleBuffer = true
	require.NoError(t, opts.Set(ep.OptionBackend, backend))
	opts.ResidencySlotBytes = uint64(4 * cfg.width * (cfg.width + 1))
	if extra := os.Getenv("CUDAEP_PREFILL_OPTIONS"); extra != "" { // k=v,k=v
		for _, kv := range strings.Split(extra, ",") {
			k, v, _ := strings.Cut(kv, "=")
			require.NoError(t, opts.Set(k, v))
		}
	}
	p, err := ep.New(opts)
	require.NoError(t, err)
	defer p.Close()

	m, _, err := newMLP(cfg.dataDir, cfg.layers, cfg.width, func(string, int, int) {})
	require.NoError(t, err)
	d := &demo{p: p, m: m, cfg: cfg}
	defer d.release()
	file, err := p.OpenExternalData(m.path)
	require.NoError(t, err)
	img, w, rows := int64(m.layerFloats()), int64(m.width), cfg.prefill
	lazy := make([]*ep.LazyWeight, m.layers)
	resident := make([]*ep.Buffer, m.layers)
	for l := range lazy {
		lazy[l], err = p.NewLazyWeight(m.layerSpec(file, l))
		require.NoError(t, err)
		resident[l], err = d.alloc(int(img))
		require.NoError(t, err)
		require.NoError(t, upload(p, resident[l], m.w[l]))
	}
	k, err := d.kernelsFor(rows)
	require.NoError(t, err)
	var bufs [3]*ep.Buffer
	for i := range bufs {
		bufs[i], err = d.alloc(rows * m.width)
		require.NoError(t, err)
	}
	raw, err := d.rawH2D()
	require.NoError(t, err)
	require.NoError(t, upload(p, bufs[0], randomRows(rand.New(rand.NewPCG(seed, 3)), rows, m.width)))

	type step func(l int, wt ep.Tensor, in, pre, out ep.Tensor) error
	mm := func(_ int, wt, in, pre, _ ep.Tensor) error {
		return k.matmul.Execute([]ep.Tensor{in, {TensorInfo: f32(w, w), Ptr: wt.Ptr}}, []ep.Tensor{pre})
	}
	bias := func(wt ep.Tensor) ep.Tensor {
		return ep.Tensor{TensorInfo: f32(w), Ptr: wt.Ptr + ep.DevicePtr(4*w*w)}
	}
	addRelu := func(_ int, wt, _, pre, out ep.Tensor) error {
		if err := k.add.Execute([]ep.Tensor{pre, bias(wt)}, []ep.Tensor{pre}); err != nil {
			return err
		}
		return k.relu.Execute([]ep.Tensor{pre}, []ep.Tensor{out})
	}
	mmAdd := func(l int, wt, in, pre, out ep.Tensor) error {
		if err := mm(l, wt, in, pre, out); err != nil {
			return err
		}
		return k.add.Execute([]ep.Tensor{pre, bias(wt)}, []ep.Tensor{out})
	}
	all := func(l int, wt, in, pre, out ep.Tensor) error {
		return d.layer(k, rows, in, pre, out, wt, l == m.layers-1)
	}
	// pass runs one prefill: paged (or over the resident weights), with compute per layer.
	pass := func(paged, serial bool, compute step) error {
		in, pre, out := bufs[0], bufs[1], bufs[2]
		if paged {
			if _, err := p.PrefetchWeight(0, lazy[0]); err != nil {
				return err
			}
		}
		for l := range m.layers {
			wt := at(resident[l], img)
			var pw *ep.PagedWeight
			if paged {
				if l+1 < m.layers {
					if dec, err := p.PrefetchWeight(ep.LayerID(l+1), lazy[l+1]); err != nil || dec.Declined() {
						return fmt.Errorf("prefetch %d: %v %v", l+1, dec, err)
					}
				}
				if pw, err = p.PageWeight(ep.LayerID(l)); err != nil {
					return err
				}
				wt = ep.Tensor{TensorInfo: f32(img), Ptr: pw.Ptr()}
			}
			if compute != nil {
				if err := compute(l, wt, at(in, int64(rows), w), at(pre, int64(rows), w), at(out, int64(rows), w)); err != nil {
					return err
				}
			}
			if pw != nil {
				if err := p.ReleasePagedWeight(pw); err != nil {
					return err
				}
			}
			if serial {
				if err := p.SynchronizeCompute(); err != nil {
					return err
				}
			}
			in, out = out, in
		}
		return nil
	}
	timeIt := func(locked bool, run func() error) time.Duration {
		var times []time.Duration
		for range 6 { // the first is a warm-up
			require.NoError(t, p.ForceSynchronize())
			start := time.Now()
			func() {
				if locked {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
				}
				require.NoError(t, run())
				require.NoError(t, p.ForceSynchronize())
			}()
			times = append(times, time.Since(start))
		}
		times = times[1:]
		slices.Sort(times)
		return times[len(times)/2]
	}
	bytes := float64(m.layers) * float64(4*img)
	arms := []struct {
		name          string
		paged, serial bool
		locked        bool
		compute       step
	}{
		{"paging", true, false, false, nil},
		{"matmul", true, false, false, mm},
		{"add+relu", true, false, false, addRelu},
		{"matmul+add", true, false, false, mmAdd},
		{"all", true, false, false, all},
		{"all, locked", true, false, true, all},
		{"compute", false, false, false, all},
		{"serial", true, true, false, all},
	}
	got := map[string]time.Duration{}
	for _, a := range arms {
		got[a.name] = timeIt(a.locked, func() error { return pass(a.paged, a.serial, a.compute) })
	}
	readBack := timeIt(false, func() error { _, err := readFloats(p, bufs[2]); return err })

	var b strings.Builder
	fmt.Fprintf(&b, "prefill diagnostics, %s: %d layers x %.1f MiB, %d rows; raw pinned H2D %.2f GB/s; options %s\n",
		p.BackendName(), m.layers, float64(4*img)/(1<<20), rows, raw, os.Getenv("CUDAEP_PREFILL_OPTIONS"))
	fmt.Fprintf(&b, "%-12s %9s %6s %6s\n", "arm", "ms", "raw", "ovl")
	sum := got["paging"] + got["compute"]
	for _, a := range arms {
		d := got[a.name]
		fmt.Fprintf(&b, "%-12s %9.3f %6.3f %6.3f\n", a.name, float64(d.Microseconds())/1000,
			bytes/d.Seconds()/1e9/raw, sum.Seconds()/d.Seconds())
	}
	fmt.Fprintf(&b, "%-12s %9.3f   (pageable read-back of the %d x %d output alone)\n", "read-back",
		float64(readBack.Microseconds())/1000, rows, m.width)
	fmt.Fprintf(&b, "perfect overlap: ovl %.3f; none: 1.000\n", sum.Seconds()/max(got["paging"], got["compute"]).Seconds())
	t.Log("\n" + b.String())
	fmt.Print(b.String())
}
