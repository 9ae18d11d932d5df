package sim

import (
	"golang.org/x/sys/unix"

	"github.com/cudaep/cudaep/cudadrv"
)

// Stream priorities as CUDA reports them: lower numbers are higher priorities.
const (
	LeastStreamPriority    = 0
	GreatestStreamPriority = -5
)

// context is a GPU's primary context and everything created in it.
type context struct {
	handle    cudadrv.RawContext
	gpu       *gpu
	legacy    *stream              // the legacy default stream (handle 0)
	streams   map[*stream]struct{} // live created streams, without legacy
	sticky    *cudadrv.Error       // the first sticky fault, then every call fails with it
	peers     map[*context]bool    // contexts whose memory this one may access (CtxEnablePeerAccess)
	destroyed bool
}

// stickyError is the error every call in a faulted context returns.
func (c *context) stickyError(op string) error {
	return &cudadrv.Error{Op: op, Result: c.sticky.Result, Detail: c.sticky.Detail}
}

// setSticky records the context's first sticky fault. d.mu is held.
func (c *context) setSticky(r cudadrv.Result, detail string) {
	if c.sticky == nil {
		c.sticky = &cudadrv.Error{Result: r, Detail: detail}
	}
}

// PrimaryCtxRetain retains the primary context of ordinal, creating it (with a new handle) when
// its count was zero.
func (d *Device) PrimaryCtxRetain(ordinal int) (cudadrv.RawContext, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpPrimaryCtxRetain); err != nil {
		return 0, err
	}
	g, err := d.gpu(OpPrimaryCtxRetain, ordinal)
	if err != nil {
		return 0, err
	}
	if g.ctx == nil {
		c := &context{
			handle:  cudadrv.RawContext(d.handle()),
			gpu:     g,
			streams: map[*stream]struct{}{},
		}
		c.legacy = d.newStream(c, 0, 0, true)
		g.ctx = c
		d.contexts[c.handle] = c
	}
	g.refs++
	return g.ctx.handle, nil
}

// PrimaryCtxRelease drops one reference to ordinal's primary context. The last release drains
// the context's streams and destroys it with everything created in it: streams, events,
// modules, graph executables, cuBLAS handles and device allocations. Threads that still have it
// current then get CUDA_ERROR_INVALID_CONTEXT.
func (d *Device) PrimaryCtxRelease(ordinal int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpPrimaryCtxRelease); err != nil {
		return err
	}
	g, err := d.gpu(OpPrimaryCtxRelease, ordinal)
	if err != nil {
		return err
	}
	if g.refs == 0 {
		return fail(OpPrimaryCtxRelease, cudadrv.ErrorInvalidContext, "the primary context of device %d is not retained", ordinal)
	}
	g.refs--
	if g.refs == 0 {
		d.destroyContext(g.ctx)
		g.ctx = nil
	}
	return nil
}

// destroyContext drains and tears down c. d.mu is held (and released while waiting).
func (d *Device) destroyContext(c *context) {
	c.destroyed = true
	delete(d.contexts, c.handle)
	d.forgetPeer(c)
	for cp := range d.captures {
		if cp.ctx == c {
			d.endCapture(cp)
		}
	}
	all := append([]*stream{c.legacy}, c.streamList()...)
	for _, s := range all {
		d.stopStream(s)
	}
	for h, e := range d.events {
		if e.ctx == c {
			delete(d.events, h)
		}
	}
	for h, m := range d.modules {
		if m.ctx == c {
			d.unloadModule(h, m)
		}
	}
	for h, x := range d.execs {
		if x.ctx == c {
			delete(d.execs, h)
		}
	}
	for h, b := range d.blas {
		if b.ctx == c {
			delete(d.blas, h)
		}
	}
	d.mem.freeContext(c)
}

// streamList returns c's created streams (not legacy) in no particular order.
func (c *context) streamList() []*stream {
	out := make([]*stream, 0, len(c.streams))
	for s := range c.streams {
		out = append(out, s)
	}
	return out
}

// CtxSetCurrent binds ctx to the calling OS thread; zero unbinds.
func (d *Device) CtxSetCurrent(ctx cudadrv.RawContext) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpCtxSetCurrent); err != nil {
		return err
	}
	tid := unix.Gettid()
	if ctx == 0 {
		delete(d.current, tid)
		return nil
	}
	c := d.contexts[ctx]
	if c == nil {
		return fail(OpCtxSetCurrent, cudadrv.ErrorInvalidContext, "context %#x does not exist", uintptr(ctx))
	}
	d.current[tid] = c
	return nil
}

// CtxGetCurrent returns the context bound to the calling OS thread, or zero.
func (d *Device) CtxGetCurrent() (cudadrv.RawContext, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpCtxGetCurrent); err != nil {
		return 0, err
	}
	if c := d.current[unix.Gettid()]; c != nil {
		return c.handle, nil
	}
	return 0, nil
}

// CtxSynchronize waits for all work queued in the current context so far.
//
// # Errors
//
// While any capture is live in the context, from any thread and in any mode, it fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates those captures (measured on the
// H200 for a thread-local capture and another thread). A sticky fault is returned after the
// wait.
func (d *Device) CtxSynchronize() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpCtxSynchronize)
	if err != nil {
		return err
	}
	if n := d.invalidateWhere(c, func(*capture) bool { return true }, "cuCtxSynchronize while capturing"); n > 0 {
		return fail(OpCtxSynchronize, cudadrv.ErrorStreamCaptureUnsupported, "%d stream capture(s) live in this context were invalidated", n)
	}
	return d.drainContext(OpCtxSynchronize, c)
}

// drainContext waits until every stream of c has run what was queued at the call. d.mu held.
func (d *Device) drainContext(op string, c *context) error {
	all := append([]*stream{c.legacy}, c.streamList()...)
	for _, s := range all {
		if err := d.waitStream(op, s, s.enq); err != nil {
			return err
		}
	}
	if c.sticky != nil {
		return c.stickyError(op)
	}
	return nil
}

// MemGetInfo reports the current context's device memory: free is the total minus the live
// allocations (each rounded up to the allocation granule).
func (d *Device) MemGetInfo() (free, total uint64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemGetInfo)
	if err != nil {
		return 0, 0, err
	}
	return d.opts.TotalMemory - c.gpu.used, d.opts.TotalMemory, nil
}

// StreamPriorityRange returns (LeastStreamPriority, GreatestStreamPriority), i.e. (0, -5).
func (d *Device) StreamPriorityRange() (least, greatest int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.enter(OpStreamPriorityRange); err != nil {
		return 0, 0, err
	}
	return LeastStreamPriority, GreatestStreamPriority, nil
}
