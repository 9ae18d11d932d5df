package sim

import (
	"github.com/cudaep/cudaep/cudadrv"
)

// Peer access between simulated devices.
//
// Every device's memory lives in one address space (unified addressing), so a copy between
// two devices' allocations is an ordinary device copy once it is queued. What the simulator
// models is the rule around it: which pairs of devices can reach each other
// (Options.PeerAccess), the per-context enablement (CtxEnablePeerAccess, idempotent only in
// that a second enable reports CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED), and cuMemcpyPeerAsync,
// whose ranges must lie in allocations of the contexts it names.
//
// The driver copies between contexts without enabled access too, staging through host memory
// on its own; the simulator refuses such a copy with CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, so
// that a caller claiming the direct path is proved to have enabled it. A program correct on the
// simulator is correct on the driver; the converse need not hold.

// canAccessPeer applies Options.PeerAccess to two distinct ordinals. d.mu is held.
func (d *Device) canAccessPeer(device, peer int) bool {
	if device == peer {
		return false
	}
	if d.opts.PeerAccess == nil {
		return true
	}
	return d.opts.PeerAccess(device, peer)
}

// DeviceCanAccessPeer reports whether device ordinal can access device peer's memory: false
// for a device and itself, else Options.PeerAccess (every pair when it is nil).
//
// # Errors
//
// CUDA_ERROR_INVALID_DEVICE for an ordinal outside [0, Options.Devices).
func (d *Device) DeviceCanAccessPeer(ordinal, peer int) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpDeviceCanAccessPeer); err != nil {
		return false, err
	}
	if _, err := d.gpu(OpDeviceCanAccessPeer, ordinal); err != nil {
		return false, err
	}
	if _, err := d.gpu(OpDeviceCanAccessPeer, peer); err != nil {
		return false, err
	}
	return d.canAccessPeer(ordinal, peer), nil
}

// CtxEnablePeerAccess lets the current context access the memory of the context peer, until
// either context is destroyed.
//
// # Errors
//
// CUDA_ERROR_INVALID_CONTEXT for a peer that does not exist (destroyed or never made);
// CUDA_ERROR_PEER_ACCESS_UNSUPPORTED for a peer context of the current context's own device
// (what the driver answered on the H200 for a context and itself) and when Options.PeerAccess
// denies the pair;
// CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED when it is enabled already.
func (d *Device) CtxEnablePeerAccess(peer cudadrv.RawContext) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpCtxEnablePeerAccess)
	if err != nil {
		return err
	}
	pc := d.contexts[peer]
	if pc == nil {
		return fail(OpCtxEnablePeerAccess, cudadrv.ErrorInvalidContext, "peer context %#x does not exist (released or never retained)", uintptr(peer))
	}
	if pc.gpu == c.gpu {
		return fail(OpCtxEnablePeerAccess, cudadrv.ErrorPeerAccessUnsupported, "the peer context is of the current context's own device %d", c.gpu.ordinal)
	}
	if !d.canAccessPeer(c.gpu.ordinal, pc.gpu.ordinal) {
		return fail(OpCtxEnablePeerAccess, cudadrv.ErrorPeerAccessUnsupported, "device %d cannot access device %d (Options.PeerAccess)", c.gpu.ordinal, pc.gpu.ordinal)
	}
	if c.peers[pc] {
		return fail(OpCtxEnablePeerAccess, cudadrv.ErrorPeerAccessAlreadyEnabled, "device %d already accesses device %d", c.gpu.ordinal, pc.gpu.ordinal)
	}
	if c.peers == nil {
		c.peers = map[*context]bool{}
	}
	c.peers[pc] = true
	return nil
}

// forgetPeer drops every other context's access to c, which is being destroyed. d.mu is held.
func (d *Device) forgetPeer(c *context) {
	for _, other := range d.contexts {
		delete(other.peers, c)
	}
	c.peers = nil
}

