package sim_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

func TestMemAllocAddressesAreAlignedDistinctAndNeverReused(t *testing.T) {
	e := newEnv(t, sim.Options{})
	seen := map[cudadrv.DevicePtr]bool{}
	var last cudadrv.DevicePtr
	for _, size := range []uint64{1, 255, 256, 257, 4096, 1 << 20} {
		p := e.alloc(size)
		assert.GreaterOrEqual(t, p, sim.AddressBase)
		assert.Zero(t, uint64(p)%sim.AllocationAlignment, "size %d", size)
		assert.False(t, seen[p])
		assert.Greater(t, p, last)
		seen[p], last = true, p
		require.NoError(t, e.d.MemFree(p))
		q := e.alloc(size)
		assert.NotEqual(t, p, q, "a freed address is not handed out again")
		seen[q], last = true, q
	}
}

func TestFreshAllocationsAreNotZeroed(t *testing.T) {
	e := newEnv(t, sim.Options{})
	p := e.alloc(10)
	b := e.get(p, 10)
	assert.Equal(t, uint32(sim.UninitializedWord), binary.LittleEndian.Uint32(b))
	assert.Equal(t, uint32(sim.UninitializedWord), binary.LittleEndian.Uint32(b[4:]))
}

func TestMemAllocOutOfMemoryAndMemGetInfo(t *testing.T) {
	const total = 1 << 20
	e := newEnv(t, sim.Options{TotalMemory: total})
	require.NoError(t, e.d.MemFree(e.scratch))
	free, tot, err := e.d.MemGetInfo()
	require.NoError(t, err)
	assert.Equal(t, uint64(total), tot)
	assert.Equal(t, uint64(total), free)

	p := e.alloc(total - 512)
	q := e.alloc(300) // rounds to 512
	free, _, err = e.d.MemGetInfo()
	require.NoError(t, err)
	assert.Zero(t, free)
	_, err = e.d.MemAlloc(1)
	requireResult(t, err, cudadrv.ErrorOutOfMemory)
	_, err = e.d.MemAlloc(1 << 62)
	requireResult(t, err, cudadrv.ErrorOutOfMemory)
	st := e.d.Stats()
	assert.Equal(t, 2, st.Allocations)
	assert.Equal(t, uint64(total-512+300), st.AllocatedBytes)

	require.NoError(t, e.d.MemFree(q))
	free, _, err = e.d.MemGetInfo()
	require.NoError(t, err)
	assert.Equal(t, uint64(512), free)
	require.NoError(t, e.d.MemFree(p))
	assert.Zero(t, e.d.Stats().Allocations)
}

func TestMemFreeErrors(t *testing.T) {
	e := newEnv(t, sim.Options{})
	p := e.alloc(1024)
	freed := e.alloc(64)
	require.NoError(t, e.d.MemFree(freed))
	_, err := e.d.MemAlloc(0)
	requireResult(t, err, cudadrv.ErrorInvalidValue)
	tests := []struct {
		name   string
		p      cudadrv.DevicePtr
		detail string
	}{
		{"zero", 0, "touches no allocation"},
		{"interior", p + 256, fmt.Sprintf("base %#x, size 1024", uint64(p))},
		{"double free", freed, "freed allocation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.bind(t)
			err := e.d.MemFree(tt.p)
			requireResult(t, err, cudadrv.ErrorInvalidValue)
			assert.Contains(t, err.Error(), tt.detail)
		})
	}
}

