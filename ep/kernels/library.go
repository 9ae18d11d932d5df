package kernels

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/graphs"
)

// ptxFiles holds the generated PTX modules (see mkptx.sh), one per CUDA source in cuda/.
//
//go:embed ptx/*.ptx
var ptxFiles embed.FS

// ptxSource is where NewLibrary reads the modules: ptxFiles, or in this package's tests a
// folder of freshly generated PTX (export_test.go's UsePTXDir).
var ptxSource fs.FS = ptxFiles

// ptxModule is one built-in PTX module and the entry points the package takes from it.
type ptxModule struct {
	file    string
	entries []string
}

// pendingPTX names the pending modules: those whose CUDA source is newer than its committed
// PTX (the PTX is generated with nvcc on a machine that has it; see mkptx.sh), so that the
// file may be missing or lack some of the entries. NewLibrary loads what there is and records
// each entry it could not resolve with the reason, and the builders of the ops that need such
// an entry refuse them (Library.entry), naming it, so that a node is declined rather than run
// by a kernel that does not exist. Every other module must load and resolve every entry, or
// NewLibrary fails. Files that add a pending module enter it from an init function.
var pendingPTX = map[string]bool{}

// modules lists every built-in PTX module. The names are the extern "C" kernels of
// cuda/<module>.cu and the names SimKernels registers. Files that add a module of their own
// append it from an init function.
var modules = []ptxModule{
	{"ptx/elementwise.ptx", elementwiseEntries()},
	{"ptx/softmax.ptx", typedEntries([]string{"cudaep_softmax_rows", "cudaep_softmax_cols"}, floatTypes)},
	{"ptx/cast.ptx", castEntries()},
	{"ptx/nonzero.ptx", []string{"cudaep_nonzero_f32", "cudaep_nonzero_i32", "cudaep_nonzero_i64", "cudaep_nonzero_b8"}},
}

// typedEntries returns <stem>_<suffix> for every stem and dtype.
func typedEntries(stems []string, types []DType) []string {
	var e []string
	for _, stem := range stems {
		for _, t := range types {
			e = append(e, stem+"_"+t.suffix())
		}
	}
	return e
}

// Runtime is what a Library runs on: the provider's context, its compute stream, a cuBLAS
// handle bound to that stream (needed by MatMul and Gemm only; nil refuses them at Get) and
// whether float32 GEMMs may use TF32 tensor cores. The Library does not own any of them: the
// caller destroys them after closing the Library.
type Runtime struct {
	Context *cudadrv.Context
	Stream  *cudadrv.Stream
	BLAS    *cudadrv.BLAS
	TF32    bool
}

// Library is the set of built-in kernels of one provider: the loaded PTX modules and the
// Runtime they run on. Create it once per provider with NewLibrary and Close it before the
// runtime's objects are destroyed.
//
// Get is safe for concurrent use. Kernels from one Library all queue work on its one stream;
// a Kernel itself is not safe for concurrent use.
type Library struct {
	rt      Runtime
	mods    []*cudadrv.Module
	fns     map[string]*cudadrv.Function
	missing map[string]string // entries of pending modules NewLibrary could not resolve, and why
	closed  atomic.Bool
	mu      sync.Mutex // serializes Close

	scratchMu sync.Mutex
	scratch   []*cudadrv.DeviceBuffer // see scratchBuffer; freed by Close
	counters  []*cudadrv.DeviceBuffer // see counterBuffer; freed by Close

	nextID       atomic.Uint32         // the last FaultID Get gave
	faultWord    *cudadrv.DeviceBuffer // the data fault word (faults.go), made by the first kernel that records faults; freed by Close
	faultMirror  *cudadrv.HostBuffer   // its host-mapped mirror, which TakeFault reads; freed by Close
	faultMu      sync.Mutex            // guards faultKernels and faultLive, and the word and mirror against Close
	faultKernels map[uint32]weak.Pointer[faultRecord]
	faultLive    int // len(faultKernels) after its last sweep
}

// errPanicked is wrapped by the error Get returns for a panic it recovered.
var errPanicked = errors.New("internal error")

// ErrClosed is returned by Library.Get, Kernel.Execute and a second Library.Close once the
// Library is closed.
var ErrClosed = errors.New("kernels: library closed")

