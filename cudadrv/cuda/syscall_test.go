package cuda

import (
	"bytes"
	"os"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
)

// openLibc resolves the libc test table (zlibc_test.go, generated like the CUDA tables).
func openLibc(tb testing.TB) (*libcTable, uintptr) {
	tb.Helper()
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_LOCAL)
	require.NoError(tb, err)
	t := new(libcTable)
	require.NoError(tb, resolveLocked(func() error { return t.resolve(h) }))
	return t, h
}

// libcAddr returns the address of a libc test symbol.
func (t *libcTable) libcAddr(tb testing.TB, name string) uintptr {
	for i, n := range libcSymbols {
		if n == name {
			return t.addr[i]
		}
	}
	tb.Fatalf("%s is not in testdata/libc.prototypes", name)
	return 0
}

func TestGeneratedWrappersAllocateNothing(t *testing.T) {
	libc, _ := openLibc(t)
	buf := make([]byte, 64) // on the heap: it is handed to C below

	var fill byte
	allocs := testing.AllocsPerRun(1000, func() {
		fill++
		libc.memset(unsafe.Pointer(&buf[0]), int32(fill), uintptr(len(buf)))
	})
	assert.Zero(t, allocs, "a wrapper given a pointer to memory already on the heap")
	assert.Equal(t, bytes.Repeat([]byte{fill}, len(buf)), buf, "the calls did run")

	allocs = testing.AllocsPerRun(1000, func() { _ = libc.abs(-5) })
	assert.Zero(t, allocs, "a wrapper with scalar arguments only")
	assert.Equal(t, int32(5), libc.abs(-5))

	allocs = testing.AllocsPerRun(1000, func() { _ = libc.getpid() })
	assert.Zero(t, allocs, "a wrapper without arguments")
	assert.Equal(t, int32(os.Getpid()), libc.getpid())
}

func TestSyscallNVariadicListAllocates(t *testing.T) {
	// Why the wrappers pass a pooled array instead of a variadic list: SyscallN is
	// //go:uintptrescapes, so the implicit []uintptr of a variadic call escapes and is
	// allocated on every call, even when every pointer in it is already on the heap. If a
	// purego or compiler change ever makes this 0, the pooling in callargs.go can go.
	libc, _ := openLibc(t)
	memset := libc.libcAddr(t, "memset")
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		purego.SyscallN(memset, uintptr(unsafe.Pointer(&buf[0])), 7, uintptr(len(buf)))
	})
	assert.Equal(t, 1.0, allocs)
	assert.Equal(t, bytes.Repeat([]byte{7}, len(buf)), buf)

	getpid := libc.libcAddr(t, "getpid")
	allocs = testing.AllocsPerRun(1000, func() { purego.SyscallN(getpid) })
	assert.Zero(t, allocs, "without arguments there is no list to allocate")
}

func TestWrapperMovesAPointedToLocalToTheHeap(t *testing.T) {
	// The guarantee uintptrescapes gave and escape() restores: the address of a local handed
	// to a wrapper moves the local to the heap (once per call), so no uintptr given to C ever
	// points into a goroutine stack that could move. Hot calls avoid it by passing pointers
	// to memory already on the heap or outside Go.
	libc, _ := openLibc(t)
	allocs := testing.AllocsPerRun(100, func() {
		var local [64]byte
		libc.memset(unsafe.Pointer(&local[0]), 1, uintptr(len(local)))
	})
	assert.Equal(t, 1.0, allocs)
}

// newYieldBackend returns a Backend whose every driver and cuBLAS entry point is libc's
// sched_yield, which ignores its arguments and returns 0 (success). It runs the backend's Go
// side of each call, argument marshalling included, without a GPU. On the SysV ABIs the
// caller owns argument registers and stack, so extra arguments to sched_yield are harmless.
func newYieldBackend(t *testing.T) *Backend {
	libc, _ := openLibc(t)
	yield := libc.libcAddr(t, "sched_yield")
	b := &Backend{}
	for i := range b.drv.addr {
		b.drv.addr[i] = yield
	}
	blas := new(cublasTable)
	for i := range blas.addr {
		blas.addr[i] = yield
	}
	b.blas.Store(blas)
	return b
}

