package ep_test

import (
	"testing"

	"github.com/cudaep/cudaep/cudadrv/drivertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

func f32(shape ...int64) ep.TensorInfo { return ep.TensorInfo{DType: kernels.Float32, Shape: shape} }

func tensor(b *ep.Buffer, shape ...int64) ep.Tensor {
	return ep.Tensor{TensorInfo: f32(shape...), Ptr: b.Ptr()}
}

func getKernel(t *testing.T, p *ep.Provider, op string, opset int, inputs ...ep.TensorInfo) *ep.Kernel {
	t.Helper()
	k, err := p.GetKernel(ep.Spec{Op: op, Opset: opset, Inputs: inputs})
	require.NoError(t, err)
	return k
}

// mlp is a 2-layer MLP decode step, y = (relu(x·W1 + b1))·W2 + b2, plus a NonZero over the
// hidden activations: the non-capturable seam between the two layers' segments.
type mlp struct {
	p                   *ep.Provider
	batch, in, hid, out int64
	x, w1, b1, w2, b2   *ep.Buffer
	h0, h1, h2, y0, y   *ep.Buffer
	nzIdx, nzCount      *ep.Buffer
	mm1, add1, relu     *ep.Kernel
	mm2, add2, nonzero  *ep.Kernel
}

func newMLP(t *testing.T, p *ep.Provider) *mlp {
	m := &mlp{p: p, batch: 1, in: 64, hid: 96, out: 48}
	m.x = upload(t, p, drivertest.RandomFloat32(int(m.batch*m.in)))
	m.w1 = upload(t, p, drivertest.RandomFloat32(int(m.in*m.hid)))
	m.b1 = upload(t, p, drivertest.RandomFloat32(int(m.hid)))
	m.w2 = upload(t, p, drivertest.RandomFloat32(int(m.hid*m.out)))
	m.b2 = upload(t, p, drivertest.RandomFloat32(int(m.out)))
	for _, b := range []**ep.Buffer{&m.h0, &m.h1, &m.h2} {
		*b = alloc(t, p, uint64(4*m.batch*m.hid))
	}
	m.y0 = alloc(t, p, uint64(4*m.batch*m.out))
	m.y = alloc(t, p, uint64(4*m.batch*m.out))
	m.mm1 = getKernel(t, p, "MatMul", 13, f32(m.batch, m.in), f32(m.in, m.hid))
	m.add1 = getKernel(t, p, "Add", 14, f32(m.batch, m.hid), f32(m.hid))
	m.relu = getKernel(t, p, "Relu", 14, f32(m.batch, m.hid))
	m.mm2 = getKernel(t, p, "MatMul", 13, f32(m.batch, m.hid), f32(m.hid, m.out))
	m.add2 = getKernel(t, p, "Add", 14, f32(m.batch, m.out), f32(m.out))
	m.nonzero = getKernel(t, p, "NonZero", 13, f32(m.batch, m.hid))
	outs := m.nonzero.Outputs()
	m.nzIdx = alloc(t, p, uint64(outs[0].Bytes()))
	m.nzCount = alloc(t, p, uint64(outs[1].Bytes()))
	return m
}

func (m *mlp) layer1(t *testing.T) {
	t.Helper()
	require.NoError(t, m.mm1.Execute([]ep.Tensor{tensor(m.x, m.batch, m.in), tensor(m.w1, m.in, m.hid)}, []ep.Tensor{tensor(m.h0, m.batch, m.hid)}))
	require.NoError(t, m.add1.Execute([]ep.Tensor{tensor(m.h0, m.batch, m.hid), tensor(m.b1, m.hid)}, []ep.Tensor{tensor(m.h1, m.batch, m.hid)}))
	require.NoError(t, m.relu.Execute([]ep.Tensor{tensor(m.h1, m.batch, m.hid)}, []ep.Tensor{tensor(m.h2, m.batch, m.hid)}))
}

func (m *mlp) layer2(t *testing.T) {
	t.Helper()
	require.NoError(t, m.mm2.Execute([]ep.Tensor{tensor(m.h2, m.batch, m.hid), tensor(m.w2, m.hid, m.out)}, []ep.Tensor{tensor(m.y0, m.batch, m.out)}))
	require.NoError(t, m.add2.Execute([]ep.Tensor{tensor(m.y0, m.batch, m.out), tensor(m.b2, m.out)}, []ep.Tensor{tensor(m.y, m.batch, m.out)}))
}

// seam runs NonZero over the hidden activations eagerly and reads its count on the host.
func (m *mlp) seam(t *testing.T) int64 {
	t.Helper()
	count := ep.Tensor{TensorInfo: ep.TensorInfo{DType: kernels.Int64, Shape: []int64{1}}, Ptr: m.nzCount.Ptr()}
	idx := ep.Tensor{TensorInfo: m.nonzero.Outputs()[0], Ptr: m.nzIdx.Ptr()}
	require.NoError(t, m.nonzero.Execute([]ep.Tensor{tensor(m.h2, m.batch, m.hid)}, []ep.Tensor{idx, count}))
	n, err := m.nonzero.NonZeroCount(count)
	require.NoError(t, err)
	return n
}

func (m *mlp) poison(t *testing.T) {
	t.Helper()
	require.NoError(t, m.p.Memset(m.y, 0, m.y.Size(), 0xff))
	require.NoError(t, m.p.Memset(m.h2, 0, m.h2.Size(), 0xff))
}

func (m *mlp) all() []*ep.Buffer {
	return []*ep.Buffer{m.x, m.w1, m.b1, m.w2, m.b2, m.h0, m.h1, m.h2, m.y0, m.y}
}

// TestDecodeStepEagerWholeAndSegmentedAreBitIdentical executes a 2-layer MLP step eagerly,
// captures it whole and segmented around NonZero, replays both, and gets bit-identical outputs
// (and the same NonZero count at the seam) — with no device allocation during replay.
func TestDecodeStepEagerWholeAndSegmentedAreBitIdentical(t *testing.T) {
	p := newProvider(t)
	m := newMLP(t, p)

	m.poison(t)
	m.layer1(t)
	eagerCount := m.seam(t)
	m.layer2(t)
	eager := download(t, p, m.y)
	for i, v := range eager {
		require.False(t, v != v, "eager y[%d] was not written", i)
	}
	require.Positive(t, eagerCount)

	// Whole-step capture (without the seam).
	whole := graphs.Keyed(1)
	require.NoError(t, p.BeginCapture(whole, []*ep.Kernel{m.mm1, m.add1, m.relu, m.mm2, m.add2}, m.all()))
	m.layer1(t)
	m.layer2(t)
	require.NoError(t, p.EndCapture(whole))
	assert.Equal(t, 1, p.SegmentCount(whole))

	// Segmented capture around the NonZero seam: the audit refuses NonZero inside a capture.
	err := p.BeginCapture(graphs.Primary, []*ep.Kernel{m.relu, m.nonzero}, nil)
	require.ErrorIs(t, err, graphs.ErrRejected)
	assert.Contains(t, err.Error(), "rejected before begin_capture")
	require.NoError(t, p.BeginCapture(graphs.Primary, []*ep.Kernel{m.mm1, m.add1, m.relu}, m.all()))
	m.layer1(t)
	require.NoError(t, p.EndCapture(graphs.Primary))
	require.NoError(t, p.BeginCapture(graphs.Primary, []*ep.Kernel{m.mm2, m.add2}, m.all()))
	m.layer2(t)
	require.NoError(t, p.EndCapture(graphs.Primary))
	assert.Equal(t, 2, p.SegmentCount(graphs.Primary))

	stats := p.Stats()
	for step := 0; step < 3; step++ {
		m.poison(t)
		require.NoError(t, p.Replay(whole))
		assert.Equal(t, eager, download(t, p, m.y), "whole replay %d", step)

		m.poison(t)
		require.NoError(t, p.ReplaySegment(graphs.Primary, 0))
		assert.Equal(t, eagerCount, m.seam(t), "seam count on replay %d", step)
		require.NoError(t, p.ReplaySegment(graphs.Primary, 1))
		assert.Equal(t, eager, download(t, p, m.y), "segmented replay %d", step)
	}
	after := p.Stats()
	assert.Equal(t, stats.Allocs, after.Allocs, "replay allocates no device memory")
	gs, err := p.GraphStats(graphs.Primary)
	require.NoError(t, err)
	assert.Equal(t, uint64(6), gs.ReplayLaunches)
	unused, err := p.GraphStats(graphs.Keyed(99))
	require.NoError(t, err)
	assert.Zero(t, unused.Captures)
	assert.Equal(t, []int64{1}, p.GraphKeys(), "reading an unused key's stats does not create the slot")

	for _, s := range []ep.Slot{whole, graphs.Primary} {
		had, err := p.ResetGraph(s)
		require.NoError(t, err)
		assert.True(t, had)
		assert.False(t, p.HasExecutable(s))
	}
}
