package sim_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// The timing model (Options.CopyBandwidth, Options.KernelDuration) is checked without reading
// a clock: a modelClock stands in for the sleep through which the workers spend modelled time,
// records what each piece of work was charged in the order the workers charged it, and can
// hold a charge until the test releases it. Overlap and serialization are then proved by the
// order of events and charges, never by elapsed times.

const (
	modelBandwidth = 1 << 30 // bytes/s
	modelCopyBytes = 3 << 20
	modelKernel    = 7 * time.Millisecond
)

// copyCharge is what the model charges a copy of n bytes: size/bandwidth, computed as the
// simulator computes it.
func copyCharge(n int) time.Duration {
	bytes, bandwidth := float64(n), float64(modelBandwidth)
	return time.Duration(bytes / bandwidth * float64(time.Second))
}

var modelCopyTime = copyCharge(modelCopyBytes)

// modelClock is the simulated device's sleep in these tests.
type modelClock struct {
	mu      sync.Mutex
	changed *sync.Cond
	began   []time.Duration // charges begun, in order
	spent   []time.Duration // charges completed, in order
	held    map[time.Duration]chan struct{}
}

func newModelEnv(t *testing.T) (*env, *modelClock) {
	e := newEnv(t, sim.Options{CopyBandwidth: modelBandwidth, KernelDuration: modelKernel})
	c := &modelClock{held: map[time.Duration]chan struct{}{}}
	c.changed = sync.NewCond(&c.mu)
	sim.SetSleep(e.d, c.sleep)
	t.Cleanup(c.releaseAll)
	return e, c
}

func (c *modelClock) sleep(d time.Duration) {
	c.mu.Lock()
	c.began = append(c.began, d)
	release := c.held[d]
	c.changed.Broadcast()
	c.mu.Unlock()
	if release != nil {
		<-release
	}
	c.mu.Lock()
	c.spent = append(c.spent, d)
	c.changed.Broadcast()
	c.mu.Unlock()
}

// hold makes every charge of d wait for release.
func (c *modelClock) hold(d time.Duration) (release func()) {
	ch := make(chan struct{})
	c.mu.Lock()
	c.held[d] = ch
	c.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (c *modelClock) releaseAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for d, ch := range c.held {
		select {
		case <-ch:
		default:
			close(ch)
		}
		delete(c.held, d)
	}
}

