package partition

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

// decodeRun is a Llama decode step's partition as ONNX Runtime runs it with IOBinding and two
// sets of cache buffers swapped every step: input_ids and cache_position on the host, the past
// keys and values of every layer in device memory the session's Memory knows (set k), logits
// and the present keys and values (set 1-k) written to device memory. The host's device
// tensors are fake addresses registered in the Memory as allocations of their own (no device
// memory behind them: deciding a run reads only addresses).
type decodeRun struct {
	pt       *Partition
	mem      *Memory
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
// partition on it (with the extra nodes last), and registers the host's tensors; cleanup
// unregisters them and closes both.
func newDecodeRun(tb testing.TB, cudaGraph bool, extra ...Node) *decodeRun {
	tb.Helper()
	opts := ep.DefaultOptions()
	opts.Backend = ep.BackendSim
	p, err := ep.New(opts)
	require.NoError(tb, err)
	mem := &Memory{}
	s, err := NewSession(p, Options{CUDAGraph: cudaGraph, Paging: PagingOff}, mem, nil)
	require.NoError(tb, err)
	kvInfo := ep.TensorInfo{DType: ep.BFloat16, Shape: []int64{1, 2, 16, 8}}
	i64 := func(shape ...int64) ep.TensorInfo { return ep.TensorInfo{DType: ep.Int64, Shape: shape} }
	nodes := []Node{
		{Name: "pos", Op: "Add", Opset: 17,
			Inputs:  []Value{{Name: "input_ids", Info: i64(1, 1)}, {Name: "cache_position", Info: i64(1)}},
			Outputs: []Value{{Name: "x", Info: i64(1, 1)}}},
		{Name: "head", Op: "Cast", Opset: 17, Attrs: map[string]ep.Attribute{"to": ep.IntAttr(int64(ep.BFloat16))},
			Inputs:  []Value{{Name: "x", Info: i64(1, 1)}},
			Outputs: []Value{{Name: "logits", Info: ep.TensorInfo{DType: ep.BFloat16, Shape: []int64{1, 1}}}}},
	}
	pt := &Partition{s: s, name: "decode", w: &weights{}, plans: map[string]*plan{},
		inputs: []string{"input_ids", "cache_position"}, outputs: []string{"logits"}}
	for i := range 2 * decodeLayers {
		past, present := "past."+strconv.Itoa(i), "present."+strconv.Itoa(i)
		nodes = append(nodes, Node{Name: "update." + strconv.Itoa(i), Op: "Relu", Opset: 17,
			Inputs: []Value{{Name: past, Info: kvInfo}}, Outputs: []Value{{Name: present, Info: kvInfo}}})
		pt.inputs = append(pt.inputs, past)
		pt.outputs = append(pt.outputs, present)
	}
	pt.nodes = append(nodes, extra...)
	d := &decodeRun{pt: pt, mem: mem, kvInfo: kvInfo, host: [2]int64{5, 128}, hostInfo: [2]ep.TensorInfo{i64(1, 1), i64(1)}}
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
		fakeAlloc(tb, mem, a, fakeStride, 0)
	}
	tb.Cleanup(func() {
		for _, a := range regs {
			fakeFree(mem, a)
		}
		for _, pl := range pt.plans {
			clear(pl.graphs) // fake slots (markCaptured): nothing to remove
		}
		require.NoError(tb, pt.Close())
		require.NoError(tb, p.Close())
	})
	return d
}

// fakeAlloc registers [base, base+size) on ordinal in mem as a device allocation the host
// holds, as an allocator does, and returns it.
func fakeAlloc(tb testing.TB, mem *Memory, base, size uint64, ordinal int) Allocation {
	tb.Helper()
	a := Allocation{Base: base, Size: size, Ordinal: ordinal, reg: new(registration)}
	mem.Add(a)
	return a
}

// fakeFree takes the allocation at base out of mem's index, as a host's free does (without
// keeping it for reuse: there is no buffer behind it).
func fakeFree(mem *Memory, base uint64) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	mem.remove(base)
}

