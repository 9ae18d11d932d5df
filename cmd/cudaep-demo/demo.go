package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/cudaep/cudaep/ep"
)

// config is the size of the end-to-end run.
type config struct {
	layers, width   int
	prefill, tokens int // prefill batch rows, decode tokens
	dataDir         string
	progress        string // -progress: auto, lines or off
	// tolerance is the relative error allowed against the float64 reference: 1e-4 for full
	// float32 math, 5e-3 when GEMMs may use TF32 (a 10-bit mantissa in the products).
	tolerance float64
}

// results is what the end-to-end run measured and checked.
type results struct {
	weightsPath  string
	weightsBytes int64
	wroteWeights bool

	openTime         time.Duration     // OpenExternalData, registration included
	registered       ep.RegisterReport // what registering the file when it was opened did
	registeredAtOpen bool
	rawGBps          float64          // pinned host-to-device copies of the layers, same run
	prefillTime      [2]time.Duration // the first prefill, right after the open, and a second: to the last layer done
	readTime         [2]time.Duration // reading each prefill's output back afterwards
	hostEnqueued     [2]time.Duration // when each prefill's host loop had queued every layer
	computeAlone     time.Duration    // the layers' kernels over resident weights, no paging
	pagingAlone      time.Duration    // the paging of every layer, no kernels
	prefillBytes     [2]uint64        // bytes paged through the double buffer
	paths            []string         // per layer: the transfer path, or why it was declined
	prefillErr       float64          // max relative error of the checked rows
	prefillChecked   int

	segments          int
	seamMean          float64 // mean NonZero count at the seam
	segmentedPerToken time.Duration
	wholePerToken     time.Duration
	replayOnly        time.Duration
	decodeErr         float64
	goAllocs          uint64 // Go heap allocations during the replay-only loop
	deviceAllocs      uint64 // device allocations during the whole decode phase
}

// demo holds the provider-side objects of one run.
type demo struct {
	p   *ep.Provider
	m   *mlp
	cfg config
	res results

	keep []*ep.Buffer // released at the end
}

func (d *demo) alloc(floats int) (*ep.Buffer, error) {
	b, err := d.p.Alloc(uint64(4*floats), 0)
	if err == nil {
		d.keep = append(d.keep, b)
	}
	return b, err
}

func (d *demo) release() {
	for _, b := range d.keep {
		_ = b.Release()
	}
}

func f32(shape ...int64) ep.TensorInfo { return ep.TensorInfo{DType: ep.Float32, Shape: shape} }

func at(b *ep.Buffer, shape ...int64) ep.Tensor {
	return ep.Tensor{TensorInfo: f32(shape...), Ptr: b.Ptr()}
}

func upload(p *ep.Provider, b *ep.Buffer, f []float32) error {
	return p.CopyToDevice(b, 0, floatBytes(f))
}

func readFloats(p *ep.Provider, b *ep.Buffer) ([]float32, error) {
	raw := make([]byte, b.Size())
	if err := p.CopyToHost(raw, b, 0); err != nil {
		return nil, err
	}
	return bytesFloats(raw), nil
}

// layerKernels are one batch size's kernels for a dense layer.
type layerKernels struct {
	matmul, add, relu *ep.Kernel
}

func (d *demo) kernelsFor(rows int) (layerKernels, error) {
	r, w := int64(rows), int64(d.m.width)
	var k layerKernels
	var err error
	if k.matmul, err = d.p.GetKernel(ep.Spec{Op: "MatMul", Opset: 13, Inputs: []ep.TensorInfo{f32(r, w), f32(w, w)}}); err != nil {
		return k, err
	}
	if k.add, err = d.p.GetKernel(ep.Spec{Op: "Add", Opset: 14, Inputs: []ep.TensorInfo{f32(r, w), f32(w)}}); err != nil {
		return k, err
	}
	k.relu, err = d.p.GetKernel(ep.Spec{Op: "Relu", Opset: 14, Inputs: []ep.TensorInfo{f32(r, w)}})
	return k, err
}

// layer queues one dense layer: out = act(in·W + b), with W and b at weights (W then b).
func (d *demo) layer(k layerKernels, rows int, in, pre, out ep.Tensor, weights ep.Tensor, last bool) error {
	w := int64(d.m.width)
	wt := ep.Tensor{TensorInfo: f32(w, w), Ptr: weights.Ptr}
	bt := ep.Tensor{TensorInfo: f32(w), Ptr: weights.Ptr + ep.DevicePtr(4*w*w)}
	if err := k.matmul.Execute([]ep.Tensor{in, wt}, []ep.Tensor{pre}); err != nil {
		return err
	}
	if last {
		return k.add.Execute([]ep.Tensor{pre, bt}, []ep.Tensor{out})
	}
	if err := k.add.Execute([]ep.Tensor{pre, bt}, []ep.Tensor{pre}); err != nil {
		return err
	}
	return k.relu.Execute([]ep.Tensor{pre}, []ep.Tensor{out})
}

