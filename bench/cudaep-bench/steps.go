package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep"
)

// The decode step every graph row replays is a chain of N float32 Adds over three buffers of
// stepElems elements: c = a + b, a = c + b, c = a + b, … — through ep it is N executions of
// one ep Add kernel; in the raw baselines (Go here, C in bench/baselines) it is N launches of the
// same PTX function, cudaep_add_f32 from ep/kernels/ptx/elementwise.ptx, with the same
// geometry (256-thread blocks, one element per thread). So both sides replay identical device
// work and differ only in the host path.

// addPTX is where the raw baselines load cudaep_add_f32 from, relative to the repository root.
const addPTX = "ep/kernels/ptx/elementwise.ptx"

// addEntry is the kernel ep's Add runs for same-shape float32 inputs.
const addEntry = "cudaep_add_f32"

const blockThreads = 256

// rawEnv is what the in-process raw baselines use: a stream of their own on the provider's
// context (non-blocking, highest priority, like ep's compute stream), cudaep_add_f32 loaded
// from its PTX, and a cuBLAS handle made on first use.
type rawEnv struct {
	b      *bench
	stream *cudadrv.Stream
	module *cudadrv.Module
	add    *cudadrv.Function
	args   *cudadrv.KernelArgs
	blas   *cudadrv.BLAS
	inproc *rawInproc // the in-process raw C baselines, loaded on first use (inproc.go)
}

func openRawEnv(b *bench) (*rawEnv, error) {
	ptx, err := os.ReadFile(b.repoPath(addPTX))
	if err != nil {
		return nil, fmt.Errorf("read the Add kernel's PTX (run from the repository root or pass -repo): %w", err)
	}
	_, greatest, err := b.ctx.StreamPriorityRange()
	if err != nil {
		return nil, err
	}
	r := &rawEnv{b: b, args: new(cudadrv.KernelArgs)}
	if r.stream, err = b.ctx.NewStream(cudadrv.StreamNonBlocking, greatest); err != nil {
		return nil, err
	}
	if r.module, err = b.ctx.LoadModule(ptx); err != nil {
		return nil, errors.Join(err, r.close())
	}
	if r.add, err = r.module.Function(addEntry); err != nil {
		return nil, errors.Join(err, r.close())
	}
	return r, nil
}

// close drains the stream and releases what the raw baselines made.
func (r *rawEnv) close() error {
	if r.inproc != nil {
		r.inproc.close()
	}
	var errs []error
	if r.stream != nil {
		errs = append(errs, r.stream.Synchronize())
	}
	if r.blas != nil {
		errs = append(errs, r.blas.Destroy())
	}
	if r.module != nil {
		errs = append(errs, r.module.Unload())
	}
	if r.stream != nil {
		errs = append(errs, r.stream.Destroy())
	}
	r.stream, r.blas, r.module = nil, nil, nil
	return errors.Join(errs...)
}

// blasHandle returns the raw baselines' cuBLAS handle on their stream, default math.
func (r *rawEnv) blasHandle() (*cudadrv.BLAS, error) {
	if r.blas != nil {
		return r.blas, nil
	}
	h, err := r.stream.NewBLAS()
	if err != nil {
		return nil, err
	}
	if err := h.SetMathMode(cudadrv.MathDefault); err != nil {
		return nil, errors.Join(err, h.Destroy())
	}
	r.blas = h
	return h, nil
}

// launchAdd queues out = x + y over n elements on the raw stream.
func (r *rawEnv) launchAdd(out, x, y cudadrv.DevicePtr, n int64) error {
	r.args.Reset()
	r.args.Ptr(out).Ptr(x).Ptr(y).U64(uint64(n))
	grid := cudadrv.Dim3{X: uint32((n + blockThreads - 1) / blockThreads), Y: 1, Z: 1}
	return r.stream.Launch(r.add, grid, cudadrv.Dim3{X: blockThreads, Y: 1, Z: 1}, 0, r.args)
}

// step is the three buffers of a chain step, as ep buffers and tensors, on one provider.
type step struct {
	b       *bench
	p       *ep.Provider // the provider the buffers and the kernel belong to
	n       int64
	add     *ep.Kernel
	a, bb   *ep.Buffer
	c       *ep.Buffer
	ins     [2][]ep.Tensor // {a,b}, {c,b}
	outs    [2][]ep.Tensor // {c}, {a}
	initial []byte         // a's starting bytes (distinct, non-zero floats)
}

// newStep allocates the buffers through ep, fills them with non-zero patterns and gets the Add
// kernel, on the run's provider.
func (b *bench) newStep(n int64) (*step, error) { return b.newStepOn(b.p, n) }

