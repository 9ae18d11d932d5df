package cuda

import (
	"bytes"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/cudaep/cudaep/cudadrv"
)

// nvrtcLib returns the NVRTC symbol table, loading the library on first use.
func (b *Backend) nvrtcLib() (*nvrtcTable, error) {
	if t := b.rtc.Load(); t != nil {
		return t, nil
	}
	b.libMu.Lock()
	defer b.libMu.Unlock()
	if t := b.rtc.Load(); t != nil {
		return t, nil
	}
	h, _, err := openLibrary(nvrtcSpec)
	if err != nil {
		return nil, err
	}
	t := new(nvrtcTable)
	if err := resolveLocked(func() error { return t.resolve(h) }); err != nil {
		return nil, err
	}
	b.rtc.Store(t)
	return t, nil
}

// nvrtcErrorCompilation is NVRTC_ERROR_COMPILATION.
const nvrtcErrorCompilation nvrtcResult = 6

// name returns NVRTC's name for r, such as "NVRTC_ERROR_COMPILATION".
func (t *nvrtcTable) name(r nvrtcResult) string {
	// nvrtcGetErrorString returns a pointer into the library's static string table.
	if s := goString(t.nvrtcGetErrorString(r)); s != "" {
		return s
	}
	return "nvrtcResult(" + strconv.Itoa(int(r)) + ")"
}

// CompilePTX compiles the CUDA C++ source with NVRTC, loading NVRTC on first use, and returns
// the PTX text without its trailing NUL. name is the program name the compiler uses in its
// messages. options are passed through unchanged (for example "--gpu-architecture=compute_90",
// "-default-device"); with none, NVRTC targets its default architecture, which the driver JITs
// for the device when the module loads.
//
// # Errors
//
// A *cudadrv.LibraryError when NVRTC cannot be found; a *cudadrv.CompileError when a step
// fails, carrying the compiler's log when compilation itself failed.
func (b *Backend) CompilePTX(source, name string, options []string) ([]byte, error) {
	t, err := b.nvrtcLib()
	if err != nil {
		return nil, err
	}
	fail := func(r nvrtcResult, log string) error {
		return &cudadrv.CompileError{Program: name, Result: int(r), Name: t.name(r), Log: log}
	}

	// The strings below are Go memory read by NVRTC during the calls that take them; the
	// option array is Go memory holding pointers to Go memory, so every target is pinned for
	// as long as NVRTC may read it (cgo's rule for pointers inside memory passed to C).
	// nvrtcCreateProgram copies the source and name.
	var pin runtime.Pinner
	defer pin.Unpin()
	csrc, cname := cBytes(source), cBytes(name)
	pin.Pin(&csrc[0])
	pin.Pin(&cname[0])
	var opts unsafe.Pointer
	if len(options) > 0 {
		arr := make([]*byte, len(options))
		for i, o := range options {
			c := cBytes(o)
			pin.Pin(&c[0])
			arr[i] = &c[0]
		}
		pin.Pin(&arr[0])
		opts = unsafe.Pointer(&arr[0])
	}

	// prog escapes through the wrapper (cold call); the library writes it during the call.
	prog := new(nvrtcProgram)
	if r := t.nvrtcCreateProgram(prog, &csrc[0], &cname[0], 0, nil, nil); r != 0 {
		return nil, fail(r, "")
	}
	defer t.nvrtcDestroyProgram(prog)

	if r := t.nvrtcCompileProgram(*prog, int32(len(options)), opts); r != 0 {
		log := t.programLog(*prog)
		if r != nvrtcErrorCompilation && log == "" {
			return nil, fail(r, "")
		}
		return nil, fail(r, log)
	}

	size := new(uintptr)
	if r := t.nvrtcGetPTXSize(*prog, size); r != 0 {
		return nil, fail(r, "")
	}
	if *size == 0 {
		return nil, fail(nvrtcErrorCompilation, "NVRTC produced no PTX")
	}
	ptx := make([]byte, *size)
	// NVRTC writes exactly *size bytes (the PTX and its NUL) into ptx during the call.
	if r := t.nvrtcGetPTX(*prog, &ptx[0]); r != 0 {
		return nil, fail(r, "")
	}
	return bytes.TrimRight(ptx, "\x00"), nil
}

// programLog returns the compiler log of prog, "" when there is none or it cannot be read.
func (t *nvrtcTable) programLog(prog nvrtcProgram) string {
	size := new(uintptr)
	if t.nvrtcGetProgramLogSize(prog, size) != 0 || *size <= 1 {
		return ""
	}
	buf := make([]byte, *size)
	// NVRTC writes exactly *size bytes (the log and its NUL) into buf during the call.
	if t.nvrtcGetProgramLog(prog, &buf[0]) != 0 {
		return ""
	}
	return string(bytes.TrimRight(buf, "\x00"))
}
