package sim_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// plusOne returns b with every byte incremented, as sim_test_touch does.
func plusOne(b []byte) []byte {
	out := append([]byte(nil), b...)
	for i := range out {
		out[i]++
	}
	return out
}

func TestStreamRunsWorkAsynchronouslyInOrder(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(64)
	e.put(p, pattern(64, 1))
	g := newGate(t)

	e.launchGate(s, g)
	require.NoError(t, e.d.MemcpyHtoDAsync(p, pattern(64, 9), s))
	require.NoError(t, e.launchTouch(s, p, 64))
	<-g.started
	requireResult(t, e.d.StreamQuery(s), cudadrv.ErrorNotReady)
	assert.Equal(t, pattern(64, 1), e.get(p, 64), "work queued behind the gate has not run")

	g.open()
	require.NoError(t, e.d.StreamSynchronize(s))
	require.NoError(t, e.d.StreamQuery(s))
	assert.Equal(t, plusOne(pattern(64, 9)), e.get(p, 64), "the copy ran before the kernel")
}

func TestStreamCreateFlagsAndPriorities(t *testing.T) {
	e := newEnv(t, sim.Options{})
	least, greatest, err := e.d.StreamPriorityRange()
	require.NoError(t, err)
	assert.Equal(t, 0, least)
	assert.Equal(t, -5, greatest)
	for _, prio := range []int{-100, greatest, -1, least, 7} {
		s, err := e.d.StreamCreate(cudadrv.StreamNonBlocking, prio)
		require.NoError(t, err, "priority %d is clamped", prio)
		require.NoError(t, e.d.StreamDestroy(s))
	}
	_, err = e.d.StreamCreate(0x10, 0)
	requireResult(t, err, cudadrv.ErrorInvalidValue)
}

func TestLegacyStreamSynchronizesWithBlockingStreamsOnly(t *testing.T) {
	tests := []struct {
		name  string
		flags cudadrv.StreamFlags
	}{
		{"blocking", 0},
		{"non-blocking", cudadrv.StreamNonBlocking},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, sim.Options{})
			s, err := e.d.StreamCreate(tt.flags, 0)
			require.NoError(t, err)
			p := e.alloc(32)
			e.put(p, pattern(32, 4))
			g := newGate(t)
			e.launchGate(s, g)
			require.NoError(t, e.launchTouch(s, p, 32))
			<-g.started

			got := make(chan []byte, 1)
			e.onThreadAsync(func() {
				b := make([]byte, 32)
				assert.NoError(t, e.d.MemcpyDtoH(b, p)) // runs on the legacy stream
				got <- b
			})
			if tt.flags == cudadrv.StreamNonBlocking {
				assert.Equal(t, pattern(32, 4), <-got, "the legacy stream does not wait for a non-blocking stream")
				g.open()
			} else {
				g.open()
				assert.Equal(t, plusOne(pattern(32, 4)), <-got, "the legacy stream waited for the blocking stream's earlier work")
			}
			require.NoError(t, e.d.StreamSynchronize(s))
		})
	}
}

func TestBlockingStreamWaitsForEarlierLegacyWork(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s, err := e.d.StreamCreate(0, 0)
	require.NoError(t, err)
	p := e.alloc(16)
	e.put(p, pattern(16, 2))
	g := newGate(t)
	e.launchGate(0, g)
	require.NoError(t, e.launchTouch(0, p, 16))
	<-g.started
	host := make([]byte, 16)
	require.NoError(t, e.d.MemcpyDtoHAsync(host, p, s))
	g.open()
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, plusOne(pattern(16, 2)), host)
	require.NoError(t, e.d.StreamSynchronize(0))
	require.NoError(t, e.d.StreamQuery(cudadrv.RawStream(0)))
}

func TestStreamDestroyWaitsForPendingWork(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(16)
	e.put(p, pattern(16, 5))
	g := newGate(t)
	e.launchGate(s, g)
	require.NoError(t, e.launchTouch(s, p, 16))
	<-g.started
	destroyed := make(chan error, 1)
	e.onThreadAsync(func() { destroyed <- e.d.StreamDestroy(s) })
	g.open()
	require.NoError(t, <-destroyed)
	assert.Equal(t, plusOne(pattern(16, 5)), e.get(p, 16), "the queued touch ran before the stream went away")

	requireResult(t, e.d.StreamDestroy(s), cudadrv.ErrorInvalidHandle, "destroy twice")
	requireResult(t, e.d.StreamSynchronize(s), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.launchTouch(s, p, 16), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.d.StreamDestroy(0), cudadrv.ErrorInvalidHandle, "the legacy stream")
	requireResult(t, e.d.StreamDestroy(0xdead), cudadrv.ErrorInvalidHandle)
	assert.Zero(t, e.d.Stats().Streams)
}

func TestManyStreamsFromManyGoroutines(t *testing.T) {
	e := newEnv(t, sim.Options{})
	const workers = 8
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			e.onThread(true, func() {
				s, err := e.d.StreamCreate(cudadrv.StreamNonBlocking, -w%6)
				if !assert.NoError(t, err) {
					return
				}
				p, err := e.d.MemAlloc(128)
				assert.NoError(t, err)
				src := pattern(128, byte(w))
				want := append([]byte(nil), src...) // src is read when the copy runs
				assert.NoError(t, e.d.MemcpyHtoDAsync(p, src, s))
				for i := 0; i < 20; i++ {
					assert.NoError(t, e.launchTouch(s, p, 128))
					for j := range want {
						want[j]++
					}
				}
				got := make([]byte, 128)
				assert.NoError(t, e.d.MemcpyDtoHAsync(got, p, s))
				assert.NoError(t, e.d.StreamSynchronize(s))
				assert.Equal(t, want, got)
				assert.NoError(t, e.d.MemFree(p))
				assert.NoError(t, e.d.StreamDestroy(s))
			})
		}(w)
	}
	wg.Wait()
	assert.Zero(t, e.d.Stats().Streams)
}