// NewLibrary loads the built-in PTX modules into rt.Context and resolves every entry point,
// and sets rt.BLAS's math mode (TF32 tensor ops when rt.TF32, default
// float32 math otherwise). The context must be bound on the calling OS thread.
//
// # Errors
//
// A nil Context or Stream is an error; a module that fails to load or lacks an entry point is
// returned as the driver's error wrapped with the module's name, after unloading what was
// loaded. A pending module (see pendingPTX) is the exception: its missing file or entries are
// recorded, and Get refuses the ops that need them.
func NewLibrary(rt Runtime) (*Library, error) {
	if rt.Context == nil || rt.Stream == nil {
		return nil, errors.New("kernels: NewLibrary needs a Runtime with a Context and a Stream")
	}
	if rt.BLAS != nil {
		mode := cudadrv.MathDefault
		if rt.TF32 {
			mode = cudadrv.MathTF32TensorOp
		}
		if err := rt.BLAS.SetMathMode(mode); err != nil {
			return nil, fmt.Errorf("kernels: set the cuBLAS math mode: %w", err)
		}
	}
	l := &Library{rt: rt, fns: map[string]*cudadrv.Function{}, missing: map[string]string{}}
	for _, m := range modules {
		image, err := fs.ReadFile(ptxSource, m.file)
		if err != nil && pendingPTX[m.file] && errors.Is(err, fs.ErrNotExist) {
			for _, name := range m.entries {
				l.missing[name] = fmt.Sprintf("the library's PTX has no %s: %s is newer than the committed PTX (regenerate it with ep/kernels/mkptx.sh)", m.file, moduleSource(m.file))
			}
			continue
		}
		if err != nil {
			l.unload()
			return nil, fmt.Errorf("kernels: embedded %s: %w", m.file, err)
		}
		if why := l.tooNew(image); why != "" {
			for _, name := range m.entries {
				l.missing[name] = fmt.Sprintf("%s %s", m.file, why)
			}
			continue
		}
		mod, err := rt.Context.LoadModule(image)
		if err != nil {
			l.unload()
			return nil, fmt.Errorf("kernels: load %s: %w", m.file, err)
		}
		l.mods = append(l.mods, mod)
		for _, name := range m.entries {
			fn, err := mod.Function(name)
			if err != nil && pendingPTX[m.file] && errors.Is(err, cudadrv.ErrorNotFound) {
				l.missing[name] = fmt.Sprintf("%s has no entry point %s: %s is newer than that PTX (regenerate it with ep/kernels/mkptx.sh): %v", m.file, name, moduleSource(m.file), err)
				continue
			}
			if err != nil {
				l.unload()
				return nil, fmt.Errorf("kernels: %s: entry point %s: %w", m.file, name, err)
			}
			l.fns[name] = fn
		}
	}
	return l, nil
}

// tooNew says why the device cannot load a module's PTX, one whose .target (sm_80 for
// flash_attention.cu's compute_80: see mkptx.sh) is above the device's compute capability, or
// returns "". The entries of such a module are missing, as a pending module's are, and the
// builders that prefer them keep their portable kernels (or refuse, naming the entry).
func (l *Library) tooNew(image []byte) string {
	ptx, err := cudadrv.ParsePTX(image[:min(len(image), 4096)]) // the header: .version, .target
	if err != nil {
		return "" // the driver's load reports it
	}
	var want int
	if _, err := fmt.Sscanf(ptx.Target, "sm_%d", &want); err != nil {
		return ""
	}
	major, minor := l.rt.Context.Device().ComputeCapability()
	if have := 10*major + minor; have < want {
		return fmt.Sprintf("targets %s, above this device's compute capability %d.%d", ptx.Target, major, minor)
	}
	return ""
}

// moduleSource names the CUDA source of a module's PTX file: "ptx/x.ptx" is cuda/x.cu's.
func moduleSource(file string) string {
	return "cuda/" + strings.TrimSuffix(strings.TrimPrefix(file, "ptx/"), ".ptx") + ".cu"
}

// unload unloads every loaded module and frees the fault word, and returns the first error.
func (l *Library) unload() error {
	var first error
	for _, m := range l.mods {
		if err := m.Unload(); err != nil && first == nil {
			first = err
		}
	}
	l.mods = nil
	l.faultMu.Lock()
	defer l.faultMu.Unlock()
	if l.faultWord != nil {
		if err := l.faultWord.Free(); err != nil && first == nil {
			first = err
		}
		if err := l.faultMirror.Free(); err != nil && first == nil {
			first = err
		}
		l.faultWord, l.faultMirror = nil, nil
	}
	return first
}

