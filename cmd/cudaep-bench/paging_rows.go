package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
	"github.com/cudaep/cudaep/paging/pagingtest"
)

// The paging rows drive package paging directly — a DoubleBuffer over a CUDATransfer, with a
// StagingPool and a copy and a compute stream of their own — rather than ep's residency,
// because the residency always takes the zero-copy path (falling back to staging only on a
// registration error), and the rows compare both paths. The pipeline is the one ep's
// residency builds; ep adds routing and bookkeeping around it, not device work.
//
// For each layer size, LAYERS layers of a real external-data file (written to -tmp, mapped
// MAP_SHARED read-only) are paged, per arm, timed on the host from the first enqueue to both
// streams drained:
//
//	raw  cuMemcpyHtoDAsync of one layer from one pinned buffer, back to back: the link's rate
//	C    the compute proxy alone: a kernel spinning on %globaltimer for the raw copy time of a
//	     layer (pagingtest's spin kernel), so copy and compute are balanced and overlap matters
//	     most
//	X    the copy path alone: the pipelined loop with no compute
//	S    serial one-slot: prefetch, wait, compute, release, and the host waits for the compute
//	     before the next prefetch, so no copy overlaps compute
//	P    pipelined two-slot: prefetch N+1 before consuming N
//
// and reported as P/max(C,X) (1.0 is perfect overlap), S/(C+X) (1.0 is no overhead) and the
// link efficiency (bytes/X)/raw. On the simulated device, copies are modelled at
// simCopyRate and the compute proxy sleeps.

// simCopyRate is the simulated device's modelled link for the paging rows, bytes per second.
const simCopyRate = 4e9

// pagingMode is one transfer path of the paging rows.
type pagingMode struct {
	name string
	mode paging.TransferMode
}

var pagingModes = []pagingMode{{"zero-copy", paging.ModeZeroCopy}, {"staging", paging.ModeStaging}}

func pagingID(mode string, layerBytes uint64) string {
	return "paging/" + mode + "/" + sizeLabel(layerBytes)
}

// pagingEnv is the paging rows' device: the provider's context on the GPU, or a simulated
// device of its own whose copies are modelled at simCopyRate.
type pagingEnv struct {
	ctx           *cudadrv.Context
	copy, compute *cudadrv.Stream
	pool          *paging.StagingPool
	kernels       *pagingtest.Kernels // the compute proxy
	simDevice     *sim.Device         // non-nil when the env owns a simulated device
}

func (b *bench) openPagingEnv() (*pagingEnv, error) {
	env := &pagingEnv{ctx: b.ctx}
	if !b.onGPU {
		env.simDevice = sim.New(sim.Options{CopyBandwidth: simCopyRate})
		drv, err := cudadrv.NewDriver(env.simDevice)
		if err != nil {
			return nil, errors.Join(err, env.simDevice.Close())
		}
		dev, err := drv.Device(0)
		if err != nil {
			return nil, errors.Join(err, env.simDevice.Close())
		}
		if env.ctx, err = dev.RetainPrimaryContext(); err != nil {
			return nil, errors.Join(err, env.simDevice.Close())
		}
	}
	if err := env.ctx.Bind(); err != nil {
		return nil, errors.Join(err, env.close(b))
	}
	least, greatest, err := env.ctx.StreamPriorityRange()
	if err != nil {
		return nil, errors.Join(err, env.close(b))
	}
	// As ep's: copies on the lowest priority, compute on the highest.
	if env.copy, err = env.ctx.NewStream(cudadrv.StreamNonBlocking, least); err != nil {
		return nil, errors.Join(err, env.close(b))
	}
	if env.compute, err = env.ctx.NewStream(cudadrv.StreamNonBlocking, greatest); err != nil {
		return nil, errors.Join(err, env.close(b))
	}
	if env.pool, err = paging.NewStagingPool(env.ctx, paging.DefaultRetentionCap); err != nil {
		return nil, errors.Join(err, env.close(b))
	}
	if env.kernels, err = pagingtest.LoadKernels(env.ctx); err != nil {
		return nil, errors.Join(err, env.close(b))
	}
	return env, nil
}

