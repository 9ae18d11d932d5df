package partition

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep"
)

// newProvider makes a provider on the tests' backend (CUDAEP_TEST_BACKEND), closed with the
// test; mutate adjusts its options first.
func newProvider(t *testing.T, mutate ...func(*ep.Options)) *ep.Provider {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	for _, m := range mutate {
		m(&opts)
	}
	p, err := ep.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p
}

// alloc allocates n bytes on p, released with the test.
func alloc(t *testing.T, p *ep.Provider, n uint64) *ep.Buffer {
	t.Helper()
	b, err := p.Alloc(n, 0)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := b.Release(); err != nil && !errors.Is(err, ep.ErrReleased) {
			t.Errorf("release: %v", err)
		}
	})
	return b
}

// f32 is a float32 tensor of shape.
func f32(shape ...int64) ep.TensorInfo { return ep.TensorInfo{DType: ep.Float32, Shape: shape} }
