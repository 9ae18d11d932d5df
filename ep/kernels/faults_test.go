package kernels_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

// gatherRun is a Gather of data [4, 3] float32 along axis 0 with two indices of it, named
// gather_3.
type gatherRun struct {
	k         kernels.Kernel
	ins, outs []kernels.Tensor
	data      []float32
}

func (f *fixture) newGatherRun(it kernels.DType) *gatherRun {
	f.t.Helper()
	r := &gatherRun{data: []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
	r.k = f.get(kernels.Spec{Name: "gather_3", Op: "Gather", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(4, 3), info(it, 2)}})
	r.ins = []kernels.Tensor{f.uploadF32([]int64{4, 3}, r.data), f.alloc(info(it, 2))}
	r.outs = f.outputs(r.k)
	return r
}

// setIndices writes the two indices (in the indices tensor's dtype).
func (r *gatherRun) setIndices(f *fixture, a, b int64) {
	f.t.Helper()
	var buf []byte
	if r.ins[1].DType == kernels.Int32 {
		buf = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, uint32(int32(a))), uint32(int32(b)))
	} else {
		buf = i64Bytes([]int64{a, b})
	}
	require.NoError(f.t, f.stream.Synchronize())
	require.NoError(f.t, f.env.Context.CopyHtoD(r.ins[1].Ptr, buf))
}

func TestGatherIndexOutsideTheAxisIsADataFault(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name string
		it   kernels.DType
		bad  int64
	}{
		{"4", kernels.Int64, 4}, {"9", kernels.Int64, 9}, {"-5", kernels.Int64, -5},
		{"MaxInt64", kernels.Int64, math.MaxInt64}, {"MinInt64", kernels.Int64, math.MinInt64},
		{"MaxInt32", kernels.Int32, math.MaxInt32}, {"MinInt32", kernels.Int32, math.MinInt32},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			r := f.newGatherRun(c.it)
			r.setIndices(f, -1, c.bad)
			require.NoError(t, r.k.Execute(r.ins, r.outs))
			got := f.downloadF32(r.outs[0])
			assert.Equal(t, []float32{10, 11, 12, 0, 0, 0}, got, "index -1 is the last row, the bad one gives zeros")
			fault := f.takeFault()
			require.NotNil(t, fault)
			assert.ErrorIs(t, fault, kernels.ErrDataFault)
			var asFault *kernels.DataFault
			require.True(t, errors.As(error(fault), &asFault))
			assert.Equal(t, kernels.DataFault{ID: kernels.FaultID(r.k), Node: "gather_3", Op: "Gather", Kernel: r.k.Name(),
				Input: 1, InputName: "indices", Value: c.bad, Detail: "outside [-4, 4) (axis 0 of data has 4 elements)"}, *fault)
			assert.Equal(t, "kernels: node 'gather_3' (Gather): input 'indices' holds "+fmt.Sprint(c.bad)+", outside [-4, 4) (axis 0 of data has 4 elements)", fault.Error())
			assert.Nil(t, f.takeFault(), "TakeFault clears the word")

			r.setIndices(f, -4, 3)
			require.NoError(t, r.k.Execute(r.ins, r.outs))
			assert.Equal(t, []float32{1, 2, 3, 10, 11, 12}, f.downloadF32(r.outs[0]))
			assert.Nil(t, f.takeFault(), "indices in [-4, 4) are no fault")
		})
	}
}

func TestIntegerDivisionByZeroIsADataFault(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Int32, kernels.Int64} {
		for _, shapes := range [][2][]int64{{{2, 3}, {2, 3}}, {{2, 3}, {3}}} {
			t.Run(fmt.Sprintf("%s/%v", dt, shapes[1]), func(t *testing.T) {
				f := f.sub(t)
				spec := kernels.Spec{Name: "div_1", Op: "Div", Opset: 14, Inputs: []kernels.TensorInfo{info(dt, shapes[0]...), info(dt, shapes[1]...)}}
				b := []float64{2, 0, -3, 4, 5, 6}[:numel(shapes[1])]
				k, got := f.runTyped(spec, []float64{7, 8, 9, 10, 11, 12}, b)
				assert.Equal(t, 0.0, got[1], "x / 0 is 0")
				fault := f.takeFault()
				require.NotNil(t, fault)
				assert.Equal(t, kernels.FaultID(k), fault.ID)
				assert.Equal(t, "kernels: node 'div_1' (Div): input 'B' holds 0, an integer division by zero", fault.Error())

				_, got = f.runTyped(spec, []float64{7, 8, 9, 10, 11, 12}, []float64{2, 1, -3, 4, 5, 6}[:numel(shapes[1])])
				assert.Equal(t, 8.0, got[1])
				assert.Nil(t, f.takeFault(), "no divisor of 0, no fault")
			})
		}
	}
	t.Run("float division by zero is IEEE, no fault", func(t *testing.T) {
		f := f.sub(t)
		_, got := f.runF32(kernels.Spec{Op: "Div", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(2), f32Info(2)}}, []float32{1, 0}, []float32{0, 0})
		assert.True(t, math.IsInf(float64(got[0]), 1))
		assert.Nil(t, f.takeFault())
	})
}

