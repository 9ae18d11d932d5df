package ep

import (
	"fmt"
	"slices"

	"github.com/cudaep/cudaep/cudadrv"

	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

// Tensor descriptors and operator specs are the kernels package's; the aliases let a Go host
// use them through ep alone.
type (
	// DType is an ONNX element type (TensorProto numbering).
	DType = kernels.DType
	// TensorInfo is a tensor's dtype and shape.
	TensorInfo = kernels.TensorInfo
	// Tensor is a dense row-major tensor in device memory.
	Tensor = kernels.Tensor
	// Spec describes one operator instance: op, opset, inputs, attributes.
	Spec = kernels.Spec
	// Attribute is one ONNX node attribute.
	Attribute = kernels.Attribute
	// AttrKind is the type of an Attribute's value (Attribute.Kind).
	AttrKind = kernels.AttrKind
	// Const is the value of a constant input, for Spec.Consts.
	Const = kernels.Const
	// DevicePtr is a device address.
	DevicePtr = cudadrv.DevicePtr
	// CaptureSupport says whether a kernel may be recorded into a CUDA graph
	// (Kernel.CaptureSupport): IsSupported, and Reason when it may not (a seam kernel, such
	// as one that reads a device result on the host).
	CaptureSupport = graphs.CaptureSupport
)

// The attribute kinds, as ONNX's AttributeProto names them.
const (
	AttrInt    = kernels.AttrInt
	AttrFloat  = kernels.AttrFloat
	AttrInts   = kernels.AttrInts
	AttrString = kernels.AttrString
	AttrTensor = kernels.AttrTensor
)

// Attribute constructors, for Spec.Attrs.
var (
	IntAttr    = kernels.IntAttr
	IntsAttr   = kernels.IntsAttr
	FloatAttr  = kernels.FloatAttr
	StringAttr = kernels.StringAttr
	TensorAttr = kernels.TensorAttr
)

// Float16Value and BFloat16Value decode the bits of an IEEE binary16 and a bfloat16 value, for
// hosts that read 16-bit constants into Spec.Consts.
var (
	Float16Value  = cudadrv.Float16Value
	BFloat16Value = cudadrv.BFloat16Value
)

// Constant-input constructors, for Spec.Consts.
var (
	IntsConst   = kernels.IntsConst
	FloatsConst = kernels.FloatsConst
)

// The element types, for hosts that build TensorInfos through ep.
const (
	Float32  = kernels.Float32
	Float16  = kernels.Float16
	BFloat16 = kernels.BFloat16
	Float64  = kernels.Float64
	Int32    = kernels.Int32
	Int64    = kernels.Int64
	Bool     = kernels.Bool
	Uint8    = kernels.Uint8 // MatMulNBits' packed weights and zero points
)

// ErrUnsupported is wrapped by every refusal of an op, dtype, shape, stride or attribute the
// provider cannot run.
var ErrUnsupported = kernels.ErrUnsupported

// Kernel is one operator instance of a provider. Its CaptureSupport is what BeginCapture audits
// (it is a node of the graph layer's capturability audit). A Kernel is not safe for concurrent use.
type Kernel struct {
	p    *Provider
	k    kernels.Kernel
	ins  []TensorInfo // the inputs Get was given, for the argument check of a refused call
	view bool
}

// GetKernel returns the kernel for spec (see the kernels package for the support matrix).
//
// # Errors
//
// Every op, dtype, shape or attribute combination the provider cannot run is refused here,
// never at Execute time, with an error naming the op, the offending input and what is
// supported (it wraps kernels.ErrUnsupported).
func (p *Provider) GetKernel(spec Spec) (*Kernel, error) {
	e, err := p.enter("get a kernel", accessDriver)
	if err != nil {
		return nil, err
	}
	defer e.leave()
	k, err := p.lib.Get(spec)
	if err != nil {
		return nil, fmt.Errorf("ep: get kernel: %w", err)
	}
	ins := make([]TensorInfo, len(spec.Inputs))
	for i, in := range spec.Inputs {
		ins[i] = TensorInfo{DType: in.DType, Shape: slices.Clone(in.Shape)}
	}
	return &Kernel{p: p, k: k, ins: ins, view: isView(spec, k.Outputs())}, nil
}

// View reports whether the kernel's output is its first input's bytes unchanged under another
// shape: Reshape, Squeeze, Unsqueeze and Identity; a Transpose that moves only axes of length
// 1; an Expand or a Cast that changes nothing. A plan may then alias the output to the input
// instead of executing the kernel (Execute still copies).
func (k *Kernel) View() bool { return k.view }

// isView reports whether a kernel built for spec, with outputs outs, only renames its first
// input's bytes.
func isView(spec Spec, outs []TensorInfo) bool {
	if len(outs) != 1 || len(spec.Inputs) == 0 || outs[0].Bytes() != spec.Inputs[0].Bytes() ||
		outs[0].DType != spec.Inputs[0].DType {
		return false
	}
	in := spec.Inputs[0]
	switch spec.Op {
	case "Reshape", "Squeeze", "Unsqueeze", "Identity":
		return true
	case "Expand", "Cast":
		return in.Equal(outs[0])
	case "Transpose":
		a, ok := spec.Attrs["perm"]
		if !ok {
			return in.Rank() < 2 // the default reverses the axes
		}
		// The axes longer than 1 must keep their order.
		last := -1
		for _, ax := range a.Ints() {
			if ax < 0 || int(ax) >= in.Rank() {
				return false
			}
			if in.Shape[ax] == 1 {
				continue
			}
			if int(ax) < last {
				return false
			}
			last = int(ax)
		}
		return true
	}
	return false
}

// InPlace reports whether Execute may be given the kernel's output (by index) in the memory
// of input (by index): the elementwise unary and binary ops and Where, for an input of the
// output's dtype and shape, and cudaep.WherePair, each output for its own X or Y. The result is
// then the out-of-place one, and a Where stores only the elements it takes from its other
// operand: a key/value cache that is both a Where's Y and its output is updated at its one new
// position, not copied. A plan may map such an output onto the input's memory when nothing
// reads the input after the kernel.
func (k *Kernel) InPlace(output, input int) bool { return kernels.InPlace(k.k, output, input) }

// Variant names the kernel of its op family the provider chose, where a family has several:
// for Attention "decode" (fewer than 16 query rows), "flash" (tensor cores: float16 and
// bfloat16 of head size 64 or 128, on compute capability 8.0 or later) or "prefill" (float32
// arithmetic). Other kernels: "".
func (k *Kernel) Variant() string { return kernels.Variant(k.k) }

// Name describes the kernel, e.g. "Add(float32[2,3], float32[3])".
func (k *Kernel) Name() string { return k.k.Name() }

// Outputs returns the dtypes and shapes of the outputs Execute must be given.
func (k *Kernel) Outputs() []TensorInfo { return k.k.Outputs() }

// CaptureSupport says whether the kernel may be recorded into a CUDA graph, and if not why.
func (k *Kernel) CaptureSupport() CaptureSupport { return k.k.CaptureSupport() }

// Execute queues the operator on the provider's compute stream; it does not wait. Inside a
// capture on this thread the work is recorded instead; during a capture on another thread it
// is refused with ErrCaptureLive.
//
// # Errors
//
// Tensors that differ from what GetKernel was given wrap kernels.ErrTensorMismatch, before the
// capture window's refusals (ErrCaptureLive, ErrThreadCaptures): argument errors come first.
func (k *Kernel) Execute(inputs, outputs []Tensor) error {
	e, err := k.p.enter("execute a kernel", accessRecord)
	if err != nil {
		// Refused without the kernel: report a bad tensor first, as the kernel would have.
		if terr := checkTensors(k.Name(), inputs, k.ins, outputs, k.k.Outputs()); terr != nil {
			return terr
		}
		return err
	}
	defer e.leave()
	return k.k.Execute(inputs, outputs)
}

// checkTensors is the kernels' check of Execute's tensors (count, dtype and shape, a device
// address for every tensor with elements, element alignment), for a call refused before the
// kernel saw them. It returns nil when they are right or the kernel's inputs are unknown.
func checkTensors(name string, ins []Tensor, wantIns []TensorInfo, outs []Tensor, wantOuts []TensorInfo) error {
	for _, set := range []struct {
		role string
		got  []Tensor
		want []TensorInfo
	}{{"input", ins, wantIns}, {"output", outs, wantOuts}} {
		if len(set.got) != len(set.want) {
			return fmt.Errorf("%w: %s: %d %ss, want %d", kernels.ErrTensorMismatch, name, len(set.got), set.role, len(set.want))
		}
		for i, t := range set.got {
			if !t.TensorInfo.Equal(set.want[i]) {
				return fmt.Errorf("%w: %s: %s %d is %s, want %s", kernels.ErrTensorMismatch, name, set.role, i, t.TensorInfo, set.want[i])
			}
			if t.NumElements() == 0 || absent(set.want[i]) {
				continue // no bytes, or an optional input the node leaves out (the zero Tensor)
			}
			if t.Ptr == 0 {
				return fmt.Errorf("%w: %s: %s %d has a zero device address", kernels.ErrTensorMismatch, name, set.role, i)
			}
			if size := cudadrv.DevicePtr(t.DType.Size()); size > 1 && t.Ptr%size != 0 {
				return fmt.Errorf("%w: %s: %s %d at device address %#x is not aligned to its %d-byte %s elements",
					kernels.ErrTensorMismatch, name, set.role, i, uint64(t.Ptr), size, t.DType)
			}
		}
	}
	return nil
}

// BroadcastShapes returns the numpy (ONNX multidirectional) broadcast of the shapes the kernels
// apply, or false when they do not broadcast.
var BroadcastShapes = kernels.BroadcastShapes

// absent reports whether info is an optional input a node leaves out: the zero TensorInfo,
// which Spec.Inputs and Execute take for it.
func absent(info TensorInfo) bool { return info.DType == 0 && len(info.Shape) == 0 }

// NonZeroCount reads the element count a NonZero kernel found in its last execution (count is
// its second output). It waits for the compute stream: this host read is why NonZero is a
// seam between captured segments, and why it is refused with ErrCaptureLive during a capture.
func (k *Kernel) NonZeroCount(count Tensor) (int64, error) {
	nz, ok := k.k.(*kernels.NonZeroKernel)
	if !ok {
		return 0, fmt.Errorf("ep: %s is not a NonZero kernel", k.k.Name())
	}
	e, err := k.p.enter("read the NonZero count (it synchronizes the stream)", accessDriver)
	if err != nil {
		// Argument errors first: a count tensor the kernel would refuse.
		if terr := checkTensors(k.Name(), nil, nil, []Tensor{count}, k.k.Outputs()[1:]); terr != nil {
			return 0, terr
		}
		return 0, err
	}
	defer e.leave()
	return nz.Count(count)
}