// inputs returns step k's inputs as the host hands them over (into ins, reused).
func (d *decodeRun) inputs(ins []Tensor, k int) []Tensor {
	ins = append(ins[:0],
		Tensor{Info: d.hostInfo[0], Data: unsafe.Pointer(&d.host[0])},
		Tensor{Info: d.hostInfo[1], Data: unsafe.Pointer(&d.host[1])})
	for _, a := range d.kv[k] {
		ins = append(ins, Tensor{Info: d.kvInfo, Data: devicePointer(a), OnDevice: true})
	}
	return ins
}

// outputs returns step k's outputs as the host allocates them for plan pl (into outs, reused).
func (d *decodeRun) outputs(outs []Tensor, pl *plan, k int) []Tensor {
	outs = append(outs[:0], Tensor{Info: pl.outputs[0].info, Data: devicePointer(d.logits), OnDevice: true})
	for j, a := range d.kv[1-k] {
		outs = append(outs, Tensor{Info: pl.outputs[1+j].info, Data: devicePointer(a), OnDevice: true})
	}
	return outs
}

// devicePointer is a device address as a host hands it over (an unsafe.Pointer a run never
// dereferences; the fake addresses lie outside Go's heap).
func devicePointer(a uint64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(nil), uintptr(a))
}

// markCaptured records a fake graph slot for key gk of pl, as a capture would.
func markCaptured(pl *plan, gk string) {
	pl.graphs[gk] = ep.Keyed(int64(1000 + len(pl.graphs)))
}

// decideRun is the work of a partition run before any copy or kernel, on tensors already read:
// the plan for the inputs' shapes, and the run's decision (which device tensors it reads and
// writes in place, and its graph). outs returns the outputs the host makes for a plan.
func decideRun(pt *Partition, ins []Tensor, outs func(*plan) []Tensor) (*plan, decision, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pl, err := pt.planFor(ins)
	if err != nil {
		return nil, decision{}, err
	}
	return pl, pt.decide(pl, ins, outs(pl)), nil
}

