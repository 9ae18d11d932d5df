package sim_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// TestConcurrentCaptureReplayAndAllocation mixes, on many threads at once, thread-local
// captures and replays on private streams, cross-stream event waits, allocation churn and
// statistics reads. Run with -race.
func TestConcurrentCaptureReplayAndAllocation(t *testing.T) {
	e := newEnv(t, sim.Options{})
	shared := e.alloc(64)
	e.put(shared, pattern(64, 1))
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			e.onThread(true, func() {
				s, err := e.d.StreamCreate(cudadrv.StreamNonBlocking, -(w % 3))
				if !assert.NoError(t, err) {
					return
				}
				defer e.d.StreamDestroy(s)
				p, err := e.d.MemAlloc(32)
				assert.NoError(t, err)
				start := pattern(32, byte(10*w))
				assert.NoError(t, e.d.MemcpyHtoD(p, start))
				assert.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
				assert.NoError(t, e.launchTouch(s, p, 32))
				g, err := e.d.StreamEndCapture(s)
				if !assert.NoError(t, err) {
					return
				}
				x, err := e.d.GraphInstantiate(g, 0)
				assert.NoError(t, err)
				ev, err := e.d.EventCreate(cudadrv.EventDisableTiming)
				assert.NoError(t, err)
				const replays = 25
				for i := 0; i < replays; i++ {
					assert.NoError(t, e.d.GraphLaunch(x, s))
					assert.NoError(t, e.d.EventRecord(ev, s))
					assert.NoError(t, e.d.StreamWaitEvent(0, ev))
					q, err := e.d.MemAlloc(16)
					assert.NoError(t, err)
					assert.NoError(t, e.d.MemFree(q))
					_ = e.d.Stats()
				}
				host := make([]byte, 32)
				assert.NoError(t, e.d.MemcpyDtoH(host, p)) // legacy stream, after the waits
				want := start
				for i := 0; i < replays; i++ {
					want = plusOne(want)
				}
				assert.Equal(t, want, host)
				assert.NoError(t, e.d.GraphExecDestroy(x))
				assert.NoError(t, e.d.GraphDestroy(g))
				assert.NoError(t, e.d.EventDestroy(ev))
				assert.NoError(t, e.d.MemFree(p))
			})
		}(w)
	}
	wg.Wait()
	st := e.d.Stats()
	assert.Zero(t, st.Streams)
	assert.Zero(t, st.GraphExecs)
	assert.Zero(t, st.Captures)
	assert.Equal(t, 2, st.Allocations, "scratch and shared")
}
