package cudadrv_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// sharedSim returns an opener of a simulated driver that counts its calls and the device it
// made.
func sharedSim(opened *atomic.Int32, dev **sim.Device) func() (*cudadrv.Driver, error) {
	return func() (*cudadrv.Driver, error) {
		opened.Add(1)
		d := sim.New(sim.Options{})
		*dev = d
		return cudadrv.NewDriver(d)
	}
}

// TestSharedDriverIsOneDriverPerName: code that acquires a name the process has open gets the
// same driver and the same primary context; the last release runs onClose and closes the
// backend, after which the name is not open and a new acquire opens a new driver.
func TestSharedDriverIsOneDriverPerName(t *testing.T) {
	const name = "test-shared-one-per-name"
	_, err := cudadrv.AcquireShared(name, nil, nil)
	require.ErrorIs(t, err, cudadrv.ErrNotShared, "nothing to open")
	assert.Contains(t, err.Error(), name)

	var opened, closed atomic.Int32
	var dev *sim.Device
	onClose := func(b cudadrv.Backend) {
		closed.Add(1)
		assert.Same(t, dev, b, "onClose gets the backend being closed")
	}
	a, err := cudadrv.AcquireShared(name, sharedSim(&opened, &dev), onClose)
	require.NoError(t, err)
	assert.True(t, cudadrv.SharedOpen(name))
	b, err := cudadrv.AcquireShared(name, nil, nil)
	require.NoError(t, err)
	require.Same(t, a, b, "one driver per name")
	assert.EqualValues(t, 1, opened.Load())

	// Two users of the shared driver retain the same primary context of a device.
	da, err := a.Device(0)
	require.NoError(t, err)
	ca, err := da.RetainPrimaryContext()
	require.NoError(t, err)
	db, err := b.Device(0)
	require.NoError(t, err)
	cb, err := db.RetainPrimaryContext()
	require.NoError(t, err)
	assert.Equal(t, ca.Raw(), cb.Raw())
	require.NoError(t, ca.Release())
	require.NoError(t, cb.Release())

	require.NoError(t, cudadrv.ReleaseShared(b))
	assert.True(t, cudadrv.SharedOpen(name), "a reference is left")
	assert.Zero(t, closed.Load())
	require.NoError(t, cudadrv.ReleaseShared(a))
	assert.False(t, cudadrv.SharedOpen(name))
	assert.EqualValues(t, 1, closed.Load())
	assert.Equal(t, cudadrv.ErrorDeinitialized, cudadrv.ResultOf(dev.Init()), "the backend was closed")
	assert.Error(t, cudadrv.ReleaseShared(a), "a release too many is refused")

	c, err := cudadrv.AcquireShared(name, sharedSim(&opened, &dev), nil)
	require.NoError(t, err)
	assert.NotSame(t, a, c, "a new driver after the last release")
	assert.EqualValues(t, 2, opened.Load())
	require.NoError(t, cudadrv.ReleaseShared(c))
	assert.EqualValues(t, 1, closed.Load(), "onClose is the opener's, not the next driver's")
}

// TestSharedDriverOpensOnceUnderConcurrentAcquires: callers that acquire a name at once open
// it once and share it.
func TestSharedDriverOpensOnceUnderConcurrentAcquires(t *testing.T) {
	const name, callers = "test-shared-concurrent", 16
	var opened atomic.Int32
	var dev *sim.Device
	open := sharedSim(&opened, &dev)
	drivers := make([]*cudadrv.Driver, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := cudadrv.AcquireShared(name, open, nil)
			assert.NoError(t, err)
			drivers[i] = d
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, opened.Load())
	for _, d := range drivers {
		require.Same(t, drivers[0], d)
		require.NoError(t, cudadrv.ReleaseShared(d))
	}
	assert.False(t, cudadrv.SharedOpen(name))
}

// TestSharedDriverOpenFailureSharesNothing: an opener's error is returned and nothing is
// registered.
func TestSharedDriverOpenFailureSharesNothing(t *testing.T) {
	const name = "test-shared-open-fails"
	_, err := cudadrv.AcquireShared(name, func() (*cudadrv.Driver, error) { return nil, assert.AnError }, nil)
	require.ErrorIs(t, err, assert.AnError)
	assert.False(t, cudadrv.SharedOpen(name))
	_, err = cudadrv.AcquireShared(name, func() (*cudadrv.Driver, error) { return nil, nil }, nil)
	require.Error(t, err, "an opener must return a driver")
	assert.False(t, cudadrv.SharedOpen(name))
}