// Close unloads the PTX modules and frees the kernels' scratch memory and the fault word. Kernels from the
// Library fail with ErrClosed afterwards; work they queued earlier must have completed
// (synchronize the stream first), and graphs captured from them must be destroyed. The
// Runtime's objects are left alone. The context must be bound on the calling OS thread.
//
// # Errors
//
// A second Close returns ErrClosed; a driver error from an unload or a free is returned after
// the other modules and buffers were released.
func (l *Library) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	err := l.unload()
	l.scratchMu.Lock()
	defer l.scratchMu.Unlock()
	for _, bufs := range [][]*cudadrv.DeviceBuffer{l.scratch, l.counters} {
		for _, b := range bufs {
			if ferr := b.Free(); ferr != nil && err == nil {
				err = ferr
			}
		}
	}
	l.scratch, l.counters = nil, nil
	return err
}

// minScratch is the smallest scratch buffer scratchBuffer allocates (sizes are rounded up to a
// power of two from there, so that a few buffers serve kernels of many shapes).
const minScratch = 1 << 16

// scratchBuffer returns the address of a device buffer of at least size bytes for a kernel's
// intermediate results (the split-K partials of GroupQueryAttention, Attention and the
// GEMV, MatMulNBits' dequantized tiles). Buffers belong to the Library and live until Close,
// so that a CUDA graph captured from a kernel never holds a freed address; kernels share them,
// which is safe because every kernel of a Library runs on its one stream, in order (a graph
// captured from them must be replayed on that stream, or ordered with it). The context must
// be bound on the calling OS thread: Get calls it for the kernels that need scratch, before
// any capture.
func (l *Library) scratchBuffer(size uint64) (cudadrv.DevicePtr, error) {
	l.scratchMu.Lock()
	defer l.scratchMu.Unlock()
	if l.closed.Load() {
		return 0, ErrClosed
	}
	var best *cudadrv.DeviceBuffer
	for _, b := range l.scratch {
		if b.Size() >= size && (best == nil || b.Size() < best.Size()) {
			best = b
		}
	}
	if best != nil {
		return best.Ptr(), nil
	}
	n := uint64(minScratch)
	for n < size {
		n *= 2
	}
	b, err := l.rt.Context.Alloc(n)
	if err != nil {
		return 0, fmt.Errorf("kernels: allocate %d bytes of kernel scratch: %w", n, err)
	}
	l.scratch = append(l.scratch, b)
	return b.Ptr(), nil
}

// minCounters is the smallest counter buffer counterBuffer allocates, in counters.
const minCounters = 1024

// counterBuffer returns the address of at least n uint32 counters that are zero whenever no
// kernel of the Library is running: they are zeroed on the Library's stream when allocated,
// and every kernel that uses them (the split-K GEMV's per-tile arrival counts) must leave the
// ones it used zero when it finishes. Like scratchBuffer's buffers they belong to the Library
// until Close and are shared by its kernels, which run in order on its one stream; they are
// kept apart from the scratch buffers, whose contents other kernels overwrite. The context
// must be bound on the calling OS thread and no capture may be live on the stream: Get calls
// it, and the zeroing is queued on the stream before any kernel that reads the counters.
func (l *Library) counterBuffer(n uint64) (cudadrv.DevicePtr, error) {
	l.scratchMu.Lock()
	defer l.scratchMu.Unlock()
	if l.closed.Load() {
		return 0, ErrClosed
	}
	for _, b := range l.counters {
		if b.Size() >= 4*n {
			return b.Ptr(), nil
		}
	}
	size := uint64(4 * minCounters)
	for size < 4*n {
		size *= 2
	}
	b, err := l.rt.Context.Alloc(size)
	if err != nil {
		return 0, fmt.Errorf("kernels: allocate %d bytes of kernel counters: %w", size, err)
	}
	if err := l.rt.Stream.Memset8Async(b.Ptr(), 0, size); err != nil {
		_ = b.Free()
		return 0, fmt.Errorf("kernels: zero the kernel counters: %w", err)
	}
	l.counters = append(l.counters, b)
	return b.Ptr(), nil
}

// Runtime returns the runtime the Library was created with.
func (l *Library) Runtime() Runtime { return l.rt }