// close drains and releases the env, and binds the provider's context again.
func (env *pagingEnv) close(b *bench) error {
	var errs []error
	for _, s := range []*cudadrv.Stream{env.copy, env.compute} {
		if s != nil {
			errs = append(errs, s.Synchronize())
		}
	}
	if env.kernels != nil {
		errs = append(errs, env.kernels.Close())
	}
	if env.pool != nil {
		errs = append(errs, env.pool.Close())
	}
	for _, s := range []*cudadrv.Stream{env.copy, env.compute} {
		if s != nil {
			errs = append(errs, s.Destroy())
		}
	}
	if env.simDevice != nil {
		if env.ctx != nil {
			errs = append(errs, env.ctx.Release())
		}
		errs = append(errs, env.simDevice.Close())
	}
	errs = append(errs, b.ctx.Bind())
	return errors.Join(errs...)
}

// drain waits for both streams.
func (env *pagingEnv) drain() error {
	return errors.Join(env.copy.Synchronize(), env.compute.Synchronize())
}

// compute queues the proxy for d on the compute stream.
func (env *pagingEnv) computeFor(d time.Duration) error {
	return env.kernels.Spin(env.compute, d)
}

// pagingRows measures every selected (path, size) pair.
func (b *bench) pagingRows() ([]Row, error) {
	env, err := b.openPagingEnv()
	if err != nil {
		return nil, err
	}
	var rows []Row
	var errs []error
	for _, size := range b.sz.pageBytes {
		var modes []pagingMode
		for _, m := range pagingModes {
			if b.cfg.rows.MatchString(pagingID(m.name, size)) {
				modes = append(modes, m)
			}
		}
		if len(modes) == 0 {
			continue
		}
		b.progressf("paging %s layers …", sizeLabel(size))
		got, err := b.pagingSize(env, size, modes)
		rows = append(rows, got...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s layers: %w", sizeLabel(size), err))
		}
	}
	errs = append(errs, env.close(b))
	return rows, errors.Join(errs...)
}

// pagingFile writes layers layers of layerBytes each (a pagingtest.LayerFile: every layer a
// distinct non-zero byte pattern), maps it, and returns the source, the weights and a cleanup
// that unmaps and removes it.
func (b *bench) pagingFile(layerBytes uint64, layers int) (*paging.MmapSource, []*paging.LazyWeight, func() error, error) {
	lf := pagingtest.LayerFile{RegionBytes: int(layerBytes), RegionsPerLayer: 1, Layers: layers}
	f, err := os.CreateTemp(b.cfg.tmp, "cudaep-bench-weights-*.bin")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create the weight file (see -tmp): %w", err)
	}
	path := f.Name()
	remove := func() error { return os.Remove(path) }
	if _, err := lf.WriteTo(f); err != nil {
		return nil, nil, nil, errors.Join(fmt.Errorf("write %s: %w", path, err), f.Close(), remove())
	}
	if err := f.Close(); err != nil {
		return nil, nil, nil, errors.Join(err, remove())
	}
	l, err := lf.Open(path)
	if err != nil {
		return nil, nil, nil, errors.Join(err, remove())
	}
	return l.Source, l.Weights, func() error { return errors.Join(l.Close(), remove()) }, nil
}

