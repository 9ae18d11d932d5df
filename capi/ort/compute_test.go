package ort

import (
	"fmt"
	"sort"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

// decodeRun is a Llama decode step's partition as ORT runs it with IOBinding and two sets of
// cache buffers swapped every step: input_ids and cache_position on the host, the past keys and
// values of every layer in CudaEp device memory (set k), logits and the present keys and values
// (set 1-k) written to device memory. ORT's device tensors are fake addresses registered in
// devmem as allocations of their own (no device memory behind them: deciding a run reads only
// addresses).
type decodeRun struct {
	pt       *partition
	kv       [2][]uint64 // the two sets of cache tensors' addresses
	logits   uint64
	kvInfo   ep.TensorInfo
	host     [2]int64         // input_ids and cache_position
	hostInfo [2]ep.TensorInfo // their types and shapes
}

// Sizes of the decode partition: 32 layers make 66 inputs and 65 outputs, like the
// benchmarked Llama's decode graph. The cache tensors are small: only their count matters here.
const (
	decodeLayers  = 32
	decodeKVBytes = 2 * 16 * 8 * 2 // [1, 2, 16, 8] bfloat16
	fakeBase      = 0x7e00_0000_0000
	fakeStride    = 0x1000
)

// newDecodeRun makes a session on the simulator (CUDA graphs as cudaGraph says) and the decode
// partition on it, and registers ORT's tensors; cleanup unregisters them and closes both.
func newDecodeRun(tb testing.TB, cudaGraph bool) *decodeRun {
	tb.Helper()
	opts := ep.DefaultOptions()
	opts.Backend = ep.BackendSim
	p, err := ep.New(opts)
	require.NoError(tb, err)
	s := &session{opts: sessionOptions{provider: opts, cudaGraph: cudaGraph, paging: "off", fusion: false}, p: p}
	kvInfo := ep.TensorInfo{DType: ep.BFloat16, Shape: []int64{1, 2, 16, 8}}
	i64 := func(shape ...int64) ep.TensorInfo { return ep.TensorInfo{DType: ep.Int64, Shape: shape} }
	nodes := []ep.Node{
		{Name: "pos", Op: "Add", Opset: 17,
			Inputs:  []ep.Value{{Name: "input_ids", Info: i64(1, 1)}, {Name: "cache_position", Info: i64(1)}},
			Outputs: []ep.Value{{Name: "x", Info: i64(1, 1)}}},
		{Name: "head", Op: "Cast", Opset: 17, Attrs: map[string]ep.Attribute{"to": ep.IntAttr(int64(ep.BFloat16))},
			Inputs:  []ep.Value{{Name: "x", Info: i64(1, 1)}},
			Outputs: []ep.Value{{Name: "logits", Info: ep.TensorInfo{DType: ep.BFloat16, Shape: []int64{1, 1}}}}},
	}
	pt := &partition{s: s, name: "decode", w: &weights{}, plans: map[string]*plan{},
		inputs: []string{"input_ids", "cache_position"}, outputs: []string{"logits"}}
	for i := range 2 * decodeLayers {
		past, present := "past."+strconv.Itoa(i), "present."+strconv.Itoa(i)
		nodes = append(nodes, ep.Node{Name: "update." + strconv.Itoa(i), Op: "Relu", Opset: 17,
			Inputs: []ep.Value{{Name: past, Info: kvInfo}}, Outputs: []ep.Value{{Name: present, Info: kvInfo}}})
		pt.inputs = append(pt.inputs, past)
		pt.outputs = append(pt.outputs, present)
	}
	pt.nodes = nodes
	d := &decodeRun{pt: pt, kvInfo: kvInfo, host: [2]int64{5, 128}, hostInfo: [2]ep.TensorInfo{i64(1, 1), i64(1)}}
	var regs []uint64
	for k := range 2 {
		for i := range 2 * decodeLayers {
			addr := uint64(fakeBase + (k*2*decodeLayers+i)*fakeStride)
			d.kv[k] = append(d.kv[k], addr)
			regs = append(regs, addr)
		}
	}
	d.logits = uint64(fakeBase + 4*decodeLayers*fakeStride)
	regs = append(regs, d.logits)
	for _, a := range regs {
		fakeAlloc(tb, a, fakeStride, 0)
	}
	tb.Cleanup(func() {
		for _, a := range regs {
			fakeFree(a)
		}
		for _, pl := range pt.plans {
			clear(pl.graphs) // fake slots (markCaptured): nothing to remove
		}
		require.NoError(tb, pt.close())
		require.NoError(tb, p.Close())
	})
	return d
}

// fakeAlloc registers [base, base+size) on ordinal as a device allocation ORT holds.
func fakeAlloc(tb testing.TB, base, size uint64, ordinal int) {
	tb.Helper()
	devmem.mu.Lock()
	defer devmem.mu.Unlock()
	i := sort.Search(len(devmem.bufs), func(i int) bool { return devmem.bufs[i].base > base })
	devmem.bufs = append(devmem.bufs, devBuf{})
	copy(devmem.bufs[i+1:], devmem.bufs[i:])
	devmem.bufs[i] = devBuf{base: base, size: size, ordinal: ordinal}
}

// fakeFree unregisters the allocation at base (registered by fakeAlloc).
func fakeFree(base uint64) {
	devmem.mu.Lock()
	defer devmem.mu.Unlock()
	for i, b := range devmem.bufs {
		if b.base == base {
			devmem.bufs = append(devmem.bufs[:i], devmem.bufs[i+1:]...)
			return
		}
	}
}

// inputs returns step k's inputs as compute reads them from ORT (into ins, reused).
func (d *decodeRun) inputs(ins []hostTensor, k int) []hostTensor {
	ins = append(ins[:0],
		hostTensor{info: d.hostInfo[0], data: unsafe.Pointer(&d.host[0])},
		hostTensor{info: d.hostInfo[1], data: unsafe.Pointer(&d.host[1])})
	for _, a := range d.kv[k] {
		ins = append(ins, hostTensor{info: d.kvInfo, data: devicePointer(a), onGPU: true})
	}
	return ins
}

// outputs returns step k's outputs as ORT allocates them for plan pl (into outs, reused).
func (d *decodeRun) outputs(outs []hostTensor, pl *plan, k int) []hostTensor {
	outs = append(outs[:0], hostTensor{info: pl.outputs[0].info, data: devicePointer(d.logits), onGPU: true})
	for j, a := range d.kv[1-k] {
		outs = append(outs, hostTensor{info: pl.outputs[1+j].info, data: devicePointer(a), onGPU: true})
	}
	return outs
}

// devicePointer is a device address as ORT hands it over (an unsafe.Pointer compute never
// dereferences; the fake addresses lie outside Go's heap).
func devicePointer(a uint64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(nil), uintptr(a))
}

