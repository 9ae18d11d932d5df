//go:build !(linux && amd64)

package cuda

import "github.com/ebitengine/purego"

// ccall calls f.fn through purego.SyscallN, the generated wrappers' path: the direct
// trampoline exists for linux/amd64 only.
func ccall(f *cframe) uintptr {
	a := getCallArgs()
	copy(a[:maxCCallArgs], f.a[:])
	r, _, _ := purego.SyscallN(f.fn, a[:maxCCallArgs]...)
	putCallArgs(a)
	f.r = r
	return r
}