// runModel is the end-to-end run: write the weights once, prefill through the double buffer
// (keeping a resident copy of each layer for decode), capture the decode step whole and
// segmented around NonZero, replay it for the decode tokens, and check every output against
// the host reference.
func runModel(p *ep.Provider, cfg config, progress progressFunc) (res results, err error) {
	m, wrote, err := newMLP(cfg.dataDir, cfg.layers, cfg.width, progress)
	if err != nil {
		return res, fmt.Errorf("weights: %w", err)
	}
	d := &demo{p: p, m: m, cfg: cfg}
	defer d.release()
	d.res.weightsPath, d.res.weightsBytes, d.res.wroteWeights = m.path, m.fileSize(), wrote
	resident, err := d.prefill(progress)
	if err != nil {
		return d.res, fmt.Errorf("prefill: %w", err)
	}
	if err := d.decode(resident, progress); err != nil {
		return d.res, fmt.Errorf("decode: %w", err)
	}
	return d.res, nil
}

// prefill runs cfg.prefill rows through every layer, paging layer l+1 while layer l computes,
// twice: the first prefill right after the weight file is opened, then a second one. It
// returns the resident copies of the layers the first one built.
func (d *demo) prefill(progress progressFunc) (_ []*ep.Buffer, err error) {
	m, p, rows := d.m, d.p, d.cfg.prefill
	start := time.Now()
	file, err := p.OpenExternalData(m.path)
	if err != nil {
		return nil, err
	}
	d.res.openTime = time.Since(start)
	d.res.registered, d.res.registeredAtOpen = p.ExternalDataRegistration(file)
	lazy := make([]*ep.LazyWeight, m.layers)
	resident := make([]*ep.Buffer, m.layers)
	for l := range lazy {
		if lazy[l], err = p.NewLazyWeight(m.layerSpec(file, l)); err != nil {
			return nil, err
		}
		if resident[l], err = d.alloc(m.layerFloats()); err != nil {
			return nil, err
		}
	}
	k, err := d.kernelsFor(rows)
	if err != nil {
		return nil, err
	}
	img := int64(m.layerFloats())
	identity, err := p.GetKernel(ep.Spec{Op: "Identity", Opset: 14, Inputs: []ep.TensorInfo{f32(img)}})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	x := randomRows(rng, rows, m.width)
	w := int64(m.width)
	var bufs [3]*ep.Buffer
	for i := range bufs {
		if bufs[i], err = d.alloc(rows * m.width); err != nil {
			return nil, err
		}
	}
	if d.res.rawGBps, err = d.rawH2D(); err != nil {
		return nil, fmt.Errorf("raw pinned H2D: %w", err)
	}
	// Warm the kernels up once (a server does it when it loads): the first GEMM loads its
	// cuBLAS kernels, which is no part of paging. The warm-up reads a resident buffer not yet
	// filled and its output is overwritten below.
	if err := d.layer(k, rows, at(bufs[0], int64(rows), w), at(bufs[1], int64(rows), w), at(bufs[2], int64(rows), w), at(resident[0], img), false); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := identity.Execute([]ep.Tensor{at(resident[0], img)}, []ep.Tensor{at(resident[1], img)}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	check := min(rows, 8)
	ref, _ := m.forward(x[:check*m.width], check, 0)
	d.res.paths = make([]string, m.layers)
	// The output comes back into pinned host memory allocated once, as a server keeps it: a
	// copy into fresh pageable memory costs a page fault per 4 KiB page (about 1 ms per MiB
	// on the H200's host), more than the copy itself.
	host, err := p.AllocPinned(bufs[2].Size())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, host.Release()) }()
	for pass := range d.res.prefillTime {
		in, pre, out := bufs[0], bufs[1], bufs[2]
		if err := upload(p, in, x); err != nil {
			return nil, err
		}
		if err := p.ForceSynchronize(); err != nil {
			return nil, err
		}
		start := time.Now()
		var paths []string
		var bytes uint64
		if paths, bytes, err = d.prefillPass(progress, lazy, resident, k, identity, pass == 0, in, pre, out); err != nil {
			return nil, err
		}
		d.res.hostEnqueued[pass] = time.Since(start)
		// The prefill ends when the compute stream has run the last layer; reading the output
		// back is timed apart, and the report gives the rate with and without it.
		if err := p.SynchronizeCompute(); err != nil {
			return nil, err
		}
		d.res.prefillTime[pass] = time.Since(start)
		if m.layers%2 == 0 {
			out = in // the layers swapped in and out; the result is where the last one wrote
		}
		read := time.Now()
		if err := p.CopyToHost(host.Bytes(), out, 0); err != nil {
			return nil, err
		}
		d.res.readTime[pass] = time.Since(read)
		got := bytesFloats(host.Bytes())
		d.res.prefillBytes[pass] = bytes
		if pass == 0 {
			d.res.paths = paths
		}
		e := relErr(got[:check*m.width], ref)
		d.res.prefillErr = math.Max(d.res.prefillErr, e)
		d.res.prefillChecked = check
		if e > d.cfg.tolerance {
			return nil, fmt.Errorf("prefill %d output differs from the reference: relative error %.3g", pass+1, e)
		}
	}
	if err := d.breakdown(lazy, resident, k, bufs); err != nil {
		return nil, fmt.Errorf("prefill breakdown: %w", err)
	}
	return resident, nil
}