func TestCopiesAndMemsetsMoveTheRightBytes(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	const n = 96
	words := func(v uint32, count int) []byte {
		b := make([]byte, 4*count)
		for i := 0; i < count; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], v)
		}
		return b
	}
	tests := []struct {
		name string
		run  func(dst, src cudadrv.DevicePtr) error // src holds pattern(n, 7), dst pattern(n, 50)
		want []byte                                 // dst afterwards
	}{
		{"HtoD", func(dst, _ cudadrv.DevicePtr) error { return e.d.MemcpyHtoD(dst+8, pattern(16, 90)) },
			append(append(pattern(n, 50)[:8:8], pattern(16, 90)...), pattern(n, 50)[24:]...)},
		{"HtoDAsync", func(dst, _ cudadrv.DevicePtr) error { return e.d.MemcpyHtoDAsync(dst, pattern(n, 91), s) },
			pattern(n, 91)},
		{"DtoD", func(dst, src cudadrv.DevicePtr) error { return e.d.MemcpyDtoD(dst, src, n) }, pattern(n, 7)},
		{"DtoDAsync", func(dst, src cudadrv.DevicePtr) error { return e.d.MemcpyDtoDAsync(dst+32, src, 32, s) },
			append(append(pattern(n, 50)[:32:32], pattern(n, 7)[:32]...), pattern(n, 50)[64:]...)},
		{"MemsetD8", func(dst, _ cudadrv.DevicePtr) error { return e.d.MemsetD8(dst, 0xA7, n) }, bytesOf(0xA7, n)},
		{"MemsetD8Async", func(dst, _ cudadrv.DevicePtr) error { return e.d.MemsetD8Async(dst+1, 0x3C, n-2, s) },
			append(append(pattern(n, 50)[:1:1], bytesOf(0x3C, n-2)...), pattern(n, 50)[n-1])},
		{"MemsetD32Async", func(dst, _ cudadrv.DevicePtr) error { return e.d.MemsetD32Async(dst, 0xDEADBEEF, n/4, s) },
			words(0xDEADBEEF, n/4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.bind(t)
			dst, src := e.alloc(n), e.alloc(n)
			e.put(src, pattern(n, 7))
			e.put(dst, pattern(n, 50))
			require.NoError(t, tt.run(dst, src))
			require.NoError(t, e.d.StreamSynchronize(s))
			got := make([]byte, n)
			require.NoError(t, e.d.MemcpyDtoHAsync(got, dst, s))
			require.NoError(t, e.d.StreamSynchronize(s))
			assert.Equal(t, tt.want, got)
			assert.Equal(t, pattern(n, 7), e.get(src, n), "the source is untouched")
		})
	}
}

func bytesOf(v byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v
	}
	return b
}

func TestCopyRangesAreValidatedAtEnqueue(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	a, b := e.alloc(256), e.alloc(256)
	gone := e.alloc(64)
	require.NoError(t, e.d.MemFree(gone))
	host := make([]byte, 257)
	tests := []struct {
		name   string
		call   func() error
		detail string
	}{
		{"HtoD past the end", func() error { return e.d.MemcpyHtoD(a, host) }, fmt.Sprintf("base %#x, size 256", uint64(a))},
		{"HtoDAsync past the end", func() error { return e.d.MemcpyHtoDAsync(a+1, host[:256], s) }, "size 256"},
		{"DtoH before the base", func() error { return e.d.MemcpyDtoH(host[:8], a-8) }, "access"},
		{"DtoHAsync of a freed range", func() error { return e.d.MemcpyDtoHAsync(host[:8], gone, s) }, "freed allocation"},
		{"DtoD spanning two allocations", func() error { return e.d.MemcpyDtoD(b, a+128, 256) }, "source"},
		{"DtoDAsync destination past the end", func() error { return e.d.MemcpyDtoDAsync(b+200, a, 100, s) }, "destination"},
		{"MemsetD8 past the end", func() error { return e.d.MemsetD8(a, 1, 257) }, "size 256"},
		{"MemsetD8Async of nothing", func() error { return e.d.MemsetD8Async(0x1234, 1, 1, s) }, "no allocation"},
		{"MemsetD32Async past the end", func() error { return e.d.MemsetD32Async(a, 1, 65, s) }, "size 256"},
		{"MemsetD32Async misaligned", func() error { return e.d.MemsetD32Async(a+2, 1, 4, s) }, "aligned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.bind(t)
			err := tt.call()
			requireResult(t, err, cudadrv.ErrorInvalidValue)
			assert.Contains(t, err.Error(), tt.detail)
		})
	}
	require.NoError(t, e.d.StreamSynchronize(s), "a refused copy leaves no fault behind")
}