// gqaFaultRun is a GroupQueryAttention of one batch, one new token, 2 query heads and 1 kv
// head of 16, on a shared cache of capacity 32 (the present outputs are the past buffers),
// rotary with a cos/sin cache of maxPos rows, named gqa_0; seqlens_k and total are set by the
// test.
type gqaFaultRun struct {
	k         kernels.Kernel
	ins, outs []kernels.Tensor
}

const gqaFaultCap = 32

func (f *fixture) newGQAFaultRun(maxPos int64, constTotal bool) *gqaFaultRun {
	f.t.Helper()
	dt := kernels.Float32
	past := info(dt, 1, 1, gqaFaultCap, 16)
	cache := info(dt, maxPos, 8)
	spec := kernels.Spec{Name: "gqa_0", Op: "com.microsoft.GroupQueryAttention", Opset: 1,
		Attrs: map[string]kernels.Attribute{"num_heads": kernels.IntAttr(2), "kv_num_heads": kernels.IntAttr(1), "do_rotary": kernels.IntAttr(1)},
		Inputs: []kernels.TensorInfo{info(dt, 1, 1, 32), info(dt, 1, 1, 16), info(dt, 1, 1, 16), past, past,
			info(kernels.Int32, 1), info(kernels.Int32), cache, cache}}
	if constTotal {
		spec.Consts = map[int]kernels.Const{6: kernels.IntsConst(gqaFaultCap)}
	}
	r := &gqaFaultRun{k: f.get(spec)}
	for _, in := range spec.Inputs {
		if in.DType == kernels.Int32 {
			r.ins = append(r.ins, f.alloc(in)) // seqlens_k and total_sequence_length: set
			continue
		}
		r.ins = append(r.ins, f.uploadTyped(dt, in.Shape, f.randomTyped(dt, in.NumElements())))
	}
	r.outs = []kernels.Tensor{f.alloc(r.k.Outputs()[0])}
	if constTotal {
		r.outs = append(r.outs, r.ins[3], r.ins[4]) // the shared buffer
	} else {
		r.outs = append(r.outs, f.alloc(r.k.Outputs()[1]), f.alloc(r.k.Outputs()[2]))
	}
	return r
}

// set writes seqlens_k and total_sequence_length.
func (r *gqaFaultRun) set(f *fixture, seqlen, total int32) {
	f.t.Helper()
	require.NoError(f.t, f.stream.Synchronize())
	require.NoError(f.t, f.env.Context.CopyHtoD(r.ins[5].Ptr, binary.LittleEndian.AppendUint32(nil, uint32(seqlen))))
	require.NoError(f.t, f.env.Context.CopyHtoD(r.ins[6].Ptr, binary.LittleEndian.AppendUint32(nil, uint32(total))))
}

func TestGroupQueryAttentionLengthsOutsideTheCacheAreDataFaults(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name          string
		constTotal    bool
		maxPos        int64
		seqlen, total int32
		input         int
		inputName     string
		value         int64
		detail        string
	}{
		{"seqlens_k -5", true, 64, -5, gqaFaultCap, 5, "seqlens_k", -5, "outside [0, 32) (the present cache's capacity)"},
		{"seqlens_k INT32_MIN", true, 64, math.MinInt32, gqaFaultCap, 5, "seqlens_k", math.MinInt32, "outside [0, 32)"},
		{"seqlens_k at the capacity", true, 64, gqaFaultCap, gqaFaultCap, 5, "seqlens_k", gqaFaultCap, "outside [0, 32)"},
		{"seqlens_k INT32_MAX", true, 64, math.MaxInt32, gqaFaultCap, 5, "seqlens_k", math.MaxInt32, "outside [0, 32)"},
		{"total_sequence_length 0", true, 64, 3, 0, 6, "total_sequence_length", 0, "outside [1, 32]"},
		{"total_sequence_length past the capacity", false, 64, 3, gqaFaultCap + 2, 6, "total_sequence_length", gqaFaultCap + 2, "outside [1, 33]"},
		{"rotary position past the cos cache", true, 8, 20, gqaFaultCap, 7, "cos_cache", 20, "at or past the cos_cache's 8 rows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			r := f.newGQAFaultRun(c.maxPos, c.constTotal)
			r.set(f, c.seqlen, c.total)
			require.NoError(t, r.k.Execute(r.ins, r.outs))
			fault := f.takeFault()
			require.NotNil(t, fault, "the bad length is reported")
			assert.Equal(t, kernels.FaultID(r.k), fault.ID)
			assert.Equal(t, "gqa_0", fault.Node)
			assert.Equal(t, c.input, fault.Input)
			assert.Equal(t, c.inputName, fault.InputName)
			assert.Equal(t, c.value, fault.Value)
			assert.Contains(t, fault.Detail, c.detail)

			r.set(f, 7, gqaFaultCap)
			if !c.constTotal {
				r.set(f, 7, gqaFaultCap-1) // the growing cache: total = past + 1
			}
			require.NoError(t, r.k.Execute(r.ins, r.outs))
			assert.Nil(t, f.takeFault(), "valid lengths are no fault")
		})
	}
}