// Kernel is one operator instance bound to a Library, built by Library.Get for fixed input
// dtypes, shapes and attributes. It is a graphs.Node, so a sequence of kernels can be handed
// to the capturability audit as is. It is not safe for concurrent use.
type Kernel interface {
	// Name describes the kernel for messages and the capturability audit, e.g.
	// "Add(float32[2,3], float32[3])".
	Name() string
	// Outputs returns the dtypes and shapes of the outputs Execute must be given, in ONNX
	// output order (a fresh copy).
	Outputs() []TensorInfo
	// Execute queues the operator on the Library's stream, reading inputs and writing outputs.
	// The Library's context must be bound on the calling OS thread. It allocates nothing and
	// does not wait for the work. The kernels InPlace names, Softmax and Identity may run in
	// place (an output that is an input of the output's shape), and GroupQueryAttention's present
	// outputs may be its past inputs (the shared cache); otherwise outputs must not overlap
	// inputs.
	//
	// # Errors
	//
	// Tensors that differ from what Get was given (count, dtype, shape, a zero address) wrap
	// ErrTensorMismatch and nothing is queued; a closed Library is ErrClosed; a driver or
	// cuBLAS error is returned as is (the stream may hold part of the work then).
	Execute(inputs, outputs []Tensor) error
	// CaptureSupport says whether Execute may be recorded into a CUDA graph: Supported for
	// every op but NonZero. It never touches the device.
	CaptureSupport() graphs.CaptureSupport
}

var _ graphs.Node = Kernel(nil)

// inPlacer is a kernel whose outputs may share the memory of some of its inputs.
type inPlacer interface{ inPlace(output, input int) bool }

// InPlace reports whether k's Execute may be given its output (by index) in the memory of
// input (the same address): the elementwise unary and binary ops and Where, for an input of the
// output's dtype and shape, and cudaep.WherePair, each output for its own X or Y. Each output
// element is then computed from the input's element at the same offset by the thread that
// reads it, before it writes it, so the result is the out-of-place one. A Where in place stores
// only the elements it takes from its other operand (a key/value cache updated at one position
// stores one row).
func InPlace(k Kernel, output, input int) bool {
	ip, ok := k.(inPlacer)
	return ok && ip.inPlace(output, input)
}

// variantNamer is a kernel that says which kernel of its family Get chose.
type variantNamer interface{ variant() string }

// Variant names the kernel of its op family that Get chose for k, where a family has several
// (variants.go): for Attention "decode", "flash" or "prefill". Other kernels: "".
func Variant(k Kernel) string {
	if v, ok := k.(variantNamer); ok {
		return v.variant()
	}
	return ""
}

// builder makes the kernel for one op from a validated-by-the-builder spec. optional lists
// the inputs that may be absent (the zero TensorInfo, see Spec.Inputs) before a present one;
// Get refuses an absent input anywhere else.
type builder struct {
	inputNames []string
	optional   []int
	build      func(l *Library, s opSpec) (Kernel, error)
}

// builders maps every supported op type to its builder. It is filled in by init functions of
// the files that implement the ops, so that each op lives in one file.
var builders = map[string]builder{}