// pagingSize measures one layer size: the raw link and the compute proxy once, then the three
// arms of each transfer path.
func (b *bench) pagingSize(env *pagingEnv, layerBytes uint64, modes []pagingMode) (rows []Row, err error) {
	layers, runs := b.sz.pageLayers, b.sz.pageRuns
	src, weights, cleanup, err := b.pagingFile(layerBytes, layers)
	if err != nil {
		return nil, err
	}
	defer func() { err = errJoin(err, cleanup()) }()

	// once runs f from drained streams to drained streams and returns ms per layer; timed
	// runs it once to warm up, then runs times.
	once := func(f func() error) (float64, error) {
		if err := env.drain(); err != nil {
			return 0, err
		}
		start := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		if err := env.drain(); err != nil {
			return 0, err
		}
		return millis(time.Since(start)) / float64(layers), nil
	}
	timed := func(f func() error) ([]float64, error) {
		var out []float64
		for run := 0; run <= runs; run++ {
			v, err := once(f)
			if err != nil {
				return nil, err
			}
			if run > 0 {
				out = append(out, v)
			}
		}
		return out, nil
	}

	rawMs, err := b.rawPinnedCopy(env, layerBytes, layers, timed)
	if err != nil {
		return nil, fmt.Errorf("raw pinned H2D: %w", err)
	}
	rawSum, err := Summarize(rawMs)
	if err != nil {
		return nil, err
	}
	rawGBps := float64(layerBytes) / (rawSum.Median * 1e-3) / 1e9
	proxy := time.Duration(rawSum.Median * float64(time.Millisecond))
	cMs, err := timed(func() error {
		for range layers {
			if err := env.computeFor(proxy); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("compute proxy: %w", err)
	}

	// What the zero-copy path pays besides the copy: page-locking the layer's file extents
	// and unlocking them again, in the transfer's chunks, measured with no pipeline alive.
	regGBps, unregGBps, err := b.registrationRate(env, src, weights[0], layerBytes)
	if err != nil {
		return nil, fmt.Errorf("registration rate: %w", err)
	}

	for _, m := range modes {
		row, err := b.pagingMode(env, m, layerBytes, src, weights, rawMs, cMs, proxy, once)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", m.name, err)
		}
		row.Derived["raw_h2d_gbps"] = rawGBps
		if m.mode == paging.ModeZeroCopy {
			row.Derived["register_gbps"] = regGBps
			row.Derived["unregister_gbps"] = unregGBps
		}
		row.Goal = pagingGoal(&row, m, b.onGPU)
		rows = append(rows, row)
	}
	return rows, nil
}

// registrationRate registers one layer's mapped file bytes read-only with the driver, in
// chunks of paging.DefaultRegisterChunkBytes as the zero-copy transfer does, then unregisters
// them, pageRuns times, and returns the median rates of both in GB/s.
func (b *bench) registrationRate(env *pagingEnv, src *paging.MmapSource, w *paging.LazyWeight, layerBytes uint64) (reg, unreg float64, err error) {
	mem, err := src.RegionBytes(w.Regions()[0])
	if err != nil {
		return 0, 0, err
	}
	var regs, unregs []float64
	for range b.sz.pageRuns {
		var held []*cudadrv.Registration
		start := time.Now()
		for off := uint64(0); off < layerBytes; off += paging.DefaultRegisterChunkBytes {
			end := min(off+paging.DefaultRegisterChunkBytes, layerBytes)
			r, err := env.ctx.RegisterHost(mem[off:end:end], cudadrv.HostRegisterReadOnly)
			if err != nil {
				for _, h := range held {
					err = errors.Join(err, h.Unregister())
				}
				return 0, 0, err
			}
			held = append(held, r)
		}
		mid := time.Now()
		var errs []error
		for _, h := range held {
			errs = append(errs, h.Unregister())
		}
		if err := errors.Join(errs...); err != nil {
			return 0, 0, err
		}
		regs = append(regs, float64(layerBytes)/mid.Sub(start).Seconds()/1e9)
		unregs = append(unregs, float64(layerBytes)/time.Since(mid).Seconds()/1e9)
	}
	return median(regs), median(unregs), nil
}

// rawPinnedCopy measures cuMemcpyHtoDAsync of layers layers from one pinned buffer into one
// device buffer on the copy stream, in ms per layer.
func (b *bench) rawPinnedCopy(env *pagingEnv, layerBytes uint64, layers int, timed func(func() error) ([]float64, error)) ([]float64, error) {
	host, err := env.ctx.AllocHost(layerBytes)
	if err != nil {
		return nil, err
	}
	hb := host.Bytes()
	for i := range hb {
		hb[i] = byte(i%253) + 1
	}
	dev, err := env.ctx.Alloc(layerBytes)
	if err != nil {
		return nil, errors.Join(err, host.Free())
	}
	ms, err := timed(func() error {
		for range layers {
			if err := env.copy.CopyHtoDAsync(dev.Ptr(), hb); err != nil {
				return err
			}
		}
		return nil
	})
	return ms, errors.Join(err, env.drain(), dev.Free(), host.Free())
}

// pagingMode measures X, S and P for one transfer path and checks the bytes of one paged layer.
func (b *bench) pagingMode(env *pagingEnv, m pagingMode, layerBytes uint64, src *paging.MmapSource,
	weights []*paging.LazyWeight, rawMs, cMs []float64, proxy time.Duration,
	once func(func() error) (float64, error)) (row Row, err error) {
	layers := len(weights)
	tr, err := paging.NewCUDATransfer(paging.CUDATransferConfig{
		Context: env.ctx, CopyStream: env.copy, ComputeStream: env.compute, Pool: env.pool, Mode: m.mode,
	})
	if err != nil {
		return row, err
	}
	db, err := paging.NewDoubleBuffer(tr, layerBytes)
	if err != nil {
		return row, errors.Join(err, tr.Close())
	}
	defer func() { err = errJoin(err, db.Close()) }()

	// armClock accumulates, over an arm's measured runs, the host time spent inside Prefetch
	// (resolving regions, registering extents or copying into staging, queueing the copy) and
	// the time from the end of the host loop to both streams drained (the device's tail).
	type armClock struct {
		prefetch, loop, tail time.Duration
		loopDone             time.Time
		runs                 int
	}
	prefetch := func(clk *armClock, l int) (paging.Ticket, error) {
		t0 := time.Now()
		tk, err := db.Prefetch(paging.LayerID(l), weights[l], src)
		clk.prefetch += time.Since(t0)
		return tk, err
	}
	pipelined := func(withCompute bool) func(*armClock) error {
		return func(clk *armClock) error {
			next, err := prefetch(clk, 0)
			if err != nil {
				return err
			}
			for l := range layers {
				cur := next
				if l+1 < layers {
					if next, err = prefetch(clk, l+1); err != nil {
						return err
					}
				}
				if _, err := db.Wait(cur); err != nil {
					return err
				}
				if withCompute {
					if err := env.computeFor(proxy); err != nil {
						return err
					}
				}
				if err := db.Release(cur); err != nil {
					return err
				}
			}
			clk.loopDone = time.Now()
			return nil
		}
	}
	serial := func(clk *armClock) error {
		for l := range layers {
			tk, err := prefetch(clk, l)
			if err != nil {
				return err
			}
			if _, err := db.Wait(tk); err != nil {
				return err
			}
			if err := env.computeFor(proxy); err != nil {
				return err
			}
			if err := db.Release(tk); err != nil {
				return err
			}
			if err := env.compute.Synchronize(); err != nil { // no overlap: the next copy starts after
				return err
			}
		}
		clk.loopDone = time.Now()
		return nil
	}
	// Each arm runs once to warm up (its clock reset afterwards); then the arms alternate run
	// by run, so that drift favours none of them.
	arms := []struct {
		name string
		f    func(*armClock) error
		out  []float64
		clk  armClock
	}{{name: "x", f: pipelined(false)}, {name: "s", f: serial}, {name: "p", f: pipelined(true)}}
	before := tr.Metrics()
	for run := 0; run <= b.sz.pageRuns; run++ {
		for i := range arms {
			a := &arms[i]
			clk := &a.clk
			start := time.Now()
			v, err := once(func() error {
				start = time.Now()
				return a.f(clk)
			})
			if err != nil {
				return row, err
			}
			end := start.Add(time.Duration(v * float64(layers) * float64(time.Millisecond)))
			if run == 0 {
				a.clk = armClock{}
				continue
			}
			a.out = append(a.out, v)
			clk.loop += clk.loopDone.Sub(start)
			clk.tail += end.Sub(clk.loopDone)
			clk.runs++
		}
	}
	xMs, sMs, pMs := arms[0].out, arms[1].out, arms[2].out
	after := tr.Metrics()
	if err := b.checkPaged(env, db, src, weights[layers-1], paging.LayerID(layers-1)); err != nil {
		return row, err
	}

	row = Row{
		ID: pagingID(m.name, layerBytes), Group: GroupPaging,
		Title: fmt.Sprintf("paging %s, %d layers of %s", m.name, layers, sizeLabel(layerBytes)),
		Ours:  measure("P", SourcePage, UnitMillis, pMs),
		Baselines: []Measure{
			measure("S", SourcePage, UnitMillis, sMs),
			measure("C", SourcePage, UnitMillis, cMs),
			measure("X", SourcePage, UnitMillis, xMs),
			measure("raw pinned H2D", SourceGoRaw, UnitMillis, rawMs),
		},
	}
	if !row.Ours.Measured() {
		return row, fmt.Errorf("no P samples")
	}
	p, s, x, c := median(pMs), median(sMs), median(xMs), median(cMs)
	raw := median(rawMs)
	dm := db.Metrics()
	moved := float64(layers * (b.sz.pageRuns + 1) * 3)
	row.Derived = map[string]float64{
		"layer_bytes":                float64(layerBytes),
		"layers":                     float64(layers),
		"p_over_max_cx":              p / max(c, x),
		"s_over_c_plus_x":            s / (c + x),
		"link_efficiency":            raw / x, // (bytes/X) / (bytes/raw)
		"x_gbps":                     float64(layerBytes) / (x * 1e-3) / 1e9,
		"zero_copy_layers":           float64(dm.ZeroCopyLayers),
		"staging_layers":             float64(dm.StagingLayers),
		"fallback_layers":            float64(dm.FallbackLayers),
		"registration_failures":      float64(after.RegistrationFailures - before.RegistrationFailures),
		"host_copy_ms_per_layer":     millis(after.HostCopy-before.HostCopy) / moved,
		"staging_wait_ms_per_layer":  millis(after.StagingWait-before.StagingWait) / moved,
		"compute_proxy_ms_per_layer": millis(proxy),
	}
	perLayer := func(d time.Duration, clk armClock) float64 {
		return millis(d) / float64(max(clk.runs, 1)*layers)
	}
	for _, a := range arms {
		row.Derived[a.name+"_host_prefetch_ms_per_layer"] = perLayer(a.clk.prefetch, a.clk)
		row.Derived[a.name+"_host_loop_ms_per_layer"] = perLayer(a.clk.loop, a.clk)
		row.Derived[a.name+"_tail_ms"] = millis(a.clk.tail) / float64(max(a.clk.runs, 1))
	}
	// With L layers the pipeline cannot overlap the first copy or the last compute: even with
	// perfect overlap P = max(C,X) + min(C,X)/L, so P/max(C,X) is at least 1 + min/(L·max).
	row.Derived["p_ideal_over_max_cx"] = 1 + min(c, x)/(float64(layers)*max(c, x))
	row.Derived["p_over_ideal"] = p / (max(c, x) + min(c, x)/float64(layers))
	if dm.FallbackLayers > 0 {
		note := fmt.Sprintf("%d layers fell back from zero-copy to staging", dm.FallbackLayers)
		if fb := dm.LastFallback; fb != nil {
			note += fmt.Sprintf(" (the last, layer %d: %s)", fb.Layer, fb.Reason)
		}
		row.Notes = append(row.Notes, note)
	}
	return row, nil
}

// checkPaged pages one layer through db and compares its device bytes with the file's.
func (b *bench) checkPaged(env *pagingEnv, db *paging.DoubleBuffer, src *paging.MmapSource, w *paging.LazyWeight, layer paging.LayerID) error {
	tk, err := db.Prefetch(layer, w, src)
	if err != nil {
		return err
	}
	v, err := db.Wait(tk)
	if err != nil {
		return err
	}
	if err := env.drain(); err != nil {
		return err
	}
	got := make([]byte, v.Len)
	if err := env.ctx.CopyDtoH(got, v.Ptr); err != nil {
		return err
	}
	want, err := w.AppendImage(nil, src)
	if err != nil {
		return err
	}
	if err := db.Release(tk); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("layer %d's device bytes differ from the file's", layer)
	}
	return nil
}