func TestRotaryEmbeddingPositionOutsideTheCacheIsADataFault(t *testing.T) {
	f := newFixture(t)
	cache := info(kernels.Float32, 8, 2)
	for _, c := range []struct {
		name     string
		posShape []int64
		pos      []int64
		value    int64
	}{
		{"per token", []int64{1, 2}, []int64{3, 8}, 8},
		{"per token negative", []int64{1, 2}, []int64{-1, 0}, -1},
		{"start past the end", []int64{1}, []int64{7}, 7}, // tokens at 7 and 8
		{"start MaxInt64", []int64{1}, []int64{math.MaxInt64}, math.MaxInt64},
		{"per token MinInt64", []int64{1, 2}, []int64{0, math.MinInt64}, math.MinInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			spec := kernels.Spec{Name: "rope", Op: "com.microsoft.RotaryEmbedding", Opset: 1,
				Attrs:  map[string]kernels.Attribute{"num_heads": kernels.IntAttr(1), "rotary_embedding_dim": kernels.IntAttr(4)},
				Inputs: []kernels.TensorInfo{f32Info(1, 2, 6), info(kernels.Int64, c.posShape...), cache, cache}}
			k := f.get(spec)
			ins := []kernels.Tensor{f.uploadF32([]int64{1, 2, 6}, f.random(12)), f.upload(spec.Inputs[1], i64Bytes(c.pos)),
				f.uploadF32([]int64{8, 2}, f.random(16)), f.uploadF32([]int64{8, 2}, f.random(16))}
			outs := f.outputs(k)
			require.NoError(t, k.Execute(ins, outs))
			fault := f.takeFault()
			require.NotNil(t, fault)
			assert.Equal(t, kernels.FaultID(k), fault.ID)
			assert.Equal(t, "position_ids", fault.InputName)
			assert.Equal(t, c.value, fault.Value)
			assert.Contains(t, fault.Error(), "node 'rope' (com.microsoft.RotaryEmbedding): input 'position_ids' holds")
		})
	}
}

func TestTheFirstDataFaultWins(t *testing.T) {
	f := newFixture(t)
	g := f.newGatherRun(kernels.Int64)
	g.setIndices(f, 0, 9)
	div := f.get(kernels.Spec{Name: "div_b", Op: "Div", Opset: 14, Inputs: []kernels.TensorInfo{info(kernels.Int64, 2), info(kernels.Int64, 2)}})
	dins := []kernels.Tensor{f.upload(info(kernels.Int64, 2), i64Bytes([]int64{4, 5})), f.upload(info(kernels.Int64, 2), i64Bytes([]int64{0, 0}))}
	douts := f.outputs(div)
	require.NotEqual(t, kernels.FaultID(g.k), kernels.FaultID(div))

	require.NoError(t, g.k.Execute(g.ins, g.outs))
	require.NoError(t, div.Execute(dins, douts))
	require.NoError(t, g.k.Execute(g.ins, g.outs))
	fault := f.takeFault()
	require.NotNil(t, fault)
	assert.Equal(t, kernels.FaultID(g.k), fault.ID, "the Gather faulted first; the Div's fault after it changed nothing")
	assert.Equal(t, int64(9), fault.Value)
	assert.Nil(t, f.takeFault())

	require.NoError(t, div.Execute(dins, douts))
	fault = f.takeFault()
	require.NotNil(t, fault)
	assert.Equal(t, kernels.FaultID(div), fault.ID, "once taken, the next fault is recorded")
	assert.Equal(t, "div_b", fault.Node)
}