func TestHotCallsAllocateNothing(t *testing.T) {
	b := newYieldBackend(t)
	args := new(cudadrv.KernelArgs)
	args.Ptr(0x7000_0000).U32(1024).F32(1.5)
	host := make([]byte, 4096)
	gemm := &cudadrv.GemmParams{M: 64, N: 64, K: 64, Alpha: 1, LDA: 64, LDB: 64, LDC: 64,
		A: 0x1000, B: 0x2000, C: 0x3000, StrideA: 4096, StrideB: 4096, StrideC: 4096, BatchCount: 2}
	const s = cudadrv.RawStream(0x5000)

	calls := []struct {
		name string
		call func() error
	}{
		{"LaunchKernel", func() error {
			return b.LaunchKernel(0x6000, cudadrv.Dim3{X: 4, Y: 1, Z: 1}, cudadrv.Dim3{X: 256, Y: 1, Z: 1}, 0, s, args)
		}},
		{"LaunchKernel without args", func() error {
			return b.LaunchKernel(0x6000, cudadrv.Dim3{X: 1, Y: 1, Z: 1}, cudadrv.Dim3{X: 1, Y: 1, Z: 1}, 0, s, nil)
		}},
		{"MemcpyHtoDAsync", func() error { return b.MemcpyHtoDAsync(0x1000, host, s) }},
		{"MemcpyDtoHAsync", func() error { return b.MemcpyDtoHAsync(host, 0x1000, s) }},
		{"MemcpyDtoDAsync", func() error { return b.MemcpyDtoDAsync(0x1000, 0x2000, 4096, s) }},
		{"MemcpyPeerAsync", func() error { return b.MemcpyPeerAsync(0x1000, 0x3000, 0x2000, 0x4000, 4096, s) }},
		{"EventRecord", func() error { return b.EventRecord(0x4000, s) }},
		{"GraphLaunch", func() error { return b.GraphLaunch(0x8000, s) }},
		{"StreamWriteValue32", func() error { return b.StreamWriteValue32(s, 0x7000_0040, 7) }},
		{"Sgemm", func() error { return b.Sgemm(0x9000, gemm) }},
		{"SgemmStridedBatched", func() error { return b.SgemmStridedBatched(0x9000, gemm) }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.call())
			var err error
			allocs := testing.AllocsPerRun(1000, func() { err = c.call() })
			require.NoError(t, err)
			assert.Zero(t, allocs)
		})
	}
}

func TestLaunchKernelRefusesOverflowedArgs(t *testing.T) {
	b := newYieldBackend(t)
	args := new(cudadrv.KernelArgs)
	for range cudadrv.MaxKernelArgs + 1 {
		args.U32(1)
	}
	err := b.LaunchKernel(0x6000, cudadrv.Dim3{X: 1, Y: 1, Z: 1}, cudadrv.Dim3{X: 1, Y: 1, Z: 1}, 0, 0, args)
	var e *cudadrv.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "cuLaunchKernel", e.Op)
	assert.Equal(t, cudadrv.ErrorInvalidValue, e.Result)
}

func TestEmptyHostSlices(t *testing.T) {
	// Every driver entry point is sched_yield here, so a call that reached the driver would
	// succeed: an error proves the backend refused the empty slice itself, and nil from a
	// copy proves it did nothing.
	b := newYieldBackend(t)
	var empty []byte
	for name, err := range map[string]error{
		"cuMemHostRegister_v2": b.MemHostRegister(empty, cudadrv.HostRegisterPortable),
		"cuMemHostUnregister":  b.MemHostUnregister(empty),
		"cuMemFreeHost":        b.MemFreeHost(empty),
		"cuModuleLoadData":     func() error { _, err := b.ModuleLoadData(empty); return err }(),
		"cuMemHostAlloc":       func() error { _, err := b.MemHostAlloc(0); return err }(),
	} {
		var e *cudadrv.Error
		if assert.ErrorAs(t, err, &e, name) {
			assert.Equal(t, name, e.Op)
			assert.Equal(t, cudadrv.ErrorInvalidValue, e.Result, name)
		}
	}
	assert.NoError(t, b.MemcpyHtoD(0x1000, empty))
	assert.NoError(t, b.MemcpyDtoH(empty, 0x1000))
	assert.NoError(t, b.MemcpyHtoDAsync(0x1000, empty, 0))
	assert.NoError(t, b.MemcpyDtoHAsync(empty, 0x1000, 0))
}

