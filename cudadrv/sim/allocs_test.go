package sim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// TestHotCallsDoNotAllocate holds the simulator to the Backend's zero-allocation promise for
// LaunchKernel, the async copies, EventRecord, GraphLaunch and Sgemm (including the work the
// stream worker does for them), so allocation budgets above cudadrv hold on sim too.
func TestHotCallsDoNotAllocate(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(256)
	host := make([]byte, 256)
	touch := e.fn("sim_test_touch")
	args := new(cudadrv.KernelArgs).Ptr(p).U64(64)
	ev := e.event(0)
	x := e.instantiate(e.capture(s, func() { require.NoError(t, e.launchTouch(s, p, 64)) }))
	h := e.blas(s)
	_, word := e.mapped(64)
	gp := &cudadrv.GemmParams{M: 2, N: 2, K: 2, Alpha: 1, A: p, B: p + 16, C: p + 32, LDA: 2, LDB: 2, LDC: 2}
	calls := []struct {
		name string
		fn   func() error
	}{
		{"LaunchKernel", func() error { return e.d.LaunchKernel(touch, dim(1), dim(64), 0, s, args) }},
		{"MemcpyHtoDAsync", func() error { return e.d.MemcpyHtoDAsync(p, host, s) }},
		{"MemcpyDtoHAsync", func() error { return e.d.MemcpyDtoHAsync(host, p, s) }},
		{"MemcpyDtoDAsync", func() error { return e.d.MemcpyDtoDAsync(p+128, p, 64, s) }},
		{"MemsetD32Async", func() error { return e.d.MemsetD32Async(p, 7, 8, s) }},
		{"EventRecord", func() error { return e.d.EventRecord(ev, s) }},
		{"StreamWaitEvent", func() error { return e.d.StreamWaitEvent(s, ev) }},
		{"StreamWriteValue32", func() error { return e.d.StreamWriteValue32(s, word, 7) }},
		{"GraphLaunch", func() error { return e.d.GraphLaunch(x, s) }},
		{"Sgemm", func() error { return e.d.Sgemm(h, gp) }},
		{"StreamSynchronize", func() error { return e.d.StreamSynchronize(s) }},
	}
	for _, c := range calls {
		require.NoError(t, c.fn(), c.name)
		require.NoError(t, e.d.StreamSynchronize(s))
		allocs := testing.AllocsPerRun(200, func() {
			if err := c.fn(); err != nil {
				t.Fatal(err)
			}
		})
		require.NoError(t, e.d.StreamSynchronize(s))
		assert.Zero(t, allocs, c.name)
	}
}
