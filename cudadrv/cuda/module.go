package cuda

import (
	"runtime"
	"unsafe"

	"github.com/cudaep/cudaep/cudadrv"
)

// ModuleLoadData loads a module from PTX text or a cubin/fatbin image into the current
// context; PTX is compiled for the device by the driver. image is only read during the call.
// An image without a trailing NUL is copied with one appended (the driver reads PTX up to a
// NUL). An empty image is ErrorInvalidValue.
func (b *Backend) ModuleLoadData(image []byte) (cudadrv.RawModule, error) {
	if len(image) == 0 {
		return 0, cudadrv.NewError("cuModuleLoadData", cudadrv.ErrorInvalidValue)
	}
	img := image
	if img[len(img)-1] != 0 {
		img = append(image[:len(image):len(image)], 0)
	}
	// Go memory handed to C for the duration of the call is pinned (a no-op for memory
	// outside the Go heap); the driver copies the image and keeps no pointer into it.
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&img[0])
	var m cudadrv.RawModule
	if err := cudadrv.NewError("cuModuleLoadData", b.drv.cuModuleLoadData(&m, unsafe.Pointer(&img[0]))); err != nil {
		return 0, err
	}
	return m, nil
}

// ModuleUnload unloads m; its functions become invalid.
func (b *Backend) ModuleUnload(m cudadrv.RawModule) error {
	return cudadrv.NewError("cuModuleUnload", b.drv.cuModuleUnload(m))
}

// ModuleGetFunction returns the kernel called name (its extern "C" or mangled name) in m.
// A missing kernel is ErrorNotFound.
func (b *Backend) ModuleGetFunction(m cudadrv.RawModule, name string) (cudadrv.RawFunction, error) {
	cname := cBytes(name)
	// The name is Go memory read by the driver during the call only; pinned for it.
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&cname[0])
	var f cudadrv.RawFunction
	if err := cudadrv.NewError("cuModuleGetFunction", b.drv.cuModuleGetFunction(&f, m, &cname[0])); err != nil {
		return 0, err
	}
	return f, nil
}

// errTooManyArgs is LaunchKernel's error for an overflowed argument list, allocated once.
var errTooManyArgs = &cudadrv.Error{
	Op:     "cuLaunchKernel",
	Result: cudadrv.ErrorInvalidValue,
	Detail: "more than cudadrv.MaxKernelArgs kernel arguments",
}

// LaunchKernel queues f on s with the given grid, block, dynamic shared memory and arguments
// (nil for a kernel without parameters). It is a hot call: it allocates nothing when args is
// on the heap, as KernelArgs requires.
//
// The driver copies the argument values during the call, so args may be reset and reused as
// soon as LaunchKernel returns. During a stream capture the values are recorded in the graph.
func (b *Backend) LaunchKernel(f cudadrv.RawFunction, grid, block cudadrv.Dim3, sharedMem uint32,
	s cudadrv.RawStream, args *cudadrv.KernelArgs) error {
	var params unsafe.Pointer
	if args != nil {
		if args.Overflowed() {
			return errTooManyArgs
		}
		if args.Len() > 0 {
			// ParamArray is a void*[] inside *args whose entries point at words inside
			// *args. args is already a heap object (KernelArgs's contract), so passing its
			// address through the wrapper allocates nothing, and Go's heap does not move, so the
			// interior pointers stay valid for the call. The driver reads the array and the
			// words before cuLaunchKernel returns and keeps no pointer to them. Pinning with a
			// runtime.Pinner would cost an allocation per launch and adds nothing here.
			params = args.ParamArray()
		}
	}
	escape(params)
	c := cframe{fn: b.drv.addr[symLaunchKernel], a: [maxCCallArgs]uintptr{
		uintptr(f), uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
		uintptr(block.X), uintptr(block.Y), uintptr(block.Z), uintptr(sharedMem),
		uintptr(s), uintptr(params), 0}}
	r := ccall(&c)
	runtime.KeepAlive(args)
	runtime.KeepAlive(params)
	return cudadrv.NewError("cuLaunchKernel", cudadrv.Result(r))
}

// cBytes returns s as a NUL-terminated byte slice on the Go heap.
func cBytes(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}
