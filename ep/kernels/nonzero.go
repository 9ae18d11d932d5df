package kernels

import (
	"encoding/binary"
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/graphs"
)

func init() {
	builders["NonZero"] = builder{inputNames: []string{"X"}, build: buildNonZero}
}

// maxNonZeroRank is the highest input rank NonZero takes (the kernel gets the dimensions as
// eight separate arguments).
const maxNonZeroRank = 8

// nonZeroThreads is the NonZero kernel's block size; it runs as a single block (see
// NonZeroKernel).
const nonZeroThreads = 1024

var nonZeroEntries = map[DType]string{
	Float32: "cudaep_nonzero_f32",
	Int32:   "cudaep_nonzero_i32",
	Int64:   "cudaep_nonzero_i64",
	Bool:    "cudaep_nonzero_b8",
}

// NonZeroReason is the reason NonZero kernels give for not being capturable.
const NonZeroReason = "NonZero's output shape depends on the input's values: the count of non-zero elements must be read back to the host (a device-to-host copy and a stream synchronization) before the output can be used, and a CUDA graph cannot contain that host read"

// NonZeroKernel is NonZero (opset 9): the indices of the non-zero elements of X (NaN counts as
// non-zero, -0 as zero), as ONNX's int64 [rank(X), nnz] tensor in row-major element order.
//
// # Outputs
//
// Because nnz is only known on the device, Outputs declares an upper bound and a count:
//
//	output 0: int64 [rank, numel(X)]  indices; the first rank·nnz elements are the ONNX
//	                                  output [rank, nnz], contiguous; the rest is unwritten
//	output 1: int64 [1]               nnz
//
// The host reads nnz with Count (or ReadShape) after Execute, which synchronizes the stream:
// that host read is why CaptureSupport is Unsupported, and why NonZero is the seam between
// captured segments.
//
// # Notes
//
// The kernel runs as one block of 1024 threads that counts, then scans the input tile by tile
// to place each index in order; it reads the input twice and suits the small masks NonZero
// sees in inference, not large tensors.
type NonZeroKernel struct {
	kernelBase
	fn   *cudadrv.Function
	rank uint32
	n    uint64
	dims [maxNonZeroRank]int64
	args cudadrv.KernelArgs
	host [8]byte
}

func buildNonZero(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(9, "NonZero entered the default domain in opset 9"); err != nil {
		return nil, err
	}
	if err := s.checkInputCount(1, 1); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, []DType{Float32, Int32, Int64, Bool}, 1, maxNonZeroRank); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	x := s.Inputs[0]
	numel := x.NumElements()
	indices := []int64{int64(len(x.Shape)), numel}
	if err := s.checkOutput(indices); err != nil {
		return nil, err
	}
	k := &NonZeroKernel{kernelBase: newBase(l, s,
		TensorInfo{DType: Int64, Shape: indices},
		TensorInfo{DType: Int64, Shape: []int64{1}},
	)}
	k.fn = l.function(nonZeroEntries[x.DType])
	k.rank, k.n = uint32(len(x.Shape)), uint64(numel)
	off := maxNonZeroRank - len(x.Shape)
	for i := range k.dims {
		k.dims[i] = 1
	}
	copy(k.dims[off:], x.Shape)
	return k, nil
}

// CaptureSupport is Unsupported with NonZeroReason.
func (k *NonZeroKernel) CaptureSupport() graphs.CaptureSupport {
	return graphs.Unsupported(NonZeroReason)
}

// Execute queues the kernel: cudaep_nonzero_<t>(x, indices, count, n, rank, dims[8]).
func (k *NonZeroKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(inputs[0].Ptr).Ptr(outputs[0].Ptr).Ptr(outputs[1].Ptr).U64(k.n).U32(k.rank)
	for _, d := range k.dims {
		a.I64(d)
	}
	one := cudadrv.Dim3{X: 1, Y: 1, Z: 1}
	return k.lib.rt.Stream.Launch(k.fn, one, cudadrv.Dim3{X: nonZeroThreads, Y: 1, Z: 1}, 0, a)
}

// Count copies the non-zero count from count (output 1 of an Execute queued before) to the
// host and returns it. It synchronizes the Library's stream, so it must not run while that
// stream is being captured. The context must be bound on the calling OS thread. Not safe for
// concurrent use with the kernel's other methods.
//
// # Errors
//
// A count tensor other than int64 [1] wraps ErrTensorMismatch; a driver error (such as the
// one a live capture gives the synchronization) is returned as is.
func (k *NonZeroKernel) Count(count Tensor) (int64, error) {
	if k.lib.closed.Load() {
		return 0, ErrClosed
	}
	if err := checkTensors(k.name, "count", []Tensor{count}, k.outs[1:]); err != nil {
		return 0, err
	}
	st := k.lib.rt.Stream
	if err := st.CopyDtoHAsync(k.host[:], count.Ptr); err != nil {
		return 0, err
	}
	if err := st.Synchronize(); err != nil {
		return 0, err
	}
	nnz := int64(binary.LittleEndian.Uint64(k.host[:]))
	if nnz < 0 || uint64(nnz) > k.n {
		return 0, fmt.Errorf("kernels: %s: the device count %d is outside [0, %d]", k.name, nnz, k.n)
	}
	return nnz, nil
}

// ReadShape is Count returning the real shape of the ONNX output, [rank(X), nnz].
//
// # Errors
//
// As Count.
func (k *NonZeroKernel) ReadShape(count Tensor) ([]int64, error) {
	nnz, err := k.Count(count)
	if err != nil {
		return nil, err
	}
	return []int64{int64(k.rank), nnz}, nil
}
