package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep"
)

// eagerRows: the host cost of one eager kernel execution, ep Kernel.Execute of a float32 Add
// of eagerElems elements against Stream.Launch of the same PTX function with the same
// geometry, the queue drained every syncEvery calls off the clock.
func (b *bench) eagerRows() ([]Row, error) {
	p, raw := b.p, b.raw
	n := b.sz.eagerElems
	info := ep.TensorInfo{DType: ep.Float32, Shape: []int64{n}}
	add, err := p.GetKernel(ep.Spec{Op: "Add", Opset: 14, Inputs: []ep.TensorInfo{info, info}})
	if err != nil {
		return nil, err
	}
	bufs, err := b.allocFilled(3, uint64(4*n))
	if err != nil {
		return nil, err
	}
	defer releaseAll(bufs)
	t := func(buf *ep.Buffer) ep.Tensor { return ep.Tensor{TensorInfo: info, Ptr: buf.Ptr()} }
	ins, outs := []ep.Tensor{t(bufs[0]), t(bufs[1])}, []ep.Tensor{t(bufs[2])}
	calls, every := b.sz.enqCalls, b.sz.syncEvery
	in := b.inproc()
	samples, err := interleave(b.sz.reps, append([]arm{
		{"ep Execute", func() (float64, error) {
			return enqueueMicros(calls, every, func() error { return add.Execute(ins, outs) }, p.ForceSynchronize)
		}},
		{"Stream.Launch", func() (float64, error) {
			return enqueueMicros(calls, every, func() error {
				return raw.launchAdd(bufs[2].Ptr(), bufs[0].Ptr(), bufs[1].Ptr(), n)
			}, raw.stream.Synchronize)
		}},
	}, inprocArm(in, labelInprocEager, func() (float64, error) { return in.eager(calls, every) })...)...)
	if err != nil {
		return nil, err
	}
	return []Row{{
		ID: "eager/add", Group: "eager",
		Title: fmt.Sprintf("eager Add float32[%d], host (ep, Go)", n),
		Ours:  measure("ep Kernel.Execute", SourceEP, UnitMicros, samples[0]),
		Baselines: []Measure{
			inprocMeasure(in, labelInprocEager, samples, 2),
			measure("Go cudadrv Stream.Launch (same PTX)", SourceGoRaw, UnitMicros, samples[1]),
		},
		Notes: []string{fmt.Sprintf("host time per call; the queue is drained every %d calls with the clock stopped", every)},
	}}, nil
}

// matmulRows: ep MatMul of float32 [M,K]×[K,N] (default math, no TF32) against BLAS.Sgemm of
// the same product on the same buffers, in TFLOP/s; each sample is mmPerSample products
// between two synchronizations on the host clock. One product is checked against a float64
// reference at sampled entries before timing.
func (b *bench) matmulRows() ([]Row, error) {
	p, raw := b.p, b.raw
	m, k, n := b.sz.mm[0], b.sz.mm[1], b.sz.mm[2]
	mm, err := p.GetKernel(ep.Spec{Op: "MatMul", Opset: 13, Inputs: []ep.TensorInfo{
		{DType: ep.Float32, Shape: []int64{m, k}}, {DType: ep.Float32, Shape: []int64{k, n}}}})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(8, 2048))
	hostA, hostB := randomFloats(rng, m*k), randomFloats(rng, k*n)
	var bufs []*ep.Buffer
	defer func() { releaseAll(bufs) }()
	for _, size := range []int64{m * k, k * n, m * n} {
		buf, err := p.Alloc(uint64(4*size), 0)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, buf)
	}
	if err := p.CopyToDevice(bufs[0], 0, floatBytes(hostA)); err != nil {
		return nil, err
	}
	if err := p.CopyToDevice(bufs[1], 0, floatBytes(hostB)); err != nil {
		return nil, err
	}
	// Staged copies are queued on the compute stream; cuBLAS reads A and B on the raw stream.
	if err := p.SynchronizeCompute(); err != nil {
		return nil, err
	}
	a, bt, y := bufs[0], bufs[1], bufs[2]
	ins := []ep.Tensor{
		{TensorInfo: ep.TensorInfo{DType: ep.Float32, Shape: []int64{m, k}}, Ptr: a.Ptr()},
		{TensorInfo: ep.TensorInfo{DType: ep.Float32, Shape: []int64{k, n}}, Ptr: bt.Ptr()},
	}
	outs := []ep.Tensor{{TensorInfo: ep.TensorInfo{DType: ep.Float32, Shape: []int64{m, n}}, Ptr: y.Ptr()}}
	blas, err := raw.blasHandle()
	if err != nil {
		return nil, fmt.Errorf("raw cuBLAS handle: %w", err)
	}
	// Row-major Y = A·B is column-major Yᵀ = Bᵀ·Aᵀ: cuBLAS's M is N, its A is B.
	gp := &cudadrv.GemmParams{TransA: cudadrv.OpN, TransB: cudadrv.OpN, M: int(n), N: int(m), K: int(k),
		Alpha: 1, A: bt.Ptr(), B: a.Ptr(), C: y.Ptr(), LDA: int(n), LDB: int(k), LDC: int(n)}

	check := func(what string, run func() error) error {
		// NaN, so that unwritten entries fail; drained before run, which may use another stream.
		if err := p.Memset(y, 0, y.Size(), 0xff); err != nil {
			return err
		}
		if err := p.ForceSynchronize(); err != nil {
			return err
		}
		if err := run(); err != nil {
			return err
		}
		if err := p.ForceSynchronize(); err != nil {
			return err
		}
		return b.checkProduct(what, y, hostA, hostB, m, k, n, rng)
	}
	if err := check("ep MatMul", func() error { return mm.Execute(ins, outs) }); err != nil {
		return nil, err
	}
	if err := check("cudadrv Sgemm", func() error { return blas.Sgemm(gp) }); err != nil {
		return nil, err
	}
	flop := 2 * float64(m) * float64(k) * float64(n) * float64(b.sz.mmPerSample)
	tflops := func(run func() error, sync func() error) (float64, error) {
		start := time.Now()
		for range b.sz.mmPerSample {
			if err := run(); err != nil {
				return 0, err
			}
		}
		if err := sync(); err != nil {
			return 0, err
		}
		return flop / time.Since(start).Seconds() / 1e12, nil
	}
	samples, err := interleave(b.sz.reps,
		arm{"ep MatMul", func() (float64, error) {
			return tflops(func() error { return mm.Execute(ins, outs) }, p.ForceSynchronize)
		}},
		arm{"Sgemm", func() (float64, error) {
			return tflops(func() error { return blas.Sgemm(gp) }, raw.stream.Synchronize)
		}},
	)
	if err != nil {
		return nil, err
	}
	return []Row{{
		ID: "matmul/sgemm", Group: "matmul", HigherIsBetter: true,
		Title: fmt.Sprintf("MatMul %dx%dx%d fp32 (ep, Go)", m, k, n),
		Ours:  measure("ep MatMul Execute", SourceEP, UnitTFLOPS, samples[0]),
		Baselines: []Measure{
			measure("Go cudadrv BLAS.Sgemm", SourceGoRaw, UnitTFLOPS, samples[1]),
		},
		Notes: []string{fmt.Sprintf("%d products per sample between host-clock synchronizations; default math (TF32 off); checked against a float64 reference", b.sz.mmPerSample)},
	}}, nil
}

