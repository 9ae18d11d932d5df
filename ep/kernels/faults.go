package kernels

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/cudaep/cudaep/cudadrv"
)

// Data faults: values in device data that a kernel cannot use (a Gather index outside its
// axis, an integer divisor of 0, a GroupQueryAttention length outside its cache, a rotary
// position outside the cos/sin caches). Execute cannot check them (they are on the device,
// and a CUDA graph replays the kernels without the host), so the kernels that read them
// record the first one in a word of device memory the Library owns, while they still produce
// a memory-safe result, and the host reads it with Library.TakeFault after the work is done.
//
// The word (cuda/common.cuh's DataFault) is faultWordBytes bytes of device memory: the
// faulting kernel's id (uint32, 0: no fault), the index of the input that held the value
// (uint32), the value (int64) and the device address of its mirror. A kernel records with an
// atomic compare-and-swap of the id from 0, so the first fault of any kernel since the word
// was last cleared wins and later ones change nothing; the winning thread then writes the
// record into the mirror too, the id last, behind a system-wide fence. The mirror is
// faultRecordBytes of host-mapped pinned memory, so that TakeFault learns there was no fault
// (the case of every healthy run) from one load of host memory, without a copy or a driver
// call. The atomics stay on the device word: atomics on mapped host memory depend on the
// platform, plain stores do not. Both addresses are fixed for the Library's life, so captured
// graphs record on every replay.

// faultRecordBytes is the size of a fault record (id, input, value), and faultWordBytes of the
// device word (the record and its mirror's address).
const (
	faultRecordBytes = 16
	faultWordBytes   = faultRecordBytes + 8
)

// ErrDataFault is wrapped by every *DataFault: a kernel met a value in device data it could not
// use, where ONNX Runtime's CPU execution provider stops with an error.
var ErrDataFault = errors.New("kernels: bad device data")

// DataFault is the error Library.TakeFault returns: the first value in device data that one of
// the Library's kernels could not use since the fault word was last cleared, with the kernel
// that met it (its FaultID, node name and op) and the input that held it. The kernel's outputs
// from that execution are memory-safe but not meaningful (Gather gives zeros for the index's
// rows, integer Div 0, GroupQueryAttention drops tokens outside the cache, rotary positions
// outside the caches give NaN).
//
// errors.Is(f, ErrDataFault) holds for every DataFault.
type DataFault struct {
	// ID is the kernel's FaultID.
	ID uint32
	// Node is the ONNX node's name (Spec.Name); "" when Get was given none.
	Node string
	// Op is the kernel's op (Spec.Op), and Kernel its Name.
	Op, Kernel string
	// Input is the ONNX index of the input that held the value, InputName its ONNX name
	// ("indices", "seqlens_k", …).
	Input     int
	InputName string
	// Value is the value the kernel could not use.
	Value int64
	// Detail says what the kernel needed instead, e.g. "outside [-4, 4)".
	Detail string
}

// Error describes the fault, e.g. "kernels: node 'gather_3' (Gather): input 'indices' holds 9,
// outside [-4, 4)".
func (f *DataFault) Error() string {
	who := fmt.Sprintf("%s (kernel %d)", f.Kernel, f.ID)
	if f.Node != "" {
		who = fmt.Sprintf("node '%s' (%s)", f.Node, f.Op)
	}
	return fmt.Sprintf("kernels: %s: input '%s' holds %d, %s", who, f.InputName, f.Value, f.Detail)
}

// Is reports whether target is ErrDataFault.
func (f *DataFault) Is(target error) bool { return target == ErrDataFault }

// faultRecord is what TakeFault needs to describe a fault of one kernel: a record per kernel
// whose kernels record faults, held by the kernel (kernelBase.fault) and weakly by the
// Library, so that the Library's table does not keep dropped kernels alive.
type faultRecord struct {
	id               uint32
	node, op, kernel string
	inputNames       []string
	// detail says what the kernel needed of input's value.
	detail func(input int, value int64) string
}

// registerFaults gives k a fault record, with detail describing its faults, and enters it in
// the Library's table; the first call allocates the Library's fault word (a Library whose
// kernels read no indices, such as one that only holds memory, has none). Builders of kernels
// that record faults call it; Get has set k's id and node first.
func (k *kernelBase) registerFaults(inputNames []string, detail func(input int, value int64) string) error {
	r := &faultRecord{id: k.id, node: k.node, op: k.op, kernel: k.name, inputNames: inputNames, detail: detail}
	l := k.lib
	l.faultMu.Lock()
	defer l.faultMu.Unlock()
	if l.faultWord == nil {
		if l.closed.Load() {
			return ErrClosed
		}
		word, mirror, err := newFaultWord(l.rt.Context)
		if err != nil {
			return err
		}
		l.faultWord, l.faultMirror = word, mirror
	}
	k.fault = r
	if l.faultKernels == nil {
		l.faultKernels = map[uint32]weak.Pointer[faultRecord]{}
	}
	if len(l.faultKernels) >= 2*l.faultLive+64 {
		// Forget the kernels that are gone before the table grows (amortized over the
		// registrations since the last sweep).
		for id, w := range l.faultKernels {
			if w.Value() == nil {
				delete(l.faultKernels, id)
			}
		}
		l.faultLive = len(l.faultKernels)
	}
	l.faultKernels[r.id] = weak.Make(r)
	return nil
}

// faultArgs appends the fault word's address and the kernel's id to a, the last two arguments
// of every kernel that records faults (cuda/common.cuh's DataFault* fault, unsigned kernel).
func (k *kernelBase) faultArgs(a *cudadrv.KernelArgs) {
	a.Ptr(k.lib.faultWord.Ptr()).U32(k.id)
}