// waitFor waits until cond holds of the clock's record. A worker that never charges what the
// test waits for (streams serialized behind a held charge) would hang the test; the bound only
// turns such a hang into a failure that says why, it measures nothing.
func (c *modelClock) waitFor(t *testing.T, what string, cond func(began, spent []time.Duration) bool) {
	t.Helper()
	timedOut := false
	timer := time.AfterFunc(time.Minute, func() {
		c.mu.Lock()
		timedOut = true
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond(c.began, c.spent) {
		if timedOut {
			t.Fatalf("the workers never got to %s: began %v, spent %v", what, c.began, c.spent)
		}
		c.changed.Wait()
	}
}

func (c *modelClock) record() (began, spent []time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.began), slices.Clone(c.spent)
}

func count(ds []time.Duration, d time.Duration) int {
	n := 0
	for _, x := range ds {
		if x == d {
			n++
		}
	}
	return n
}

// TestTimingModelChargesSizeOverBandwidthAndKernelDuration: each copy a worker executes,
// asynchronous or synchronous, is charged size/bandwidth; each kernel KernelDuration; in the
// order the stream runs them. (It replaces the wall-clock assertions "the copy took
// size/bandwidth" and "the kernel took KernelDuration".)
func TestTimingModelChargesSizeOverBandwidthAndKernelDuration(t *testing.T) {
	e, clock := newModelEnv(t)
	s := e.stream()
	buf := e.alloc(modelCopyBytes)
	pinned, err := e.d.MemHostAlloc(modelCopyBytes)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.d.MemFreeHost(pinned)) })

	require.NoError(t, e.d.MemcpyHtoDAsync(buf, pinned, s))
	require.NoError(t, e.launchTouch(s, buf, 8))
	require.NoError(t, e.d.MemcpyDtoHAsync(pinned, buf, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	_, spent := clock.record()
	assert.Equal(t, []time.Duration{modelCopyTime, modelKernel, modelCopyTime}, spent)

	require.NoError(t, e.d.MemcpyHtoD(buf, pinned[:modelCopyBytes/2]))
	_, spent = clock.record()
	assert.Equal(t, copyCharge(modelCopyBytes/2), spent[len(spent)-1], "a synchronous copy is charged on the legacy stream's worker")
}

// TestTimingModelChargesNothingByDefault: without CopyBandwidth and KernelDuration no work is
// charged any time.
func TestTimingModelChargesNothingByDefault(t *testing.T) {
	e := newEnv(t, sim.Options{})
	charged := 0
	sim.SetSleep(e.d, func(time.Duration) { charged++ })
	s := e.stream()
	buf := e.alloc(4096)
	require.NoError(t, e.d.MemcpyHtoDAsync(buf, make([]byte, 4096), s))
	require.NoError(t, e.launchTouch(s, buf, 8))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Zero(t, charged)
}

// TestTimingModelOverlapsStreams: the model charges time on each stream's worker, not on the
// caller, so a modelled copy on one stream and a modelled kernel on another overlap: while the
// copy's charge is held, the enqueues return, the kernel on the other stream is charged and
// completes, and the copy's completion event is still pending. (It replaces the wall-clock
// assertions "the kernel ended after the copy began" and "the copy ended after the kernel
// began".)
func TestTimingModelOverlapsStreams(t *testing.T) {
	e, clock := newModelEnv(t)
	copyStream, computeStream := e.stream(), e.stream()
	buf := e.alloc(modelCopyBytes)
	pinned, err := e.d.MemHostAlloc(modelCopyBytes)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.d.MemFreeHost(pinned)) })
	copied, computed := e.event(cudadrv.EventDisableTiming), e.event(cudadrv.EventDisableTiming)

	release := clock.hold(modelCopyTime)
	require.NoError(t, e.d.MemcpyHtoDAsync(buf, pinned, copyStream))
	require.NoError(t, e.d.EventRecord(copied, copyStream))
	require.NoError(t, e.launchTouch(computeStream, e.scratch, 8))
	require.NoError(t, e.d.EventRecord(computed, computeStream))

	clock.waitFor(t, "the kernel's charge while the copy's is held", func(began, spent []time.Duration) bool {
		return count(began, modelCopyTime) == 1 && count(spent, modelKernel) == 1
	})
	require.NoError(t, e.d.EventSynchronize(computed), "the kernel completes while the copy is in progress")
	requireResult(t, e.d.EventQuery(copied), cudadrv.ErrorNotReady, "the copy is still in progress")

	release()
	require.NoError(t, e.d.EventSynchronize(copied))
	_, spent := clock.record()
	assert.Equal(t, []time.Duration{modelKernel, modelCopyTime}, spent, "the kernel's charge ended while the copy's was held")
}

// TestTimingModelSerializesOneStream: on one stream the same work is serialized: while the
// copy's charge is held, the kernel queued after it is neither charged nor complete. (It
// replaces the wall-clock assertion "the kernel ran after the copy".)
func TestTimingModelSerializesOneStream(t *testing.T) {
	e, clock := newModelEnv(t)
	s := e.stream()
	buf := e.alloc(modelCopyBytes)
	pinned, err := e.d.MemHostAlloc(modelCopyBytes)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.d.MemFreeHost(pinned)) })
	copied, computed := e.event(cudadrv.EventDisableTiming), e.event(cudadrv.EventDisableTiming)

	release := clock.hold(modelCopyTime)
	require.NoError(t, e.d.MemcpyHtoDAsync(buf, pinned, s))
	require.NoError(t, e.d.EventRecord(copied, s))
	require.NoError(t, e.launchTouch(s, e.scratch, 8))
	require.NoError(t, e.d.EventRecord(computed, s))

	clock.waitFor(t, "the copy's charge", func(began, _ []time.Duration) bool { return count(began, modelCopyTime) == 1 })
	// The stream's one worker is inside the held copy: nothing behind it can have started.
	began, _ := clock.record()
	assert.Equal(t, []time.Duration{modelCopyTime}, began, "the kernel was not charged while the copy was")
	requireResult(t, e.d.EventQuery(copied), cudadrv.ErrorNotReady)
	requireResult(t, e.d.EventQuery(computed), cudadrv.ErrorNotReady)

	release()
	require.NoError(t, e.d.StreamSynchronize(s))
	_, spent := clock.record()
	assert.Equal(t, []time.Duration{modelCopyTime, modelKernel}, spent)
	require.NoError(t, e.d.EventQuery(computed))
}