func TestHostMemoryRegistration(t *testing.T) {
	e := newEnv(t, sim.Options{})
	buf := make([]byte, 8192)
	require.NoError(t, e.d.MemHostRegister(buf[:4096], cudadrv.HostRegisterPortable|cudadrv.HostRegisterReadOnly))
	assert.Equal(t, 1, e.d.Stats().RegisteredRanges)

	requireResult(t, e.d.MemHostRegister(buf[:4096], 0), cudadrv.ErrorHostMemoryAlreadyRegistered, "same range")
	requireResult(t, e.d.MemHostRegister(buf[4000:5000], 0), cudadrv.ErrorHostMemoryAlreadyRegistered, "overlapping tail")
	requireResult(t, e.d.MemHostRegister(buf[100:200], 0), cudadrv.ErrorHostMemoryAlreadyRegistered, "inside")
	require.NoError(t, e.d.MemHostRegister(buf[4096:], 0), "adjacent is fine")
	requireResult(t, e.d.MemHostRegister(nil, 0), cudadrv.ErrorInvalidValue)
	requireResult(t, e.d.MemHostRegister(make([]byte, 8), 0x100), cudadrv.ErrorInvalidValue)

	requireResult(t, e.d.MemHostUnregister(buf[8:]), cudadrv.ErrorHostMemoryNotRegistered, "not the registered start")
	requireResult(t, e.d.MemHostUnregister(make([]byte, 8)), cudadrv.ErrorHostMemoryNotRegistered)
	require.NoError(t, e.d.MemHostUnregister(buf[:4096]))
	require.NoError(t, e.d.MemHostUnregister(buf[4096:]))
	requireResult(t, e.d.MemHostUnregister(buf[:4096]), cudadrv.ErrorHostMemoryNotRegistered, "twice")
	assert.Zero(t, e.d.Stats().RegisteredRanges)
}

func TestPinnedHostMemory(t *testing.T) {
	e := newEnv(t, sim.Options{})
	pinned, err := e.d.MemHostAlloc(4096)
	require.NoError(t, err)
	require.Len(t, pinned, 4096)
	assert.Equal(t, 1, e.d.Stats().PinnedHostBuffers)
	requireResult(t, e.d.MemHostRegister(pinned[16:32], 0), cudadrv.ErrorHostMemoryAlreadyRegistered, "pinned memory is page-locked already")

	s := e.stream()
	p := e.alloc(4096)
	copy(pinned, pattern(4096, 33))
	require.NoError(t, e.d.MemcpyHtoDAsync(p, pinned, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, pattern(4096, 33), e.get(p, 4096))

	_, err = e.d.MemHostAlloc(0)
	requireResult(t, err, cudadrv.ErrorInvalidValue)
	requireResult(t, e.d.MemFreeHost(pinned[1:]), cudadrv.ErrorInvalidValue)
	requireResult(t, e.d.MemFreeHost(make([]byte, 16)), cudadrv.ErrorInvalidValue)
	require.NoError(t, e.d.MemFreeHost(pinned))
	requireResult(t, e.d.MemFreeHost(pinned), cudadrv.ErrorInvalidValue, "twice")
	assert.Zero(t, e.d.Stats().PinnedHostBuffers)
}

func TestMemFreeWaitsForQueuedWork(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(32)
	e.put(p, pattern(32, 3))
	host := make([]byte, 32)
	g := newGate(t)
	e.launchGate(s, g)
	require.NoError(t, e.launchTouch(s, p, 32))
	require.NoError(t, e.d.MemcpyDtoHAsync(host, p, s))
	<-g.started
	freed := make(chan error, 1)
	e.onThreadAsync(func() { freed <- e.d.MemFree(p) })
	g.open()
	require.NoError(t, <-freed)
	require.NoError(t, e.d.StreamSynchronize(s), "the queued work ran before the free, without faulting")
	assert.Equal(t, plusOne(pattern(32, 3)), host)
}