// layerSpec describes layer l of the weight file opened as file: a float32 MatMul operand,
// W then b, one region of the file.
func (m *mlp) layerSpec(file ep.MappingID, l int) ep.WeightSpec {
	n := m.layerFloats()
	return ep.WeightSpec{
		Boundary: ep.BoundaryMatMul, DType: ep.WeightDType(ep.Float32), Shape: []int64{int64(n)},
		Regions: []ep.Region{{Mapping: file, Offset: m.layerOffset(l), Len: uint64(4 * n)}},
	}
}

// breakdown times the prefill's two halves alone, each from drained streams to drained
// streams: the layers' kernels over the resident weights (no paging), and the paging of every
// layer through the residency (no kernels), so that a prefill slower than the link says which
// half it waited for.
func (d *demo) breakdown(lazy []*ep.LazyWeight, resident []*ep.Buffer, k layerKernels, bufs [3]*ep.Buffer) error {
	m, p, rows := d.m, d.p, d.cfg.prefill
	img, w := int64(m.layerFloats()), int64(m.width)
	if err := p.ForceSynchronize(); err != nil {
		return err
	}
	start := time.Now()
	in, pre, out := bufs[0], bufs[1], bufs[2]
	for l := range m.layers {
		if err := d.layer(k, rows, at(in, int64(rows), w), at(pre, int64(rows), w), at(out, int64(rows), w), at(resident[l], img), l == m.layers-1); err != nil {
			return err
		}
		in, out = out, in
	}
	if err := p.ForceSynchronize(); err != nil {
		return err
	}
	d.res.computeAlone = time.Since(start)

	start = time.Now()
	next := func(l int) error {
		dec, err := p.PrefetchWeight(ep.LayerID(l), lazy[l])
		if err == nil && dec.Declined() {
			err = fmt.Errorf("layer %d declined: %v", l, dec)
		}
		return err
	}
	if dec, err := p.PrefetchWeight(0, lazy[0]); err != nil || dec.Declined() {
		return err // declined: no paging to time
	}
	for l := range m.layers {
		if l+1 < m.layers {
			if err := next(l + 1); err != nil {
				return err
			}
		}
		pw, err := p.PageWeight(ep.LayerID(l))
		if err != nil {
			return err
		}
		if err := p.ReleasePagedWeight(pw); err != nil {
			return err
		}
	}
	if err := p.ForceSynchronize(); err != nil {
		return err
	}
	d.res.pagingAlone = time.Since(start)
	return nil
}

