package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/paging"
	"github.com/cudaep/cudaep/paging/pagingtest"
)

// The paging rows drive package paging directly — a DoubleBuffer over a CUDATransfer, with a
// StagingPool and a copy and a compute stream of their own — rather than ep's residency, so
// that each path is measured on its own (the residency's path is the paging_path option). The
// pipeline is the one ep's residency builds; ep adds routing and bookkeeping around it, not
// device work. The end-to-end row (pagingE2ERows) goes through ep.
//
// The zero-copy path keeps a file's extents registered across fills: the warm-up run of an arm
// registers them (its X is reported as the first pass), the measured runs reuse them.
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
	regBefore := env.pool.RegistrationStats()
	var firstX float64 // X of the warm-up run: the first pass over the file
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
				if a.name == "x" {
					firstX = v
				}
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
	regAfter := env.pool.RegistrationStats()
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
		"x_first_pass_ms":            firstX,
		"first_pass_link_efficiency": raw / firstX,
		"registrations_made":         float64(regAfter.Made - regBefore.Made),
		"registrations_reused":       float64(regAfter.Reused - regBefore.Reused),
		"register_ms_per_layer":      millis(regAfter.RegisterTime-regBefore.RegisterTime) / moved,
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

// pagingGoal is issue 15's goal for a paging row: P within 1.02× the pipeline bound on both
// paths, and a link efficiency of at least 0.95 on zero-copy and 0.8 on staging for layers of
// 64 MiB and more.
func pagingGoal(row *Row, m pagingMode, onGPU bool) *Goal {
	d := row.Derived
	large := d["layer_bytes"] >= 64<<20
	g := &Goal{Text: "P ≤ 1.02× bound"}
	linkGoal := 0.0
	if large {
		linkGoal = map[paging.TransferMode]float64{paging.ModeZeroCopy: 0.95, paging.ModeStaging: 0.8}[m.mode]
		g.Text += fmt.Sprintf(", link eff ≥ %.2g", linkGoal)
	}
	if !onGPU {
		g.Detail = "not evaluated: timings of the simulated device are not performance numbers"
		return g
	}
	met := d["p_over_ideal"] <= 1.02
	g.Detail = fmt.Sprintf("P/max(C,X) = %.3f, a perfect %d-layer pipeline's bound %.3f: P is %.3f× the bound",
		d["p_over_max_cx"], int(d["layers"]), d["p_ideal_over_max_cx"], d["p_over_ideal"])
	g.Detail += fmt.Sprintf("; link efficiency %.3f (X at %.1f GB/s, raw pinned %.1f GB/s; first pass %.3f)",
		d["link_efficiency"], d["x_gbps"], d["raw_h2d_gbps"], d["first_pass_link_efficiency"])
	if m.mode == paging.ModeZeroCopy {
		g.Detail += fmt.Sprintf("; registering a layer's extents runs at %.1f GB/s, unregistering at %.1f GB/s (%g registrations made, %g reused in the measured runs)",
			d["register_gbps"], d["unregister_gbps"], d["registrations_made"], d["registrations_reused"])
	} else {
		g.Detail += fmt.Sprintf("; host copy into staging %.3f ms per layer (%.1f GB/s)",
			d["host_copy_ms_per_layer"], d["layer_bytes"]/(d["host_copy_ms_per_layer"]*1e-3)/1e9)
	}
	if large {
		met = met && d["link_efficiency"] >= linkGoal
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

// GroupPagingE2E is the group of the end-to-end paging rows (printed in the main table).
const GroupPagingE2E = "paging end to end"

// pagingE2EID names the end-to-end row of a file of layers layers of layerBytes.
func pagingE2EID(layerBytes uint64, layers int) string {
	return "paging-e2e/" + sizeLabel(layerBytes*uint64(layers))
}

func pagingE2EIDs(sz sizes) []string {
	return []string{pagingE2EID(sz.e2eLayerBytes, sz.e2eLayers)}
}

// pagingE2ERows measures a whole prefill through ep, as a host runs it: a provider with the
// prefill double buffer on and its slots reserved when it is created (residency_slot_bytes),
// an external-data file of e2eLayers layers registered when it is opened, then every layer
// prefetched one ahead, paged and released, timed from the first prefetch to the device
// drained. The first prefill (right after the open) and the later ones are reported apart,
// against raw pinned H2D of the same bytes measured in the same run. No compute runs: the
// row is the paging alone, end to end.
func (b *bench) pagingE2ERows() (rows []Row, err error) {
	layerBytes, layers := b.sz.e2eLayerBytes, b.sz.e2eLayers
	id := pagingE2EID(layerBytes, layers)
	if !b.cfg.rows.MatchString(id) {
		return nil, nil
	}
	b.progressf("paging end to end: writing %d layers of %s …", layers, sizeLabel(layerBytes))
	lf := pagingtest.LayerFile{Prefix: 64, RegionBytes: int(layerBytes), RegionsPerLayer: 1, Layers: layers, Salt: 0x5E}
	f, err := os.CreateTemp(b.cfg.tmp, "cudaep-bench-e2e-*.bin")
	if err != nil {
		return nil, fmt.Errorf("create the weight file (see -tmp): %w", err)
	}
	path := f.Name()
	defer func() { err = errJoin(err, os.Remove(path)) }()
	if _, err := lf.WriteTo(f); err != nil {
		return nil, errors.Join(fmt.Errorf("write %s: %w", path, err), f.Close())
	}
	if err := f.Close(); err != nil {
		return nil, err
	}

	opts := ep.DefaultOptions()
	opts.Backend, opts.DeviceID = b.p.BackendName(), b.p.Options().DeviceID
	opts.PrefillDoubleBuffer = true
	opts.ResidencySlotBytes = layerBytes
	p, err := ep.New(opts)
	if err != nil {
		return nil, fmt.Errorf("provider with %s: %w", opts, err)
	}
	defer func() { err = errJoin(err, errors.Join(p.Close(), b.ctx.Bind())) }()
	// p runs in b.ctx, as b.p does: the primary context of the same device.
	if err := b.ctx.Bind(); err != nil {
		return nil, err
	}
	rawMs, err := b.rawPinnedE2E(b.ctx, layerBytes, min(layers, 16))
	if err != nil {
		return nil, fmt.Errorf("raw pinned H2D: %w", err)
	}
	rawGBps := float64(layerBytes) / (median(rawMs) * 1e-3) / 1e9

	start := time.Now()
	file, err := p.OpenExternalData(path)
	if err != nil {
		return nil, err
	}
	openMs := millis(time.Since(start))
	rep, _ := p.ExternalDataRegistration(file)
	ws := make([]*ep.LazyWeight, layers)
	for i, spec := range lf.Specs(file) {
		if ws[i], err = p.NewLazyWeight(spec); err != nil {
			return nil, err
		}
	}

	prefill := func() (float64, error) {
		t0 := time.Now()
		if err := e2ePrefetch(p, 0, ws[0]); err != nil {
			return 0, err
		}
		for l := range layers {
			if l+1 < layers {
				if err := e2ePrefetch(p, l+1, ws[l+1]); err != nil {
					return 0, err
				}
			}
			pw, err := p.PageWeight(ep.LayerID(l))
			if err != nil {
				return 0, err
			}
			if err := p.ReleasePagedWeight(pw); err != nil {
				return 0, err
			}
		}
		if err := p.ForceSynchronize(); err != nil {
			return 0, err
		}
		return float64(layerBytes) * float64(layers) / time.Since(t0).Seconds() / 1e9, nil
	}
	first, err := prefill()
	if err != nil {
		return nil, fmt.Errorf("first prefill: %w", err)
	}
	var later []float64
	for range min(b.sz.reps, 5) {
		g, err := prefill()
		if err != nil {
			return nil, fmt.Errorf("prefill: %w", err)
		}
		later = append(later, g)
	}
	if err := e2eCheck(p, b.ctx, lf, ws, []int{0, layers / 2, layers - 1}); err != nil {
		return nil, err
	}
	st, _ := p.ResidencyStats()
	if err := p.CloseExternalData(file); err != nil {
		return nil, err
	}

	row := Row{
		ID: id, Group: GroupPagingE2E, HigherIsBetter: true,
		Title: fmt.Sprintf("prefill of a %s external-data file, %d layers of %s, end to end (ep)", sizeLabel(layerBytes*uint64(layers)), layers, sizeLabel(layerBytes)),
		Ours:  measure("later prefills", SourceEP, UnitGBps, later),
		Baselines: []Measure{
			measure("first prefill, right after the open", SourceEP, UnitGBps, []float64{first}),
			measure("raw pinned H2D", SourceGoRaw, UnitGBps, gbpsOf(layerBytes, rawMs)),
		},
	}
	var fallbacks, zeroCopy float64
	for _, lp := range st.Layers {
		switch lp.Path {
		case ep.PathZeroCopy:
			zeroCopy++
		case ep.PathFallback:
			fallbacks++
		}
	}
	row.Derived = map[string]float64{
		"layer_bytes":         float64(layerBytes),
		"layers":              float64(layers),
		"raw_h2d_gbps":        rawGBps,
		"first_gbps":          first,
		"later_gbps":          median(later),
		"first_over_raw":      first / rawGBps,
		"later_over_raw":      median(later) / rawGBps,
		"open_ms":             openMs,
		"registered_at_open":  float64(rep.Bytes),
		"register_at_open_ms": millis(rep.Took),
		"zero_copy_layers":    zeroCopy,
		"fallback_layers":     fallbacks,
	}
	if rep.Took > 0 {
		row.Derived["register_at_open_gbps"] = float64(rep.Bytes) / rep.Took.Seconds() / 1e9
	}
	if rep.Stopped != "" {
		row.Notes = append(row.Notes, "registration at open stopped: "+rep.Stopped)
	}
	if st.LastFallback != nil {
		row.Notes = append(row.Notes, "fallback: "+st.LastFallback.String())
	}
	g := &Goal{Text: "first and later prefills ≥ 0.9 of raw pinned H2D"}
	if !b.onGPU {
		g.Detail = "not evaluated: timings of the simulated device are not performance numbers"
	} else {
		g.Met = boolPtr(first/rawGBps >= 0.9 && median(later)/rawGBps >= 0.9)
		g.Detail = fmt.Sprintf("first %.1f GB/s (%.3f of raw), later %.1f GB/s (%.3f), raw pinned %.1f GB/s; opening took %.1f ms, of which registering %s took %.1f ms",
			first, first/rawGBps, median(later), median(later)/rawGBps, rawGBps, openMs, sizeLabel(rep.Bytes), millis(rep.Took))
	}
	row.Goal = g
	return []Row{row}, nil
}

// e2ePrefetch routes layer l through p's residency and fails on a decline.
func e2ePrefetch(p *ep.Provider, l int, w *ep.LazyWeight) error {
	d, err := p.PrefetchWeight(ep.LayerID(l), w)
	if err != nil {
		return err
	}
	if d.Declined() {
		return fmt.Errorf("layer %d declined: %v", l, d)
	}
	return nil
}

// e2eCheck pages the layers named and compares their device bytes, read in p's context ctx,
// with the file's pattern.
func e2eCheck(p *ep.Provider, ctx *cudadrv.Context, lf pagingtest.LayerFile, ws []*ep.LazyWeight, layers []int) error {
	for _, l := range layers {
		if err := e2ePrefetch(p, l, ws[l]); err != nil {
			return err
		}
		pw, err := p.PageWeight(ep.LayerID(l))
		if err != nil {
			return err
		}
		if err := p.ForceSynchronize(); err != nil {
			return err
		}
		got := make([]byte, pw.Len())
		err = ctx.CopyDtoH(got, pw.Ptr())
		if rerr := p.ReleasePagedWeight(pw); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
		for i, v := range got {
			if want := pagingtest.PatternByte(l+1, i, lf.Salt); v != want {
				return fmt.Errorf("layer %d byte %d is %#x, the file has %#x", l, i, v, want)
			}
		}
	}
	return nil
}

// rawPinnedE2E times copies of layerBytes from one pinned buffer to one device buffer, n per
// sample, on a stream of its own, in ms per copy.
func (b *bench) rawPinnedE2E(ctx *cudadrv.Context, layerBytes uint64, n int) (ms []float64, err error) {
	host, err := ctx.AllocHost(layerBytes)
	if err != nil {
		return nil, err
	}
	defer func() { err = errJoin(err, host.Free()) }()
	hb := host.Bytes()
	for i := range hb {
		hb[i] = byte(i%251) + 1
	}
	dev, err := ctx.Alloc(layerBytes)
	if err != nil {
		return nil, err
	}
	defer func() { err = errJoin(err, dev.Free()) }()
	s, err := ctx.NewStream(cudadrv.StreamNonBlocking, 0)
	if err != nil {
		return nil, err
	}
	defer func() { err = errJoin(err, s.Destroy()) }()
	for run := 0; run <= min(b.sz.reps, 5); run++ {
		t0 := time.Now()
		for range n {
			if err := s.CopyHtoDAsync(dev.Ptr(), hb); err != nil {
				return nil, err
			}
		}
		if err := s.Synchronize(); err != nil {
			return nil, err
		}
		if run > 0 {
			ms = append(ms, millis(time.Since(t0))/float64(n))
		}
	}
	return ms, nil
}

// gbpsOf turns ms per copy of n bytes into GB/s.
func gbpsOf(n uint64, ms []float64) []float64 {
	out := make([]float64, len(ms))
	for i, v := range ms {
		out[i] = float64(n) / (v * 1e-3) / 1e9
	}
	return out
}