// BenchmarkDecodeRunDecision measures the per-run Go work of a decode partition that does not
// need the host (66 inputs, 65 outputs, the cache sets swapped every step, their graphs captured):
// finding the plan and deciding which tensors the run reads and writes in place. "reused" is
// the steady state; "decided" forgets the remembered decisions before every run, the cost of a
// run that cannot reuse one (side by side: the ratio is what remembering saves). Both include
// the test's own filling of the tensors (~0.9 µs).
func BenchmarkDecodeRunDecision(b *testing.B) {
	for _, cudaGraph := range []bool{true, false} {
		for _, reuse := range []bool{true, false} {
			name := fmt.Sprintf("cuda_graph=%v/decided", cudaGraph)
			if reuse {
				name = fmt.Sprintf("cuda_graph=%v/reused", cudaGraph)
			}
			b.Run(name, func(b *testing.B) {
				d := newDecodeRun(b, cudaGraph)
				var ins, outs [2][]Tensor
				for k := range 2 {
					ins[k] = d.inputs(nil, k)
					pl, dec, err := decideRun(d.pt, ins[k], func(pl *plan) []Tensor { return d.outputs(nil, pl, k) })
					require.NoError(b, err)
					require.Len(b, dec.bound, 2*2*decodeLayers+1, "every device tensor in place")
					if cudaGraph {
						markCaptured(pl, dec.graphKey)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					k := i & 1
					ins[k] = d.inputs(ins[k], k)
					if !reuse {
						d.pt.mu.Lock()
						d.pt.forget()
						d.pt.mu.Unlock()
					}
					_, _, err := decideRun(d.pt, ins[k], func(pl *plan) []Tensor {
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
}

// step returns the decision for decode step k (cache set k read, set 1-k written), with the
// decision bind makes for the same tensors without remembered ones (want).
func (d *decodeRun) step(t *testing.T, k int) (got, want decision, pl *plan) {
	t.Helper()
	ins := d.inputs(nil, k)
	pl, got, err := decideRun(d.pt, ins, func(pl *plan) []Tensor { return d.outputs(nil, pl, k) })
	require.NoError(t, err)
	d.pt.mu.Lock()
	defer d.pt.mu.Unlock()
	outs := d.outputs(nil, pl, k)
	want.bound, want.graphKey = d.pt.bind(pl, ins, outs, &lookups{mem: d.mem})
	want.slot, want.captured = pl.graphs[want.graphKey]
	want.copies(pl, outs)
	return got, want, pl
}

// reused returns how many runs of the partition reused a decision.
func (d *decodeRun) reused() uint64 {
	d.pt.mu.Lock()
	defer d.pt.mu.Unlock()
	return d.pt.reused
}

// TestRepeatedRunsReuseTheirDecision: a decode loop swapping two cache sets decides each set's
// run once and then reuses it, without a heap allocation; every decision equals bind's.
func TestRepeatedRunsReuseTheirDecision(t *testing.T) {
	for _, cudaGraph := range []bool{false, true} {
		t.Run(fmt.Sprintf("cuda_graph=%v", cudaGraph), func(t *testing.T) {
			d := newDecodeRun(t, cudaGraph)
			for i := range 6 {
				k := i & 1
				got, want, pl := d.step(t, k)
				assert.Equal(t, want, got, "step %d", i)
				require.Len(t, got.bound, 2*2*decodeLayers+1, "every device tensor in place")
				assert.Equal(t, []int{0, 1}, got.copyIns, "the host inputs are copied")
				assert.Empty(t, got.copyOuts)
				if cudaGraph && !got.captured {
					markCaptured(pl, got.graphKey) // what the run would do
				}
			}
			// Without graphs: steps 0 and 1 decide, 2-5 reuse. With them: a decision is kept
			// once its graph is captured (steps 2 and 3 decide again), so 4 and 5 reuse.
			want := uint64(4)
			if cudaGraph {
				want = 2
			}
			assert.Equal(t, want, d.reused())

			var ins, outs [2][]Tensor
			for k := range 2 {
				ins[k], outs[k] = d.inputs(nil, k), d.outputs(nil, d.pt.last, k)
			}
			k := 0
			allocs := testing.AllocsPerRun(100, func() {
				k ^= 1
				ins[k] = d.inputs(ins[k], k)
				d.pt.mu.Lock()
				pl, err := d.pt.planFor(ins[k])
				if err == nil {
					outs[k] = d.outputs(outs[k], pl, k)
					d.pt.decide(pl, ins[k], outs[k])
				}
				d.pt.mu.Unlock()
			})
			assert.Zero(t, allocs, "a reused decision allocates nothing")
		})
	}
}

// TestSharedCacheBuffersAreUpdatedInPlace: a decode loop that binds one set of cache buffers
// as both past and present (what ORT's generative runtime does with a shared buffer) runs
// every tensor in place, each present in its past's memory, and reuses its decisions.
func TestSharedCacheBuffersAreUpdatedInPlace(t *testing.T) {
	for _, cudaGraph := range []bool{false, true} {
		t.Run(fmt.Sprintf("cuda_graph=%v", cudaGraph), func(t *testing.T) {
			d := newDecodeRun(t, cudaGraph)
			d.kv[1] = d.kv[0]
			for i := range 4 {
				got, want, pl := d.step(t, i&1)
				assert.Equal(t, want, got, "step %d", i)
				require.Len(t, got.bound, 2*2*decodeLayers+1, "every device tensor in place")
				for l := range 2 * decodeLayers {
					assert.Equal(t, []int{2 + l}, pl.shares[1+l], "present.%d may be past.%d's memory", l, l)
					assert.Equal(t, ep.DevicePtr(d.kv[0][l]), got.bound[pl.outputs[1+l].buf.Ptr()], "present.%d", l)
					assert.Equal(t, ep.DevicePtr(d.kv[0][l]), got.bound[pl.inputs[2+l].buf.Ptr()], "past.%d", l)
				}
				assert.Equal(t, []int{0, 1}, got.copyIns, "the host inputs are copied")
				assert.Empty(t, got.copyOuts)
				if cudaGraph && !got.captured {
					markCaptured(pl, got.graphKey)
				}
			}
			assert.Positive(t, d.reused())
		})
	}
}

// TestSharedBufferReadAfterItsUpdateIsCopied: when a later node reads past.0 again, present.0
// may not take its memory (the later read would see the update): a run that binds them to
// the same buffer copies every tensor, as for any overlap, and computes what it would with
// separate buffers. The other caches may still share.
func TestSharedBufferReadAfterItsUpdateIsCopied(t *testing.T) {
	kvInfo := ep.TensorInfo{DType: ep.BFloat16, Shape: []int64{1, 2, 16, 8}}
	d := newDecodeRun(t, false, Node{Name: "again", Op: "Neg", Opset: 17,
		Inputs: []Value{{Name: "past.0", Info: kvInfo}}, Outputs: []Value{{Name: "unread", Info: kvInfo}}})
	d.kv[1] = d.kv[0]
	got, want, pl := d.step(t, 0)
	assert.Equal(t, want, got)
	assert.Nil(t, got.bound, "nothing in place")
	assert.Empty(t, pl.shares[1], "present.0 may not be past.0's memory")
	assert.Equal(t, []int{3}, pl.shares[2], "present.1 may be past.1's")
}

// TestDecisionsFollowDeviceAllocations: a remembered decision is reused only while every
// allocation its lookups found is still the host's with the same extent and device, and, when a
// tensor was in no allocation, while none has been added. Each case changes the Memory
// between two runs with the same tensors; the second run must decide as bind does now.
func TestDecisionsFollowDeviceAllocations(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, d *decodeRun)
		reused bool // the second run reuses the first's decision
		past0  bool // the second run reads past.0 in place
	}{
		{"nothing changes", func(*testing.T, *decodeRun) {}, true, true},
		{"an allocation freed and handed out again", func(t *testing.T, d *decodeRun) {
			// What ORT does with a run's logits every step: the allocation comes back from
			// the Memory's free list with its registration.
			d.mem.mu.Lock()
			b, ok := d.mem.remove(d.logits)
			d.mem.mu.Unlock()
			require.True(t, ok)
			d.mem.Add(b)
		}, true, true},
		{"an allocation freed", func(t *testing.T, d *decodeRun) {
			fakeFree(d.mem, d.kv[0][0])
		}, false, false},
		{"its range reallocated smaller", func(t *testing.T, d *decodeRun) {
			fakeFree(d.mem, d.kv[0][0])
			fakeAlloc(t, d.mem, d.kv[0][0], decodeKVBytes/2, 0)
		}, false, false},
		{"its range reallocated on another device", func(t *testing.T, d *decodeRun) {
			fakeFree(d.mem, d.kv[0][0])
			fakeAlloc(t, d.mem, d.kv[0][0], fakeStride, 1)
		}, false, false},
		{"its range reallocated alike", func(t *testing.T, d *decodeRun) {
			fakeFree(d.mem, d.kv[0][0])
			fakeAlloc(t, d.mem, d.kv[0][0], fakeStride, 0)
		}, false, true},
		{"an unrelated allocation added", func(t *testing.T, d *decodeRun) {
			fakeAlloc(t, d.mem, fakeBase+0x1000_0000, fakeStride, 0)
			t.Cleanup(func() { fakeFree(d.mem, fakeBase+0x1000_0000) })
		}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDecodeRun(t, false)
			first, want, _ := d.step(t, 0)
			require.Equal(t, want, first)
			require.Contains(t, first.bound, d.pt.last.inputs[2].buf.Ptr(), "past.0 in place")
			before := d.reused()
			c.change(t, d)
			got, want, pl := d.step(t, 0)
			assert.Equal(t, want, got, "the decision is bind's")
			assert.Equal(t, c.reused, d.reused() > before, "reused")
			_, inPlace := got.bound[pl.inputs[2].buf.Ptr()]
			assert.Equal(t, c.past0, inPlace, "past.0 in place")
		})
	}
}

// TestDecisionWithATensorOutsideCudaEpMemory: a device tensor in no CudaEp allocation is
// copied, and the decision is reused until an allocation is added, which may hold it.
func TestDecisionWithATensorOutsideCudaEpMemory(t *testing.T) {
	d := newDecodeRun(t, false)
	fakeFree(d.mem, d.kv[0][0]) // the host's tensor past.0 is in memory the Memory does not know
	for range 2 {
		got, want, pl := d.step(t, 0)
		assert.Equal(t, want, got)
		assert.NotContains(t, got.bound, pl.inputs[2].buf.Ptr(), "past.0 is not read in place")
		assert.Contains(t, got.copyIns, 2, "past.0 is copied")
	}
	assert.Equal(t, uint64(1), d.reused())
	fakeAlloc(t, d.mem, d.kv[0][0], fakeStride, 0)
	got, want, pl := d.step(t, 0)
	assert.Equal(t, want, got)
	assert.Contains(t, got.bound, pl.inputs[2].buf.Ptr(), "past.0 is read in place once CudaEp holds it")
	assert.Equal(t, uint64(1), d.reused(), "an allocation added: decided again")
}

// TestDecisionsAndTheGraphCap: with CUDA graphs, a decision whose graph is not captured yet is
// not kept (the cap may be reached before its capture); past the cap a new set of addresses
// reads nothing in place and replays the copying graph, and that decision is kept.
func TestDecisionsAndTheGraphCap(t *testing.T) {
	d := newDecodeRun(t, true)
	got, _, pl := d.step(t, 0)
	require.NotNil(t, got.bound)
	got, _, _ = d.step(t, 0)
	assert.Zero(t, d.reused(), "not captured: not kept")
	for i := range maxBoundGraphs {
		pl.graphs["other "+strconv.Itoa(i)] = ep.Keyed(int64(2000 + i))
	}
	got, want, _ := d.step(t, 0)
	assert.Equal(t, want, got)
	assert.Nil(t, got.bound, "past the cap: nothing in place")
	assert.Equal(t, graphKey(pl, nil), got.graphKey)
	assert.Len(t, got.copyIns, 2+2*decodeLayers, "every input copied")
	assert.Len(t, got.copyOuts, 1+2*decodeLayers, "every output copied")
	got, want, _ = d.step(t, 0)
	assert.Equal(t, want, got)
	assert.Equal(t, uint64(1), d.reused())
}

// TestPagingPartitionReadsNothingInPlace: a paging partition's steps read layers from slots
// whose addresses change every run: it never reads or writes the host's tensors in place.
func TestPagingPartitionReadsNothingInPlace(t *testing.T) {
	d := newDecodeRun(t, true)
	d.pt.w.paged = &pagedWeights{}
	t.Cleanup(func() { d.pt.w.paged = nil })
	for range 2 {
		got, want, _ := d.step(t, 0)
		assert.Equal(t, want, got)
		assert.Nil(t, got.bound)
	}
}

// TestOutputsOverlappingInputsAreCopied: with an output at an input's address, nothing is
// read or written in place; that is a signature of its own, not the earlier run's decision.
func TestOutputsOverlappingInputsAreCopied(t *testing.T) {
	d := newDecodeRun(t, false)
	got, _, _ := d.step(t, 0)
	require.NotNil(t, got.bound)
	d.kv[1][5] = d.kv[0][7] + 64 // present.5 inside past.7
	got, want, _ := d.step(t, 0)
	assert.Equal(t, want, got)
	assert.Nil(t, got.bound)
}

// TestPlanForKeepsItsOwnShapes: a plan is found by its inputs' types and shapes, and keeps its
// own copy of them (the run's shapes live in scratch the next run overwrites).
func TestPlanForKeepsItsOwnShapes(t *testing.T) {
	d := newDecodeRun(t, false)
	ins := d.inputs(nil, 0)
	for i := range ins {
		ins[i].Info.Shape = slices.Clone(ins[i].Info.Shape)
	}
	d.pt.mu.Lock()
	defer d.pt.mu.Unlock()
	first, err := d.pt.planFor(ins)
	require.NoError(t, err)
	ins[2].Info.Shape[2] = 32 // another cache length for past.0: another plan
	second, err := d.pt.planFor(ins)
	require.NoError(t, err)
	assert.NotSame(t, first, second)
	assert.Equal(t, []int64{1, 2, 16, 8}, first.inputs[2].info.Shape, "the first plan's shape is its own")
	assert.Equal(t, []int64{1, 2, 32, 8}, second.inputs[2].info.Shape)
	ins[2].Info.Shape[2] = 16
	again, err := d.pt.planFor(ins)
	require.NoError(t, err)
	assert.Same(t, first, again)
	ins[0].Info.DType = ep.Int32
	other, err := d.pt.planFor(ins)
	if err == nil {
		assert.NotSame(t, first, other, "another element type: another plan")
	}
}

// TestOutputOverlapsMatchesEveryPair: the sorted sweep finds an overlap with an output exactly
