package kernels_test

import (
	"math"
	"testing"

	"github.com/cudaep/cudaep/cudadrv/drivertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

// step is one kernel of a decode-like sequence and its tensors.
type step struct {
	k        kernels.Kernel
	ins, out []kernels.Tensor
}

func TestCapturedSequenceReplaysBitIdentical(t *testing.T) {
	f := newFixture(t)
	const batch, hidden, inner, vocab = 4, 32, 48, 24
	x := f.uploadF32([]int64{batch, hidden}, f.random(batch*hidden))
	bias := f.uploadF32([]int64{hidden}, f.random(hidden))
	w1 := f.uploadF32([]int64{hidden, inner}, f.random(hidden*inner))
	w2 := f.uploadF32([]int64{vocab, inner}, f.random(vocab*inner))
	c := f.uploadF32([]int64{vocab}, f.random(vocab))
	gamma, beta := f.uploadF32([]int64{hidden}, f.random(hidden)), f.uploadF32([]int64{hidden}, f.random(hidden))

	var steps []step
	add := func(spec kernels.Spec, ins ...kernels.Tensor) kernels.Tensor {
		k := f.get(spec)
		outs := f.outputs(k)
		steps = append(steps, step{k, ins, outs})
		return outs[0]
	}
	h := add(kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{x.TensorInfo, bias.TensorInfo}}, x, bias)
	ln := add(kernels.Spec{Op: "LayerNormalization", Opset: 17, Inputs: []kernels.TensorInfo{h.TensorInfo, gamma.TensorInfo, beta.TensorInfo}}, h, gamma, beta)
	r := add(kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{ln.TensorInfo}}, ln)
	m := add(kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{r.TensorInfo, w1.TensorInfo}}, r, w1)
	g := add(kernels.Spec{Op: "Gelu", Opset: 20, Inputs: []kernels.TensorInfo{m.TensorInfo}}, m)
	y := add(kernels.Spec{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{g.TensorInfo, w2.TensorInfo, c.TensorInfo},
		Attrs: map[string]kernels.Attribute{"transB": kernels.IntAttr(1), "alpha": kernels.FloatAttr(0.5)}}, g, w2, c)
	s := add(kernels.Spec{Op: "Softmax", Opset: 13, Inputs: []kernels.TensorInfo{y.TensorInfo}}, y)
	add(kernels.Spec{Op: "Identity", Opset: 21, Inputs: []kernels.TensorInfo{s.TensorInfo}}, s)
	add(kernels.Spec{Op: "ReduceMax", Opset: 13, Inputs: []kernels.TensorInfo{s.TensorInfo}, Attrs: map[string]kernels.Attribute{"axes": kernels.IntsAttr(0)}}, s)
	add(kernels.Spec{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{s.TensorInfo}}, s)

	nodes := make([]graphs.Node, len(steps))
	for i, st := range steps {
		nodes[i] = st.k
	}
	require.NoError(t, graphs.Audit(nodes), "every kernel of the sequence is capturable")

	run := func() {
		for _, st := range steps {
			require.NoError(t, st.k.Execute(st.ins, st.out), st.k.Name())
		}
	}
	snapshot := func() [][]byte {
		var all [][]byte
		for _, st := range steps {
			all = append(all, f.download(st.out[0]))
		}
		return all
	}
	poisonAll := func() {
		for _, st := range steps {
			f.poison(st.out[0])
		}
	}

	run()
	eager := snapshot()
	for i, b := range eager {
		for j, v := range drivertest.BytesFloat32(b) {
			require.False(t, math.IsNaN(float64(v)), "eager step %d (%s): element %d not written", i, steps[i].k.Name(), j)
		}
	}

	poisonAll()
	require.NoError(t, f.stream.Synchronize())
	require.NoError(t, f.stream.BeginCapture(cudadrv.CaptureModeThreadLocal))
	run()
	graph, err := f.stream.EndCapture()
	require.NoError(t, err)
	defer func() { assert.NoError(t, graph.Destroy()) }()
	nodeCount, err := graph.NodeCount()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, nodeCount, len(steps), "one node or more per kernel")
	for i, b := range snapshot() {
		assert.Equal(t, byte(0xff), b[0], "step %d ran during capture instead of being recorded", i)
	}

	exec, err := graph.Instantiate(0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, exec.Destroy()) }()
	for replay := 0; replay < 2; replay++ {
		poisonAll()
		require.NoError(t, exec.Launch(f.stream))
		for i, b := range snapshot() {
			assert.Equal(t, eager[i], b, "replay %d: output of step %d (%s) differs from the eager run", replay, i, steps[i].k.Name())
		}
	}
}
