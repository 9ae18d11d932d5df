package cudadrv

import (
	"strconv"
	"sync/atomic"
)

// Stream is an in-order queue of device work. Enqueue methods return as soon as the work is
// queued; their host slices must stay alive and unchanged until the work has run. A Stream is
// safe for concurrent use, but the order of work enqueued from several goroutines at once is
// the order the calls happen to run in.
type Stream struct {
	ctx       *Context
	raw       RawStream
	destroyed atomic.Bool
}

// NewStream creates a stream with the given flags and priority (see StreamPriorityRange; a
// smaller number is a higher priority).
func (c *Context) NewStream(flags StreamFlags, priority int) (*Stream, error) {
	raw, err := c.b.StreamCreate(flags, priority)
	if err != nil {
		return nil, c.note(err)
	}
	c.count.streamsCreated.Add(1)
	return &Stream{ctx: c, raw: raw}, nil
}

// Context returns the stream's context.
func (s *Stream) Context() *Context { return s.ctx }

// Raw returns the driver's stream handle.
func (s *Stream) Raw() RawStream { return s.raw }

// live returns ErrDestroyed once the stream was destroyed, so that a dangling handle never
// reaches the driver.
func (s *Stream) live() error {
	if s == nil {
		return errNilStream
	}
	if s.destroyed.Load() {
		return ErrDestroyed
	}
	return nil
}

// Destroy waits for the stream's work and destroys it; a second call returns ErrDestroyed.
func (s *Stream) Destroy() error {
	if s == nil {
		return errNilStream
	}
	if !s.destroyed.CompareAndSwap(false, true) {
		return ErrDestroyed
	}
	if err := s.ctx.b.StreamDestroy(s.raw); err != nil {
		return s.ctx.note(err)
	}
	s.ctx.count.streamsDestroyed.Add(1)
	return nil
}

// Synchronize blocks until all work queued on s is done. Inside a live capture of s it fails
// and invalidates the capture, as in CUDA.
func (s *Stream) Synchronize() error {
	if err := s.live(); err != nil {
		return err
	}
	return s.ctx.note(s.ctx.b.StreamSynchronize(s.raw))
}

// Query reports whether all work queued on s is done, without blocking.
func (s *Stream) Query() (bool, error) {
	if err := s.live(); err != nil {
		return false, err
	}
	err := s.ctx.b.StreamQuery(s.raw)
	if err == nil {
		return true, nil
	}
	if ResultOf(err) == ErrorNotReady {
		return false, nil
	}
	return false, s.ctx.note(err)
}

// WaitEvent makes later work on s wait until e's most recent record has completed, without
// blocking the host.
func (s *Stream) WaitEvent(e *Event) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := e.live(); err != nil {
		return err
	}
	return s.ctx.note(s.ctx.b.StreamWaitEvent(s.raw, e.raw))
}

// CopyHtoDAsync queues a copy of src to device memory at dst. It allocates nothing.
func (s *Stream) CopyHtoDAsync(dst DevicePtr, src []byte) error {
	if err := s.live(); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return s.ctx.note(s.ctx.b.MemcpyHtoDAsync(dst, src, s.raw))
}

// CopyDtoHAsync queues a copy of len(dst) bytes from device memory at src. It allocates
// nothing.
func (s *Stream) CopyDtoHAsync(dst []byte, src DevicePtr) error {
	if err := s.live(); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	return s.ctx.note(s.ctx.b.MemcpyDtoHAsync(dst, src, s.raw))
}

// CopyDtoDAsync queues a device-to-device copy of size bytes. It allocates nothing.
func (s *Stream) CopyDtoDAsync(dst, src DevicePtr, size uint64) error {
	if err := s.live(); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	return s.ctx.note(s.ctx.b.MemcpyDtoDAsync(dst, src, size, s.raw))
}

// Memset8Async queues setting count bytes at dst to value.
func (s *Stream) Memset8Async(dst DevicePtr, value byte, count uint64) error {
	if err := s.live(); err != nil {
		return err
	}
	if count == 0 {
		return nil
	}
	return s.ctx.note(s.ctx.b.MemsetD8Async(dst, value, count, s.raw))
}

