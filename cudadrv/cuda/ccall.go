package cuda

// Hot driver calls do not go through the generated purego wrappers (zdriver.go) but through
// ccall, a direct call of the C function on the system stack:
//
//   - purego.SyscallN copies its arguments twice into 65-word blocks (one taken from a
//     sync.Pool), loads eight float registers and 32 argument slots for every call, whatever
//     the callee takes: measured on a CPU without a GPU, a driver call through it costs
//     80–85 ns against 2 ns from C (BenchmarkCallingMethods, BenchmarkHotCalls);
//   - ccall hands runtime.cgocall (the runtime's own entry to C, which cgo uses) a frame on
//     the caller's stack that holds the function and at most 12 integer arguments, and a small
//     assembly trampoline loads them into the C argument registers and stack slots.
//
// What runtime.cgocall does around the call (entersyscall/exitsyscall, the switch to the
// system stack) is what a cgo call pays, and it is all that is left.
//
// # Safety
//
// The frame holds uintptrs only. A pointer argument must point to memory that does not move
// while the call runs: the Go heap, C memory, or pinned memory (as for any purego call); the
// caller makes a pointer escape (escape) and keeps it alive (runtime.KeepAlive) past the call,
// as the generated wrappers do. The caller's own stack does not move while the call runs: the
// goroutine is in a system call, whose stack the runtime neither grows nor shrinks.

// maxCCallArgs is the most integer arguments ccall passes (cuLaunchKernel takes 11).
const maxCCallArgs = 12

// cframe is ccall's argument block; ccall_amd64.s reads it at these offsets.
type cframe struct {
	fn uintptr
	a  [maxCCallArgs]uintptr
	r  uintptr // the C function's return value
}

// driverIndex returns the index of a driver entry point in driverSymbols (and driverTable.addr).
// The hot calls look theirs up once, at package initialization, so that they do not depend
// on the order of driver.prototypes.
func driverIndex(name string) int {
	for i, n := range driverSymbols {
		if n == name {
			return i
		}
	}
	// A programmer error caught by every test run: the name is not in driver.prototypes.
	panic("cuda: " + name + " is not in driver.prototypes")
}

// The driver entry points called through ccall.
var (
	symCtxSetCurrent      = driverIndex("cuCtxSetCurrent")
	symCtxSynchronize     = driverIndex("cuCtxSynchronize")
	symStreamSynchronize  = driverIndex("cuStreamSynchronize")
	symStreamQuery        = driverIndex("cuStreamQuery")
	symStreamWaitEvent    = driverIndex("cuStreamWaitEvent")
	symStreamWriteValue32 = driverIndex("cuStreamWriteValue32_v2")
	symEventRecord        = driverIndex("cuEventRecord")
	symEventQuery         = driverIndex("cuEventQuery")
	symEventSynchronize   = driverIndex("cuEventSynchronize")
	symLaunchKernel       = driverIndex("cuLaunchKernel")
	symGraphLaunch        = driverIndex("cuGraphLaunch")
	symMemcpyHtoDAsync    = driverIndex("cuMemcpyHtoDAsync_v2")
	symMemcpyDtoHAsync    = driverIndex("cuMemcpyDtoHAsync_v2")
	symMemcpyDtoDAsync    = driverIndex("cuMemcpyDtoDAsync_v2")
	symMemsetD8Async      = driverIndex("cuMemsetD8Async")
	symMemsetD32Async     = driverIndex("cuMemsetD32Async")
)
