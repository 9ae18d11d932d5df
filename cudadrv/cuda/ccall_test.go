package cuda

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// libcSym resolves a libc function that is not in testdata/libc.prototypes.
func libcSym(tb testing.TB, name string) uintptr {
	tb.Helper()
	_, h := openLibc(tb)
	addr, err := purego.Dlsym(h, name)
	require.NoError(tb, err)
	return addr
}

// TestCCallPassesEveryArgumentSlot: snprintf formats nine integers after its three fixed
// arguments, so every one of ccall's 12 slots, the six register ones and the six on the stack,
// reaches the callee in order.
func TestCCallPassesEveryArgumentSlot(t *testing.T) {
	snprintf := libcSym(t, "snprintf")
	buf := make([]byte, 128)
	format := []byte("%ld %ld %ld %ld %ld %ld %ld %ld %ld\x00")
	f := cframe{fn: snprintf, a: [maxCCallArgs]uintptr{
		uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(unsafe.Pointer(&format[0])),
		11, 22, 33, 44, 55, 66, 77, 88, 1 << 40}}
	n := ccall(&f)
	want := "11 22 33 44 55 66 77 88 1099511627776"
	assert.Equal(t, uintptr(len(want)), n, "the return value")
	assert.Equal(t, uintptr(len(want)), f.r, "the frame's result")
	assert.Equal(t, want, string(buf[:bytes.IndexByte(buf, 0)]))
}

// TestCCallReturnsAllSixtyFourBits: labs of a value beyond 32 bits.
func TestCCallReturnsAllSixtyFourBits(t *testing.T) {
	labs := libcSym(t, "labs")
	v := int64(-(1<<40 + 3))
	f := cframe{fn: labs, a: [maxCCallArgs]uintptr{uintptr(v)}}
	assert.Equal(t, uintptr(1<<40+3), ccall(&f))
}

// TestCCallAllocatesNothing: the frame stays on the caller's stack.
func TestCCallAllocatesNothing(t *testing.T) {
	libc, _ := openLibc(t)
	memset := libc.libcAddr(t, "memset")
	buf := make([]byte, 64)
	var fill uintptr
	allocs := testing.AllocsPerRun(1000, func() {
		fill++
		f := cframe{fn: memset, a: [maxCCallArgs]uintptr{uintptr(unsafe.Pointer(&buf[0])), fill & 0xff, uintptr(len(buf))}}
		ccall(&f)
	})
	assert.Zero(t, allocs)
	assert.Equal(t, bytes.Repeat([]byte{byte(fill)}, len(buf)), buf, "the calls did run")
}

// TestHotCallSymbolsAreDriverSymbols: every symbol the hot calls index is the one they name.
func TestHotCallSymbolsAreDriverSymbols(t *testing.T) {
	for idx, name := range map[int]string{
		symCtxSetCurrent: "cuCtxSetCurrent", symCtxSynchronize: "cuCtxSynchronize",
		symStreamSynchronize: "cuStreamSynchronize", symStreamQuery: "cuStreamQuery",
		symStreamWaitEvent: "cuStreamWaitEvent", symStreamWriteValue32: "cuStreamWriteValue32_v2",
		symEventRecord: "cuEventRecord", symEventQuery: "cuEventQuery", symEventSynchronize: "cuEventSynchronize",
		symLaunchKernel: "cuLaunchKernel", symGraphLaunch: "cuGraphLaunch",
		symMemcpyHtoDAsync: "cuMemcpyHtoDAsync_v2", symMemcpyDtoHAsync: "cuMemcpyDtoHAsync_v2",
		symMemcpyDtoDAsync: "cuMemcpyDtoDAsync_v2", symMemsetD8Async: "cuMemsetD8Async",
		symMemsetD32Async: "cuMemsetD32Async",
	} {
		assert.Equal(t, name, driverSymbols[idx])
	}
	assert.Panics(t, func() { driverIndex("cuNoSuchCall") })
}