func TestSgemmRefusesDimensionsBeyondInt32(t *testing.T) {
	b := newYieldBackend(t)
	p := &cudadrv.GemmParams{M: 1 << 31, N: 1, K: 1, LDA: 1, LDB: 1, LDC: 1}
	var be *cudadrv.BLASError
	require.ErrorAs(t, b.Sgemm(1, p), &be)
	assert.Equal(t, cudadrv.BLASInvalidValue, be.Status)
	p.M, p.BatchCount = 1, -1<<40
	require.ErrorAs(t, b.SgemmStridedBatched(1, p), &be)
	assert.Equal(t, cudadrv.BLASInvalidValue, be.Status)
}

// Benchmarks of the calling methods on libc functions (no GPU): the generated wrappers
// (SyscallN over a pooled argument array), ccall (the hot calls' direct trampoline), a plain
// variadic SyscallN call, and the reflective RegisterFunc. memset has 3 arguments; abs is also called with 11 (it reads the first, 0),
// the arity of cuLaunchKernel.
func BenchmarkCallingMethods(b *testing.B) {
	libc, h := openLibc(b)
	buf := make([]byte, 64)
	memset := libc.libcAddr(b, "memset")

	b.Run("memset/GeneratedWrapper", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			libc.memset(unsafe.Pointer(&buf[0]), 7, uintptr(len(buf)))
		}
	})
	b.Run("memset/CCall", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f := cframe{fn: memset, a: [maxCCallArgs]uintptr{uintptr(unsafe.Pointer(&buf[0])), 7, uintptr(len(buf))}}
			ccall(&f)
		}
	})
	b.Run("memset/SyscallNVariadic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			purego.SyscallN(memset, uintptr(unsafe.Pointer(&buf[0])), 7, uintptr(len(buf)))
		}
	})
	b.Run("memset/RegisterLibFunc", func(b *testing.B) {
		var fn func(p unsafe.Pointer, c int32, n uintptr) unsafe.Pointer
		purego.RegisterLibFunc(&fn, h, "memset")
		b.ReportAllocs()
		for b.Loop() {
			fn(unsafe.Pointer(&buf[0]), 7, uintptr(len(buf)))
		}
	})

	abs := libc.libcAddr(b, "abs")
	b.Run("11args/PooledSyscallN", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a := getCallArgs()
			for i := range 11 {
				a[i] = uintptr(i)
			}
			purego.SyscallN(abs, a[:11]...)
			putCallArgs(a)
		}
	})
	b.Run("11args/CCall", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f := cframe{fn: abs, a: [maxCCallArgs]uintptr{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
			ccall(&f)
		}
	})
	b.Run("11args/SyscallNVariadic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			purego.SyscallN(abs, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
		}
	})
	b.Run("11args/RegisterFunc", func(b *testing.B) {
		var fn func(a, b, c, d, e, f, g, h, i, j, k uintptr) int32
		purego.RegisterFunc(&fn, abs)
		b.ReportAllocs()
		for b.Loop() {
			fn(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
		}
	})
}

// BenchmarkContextCalls measures, without a GPU, what the Go side of binding a context
// (cuCtxSetCurrent) and of asking which one is bound (cuCtxGetCurrent) costs through the
// backend: the same purego call path, with the driver function replaced by a trivial libc one
// that returns 0 (abs of the handle 0; strlen of the zeroed out-parameter). The check is no
// cheaper than the bind (it costs more here: its out-parameter escapes, one allocation a
// call), and on the H200 the driver's own part of cuCtxSetCurrent is 0.03 µs of the 0.18 µs
// the call costs from Go (bench/results): a check could save at most the driver's part, which
// is why ep skips the bind by trying the call instead (ep's enterUnbound).
func BenchmarkContextCalls(b *testing.B) {
	libc, _ := openLibc(b)
	be := &Backend{}
	for i, name := range driverSymbols {
		switch name {
		case "cuCtxSetCurrent":
			be.drv.addr[i] = libc.libcAddr(b, "abs")
		case "cuCtxGetCurrent":
			be.drv.addr[i] = libc.libcAddr(b, "strlen")
		}
	}
	b.Run("CtxSetCurrent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := be.CtxSetCurrent(0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CtxGetCurrent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := be.CtxGetCurrent(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