// SupportedOps returns the op types Get accepts, sorted.
func SupportedOps() []string {
	ops := make([]string, 0, len(builders))
	for op := range builders {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}

// Get returns the kernel for spec, with its output dtypes and shapes inferred. It is safe for
// concurrent use and does not touch the device, except that a kernel that needs scratch
// memory (GroupQueryAttention and Attention with one query token: their split-K partial
// results; MatMul with one row of A when it splits K: its partial sums and arrival counters;
// MatMulNBits with 16 rows or more: its dequantized tile) gets it here, from buffers the
// Library owns until Close: the Library's context must be bound on the calling OS thread then,
// and no capture may be live on it (new counters are zeroed on the Library's stream). Get
// gives the kernel its FaultID, and a kernel that records data faults keeps what TakeFault
// needs to describe them (the node's name, the op, the input names) for as long as the kernel
// is reachable.
//
// # Errors
//
// Every op, opset, dtype, shape or attribute combination the package cannot run is refused
// here (never at Execute) with an error wrapping ErrUnsupported; the message names the node
// (Spec.Name, when given), the op, the offending input or attribute, and what is supported. A closed Library returns ErrClosed.
// A failed scratch allocation is returned as the driver's error, wrapped. Get never panics on
// a Spec: a panic while judging one (a defect of this package) is recovered and returned as an
// error wrapping ErrUnsupported that names the op and the panic, so that the caller declines
// that node alone.
func (l *Library) Get(spec Spec) (k Kernel, err error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	defer func() {
		if r := recover(); r != nil {
			k, err = nil, fmt.Errorf("%w: %s%s (opset %d): %w while building the kernel (please report it): %v", ErrUnsupported, nodePrefix(spec.Name), spec.Op, spec.Opset, errPanicked, r)
		}
	}()
	b, ok := builders[spec.Op]
	if !ok {
		return nil, fmt.Errorf("%w: %sop %q is not implemented; supported ops: %s", ErrUnsupported, nodePrefix(spec.Name), spec.Op, strings.Join(SupportedOps(), ", "))
	}
	id := l.nextID.Add(1)
	for id == 0 { // after 2^32 - 1 kernels the count wraps: 0 means "no kernel"
		id = l.nextID.Add(1)
	}
	s := opSpec{Spec: &spec, inputNames: b.inputNames, id: id}
	if spec.Opset < 1 {
		return nil, s.errorf("opset %d is not an ONNX opset version (they start at 1)", spec.Opset)
	}
	for i, in := range spec.Inputs {
		if absent(in) {
			if slices.Contains(b.optional, i) {
				continue
			}
			return nil, s.errorf("%s is absent (the node leaves it out with an empty name), and the op requires it", s.input(i))
		}
		if !in.DType.Valid() {
			return nil, s.errorf("%s has unknown dtype number %d", s.input(i), int32(in.DType))
		}
	}
	if err := s.checkConsts(); err != nil {
		return nil, err
	}
	return b.build(l, s)
}

// function returns a resolved entry point; NewLibrary resolved them all but the missing
// entries of pending modules, which builders take with entry instead.
func (l *Library) function(name string) *cudadrv.Function { return l.fns[name] }

// entry returns the entry point name for the kernel of s, or, when the Library's PTX lacks it
// (an entry of a pending module: see pendingPTX), an error wrapping ErrUnsupported that refuses
// s and names the entry, the PTX file and why.
func (l *Library) entry(s opSpec, name string) (*cudadrv.Function, error) {
	if fn := l.fns[name]; fn != nil {
		return fn, nil
	}
	if why, ok := l.missing[name]; ok {
		return nil, s.errorf("the kernel's entry point %s is not available: %s", name, why)
	}
	return nil, s.errorf("the kernel's entry point %s is not among the library's (please report it)", name)
}

// kernelBase holds what every kernel shares: its Library, name, and the tensors it was built
// for.
type kernelBase struct {
	lib      *Library
	name     string
	ins      []TensorInfo
	outs     []TensorInfo
	id       uint32       // FaultID
	node, op string       // Spec.Name and Spec.Op
	fault    *faultRecord // registerFaults: set for the kernels that record data faults
}

// newBase copies the spec's inputs and names the kernel after them.
func newBase(l *Library, s opSpec, outs ...TensorInfo) kernelBase {
	ins := make([]TensorInfo, len(s.Inputs))
	parts := make([]string, len(s.Inputs))
	for i, in := range s.Inputs {
		ins[i] = cloneInfo(in)
		parts[i] = in.String()
		if absent(in) {
			parts[i] = "absent"
		}
	}
	return kernelBase{lib: l, name: s.Op + "(" + strings.Join(parts, ", ") + ")", ins: ins, outs: outs, id: s.id, node: s.Name, op: s.Op}
}

// Name returns the kernel's name.
func (k *kernelBase) Name() string { return k.name }

// Outputs returns a copy of the output infos.
func (k *kernelBase) Outputs() []TensorInfo {
	outs := make([]TensorInfo, len(k.outs))
	for i, o := range k.outs {
		outs[i] = cloneInfo(o)
	}
	return outs
}

// CaptureSupport is Supported; the NonZero kernel overrides it.
func (k *kernelBase) CaptureSupport() graphs.CaptureSupport { return graphs.Supported }

// check validates Execute's arguments; it allocates nothing when they are right.
func (k *kernelBase) check(inputs, outputs []Tensor) error {
	if k.lib.closed.Load() {
		return ErrClosed
	}
	if err := checkTensors(k.name, "input", inputs, k.ins); err != nil {
		return err
	}
	return checkTensors(k.name, "output", outputs, k.outs)
}

// Launch geometry shared by the elementwise kernels: 256-thread blocks and a grid capped so
// that the kernels' grid-stride loops do the rest.
const (
	blockThreads = 256
	maxBlocks    = 8192
)

// linearGrid returns the grid for n elements at one element per thread, capped at maxBlocks.
func linearGrid(n uint64) cudadrv.Dim3 {
	blocks := (n + blockThreads - 1) / blockThreads
	blocks = max(1, min(blocks, maxBlocks))
	return cudadrv.Dim3{X: uint32(blocks), Y: 1, Z: 1}
}

var linearBlock = cudadrv.Dim3{X: blockThreads, Y: 1, Z: 1}