// infos returns the tensors' element types and shapes.
func infos(ts []hostTensor) []ep.TensorInfo {
	out := make([]ep.TensorInfo, len(ts))
	for i, t := range ts {
		out[i] = t.info
	}
	return out
}

// markCaptured records a fake graph slot for key gk of pl, as a capture would.
func markCaptured(pl *plan, gk string) {
	pl.graphs[gk] = ep.Keyed(int64(1000 + len(pl.graphs)))
}

// decideRun is the Go-side work of a partition run that needs no OrtKernelContext, on tensors
// already read: the plan for the inputs' shapes, and which device tensors the run reads and
// writes in place (with the graph key).
func decideRun(pt *partition, ins []hostTensor, outs func(*plan) []hostTensor) (*plan, map[ep.DevicePtr]ep.DevicePtr, string, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pl, err := pt.planFor(infos(ins))
	if err != nil {
		return nil, nil, "", err
	}
	rm, gk := pt.direct(pl, ins, outs(pl))
	return pl, rm, gk, nil
}

// BenchmarkDecodeRunDecision measures the per-run Go work of a decode partition that does not
// need ORT (66 inputs, 65 outputs, the cache sets swapped every step, their graphs captured):
// finding the plan and deciding which tensors the run reads and writes in place.
func BenchmarkDecodeRunDecision(b *testing.B) {
	for _, cudaGraph := range []bool{true, false} {
		b.Run(fmt.Sprintf("cuda_graph=%v", cudaGraph), func(b *testing.B) {
			d := newDecodeRun(b, cudaGraph)
			var ins, outs [2][]hostTensor
			for k := range 2 {
				ins[k] = d.inputs(nil, k)
				pl, rm, gk, err := decideRun(d.pt, ins[k], func(pl *plan) []hostTensor { return d.outputs(nil, pl, k) })
				require.NoError(b, err)
				require.Len(b, rm, 2*2*decodeLayers+1, "every device tensor in place")
				if cudaGraph {
					markCaptured(pl, gk)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := i & 1
				ins[k] = d.inputs(ins[k], k)
				_, _, _, err := decideRun(d.pt, ins[k], func(pl *plan) []hostTensor {
					outs[k] = d.outputs(outs[k], pl, k)
					return outs[k]
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