// prefillPass is one prefill over the layers; with keep, it also copies each paged layer
// into its resident buffer for decode. It returns each layer's transfer path (or why it was
// declined) and the bytes paged.
func (d *demo) prefillPass(progress progressFunc, lazy []*ep.LazyWeight, resident []*ep.Buffer, k layerKernels, identity *ep.Kernel, keep bool, in, pre, out *ep.Buffer) ([]string, uint64, error) {
	m, p, rows := d.m, d.p, d.cfg.prefill
	img := int64(m.layerFloats())
	w := int64(m.width)
	paths := make([]string, m.layers)
	routed := make([]bool, m.layers)
	var bytes uint64
	prefetch := func(l int) error {
		dec, err := p.PrefetchWeight(ep.LayerID(l), lazy[l])
		switch {
		case err != nil:
			return fmt.Errorf("prefetch layer %d: %w", l, err)
		case dec.Reason == ep.DeclineNone:
			routed[l] = true
		default:
			paths[l] = "declined: " + dec.Reason.String()
		}
		return nil
	}
	if err := prefetch(0); err != nil {
		return nil, 0, err
	}
	for l := 0; l < m.layers; l++ {
		progress("prefill: layer", l+1, m.layers)
		if l+1 < m.layers {
			if err := prefetch(l + 1); err != nil {
				return nil, 0, err
			}
		}
		var weights ep.Tensor
		var paged *ep.PagedWeight
		if routed[l] {
			var err error
			if paged, err = p.PageWeight(ep.LayerID(l)); err != nil {
				return nil, 0, fmt.Errorf("page layer %d: %w", l, err)
			}
			weights = ep.Tensor{TensorInfo: f32(img), Ptr: paged.Ptr()}
			paths[l] = paged.Path().String()
			bytes += paged.Len()
		} else {
			// The ordinary path: read the layer from the file and upload it.
			if err := upload(p, resident[l], m.w[l]); err != nil {
				return nil, 0, err
			}
			weights = at(resident[l], img)
		}
		if err := d.layer(k, rows, at(in, int64(rows), w), at(pre, int64(rows), w), at(out, int64(rows), w), weights, l == m.layers-1); err != nil {
			return nil, 0, fmt.Errorf("layer %d: %w", l, err)
		}
		if paged != nil {
			if keep {
				if err := identity.Execute([]ep.Tensor{weights}, []ep.Tensor{at(resident[l], img)}); err != nil {
					return nil, 0, err
				}
			}
			if err := p.ReleasePagedWeight(paged); err != nil {
				return nil, 0, err
			}
		}
		in, out = out, in
	}
	return paths, bytes, nil
}

// rawH2D measures the link the prefill pages over: host-to-device copies of one layer's size
// from pinned memory, as many as there are layers, on a stream of their own, the best of three
// runs, in GB/s.
func (d *demo) rawH2D() (gbps float64, err error) {
	rate, err := d.p.MeasureHostToDevice(uint64(4*d.m.layerFloats()), d.m.layers, 3)
	return rate / 1e9, err
}

