package ep

import (
	"fmt"
	"runtime"

	"github.com/cudaep/cudaep/ep/kernels"
)

// ErrDataFault is wrapped by the error a provider reports for bad device data: a value one of
// its kernels read from device memory and could not use (a Gather index outside its axis, an
// integer divisor of 0, a GroupQueryAttention length outside its cache, a rotary position
// outside the cos/sin caches), where ONNX Runtime's CPU execution provider stops with an
// error. The kernel's outputs of that execution are memory-safe but not meaningful. Its code
// is CodeInvalidArgument.
var ErrDataFault = kernels.ErrDataFault

// DataFault is the error that names a data fault: the kernel (FaultID, node name, op), the
// input and the value. errors.As finds it in the errors that report one.
type DataFault = kernels.DataFault

// TakeDataFault returns the first data fault the provider's kernels recorded since the last
// one was taken or reported, as an error wrapping a *DataFault (nil when there was none), and
// forgets it. It does not wait: a kernel's fault is seen once the kernel has ended. The calls
// that wait for the compute stream (SynchronizeCompute, ForceSynchronize, CopyToHost, and
// CopyToDevice of more than 64 KiB) report a fault themselves, so a host that waits through
// them needs no other call; this is for one that waits otherwise (an event, another stream).
//
// With no fault it reads one word of host memory and calls no driver function (it is safe
// during a capture and allocates nothing); taking a fault clears the device's fault word,
// which binds the provider's context on the calling thread. Safe for concurrent use.
func (p *Provider) TakeDataFault() error {
	if !p.lib.FaultPending() {
		return nil
	}
	// The bind and the clearing copy must run on one OS thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.ctx.Bind(); err != nil {
		return p.bindFailed("take a data fault", err)
	}
	return p.takeDataFault()
}

// takeDataFault is TakeDataFault with the provider's context bound on the calling thread.
func (p *Provider) takeDataFault() error {
	f, err := p.lib.TakeFault()
	if err != nil {
		return fmt.Errorf("ep: read the data fault word: %w", err)
	}
	if f != nil {
		return fmt.Errorf("ep: bad device data: %w", f)
	}
	return nil
}
