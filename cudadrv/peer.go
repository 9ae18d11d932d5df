package cudadrv

import "fmt"

// CanAccessPeer reports whether dev can access the memory of peer directly over the
// interconnect (cuDeviceCanAccessPeer). A device and itself answer false, as the driver does:
// a copy within one device needs no peer access.
//
// # Errors
//
// A peer of another driver is refused with ErrorInvalidDevice; the driver's errors.
func (dev *Device) CanAccessPeer(peer *Device) (bool, error) {
	if peer == nil || peer.d != dev.d {
		return false, &Error{Op: "cuDeviceCanAccessPeer", Result: ErrorInvalidDevice, Detail: "the peer device belongs to another driver"}
	}
	return dev.d.b.DeviceCanAccessPeer(dev.ordinal, peer.ordinal)
}

// EnablePeerAccess lets c's device read and write the memory of peer's device directly
// (cuCtxEnablePeerAccess in c for peer). c must be current on the calling OS thread (Bind).
// It is idempotent: a pair already enabled, by this call or by any other user of the two
// primary contexts, is success. Access is one-way; enable the other direction in peer.
//
// # Errors
//
// A released context is ErrDestroyed; a pair the devices cannot form, c's own device
// included, is an *Error with ErrorPeerAccessUnsupported (the driver's answer on the H200 for
// a context and itself), and too many peers ErrorTooManyPeers.
func (c *Context) EnablePeerAccess(peer *Context) error {
	if c.released.Load() {
		return ErrDestroyed
	}
	if peer == nil || peer.released.Load() {
		return fmt.Errorf("cudadrv: enable peer access: %w", ErrDestroyed)
	}
	err := c.b.CtxEnablePeerAccess(peer.raw)
	if ResultOf(err) == ErrorPeerAccessAlreadyEnabled {
		return nil
	}
	return c.note(err)
}

// CopyPeerAsync queues on s a copy of size bytes from src, device memory of srcCtx, to dst,
// device memory of dstCtx (cuMemcpyPeerAsync); the two contexts may be of different devices.
// The stream's context must be current on the calling OS thread. It allocates nothing.
//
// # Notes
//
// The driver copies directly over the interconnect when the devices have peer access
// (EnablePeerAccess) and stages through host memory on its own otherwise; the simulator is
// stricter and refuses a copy between two contexts whose destination has not enabled access
// to the source (ErrorPeerAccessNotEnabled), so that code claiming the direct path is proved
// to have enabled it.
func (s *Stream) CopyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, size uint64) error {
	if err := s.live(); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	if dstCtx == nil || srcCtx == nil || dstCtx.released.Load() || srcCtx.released.Load() {
		return fmt.Errorf("cudadrv: peer copy: %w", ErrDestroyed)
	}
	return s.ctx.note(s.ctx.b.MemcpyPeerAsync(dst, dstCtx.raw, src, srcCtx.raw, size, s.raw))
}
