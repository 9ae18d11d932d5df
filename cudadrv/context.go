package cudadrv

import (
	"errors"
	"sync/atomic"
)

// Context is a retained primary context of one device, and the owner of everything created
// through it. Its methods are safe for concurrent use; driver calls run in whichever context
// is current on the calling OS thread, so bind it first (Bind).
type Context struct {
	b        Backend
	dev      *Device
	raw      RawContext
	released atomic.Bool
	sticky   atomic.Pointer[Error]
	count    counters
}

// Device returns the context's device.
func (c *Context) Device() *Device { return c.dev }

// Backend returns the backend the context runs on.
func (c *Context) Backend() Backend { return c.b }

// Raw returns the driver's context handle.
func (c *Context) Raw() RawContext { return c.raw }

// Bind makes c current on the calling OS thread (cuCtxSetCurrent). The binding belongs to the
// thread, not the goroutine: lock the goroutine to its thread (runtime.LockOSThread) for as
// long as it relies on the binding.
func (c *Context) Bind() error {
	if c.released.Load() {
		return ErrDestroyed
	}
	return c.note(c.b.CtxSetCurrent(c.raw))
}

// Release releases the primary context. Everything created through it must be destroyed
// first. A second Release returns ErrDestroyed.
func (c *Context) Release() error {
	if !c.released.CompareAndSwap(false, true) {
		return ErrDestroyed
	}
	return c.b.PrimaryCtxRelease(c.dev.ordinal)
}

// Synchronize blocks until all work in the context is done (cuCtxSynchronize). During a live
// stream capture this invalidates the capture (it is an unsafe call): callers that may run
// beside a capture wait for the capture gate first.
func (c *Context) Synchronize() error { return c.note(c.b.CtxSynchronize()) }

// MemInfo returns the free and total device memory in bytes.
func (c *Context) MemInfo() (free, total uint64, err error) {
	free, total, err = c.b.MemGetInfo()
	return free, total, c.note(err)
}

// StreamPriorityRange returns the least and greatest stream priorities (greatest is the
// numerically lowest: CUDA's higher priority is a smaller number).
func (c *Context) StreamPriorityRange() (least, greatest int, err error) {
	least, greatest, err = c.b.StreamPriorityRange()
	return least, greatest, c.note(err)
}

// Counters returns a snapshot of the context's resource counters.
func (c *Context) Counters() Counters { return c.count.snapshot() }

// StickyError returns the first sticky driver error seen in this context (a kernel fault such
// as ErrorIllegalAddress), or nil. After one, every driver call in the context fails; the
// context must be torn down.
func (c *Context) StickyError() error {
	if e := c.sticky.Load(); e != nil {
		return e
	}
	return nil
}

// RetractSticky forgets err as the context's sticky error when err is the very error recorded
// (the same *Error). It is for a caller that has learned that the call which returned err ran
// while another context, or none, was current on its thread, so that the error was not this
// context's: the caller bound this context and repeated the call, and it succeeded. A sticky
// error recorded by any other call stays.
func (c *Context) RetractSticky(err error) {
	var e *Error
	if errors.As(err, &e) {
		c.sticky.CompareAndSwap(e, nil)
	}
}

// note remembers a sticky error and returns err unchanged. It costs nothing on success.
func (c *Context) note(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) && e.Result.Sticky() {
		c.sticky.CompareAndSwap(nil, e)
	}
	return err
}
