package sim

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

// faults holds the armed fault injections, by entry point. Guarded by d.mu.
type faults struct {
	pending map[string][]*armedFault
}

// armedFault fails the call on which left reaches zero.
type armedFault struct {
	left   int
	result cudadrv.Result
	status cudadrv.BLASStatus // for cuBLAS entry points
}

func (f *faults) arm(op string, nth int, a *armedFault) {
	if !opNames[op] {
		panic(fmt.Sprintf("sim: InjectFault: unknown entry point %q (use the sim.Op* constants)", op))
	}
	if nth < 1 {
		panic(fmt.Sprintf("sim: InjectFault: nth is %d; 1 means the next call", nth))
	}
	if f.pending == nil {
		f.pending = map[string][]*armedFault{}
	}
	a.left = nth
	f.pending[op] = append(f.pending[op], a)
}

// take counts one call of op and returns the injected error if this call is one to fail.
// An injected sticky result also faults the calling thread's current context, as the real
// fault would. d.mu is held.
func (f *faults) take(op string, d *Device) error {
	if len(f.pending) == 0 {
		return nil
	}
	list := f.pending[op]
	if len(list) == 0 {
		return nil
	}
	var fired *armedFault
	kept := list[:0]
	for _, a := range list {
		a.left--
		if a.left == 0 {
			if fired == nil {
				fired = a
			}
			continue
		}
		kept = append(kept, a)
	}
	if len(kept) == 0 {
		delete(f.pending, op)
	} else {
		f.pending[op] = kept
	}
	if fired == nil {
		return nil
	}
	if blasOps[op] {
		return &cudadrv.BLASError{Op: op, Status: fired.status, Detail: "injected fault"}
	}
	if fired.result.Sticky() {
		if c := d.currentContext(); c != nil {
			c.setSticky(fired.result, "injected fault in "+op)
		}
	}
	return &cudadrv.Error{Op: op, Result: fired.result, Detail: "injected fault"}
}

// InjectFault makes the nth subsequent call (1 = the next) of the entry point op fail with r
// before doing anything; calls are counted on every goroutine. op is one of the Op*
// constants; an asynchronous operation fails at enqueue. For a cuBLAS entry point the call
// fails with CUBLAS_STATUS_EXECUTION_FAILED (use InjectBLASFault to choose the status). An
// injected sticky result (such as CUDA_ERROR_ILLEGAL_ADDRESS) also faults the calling
// thread's current context. Several injections may be armed at once.
//
// InjectFault panics on an unknown op, nth < 1 or r == cudadrv.Success: those are mistakes
// in the test that calls it.
func (d *Device) InjectFault(op string, nth int, r cudadrv.Result) {
	if r == cudadrv.Success {
		panic("sim: InjectFault: the result to inject is CUDA_SUCCESS")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fault.arm(op, nth, &armedFault{result: r, status: cudadrv.BLASExecutionFailed})
}

// InjectBLASFault is InjectFault for a cuBLAS entry point (OpBLASCreate … OpGemmStridedBatchedEx)
// failing with status s. It panics when op is not a cuBLAS entry point, nth < 1 or s is
// success.
func (d *Device) InjectBLASFault(op string, nth int, s cudadrv.BLASStatus) {
	if !blasOps[op] {
		panic(fmt.Sprintf("sim: InjectBLASFault: %q is not a cuBLAS entry point", op))
	}
	if s == cudadrv.BLASSuccess {
		panic("sim: InjectBLASFault: the status to inject is CUBLAS_STATUS_SUCCESS")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fault.arm(op, nth, &armedFault{status: s})
}

// ClearFaults disarms every pending injection.
func (d *Device) ClearFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fault.pending = nil
}