// pagingGoal is issue 8's goal for a paging row: P/max(C,X) ≤ 1.05 on both paths, and link
// efficiency ≥ 0.95 on zero-copy.
func pagingGoal(row *Row, m pagingMode, onGPU bool) *Goal {
	d := row.Derived
	g := &Goal{Text: "P/max(C,X) ≤ 1.05"}
	if m.mode == paging.ModeZeroCopy {
		g.Text += ", link eff ≥ 0.95"
	}
	if !onGPU {
		g.Detail = "not evaluated: timings of the simulated device are not performance numbers"
		return g
	}
	met := d["p_over_max_cx"] <= 1.05
	g.Detail = fmt.Sprintf("P/max(C,X) = %.3f (a perfect %d-layer pipeline: %.3f; P is %.3f× that)",
		d["p_over_max_cx"], int(d["layers"]), d["p_ideal_over_max_cx"], d["p_over_ideal"])
	if m.mode == paging.ModeZeroCopy {
		met = met && d["link_efficiency"] >= 0.95
		g.Detail += fmt.Sprintf(", link efficiency = %.3f (X at %.1f GB/s, raw pinned %.1f GB/s; registering the extents runs at %.1f GB/s, unregistering at %.1f GB/s)",
			d["link_efficiency"], d["x_gbps"], d["raw_h2d_gbps"], d["register_gbps"], d["unregister_gbps"])
	}
	g.Met = boolPtr(met)
	return g
}

// median returns the median of a non-empty series (0 for an empty one).
func median(v []float64) float64 {
	s, err := Summarize(v)
	if err != nil {
		return 0
	}
	return s.Median
}