func TestDataFaultsAreRecordedInGraphReplays(t *testing.T) {
	f := newFixture(t)
	r := f.newGatherRun(kernels.Int64)
	r.setIndices(f, 1, 2)
	exec := f.capture(func() { require.NoError(t, r.k.Execute(r.ins, r.outs)) })
	replay := func() {
		require.NoError(t, exec.Launch(f.stream))
		require.NoError(t, f.stream.Synchronize())
	}
	replay()
	assert.Equal(t, []float32{4, 5, 6, 7, 8, 9}, f.downloadF32(r.outs[0]))
	assert.Nil(t, f.takeFault(), "the captured Gather with valid indices records nothing")

	r.setIndices(f, 1, -7)
	replay()
	fault := f.takeFault()
	require.NotNil(t, fault, "the replay records into the fault word")
	assert.Equal(t, kernels.FaultID(r.k), fault.ID)
	assert.Equal(t, int64(-7), fault.Value)

	r.setIndices(f, 100, 2)
	replay()
	fault = f.takeFault()
	require.NotNil(t, fault, "a later replay records again once the word is cleared")
	assert.Equal(t, int64(100), fault.Value)

	r.setIndices(f, 3, 0)
	replay()
	assert.Nil(t, f.takeFault())
	assert.Equal(t, []float32{10, 11, 12, 1, 2, 3}, f.downloadF32(r.outs[0]))
}

// notALibraryKernel is a Kernel no Library built.
type notALibraryKernel struct{}

func (notALibraryKernel) Name() string                          { return "mine" }
func (notALibraryKernel) Outputs() []kernels.TensorInfo         { return nil }
func (notALibraryKernel) Execute(_, _ []kernels.Tensor) error   { return nil }
func (notALibraryKernel) CaptureSupport() graphs.CaptureSupport { return graphs.Supported }

func TestFaultIDsAreUniqueAndNonzero(t *testing.T) {
	f := newFixture(t)
	seen := map[uint32]bool{}
	for range 5 {
		for _, spec := range []kernels.Spec{
			{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(4)}},
			{Op: "Gather", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(4, 3), info(kernels.Int64, 2)}},
		} {
			id := kernels.FaultID(f.get(spec))
			assert.NotZero(t, id)
			assert.False(t, seen[id], "id %d given twice", id)
			seen[id] = true
		}
	}
	assert.Zero(t, kernels.FaultID(notALibraryKernel{}))
}

func TestGetErrorsNameTheNode(t *testing.T) {
	f := newFixture(t)
	_, err := f.lib.Get(kernels.Spec{Name: "slice_7", Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(4), info(kernels.Int64, 1), info(kernels.Int64, 1)},
		Consts: map[int]kernels.Const{1: kernels.IntsConst(3), 2: kernels.IntsConst(1)}})
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.Contains(t, err.Error(), "node 'slice_7': Slice (opset 13): ")
	_, err = f.lib.Get(kernels.Spec{Name: "conv_1", Op: "Conv", Opset: 13})
	assert.ErrorContains(t, err, "node 'conv_1': op \"Conv\" is not implemented")
	kernels.WithPanickingOp("cudaep_test.Panics", "boom", func() {
		_, err = f.lib.Get(kernels.Spec{Name: "p", Op: "cudaep_test.Panics", Opset: 1})
	})
	assert.ErrorContains(t, err, "node 'p': cudaep_test.Panics (opset 1): internal error")
}

func TestTakeFaultOnAClosedLibrary(t *testing.T) {
	f := newFixture(t)
	lib, err := kernels.NewLibrary(kernels.Runtime{Context: f.env.Context, Stream: f.stream})
	require.NoError(t, err)
	fault, err := lib.TakeFault()
	require.NoError(t, err)
	assert.Nil(t, fault, "a new Library's fault word is zero")
	require.NoError(t, lib.Close())
	_, err = lib.TakeFault()
	assert.ErrorIs(t, err, kernels.ErrClosed)
}

func TestTakeFaultWithoutAFaultAllocatesNothing(t *testing.T) {
	f := newFixture(t)
	r := f.newGatherRun(kernels.Int64) // a kernel that records faults: the Library has its word
	r.setIndices(f, 0, 1)
	require.NoError(t, r.k.Execute(r.ins, r.outs))
	require.NoError(t, f.stream.Synchronize())
	allocs := testing.AllocsPerRun(20, func() {
		if fault, err := f.lib.TakeFault(); err != nil || fault != nil {
			t.Fatal(fault, err)
		}
	})
	assert.Zero(t, allocs, "TakeFault with no fault (the common case, once per run)")
}