// checkProduct reads 32 random entries of y (row-major [m,n]) and compares them with a float64
// reference of A·B: ‖out − ref‖ / ‖ref‖ must be under 1e-4 (float32 accumulation over k lands
// far under that) and no entry may be NaN.
func (b *bench) checkProduct(what string, y *ep.Buffer, hostA, hostB []float32, m, k, n int64, rng *rand.Rand) error {
	var num, den float64
	cell := make([]byte, 4)
	for range 32 {
		i, j := rng.Int64N(m), rng.Int64N(n)
		if err := b.p.CopyToHost(cell, y, uint64(4*(i*n+j))); err != nil {
			return err
		}
		got := float64(math.Float32frombits(binary.LittleEndian.Uint32(cell)))
		var ref float64
		for l := range k {
			ref += float64(hostA[i*k+l]) * float64(hostB[l*n+j])
		}
		if math.IsNaN(got) {
			return fmt.Errorf("%s: entry [%d,%d] was not written (NaN)", what, i, j)
		}
		num += (got - ref) * (got - ref)
		den += ref * ref
	}
	if rel := math.Sqrt(num / den); !(rel < 1e-4) {
		return fmt.Errorf("%s: relative error %.3g against the float64 reference (limit 1e-4)", what, rel)
	}
	return nil
}

// allocFilled allocates count ep buffers of size bytes, each filled with a distinct non-zero
// float pattern.
func (b *bench) allocFilled(count int, size uint64) ([]*ep.Buffer, error) {
	var bufs []*ep.Buffer
	for i := range count {
		buf, err := b.p.Alloc(size, 0)
		if err != nil {
			return nil, errors.Join(err, releaseAll(bufs))
		}
		bufs = append(bufs, buf)
		if err := b.p.CopyToDevice(buf, 0, floatPattern(int64(size/4), float32(i)+0.5)); err != nil {
			return nil, errors.Join(err, releaseAll(bufs))
		}
	}
	// Staged copies are queued on the compute stream: done before another stream reads them.
	if err := b.p.SynchronizeCompute(); err != nil {
		return nil, errors.Join(err, releaseAll(bufs))
	}
	return bufs, nil
}

// releaseAll releases every buffer.
func releaseAll(bufs []*ep.Buffer) error {
	var errs []error
	for _, buf := range bufs {
		errs = append(errs, buf.Release())
	}
	return errors.Join(errs...)
}

// randomFloats returns n floats uniform in ±[0.25, 1): random, never zero.
func randomFloats(rng *rand.Rand, n int64) []float32 {
	out := make([]float32, n)
	for i := range out {
		v := 0.25 + 0.75*rng.Float32()
		if rng.IntN(2) == 0 {
			v = -v
		}
		out[i] = v
	}
	return out
}

// floatBytes returns v as little-endian bytes.
func floatBytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}