// decode captures the one-token step twice (whole, and in two segments around a NonZero seam
// after the middle layer) and replays both for cfg.tokens tokens, checking every token.
func (d *demo) decode(resident []*ep.Buffer, progress progressFunc) error {
	m, p := d.m, d.p
	w := int64(m.width)
	img := int64(m.layerFloats())
	k, err := d.kernelsFor(1)
	if err != nil {
		return err
	}
	nonzero, err := p.GetKernel(ep.Spec{Op: "NonZero", Opset: 13, Inputs: []ep.TensorInfo{f32(1, w)}})
	if err != nil {
		return err
	}
	x, err := d.alloc(m.width)
	if err != nil {
		return err
	}
	pre := make([]*ep.Buffer, m.layers)
	hid := make([]*ep.Buffer, m.layers)
	for l := range pre {
		if pre[l], err = d.alloc(m.width); err != nil {
			return err
		}
		if hid[l], err = d.alloc(m.width); err != nil {
			return err
		}
	}
	nzOut := nonzero.Outputs()
	nzIdx, err := p.Alloc(uint64(nzOut[0].Bytes()), 0)
	if err != nil {
		return err
	}
	d.keep = append(d.keep, nzIdx)
	nzCount, err := p.Alloc(uint64(nzOut[1].Bytes()), 0)
	if err != nil {
		return err
	}
	d.keep = append(d.keep, nzCount)
	mid := m.layers/2 - 1
	if mid < 0 {
		mid = 0
	}
	layers := func(from, to int) error {
		for l := from; l < to; l++ {
			in := at(x, 1, w)
			if l > 0 {
				in = at(hid[l-1], 1, w)
			}
			if err := d.layer(k, 1, in, at(pre[l], 1, w), at(hid[l], 1, w), at(resident[l], img), l == m.layers-1); err != nil {
				return err
			}
		}
		return nil
	}
	countTensor := ep.Tensor{TensorInfo: nzOut[1], Ptr: nzCount.Ptr()}
	seam := func() (int64, error) {
		if err := nonzero.Execute([]ep.Tensor{at(hid[mid], 1, w)}, []ep.Tensor{{TensorInfo: nzOut[0], Ptr: nzIdx.Ptr()}, countTensor}); err != nil {
			return 0, err
		}
		return nonzero.NonZeroCount(countTensor)
	}
	retain := append(append(append([]*ep.Buffer{x}, pre...), hid...), resident...)
	steps := []*ep.Kernel{k.matmul, k.add, k.relu}
	capture := func(slot ep.Slot, from, to int) error {
		if err := p.BeginCapture(slot, steps, retain); err != nil {
			return err
		}
		if err := layers(from, to); err != nil {
			return errors.Join(err, p.AbortCapture(slot))
		}
		return p.EndCapture(slot)
	}

	// Warm up eagerly (library handles, module loads), then capture on this locked thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	allocsBefore := p.Stats().Allocs
	if err := layers(0, m.layers); err != nil {
		return err
	}
	whole := ep.Keyed(1)
	segmented := ep.Primary
	if err := capture(whole, 0, m.layers); err != nil {
		return fmt.Errorf("capture the whole step: %w", err)
	}
	if err := capture(segmented, 0, mid+1); err != nil {
		return fmt.Errorf("capture segment 0: %w", err)
	}
	if err := capture(segmented, mid+1, m.layers); err != nil {
		return fmt.Errorf("capture segment 1: %w", err)
	}
	d.res.segments = p.SegmentCount(segmented)
	defer p.ResetGraph(whole)
	defer p.ResetGraph(segmented)

	rng := rand.New(rand.NewPCG(seed, 2))
	var segTime, wholeTime time.Duration
	var seamSum int64
	for t := 0; t < d.cfg.tokens; t++ {
		progress("decode: token", t+1, d.cfg.tokens)
		xt := randomRows(rng, 1, m.width)
		ref, midPre := m.forward(xt, 1, mid)
		for _, variant := range []struct {
			name string
			step func() (int64, error)
			acc  *time.Duration
		}{
			{"segmented", func() (int64, error) {
				if err := p.ReplaySegment(segmented, 0); err != nil {
					return 0, err
				}
				n, err := seam()
				if err != nil {
					return 0, err
				}
				return n, p.ReplaySegment(segmented, 1)
			}, &segTime},
			{"whole", func() (int64, error) { return -1, p.Replay(whole) }, &wholeTime},
		} {
			start := time.Now()
			if err := upload(p, x, xt); err != nil {
				return err
			}
			n, err := variant.step()
			if err != nil {
				return fmt.Errorf("%s replay: %w", variant.name, err)
			}
			y, err := readFloats(p, hid[m.layers-1])
			if err != nil {
				return err
			}
			*variant.acc += time.Since(start)
			e := relErr(y, ref)
			d.res.decodeErr = math.Max(d.res.decodeErr, e)
			if e > d.cfg.tolerance {
				return fmt.Errorf("token %d (%s replay): output differs from the reference: relative error %.3g", t, variant.name, e)
			}
			if n >= 0 {
				if err := checkCount(n, midPre); err != nil {
					return fmt.Errorf("token %d: seam: %w", t, err)
				}
				seamSum += n
			}
		}
	}
	tokens := time.Duration(d.cfg.tokens)
	d.res.segmentedPerToken, d.res.wholePerToken = segTime/tokens, wholeTime/tokens
	d.res.seamMean = float64(seamSum) / float64(d.cfg.tokens)

	// Replay only, back to back: the Go heap must not grow.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for t := 0; t < d.cfg.tokens; t++ {
		if err := p.Replay(whole); err != nil {
			return err
		}
	}
	runtime.ReadMemStats(&after)
	if err := p.ForceSynchronize(); err != nil {
		return err
	}
	d.res.replayOnly = time.Since(start) / tokens
	d.res.goAllocs = after.Mallocs - before.Mallocs
	d.res.deviceAllocs = p.Stats().Allocs - allocsBefore
	return nil
}

// checkCount compares the device's NonZero count with the reference pre-activations: every
// positive one is non-zero after ReLU; values within rounding of zero may go either way.
func checkCount(n int64, pre []float64) error {
	var sure, unsure int64
	var norm float64
	for _, v := range pre {
		norm = math.Max(norm, math.Abs(v))
	}
	for _, v := range pre {
		switch {
		case math.Abs(v) <= 1e-5*norm:
			unsure++
		case v > 0:
			sure++
		}
	}
	if n < sure || n > sure+unsure {
		return fmt.Errorf("NonZero counted %d active units, the reference %d (+%d within rounding of zero)", n, sure, unsure)
	}
	return nil
}

func randomRows(rng *rand.Rand, rows, width int) []float32 {
	x := make([]float32, rows*width)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	return x
}
