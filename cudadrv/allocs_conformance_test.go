package cudadrv_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
)

// TestHotCallsAllocateNothing: kernel launch, async copies, event record, graph launch and
// SGEMM allocate nothing on the Go heap through the cuda backend. The sim's queues allocate by
// design, so the budget is asserted on the GPU only.
func TestHotCallsAllocateNothing(t *testing.T) {
	env := drivertest.Open(t)
	if env.Sim != nil {
		t.Skip("the allocation budget is a property of the cuda backend; run with CUDAEP_TEST_BACKEND=cuda")
	}
	s := newStream(t, env)
	fn := env.AddOne(t)
	buf := newAddOneBuffers(t, env, 256)
	pinned, err := env.Context.AllocHost(1024)
	require.NoError(t, err)
	defer func() { assert.NoError(t, pinned.Free()) }()
	ev := newEvent(t, env, cudadrv.EventDisableTiming)
	args := new(cudadrv.KernelArgs)
	g := captureAddOne(t, s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n, 1)
	exec, err := g.Instantiate(0)
	require.NoError(t, err)
	require.NoError(t, g.Destroy())
	defer func() { assert.NoError(t, exec.Destroy()) }()
	h, err := s.NewBLAS()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Destroy()) }()
	gemm := &cudadrv.GemmParams{M: 8, N: 8, K: 8, Alpha: 1, A: buf.x.Ptr(), B: buf.x.Ptr(), C: buf.y.Ptr(), LDA: 8, LDB: 8, LDC: 8}
	host := pinned.Bytes()

	grid, block := cudadrv.Dim3{X: 1, Y: 1, Z: 1}, cudadrv.Dim3{X: 256, Y: 1, Z: 1}
	args.Reset()
	args.Ptr(buf.x.Ptr()).Ptr(buf.y.Ptr()).U64(buf.n)
	calls := map[string]func() error{
		"Launch":        func() error { return s.Launch(fn, grid, block, 0, args) },
		"CopyHtoDAsync": func() error { return s.CopyHtoDAsync(buf.x.Ptr(), host) },
		"CopyDtoHAsync": func() error { return s.CopyDtoHAsync(host, buf.x.Ptr()) },
		"CopyDtoDAsync": func() error { return s.CopyDtoDAsync(buf.y.Ptr(), buf.x.Ptr(), 1024) },
		"EventRecord":   func() error { return ev.Record(s) },
		"GraphLaunch":   func() error { return exec.Launch(s) },
		"Sgemm":         func() error { return h.Sgemm(gemm) },
	}
	for name, call := range calls {
		require.NoError(t, call(), name)
		var callErr error
		allocs := testing.AllocsPerRun(200, func() {
			if err := call(); err != nil {
				callErr = err
			}
		})
		require.NoError(t, callErr, name)
		assert.Zero(t, allocs, "%s allocates", name)
		require.NoError(t, s.Synchronize())
	}
}