// FaultID returns the id a kernel's data faults carry (DataFault.ID): nonzero and unique among
// the kernels of its Library, assigned by Library.Get; 0 for a kernel that no Library built.
func FaultID(k Kernel) uint32 {
	if b, ok := k.(interface{ base() *kernelBase }); ok {
		return b.base().id
	}
	return 0
}

// base returns the kernel's shared fields (FaultID and Get reach them through it).
func (k *kernelBase) base() *kernelBase { return k }

// TakeFault returns the first data fault any of the Library's kernels recorded since the
// fault word was last cleared, as a *DataFault (nil when there was none), and clears the word.
// Call it once the work whose faults it should report has completed: after synchronizing the
// Library's stream (a kernel still running may record after the read), and never while a
// capture is live on the calling thread (its copies synchronize the device's memory). The
// Library's context must be bound on the calling OS thread. A fault of a kernel that was
// dropped (garbage collected) since is described by its id alone. It is safe for concurrent
// use; on the GPU it allocates only when it returns a fault.
//
// # Errors
//
// ErrClosed for a closed Library; a driver error of the copy that reads or clears the word,
// wrapped (the word is then left as it was, or may still hold the fault).
func (l *Library) TakeFault() (*DataFault, error) {
	l.faultMu.Lock()
	defer l.faultMu.Unlock()
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if l.faultMirror == nil {
		return nil, nil // no kernel that records faults was built
	}
	mirror := l.faultMirror.Bytes()
	id := atomic.LoadUint32((*uint32)(unsafe.Pointer(unsafe.SliceData(mirror))))
	if id == 0 {
		return nil, nil
	}
	input := int(binary.LittleEndian.Uint32(mirror[4:]))
	value := int64(binary.LittleEndian.Uint64(mirror[8:]))
	// The device word first (its id is what a kernel's compare-and-swap looks at), then the
	// mirror; the mirror's address after the record stays.
	if err := l.rt.Context.Memset8(l.faultWord.Ptr(), 0, faultRecordBytes); err != nil {
		return nil, fmt.Errorf("kernels: clear the data fault word: %w", err)
	}
	clear(mirror[4:faultRecordBytes])
	atomic.StoreUint32((*uint32)(unsafe.Pointer(unsafe.SliceData(mirror))), 0)
	f := &DataFault{ID: id, Input: input, Value: value, InputName: fmt.Sprint(input),
		Kernel: "a kernel no longer held", Detail: "which the kernel could not use"}
	var r *faultRecord
	if w, ok := l.faultKernels[id]; ok {
		r = w.Value()
	}
	if r != nil {
		f.Node, f.Op, f.Kernel = r.node, r.op, r.kernel
		if input < len(r.inputNames) {
			f.InputName = r.inputNames[input]
		}
		f.Detail = r.detail(input, value)
	}
	return f, nil
}

// FaultPending reports whether the fault word holds a fault TakeFault has not taken: one load
// of the host-mapped mirror, no driver call, no allocation, safe on any thread and during a
// capture. Like TakeFault it sees a kernel's fault only once the kernel has ended. It reports
// false for a closed Library.
func (l *Library) FaultPending() bool {
	if l.closed.Load() {
		return false
	}
	l.faultMu.Lock()
	defer l.faultMu.Unlock()
	if l.faultMirror == nil {
		return false
	}
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(unsafe.SliceData(l.faultMirror.Bytes())))) != 0
}

// newFaultWord allocates the Library's fault word and its mirror, and zeroes them
// (synchronously: the zeroes and the mirror's address are in place before any kernel can run).
func newFaultWord(ctx *cudadrv.Context) (*cudadrv.DeviceBuffer, *cudadrv.HostBuffer, error) {
	mirror, err := ctx.AllocHostMapped(faultRecordBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("kernels: allocate the data fault mirror: %w", err)
	}
	clear(mirror.Bytes())
	b, err := ctx.Alloc(faultWordBytes)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("kernels: allocate the data fault word: %w", err), mirror.Free())
	}
	var init [faultWordBytes]byte
	binary.LittleEndian.PutUint64(init[faultRecordBytes:], uint64(mirror.DevicePtr()))
	if err := ctx.CopyHtoD(b.Ptr(), init[:]); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("kernels: initialize the data fault word: %w", err), b.Free(), mirror.Free())
	}
	return b, mirror, nil
}

// simRecordFault is cuda/common.cuh's record_fault for the simulated kernels: with the fault
// word at pointer argument arg and the kernel's id at arg+1, it records (id, input, value) in
// the word and its mirror unless the word already holds a fault.
func simRecordFault(l *cudadrv.KernelLaunch, arg int, input uint32, value int64) error {
	id := l.U32Arg(arg + 1)
	if id == 0 {
		return fmt.Errorf("%s: kernel id 0 (the Library gives every kernel a nonzero one)", l.Name)
	}
	word := l.PtrArg(arg)
	head, err := l.Uint32s(word, 2)
	if err != nil {
		return err
	}
	if head[0] != 0 {
		return nil
	}
	val, err := l.Int64s(word+8, 1)
	if err != nil {
		return err
	}
	at, err := l.Int64s(word+faultRecordBytes, 1)
	if err != nil {
		return err
	}
	mhead, err := l.Uint32s(cudadrv.DevicePtr(at[0]), 2)
	if err != nil {
		return fmt.Errorf("%s: the fault word's mirror: %w", l.Name, err)
	}
	mval, err := l.Int64s(cudadrv.DevicePtr(at[0])+8, 1)
	if err != nil {
		return fmt.Errorf("%s: the fault word's mirror: %w", l.Name, err)
	}
	head[0], head[1], val[0] = id, input, value
	mhead[1], mval[0] = input, value
	atomic.StoreUint32(&mhead[0], id)
	return nil
}