// Memset32Async queues setting count 32-bit words at dst to value.
func (s *Stream) Memset32Async(dst DevicePtr, value uint32, count uint64) error {
	if err := s.live(); err != nil {
		return err
	}
	if count == 0 {
		return nil
	}
	return s.ctx.note(s.ctx.b.MemsetD32Async(dst, value, count, s.raw))
}

// WriteValue32 queues a write of value to the 4-byte-aligned device address addr
// (cuStreamWriteValue32_v2): it runs after all work queued on s before it, behind a memory
// fence that makes that work's writes visible first, so a host that reads value at addr (in
// memory from Context.AllocHostMapped) knows that work is done. Inside a capture of s it is
// recorded as a graph node. It allocates nothing.
func (s *Stream) WriteValue32(addr DevicePtr, value uint32) error {
	if err := s.live(); err != nil {
		return err
	}
	return s.ctx.note(s.ctx.b.StreamWriteValue32(s.raw, addr, value))
}

// Launch queues kernel f over grid×block threads with sharedMem bytes of dynamic shared
// memory. It allocates nothing; args must be kept alive by the caller (it is read during the
// call only: the driver copies the argument values).
//
// # Errors
//
// More than MaxKernelArgs arguments is ErrorInvalidValue before anything is queued.
func (s *Stream) Launch(f *Function, grid, block Dim3, sharedMem uint32, args *KernelArgs) error {
	if err := s.live(); err != nil {
		return err
	}
	if f == nil || args == nil || args.Overflowed() {
		return errBadLaunch(f, args)
	}
	if err := f.mod.live(); err != nil {
		return err
	}
	return s.ctx.note(s.ctx.b.LaunchKernel(f.raw, grid, block, sharedMem, s.raw, args))
}

func errBadLaunch(f *Function, args *KernelArgs) error {
	switch {
	case f == nil:
		return &Error{Op: "cuLaunchKernel", Result: ErrorInvalidValue, Detail: "nil function"}
	case args == nil:
		return &Error{Op: "cuLaunchKernel", Result: ErrorInvalidValue, Detail: "nil argument list"}
	}
	return &Error{Op: "cuLaunchKernel", Result: ErrorInvalidValue,
		Detail: "more than " + strconv.Itoa(MaxKernelArgs) + " kernel arguments for " + f.name}
}

// BeginCapture starts recording work queued on s into a graph instead of running it
// (cuStreamBeginCapture). With CaptureModeThreadLocal or CaptureModeGlobal, EndCapture must
// run on the same OS thread: lock the goroutine to its thread for the whole capture.
func (s *Stream) BeginCapture(mode CaptureMode) error {
	if err := s.live(); err != nil {
		return err
	}
	return s.ctx.note(s.ctx.b.StreamBeginCapture(s.raw, mode))
}

// EndCapture ends the capture and returns the recorded graph. When the capture was
// invalidated it returns ErrorStreamCaptureInvalidated and no graph, and the stream is out of
// capture mode again (this is how an aborted capture is cleaned up).
func (s *Stream) EndCapture() (*Graph, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	raw, err := s.ctx.b.StreamEndCapture(s.raw)
	if err != nil {
		return nil, s.ctx.note(err)
	}
	if raw == 0 {
		return nil, &Error{Op: "cuStreamEndCapture", Result: ErrorStreamCaptureInvalidated, Detail: "no graph returned"}
	}
	s.ctx.count.graphsCreated.Add(1)
	return &Graph{ctx: s.ctx, raw: raw}, nil
}

// CaptureStatus returns whether s is capturing, and whether that capture was invalidated.
func (s *Stream) CaptureStatus() (CaptureStatus, error) {
	if err := s.live(); err != nil {
		return CaptureStatusNone, err
	}
	st, err := s.ctx.b.StreamCaptureStatus(s.raw)
	return st, s.ctx.note(err)
}

// IsCapturing reports whether s is in capture mode (active or invalidated).
func (s *Stream) IsCapturing() (bool, error) {
	st, err := s.CaptureStatus()
	return st != CaptureStatusNone, err
}