// MemcpyPeerAsync queues on stream h (of the current context) a copy of size bytes from src,
// in an allocation of context srcCtx, to dst, in an allocation of context dstCtx. Between two
// contexts it needs dstCtx to have enabled access to srcCtx (see the note at the top of this
// file); within one context it is MemcpyDtoDAsync. On a capturing stream it is recorded.
//
// # Errors
//
// CUDA_ERROR_INVALID_CONTEXT for a context that does not exist; CUDA_ERROR_INVALID_VALUE for a
// range that is not inside one live device allocation of the context named for it;
// CUDA_ERROR_PEER_ACCESS_NOT_ENABLED as above; a stream of another context,
// CUDA_ERROR_INVALID_HANDLE.
func (d *Device) MemcpyPeerAsync(dst cudadrv.DevicePtr, dstCtx cudadrv.RawContext, src cudadrv.DevicePtr, srcCtx cudadrv.RawContext, size uint64, h cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemcpyPeerAsync)
	if err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	dc, sc := d.contexts[dstCtx], d.contexts[srcCtx]
	if dc == nil || sc == nil {
		return fail(OpMemcpyPeerAsync, cudadrv.ErrorInvalidContext, "the destination context %#x or the source context %#x does not exist", uintptr(dstCtx), uintptr(srcCtx))
	}
	if err := d.checkOwned(OpMemcpyPeerAsync, "source", src, size, sc); err != nil {
		return err
	}
	if err := d.checkOwned(OpMemcpyPeerAsync, "destination", dst, size, dc); err != nil {
		return err
	}
	if dc != sc && !dc.peers[sc] {
		return fail(OpMemcpyPeerAsync, cudadrv.ErrorPeerAccessNotEnabled, "device %d has not enabled access to device %d (cuCtxEnablePeerAccess)", dc.gpu.ordinal, sc.gpu.ordinal)
	}
	o := op{kind: opDtoD, dst: dst, src: src, size: size}
	return d.asyncOp(OpMemcpyPeerAsync, c, h, &o)
}

// checkOwned validates that [p, p+n) lies in one live device allocation of context c. d.mu is
// held.
func (d *Device) checkOwned(op, what string, p cudadrv.DevicePtr, n uint64, c *context) error {
	a, _, err := d.mem.find(p, n)
	if err != nil {
		return fail(op, cudadrv.ErrorInvalidValue, "%s: %v", what, err)
	}
	if a.ctx != c {
		if a.ctx == nil {
			return fail(op, cudadrv.ErrorInvalidValue, "%s %#x is mapped host memory, not device memory of device %d", what, uint64(p), c.gpu.ordinal)
		}
		return fail(op, cudadrv.ErrorInvalidValue, "%s %#x is memory of device %d, not of device %d as named", what, uint64(p), a.ctx.gpu.ordinal, c.gpu.ordinal)
	}
	return nil
}

// checkCrossDevice refuses a plain device copy (MemcpyDtoD, MemcpyDtoDAsync) between
// allocations of two devices whose destination has not enabled access to the source. Unified
// addressing lets the driver take such a copy (staging it itself when the devices cannot reach
// each other); the simulator is stricter, as with MemcpyPeerAsync, so that code that moves
// bytes between devices says so (cuMemcpyPeerAsync, or staging of its own). Mapped host memory
// is reachable from every device. d.mu is held; both ranges were checked.
func (d *Device) checkCrossDevice(op string, dst, src cudadrv.DevicePtr) error {
	da, _, _ := d.mem.find(dst, 1)
	sa, _, _ := d.mem.find(src, 1)
	if da == nil || sa == nil || da.ctx == nil || sa.ctx == nil || da.ctx == sa.ctx || da.ctx.peers[sa.ctx] {
		return nil
	}
	return fail(op, cudadrv.ErrorPeerAccessNotEnabled, "a device copy from device %d's memory to device %d's, which has not enabled access to it: the simulator refuses what the driver would stage silently (use cuMemcpyPeerAsync after cuCtxEnablePeerAccess, or stage through host memory)",
		sa.ctx.gpu.ordinal, da.ctx.gpu.ordinal)
}