// newStepOn is newStep on provider p.
func (b *bench) newStepOn(p *ep.Provider, n int64) (*step, error) {
	info := ep.TensorInfo{DType: ep.Float32, Shape: []int64{n}}
	add, err := p.GetKernel(ep.Spec{Op: "Add", Opset: 14, Inputs: []ep.TensorInfo{info, info}})
	if err != nil {
		return nil, err
	}
	s := &step{b: b, p: p, n: n, add: add}
	bufs := make([]*ep.Buffer, 3)
	for i := range bufs {
		if bufs[i], err = p.Alloc(uint64(4*n), 0); err != nil {
			return nil, errors.Join(err, s.release())
		}
	}
	s.a, s.bb, s.c = bufs[0], bufs[1], bufs[2]
	s.initial = floatPattern(n, 0.25)
	for i, buf := range bufs {
		if err := p.CopyToDevice(buf, 0, floatPattern(n, float32(i)+0.25)); err != nil {
			return nil, errors.Join(err, s.release())
		}
	}
	// The copies are queued on the compute stream (staged); the raw baselines read the buffers
	// from a stream of their own.
	if err := p.SynchronizeCompute(); err != nil {
		return nil, errors.Join(err, s.release())
	}
	t := func(buf *ep.Buffer) ep.Tensor { return ep.Tensor{TensorInfo: info, Ptr: buf.Ptr()} }
	s.ins = [2][]ep.Tensor{{t(s.a), t(s.bb)}, {t(s.c), t(s.bb)}}
	s.outs = [2][]ep.Tensor{{t(s.c)}, {t(s.a)}}
	return s, nil
}

// release gives the step's buffers back (graphs that captured them keep their own reference).
func (s *step) release() error {
	var errs []error
	for _, buf := range []*ep.Buffer{s.a, s.bb, s.c} {
		if buf != nil {
			errs = append(errs, buf.Release())
		}
	}
	return errors.Join(errs...)
}

// reset writes a's starting bytes back, so that two ways of running a step can be compared.
func (s *step) reset() error { return s.p.CopyToDevice(s.a, 0, s.initial) }

// execute queues kernels Adds of the chain through ep, starting at link first.
func (s *step) execute(first, kernels int) error {
	for k := first; k < first+kernels; k++ {
		if err := s.add.Execute(s.ins[k%2], s.outs[k%2]); err != nil {
			return err
		}
	}
	return nil
}

// capture records kernels Adds (from link first) into slot as one segment: a new generation,
// or a further segment when one is installed. A failure aborts the capture.
func (s *step) capture(slot ep.Slot, first, kernels int) error {
	return s.record(slot, first, kernels, s.p.BeginCapture)
}

// recapture is capture through Recapture: the slot's installed generation is retired and the
// new one updates its executable in place when the topology is unchanged.
func (s *step) recapture(slot ep.Slot, kernels int) error {
	return s.record(slot, 0, kernels, s.p.Recapture)
}

func (s *step) record(slot ep.Slot, first, kernels int, begin func(ep.Slot, []*ep.Kernel, []*ep.Buffer) error) error {
	p := s.p
	if err := begin(slot, []*ep.Kernel{s.add}, []*ep.Buffer{s.a, s.bb, s.c}); err != nil {
		return err
	}
	if err := s.execute(first, kernels); err != nil {
		return errors.Join(err, p.AbortCapture(slot))
	}
	return p.EndCapture(slot)
}

// rawGraph records the same chain on the raw stream with the cudadrv wrappers alone.
func (s *step) rawGraph(kernels int) (*cudadrv.Graph, error) {
	r := s.b.raw
	if err := r.stream.BeginCapture(cudadrv.CaptureModeThreadLocal); err != nil {
		return nil, err
	}
	for k := range kernels {
		var err error
		if k%2 == 0 {
			err = r.launchAdd(s.c.Ptr(), s.a.Ptr(), s.bb.Ptr(), s.n)
		} else {
			err = r.launchAdd(s.a.Ptr(), s.c.Ptr(), s.bb.Ptr(), s.n)
		}
		if err != nil {
			_, endErr := r.stream.EndCapture()
			return nil, errors.Join(err, endErr)
		}
	}
	return r.stream.EndCapture()
}

// rawReady is the raw capture→ready path: capture, instantiate with node priority (as graphs
// does), upload. It returns the time those took; the caller destroys both.
func (s *step) rawReady(kernels int) (*cudadrv.Graph, *cudadrv.GraphExec, time.Duration, error) {
	start := time.Now()
	g, err := s.rawGraph(kernels)
	if err != nil {
		return nil, nil, 0, err
	}
	e, err := g.Instantiate(cudadrv.InstantiateUseNodePriority)
	if err != nil {
		return nil, nil, 0, errors.Join(err, g.Destroy())
	}
	if err := e.Upload(s.b.raw.stream); err != nil {
		return nil, nil, 0, errors.Join(err, e.Destroy(), g.Destroy())
	}
	return g, e, time.Since(start), nil
}

// destroyRaw drains the raw stream and destroys a raw executable and its graph.
func (s *step) destroyRaw(g *cudadrv.Graph, e *cudadrv.GraphExec) error {
	return errors.Join(s.b.raw.stream.Synchronize(), e.Destroy(), g.Destroy())
}

// resetSlot drops whatever slot holds.
func (b *bench) resetSlot(slot ep.Slot) error {
	_, err := b.p.ResetGraph(slot)
	return err
}

// stepSlot is the slot every graph row uses.
var stepSlot = ep.Primary

// floatPattern returns n distinct, non-zero, exactly representable float32s from base, as
// little-endian bytes.
func floatPattern(n int64, base float32) []byte {
	out := make([]byte, 4*n)
	for i := range n {
		v := base + float32(i%4096)*0.5 + 1
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}
