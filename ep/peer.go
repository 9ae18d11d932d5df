package ep

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cudaep/cudaep/cudadrv"
)

// PeerPath says how CopyPeer moved the bytes.
type PeerPath uint8

// The paths of a CopyPeer. The numbers are the C ABI's CUDAEP_PEER_PATH_* values.
const (
	// PeerPathNone: nothing was copied (a zero-byte copy).
	PeerPathNone PeerPath = 0
	// PeerPathDevice: both buffers live on one device; an ordinary device copy.
	PeerPathDevice PeerPath = 1
	// PeerPathDirect: between two devices that can reach each other, over the interconnect
	// (cuMemcpyPeerAsync, with the destination's access to the source enabled once per pair).
	PeerPathDirect PeerPath = 2
	// PeerPathStaged: between two devices that cannot reach each other, through pinned host
	// memory in chunks (a device-to-host copy on the source side, a host-to-device copy on the
	// destination side, double-buffered).
	PeerPathStaged PeerPath = 3
)

// String names the path: "none", "device", "direct" or "staged".
func (p PeerPath) String() string {
	switch p {
	case PeerPathNone:
		return "none"
	case PeerPathDevice:
		return "device"
	case PeerPathDirect:
		return "direct"
	case PeerPathStaged:
		return "staged"
	}
	return fmt.Sprintf("PeerPath(%d)", uint8(p))
}

// DefaultPeerChunk is the size of each of the two pinned staging slots of a staged peer copy
// (allocated on a provider's first staged copy into it, kept until Close).
const DefaultPeerChunk = 8 << 20

// PeerStats count the peer copies a provider made as the destination side, by path, and
// their bytes.
type PeerStats struct {
	Device, Direct, Staged uint64 // copies
	Bytes                  uint64 // bytes copied by all of them
	// EnabledPeers counts the devices this provider's context was given direct access to.
	EnabledPeers uint64
}

// peerIDs numbers providers in the order they first take part in a peer copy: the order in
// which a copy enters two providers' capture windows, so that two copies in opposite
// directions never wait for each other's windows (a capture pending on one of them would
// otherwise deadlock both).
var peerIDs atomic.Uint64

// peerSide is a provider's part in peer copies: events that order its compute stream against
// another provider's, the pinned staging slots of copies staged into it, and what it learned
// about reaching other devices. Everything driver-made is made on first use, in the provider's
// context, and given back by close.
type peerSide struct {
	idOnce sync.Once
	id     uint64

	mu      sync.Mutex
	ready   *cudadrv.Event     // recorded on compute: the source side's work so far
	done    *cudadrv.Event     // recorded on compute: the destination side's copy so far
	reach   map[int]bool       // device ordinal → this device can access its memory
	enabled map[*Provider]bool // providers (of other devices) this context has access to

	// staging serializes staged copies into this provider: they share its two slots.
	staging  sync.Mutex
	chunk    uint64              // slot size; DefaultPeerChunk unless a test changed it
	host     *cudadrv.HostBuffer // two slots of chunk bytes
	slotFree [2]*cudadrv.Event   // recorded on compute after the last read of each slot

	force atomic.Uint32 // tests: a PeerPath to take instead of the one the devices allow

	device, direct, staged, bytes, enabledPeers atomic.Uint64
}

// order returns the provider's place in the window order.
func (s *peerSide) order() uint64 {
	s.idOnce.Do(func() { s.id = peerIDs.Add(1) })
	return s.id
}

// events makes the ordering events on first use. p's window is entered and its context bound.
func (p *Provider) peerEvents() error {
	s := &p.peer
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready != nil {
		return nil
	}
	ready, err := p.ctx.NewEvent(cudadrv.EventDisableTiming)
	if err != nil {
		return fmt.Errorf("ep: peer copy: create an event: %w", err)
	}
	done, err := p.ctx.NewEvent(cudadrv.EventDisableTiming)
	if err != nil {
		return errors.Join(fmt.Errorf("ep: peer copy: create an event: %w", err), ready.Destroy())
	}
	s.ready, s.done = ready, done
	return nil
}

// close gives back what peer copies made; teardown calls it with the context bound, after the
// compute stream has drained (so no staged copy still reads or writes the slots).
func (s *peerSide) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, e := range []*cudadrv.Event{s.ready, s.done, s.slotFree[0], s.slotFree[1]} {
		if e != nil {
			errs = append(errs, e.Destroy())
		}
	}
	s.ready, s.done, s.slotFree = nil, nil, [2]*cudadrv.Event{}
	if s.host != nil {
		errs = append(errs, s.host.Free())
		s.host = nil
	}
	s.enabled = nil
	return errors.Join(errs...)
}

// PeerStats returns the provider's peer-copy counters.
func (p *Provider) PeerStats() PeerStats {
	s := &p.peer
	return PeerStats{Device: s.device.Load(), Direct: s.direct.Load(), Staged: s.staged.Load(),
		Bytes: s.bytes.Load(), EnabledPeers: s.enabledPeers.Load()}
}

// CopyPeer copies n bytes from src at srcOff into dst at dstOff, where the two buffers may
// live on different devices (of one backend), and says which path it took: PeerPathDirect
// between devices that can reach each other, PeerPathStaged through pinned host memory between
// devices that cannot, PeerPathDevice when both are on one device, PeerPathNone for n = 0.
//
// p takes the side of the copy it runs on: the destination side when p runs on dst's device,
// else the source side (p must run on one of the two devices). The other side is the other
// buffer's owner. When both buffers are on p's device and another provider owns one of them,
// that owner is ordered like a side: the copy runs after its queued work, its later work after
// the copy. The copy is queued on the destination side's compute stream and returns
// without waiting for it; it runs after the work queued so far on both sides' compute streams,
// and the work either side queues afterwards runs after it (so the source side may overwrite
// src and the destination side may read dst at once, in stream order; a host reads dst with
// CopyToHost on the destination side, which waits).
//
// # Notes
//
// Each provider keeps its own context, streams and events: the two sides are ordered by
// events recorded on one compute stream and waited for on the other, on the device, without
// the host blocking and without a device-wide synchronization, so the capture gate of neither
// device is involved. Peer access is enabled once per pair of providers (the driver's
// "already enabled" counts as success). A staged copy uses two pinned slots of
// DefaultPeerChunk bytes that the destination side allocates on its first staged copy and
// keeps until Close; staged copies into one provider take turns with its slots.
//
// # Errors
//
// Before anything is queued: a nil or released buffer (ErrReleased), a range outside either
// buffer, p on neither device or the buffers of two backends (ErrInvalidArgument), a closed
// provider on either side (ErrClosed), a live capture on either side (ErrCaptureLive: a peer
// copy cannot be recorded; use CopyBuffer within one provider). The driver's errors otherwise;
// if one comes after part of the copy was queued, CopyPeer waits for what was queued before
// returning it, so that no copy is left running against memory the caller may reuse.
func (p *Provider) CopyPeer(dst *Buffer, dstOff uint64, src *Buffer, srcOff, n uint64) (PeerPath, error) {
	if dst == nil || src == nil {
		return PeerPathNone, fmt.Errorf("%w: peer copy: a nil buffer", ErrInvalidArgument)
	}
	if err := dst.check(dstOff, n); err != nil {
		return PeerPathNone, fmt.Errorf("ep: peer copy: destination: %w", err)
	}
	if err := src.check(srcOff, n); err != nil {
		return PeerPathNone, fmt.Errorf("ep: peer copy: source: %w", err)
	}
	if n == 0 {
		return PeerPathNone, nil
	}
	if dst.p.drv != src.p.drv || p.drv != dst.p.drv {
		return PeerPathNone, fmt.Errorf("%w: peer copy: the buffers and the provider are of different backends", ErrInvalidArgument)
	}
	dd, sd, pd := dst.p.dev.Ordinal(), src.p.dev.Ordinal(), p.dev.Ordinal()
	d, s := dst.p, src.p // the destination and source sides
	switch pd {
	case dd:
		d = p
	case sd:
		s = p
	default:
		return PeerPathNone, fmt.Errorf("%w: peer copy: the provider runs on device %d, the destination lives on device %d and the source on device %d",
			ErrInvalidArgument, pd, dd, sd)
	}
	if da, sa := dst.ptr+cudadrv.DevicePtr(dstOff), src.ptr+cudadrv.DevicePtr(srcOff); da == sa && dd == sd {
		return PeerPathDevice, nil // the same bytes: nothing to move
	} else if da < sa+cudadrv.DevicePtr(n) && sa < da+cudadrv.DevicePtr(n) {
		return PeerPathNone, fmt.Errorf("%w: peer copy: the ranges [%#x, +%d) and [%#x, +%d) overlap", ErrInvalidArgument, uint64(da), n, uint64(sa), n)
	}
	for _, q := range []*Provider{d, s} {
		if q.closed.Load() {
			return PeerPathNone, fmt.Errorf("%w: peer copy: the provider on device %d was closed", ErrClosed, q.dev.Ordinal())
		}
	}
	// With both buffers on p's device, p takes a side whose buffer another provider owns: that
	// owner's queued work (which may still write or read its buffer) must come before the copy,
	// and its later work after it, like a side's.
	owner := dst.p
	if owner == d || owner == s {
		owner = src.p
	}
	if owner != d && owner != s {
		if err := OrderAfter(d, owner); err != nil {
			return PeerPathNone, fmt.Errorf("ep: peer copy: order after the work of the provider owning a buffer: %w", err)
		}
	}
	path, err := copySides(d, s, dst.ptr+cudadrv.DevicePtr(dstOff), src.ptr+cudadrv.DevicePtr(srcOff), n)
	if err != nil {
		return PeerPathNone, err
	}
	if owner != d && owner != s {
		if err := OrderAfter(owner, d); err != nil {
			return PeerPathNone, errors.Join(fmt.Errorf("ep: peer copy: order the work of the provider owning a buffer after the copy: %w", err),
				d.SynchronizeCompute())
		}
	}
	return path, nil
}

// copySides runs a copy between its sides, with both capture windows entered.
func copySides(d, s *Provider, dst, src cudadrv.DevicePtr, n uint64) (PeerPath, error) {
	leave, err := enterSides(d, s)
	if err != nil {
		return PeerPathNone, err
	}
	defer leave()
	c := peerCopy{d: d, s: s, dst: dst, src: src, n: n}
	path, err := c.route()
	if err != nil {
		return PeerPathNone, err
	}
	if err := c.run(path); err != nil {
		return PeerPathNone, err
	}
	st := &d.peer
	st.bytes.Add(n)
	switch path {
	case PeerPathDevice:
		st.device.Add(1)
	case PeerPathDirect:
		st.direct.Add(1)
	case PeerPathStaged:
		st.staged.Add(1)
	}
	return path, nil
}

// enterSides enters the capture windows of d and s (once when they are one provider) in the
// peer order, refusing a live capture on either, and returns the function that leaves both.
func enterSides(d, s *Provider) (func(), error) {
	const what = "copy between devices"
	if d == s {
		e, err := d.enter(what, accessDriver)
		if err != nil {
			return nil, err
		}
		return e.leave, nil
	}
	first, second := d, s
	if s.peer.order() < d.peer.order() {
		first, second = s, d
	}
	e1, err := first.enter(what, accessDriver)
	if err != nil {
		return nil, err
	}
	e2, err := second.enter(what, accessDriver)
	if err != nil {
		e1.leave()
		return nil, err
	}
	return func() { e2.leave(); e1.leave() }, nil
}

// peerCopy is one CopyPeer between its sides, with both windows entered.
type peerCopy struct {
	d, s     *Provider
	dst, src cudadrv.DevicePtr
	n        uint64
}

// route decides the path: one device, or whether the destination's device can reach the
// source's (asked once per device pair and kept), unless a test forced a path.
func (c *peerCopy) route() (PeerPath, error) {
	if f := PeerPath(c.d.peer.force.Load()); f != PeerPathNone {
		return f, nil
	}
	so := c.s.dev.Ordinal()
	if c.d.dev.Ordinal() == so {
		return PeerPathDevice, nil
	}
	st := &c.d.peer
	st.mu.Lock()
	can, known := st.reach[so]
	st.mu.Unlock()
	if !known {
		var err error
		if can, err = c.d.dev.CanAccessPeer(c.s.dev); err != nil {
			return PeerPathNone, fmt.Errorf("ep: peer copy: can device %d access device %d: %w", c.d.dev.Ordinal(), so, err)
		}
		st.mu.Lock()
		if st.reach == nil {
			st.reach = map[int]bool{}
		}
		st.reach[so] = can
		st.mu.Unlock()
	}
	if can {
		return PeerPathDirect, nil
	}
	return PeerPathStaged, nil
}

// bind makes q's context current on the thread (whose window the copy entered).
func bind(q *Provider) error {
	if err := q.ctx.Bind(); err != nil {
		return fmt.Errorf("ep: peer copy: bind the context of device %d: %w", q.dev.Ordinal(), err)
	}
	return nil
}

// run queues the copy on path.
func (c *peerCopy) run(path PeerPath) error {
	for _, q := range []*Provider{c.s, c.d} {
		if err := bind(q); err != nil {
			return err
		}
		if err := q.peerEvents(); err != nil {
			return err
		}
	}
	if path == PeerPathStaged {
		return c.staged()
	}
	if path == PeerPathDirect && c.d.dev.Ordinal() != c.s.dev.Ordinal() {
		if err := c.enable(); err != nil {
			return err
		}
	}
	if err := c.sourceReady(); err != nil {
		return err
	}
	// c.d's context is current: sourceReady bound it last.
	var err error
	if path == PeerPathDirect {
		err = c.d.compute.CopyPeerAsync(c.dst, c.d.ctx, c.src, c.s.ctx, c.n)
	} else {
		err = c.d.compute.CopyDtoDAsync(c.dst, c.src, c.n)
	}
	if err != nil {
		return fmt.Errorf("ep: peer copy (%s) from device %d to device %d: %w", path, c.s.dev.Ordinal(), c.d.dev.Ordinal(), err)
	}
	return c.copied()
}

// enable gives the destination's context access to the source's, once per pair of providers.
// The destination's context is current.
func (c *peerCopy) enable() error {
	st := &c.d.peer
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.enabled[c.s] {
		return nil
	}
	if err := bind(c.d); err != nil {
		return err
	}
	if err := c.d.ctx.EnablePeerAccess(c.s.ctx); err != nil {
		return fmt.Errorf("ep: peer copy: enable device %d's access to device %d: %w", c.d.dev.Ordinal(), c.s.dev.Ordinal(), err)
	}
	if st.enabled == nil {
		st.enabled = map[*Provider]bool{}
	}
	for q := range st.enabled {
		if q.closed.Load() {
			delete(st.enabled, q) // its context may be gone: a new provider enables anew
		}
	}
	st.enabled[c.s] = true
	st.enabledPeers.Add(1)
	return nil
}

// sourceReady orders the destination's compute stream after the work queued so far on the
// source's, and leaves the destination's context current.
func (c *peerCopy) sourceReady() error {
	if c.s != c.d {
		if err := bind(c.s); err != nil {
			return err
		}
		if err := c.s.peer.ready.Record(c.s.compute); err != nil {
			return fmt.Errorf("ep: peer copy: mark the source's work on device %d: %w", c.s.dev.Ordinal(), err)
		}
	}
	if err := bind(c.d); err != nil {
		return err
	}
	if c.s != c.d {
		if err := c.d.compute.WaitEvent(c.s.peer.ready); err != nil {
			return fmt.Errorf("ep: peer copy: order device %d after the source's work: %w", c.d.dev.Ordinal(), err)
		}
	}
	return nil
}

// copied orders the source's compute stream after the copy just queued on the destination's
// (whose context is current), so that the source's later work cannot overwrite src before the
// copy read it. When that fails the host waits for the copy instead.
func (c *peerCopy) copied() error {
	if c.s == c.d {
		return nil
	}
	err := c.d.peer.done.Record(c.d.compute)
	if err == nil {
		if err = bind(c.s); err == nil {
			err = c.s.compute.WaitEvent(c.d.peer.done)
		}
	}
	if err == nil {
		return nil
	}
	return errors.Join(fmt.Errorf("ep: peer copy: order device %d after the copy: %w", c.s.dev.Ordinal(), err), c.drain())
}

// drain waits on the host for what both sides queued, after a failure left a copy queued
// without its fences. It binds each side in turn.
func (c *peerCopy) drain() error {
	var errs []error
	for _, q := range []*Provider{c.d, c.s} {
		if err := bind(q); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, q.compute.Synchronize())
	}
	return errors.Join(errs...)
}

// stagingSlots makes the destination's two pinned slots on its first staged copy. The
// destination's context is current and its staging lock held.
func (c *peerCopy) stagingSlots() ([2][]byte, error) {
	st := &c.d.peer
	if st.host == nil {
		chunk := st.chunk
		if chunk == 0 {
			chunk = DefaultPeerChunk
		}
		var events [2]*cudadrv.Event
		for i := range events {
			e, err := c.d.ctx.NewEvent(cudadrv.EventDisableTiming)
			if err != nil {
				for _, made := range events[:i] {
					_ = made.Destroy()
				}
				return [2][]byte{}, fmt.Errorf("ep: peer copy: create a staging event: %w", err)
			}
			events[i] = e
		}
		hb, err := c.d.ctx.AllocHost(2 * chunk)
		if err != nil {
			return [2][]byte{}, errors.Join(fmt.Errorf("ep: peer copy: allocate %d bytes of pinned staging: %w", 2*chunk, err),
				events[0].Destroy(), events[1].Destroy())
		}
		st.mu.Lock()
		st.host, st.slotFree, st.chunk = hb, events, chunk
		st.mu.Unlock()
	}
	b := st.host.Bytes()
	return [2][]byte{b[:st.chunk:st.chunk], b[st.chunk:]}, nil
}

// staged queues the copy through the destination's pinned slots, chunk by chunk, alternating
// slots so that the source's copy of one chunk into host memory overlaps the destination's copy
// of the previous chunk out of it. Per chunk: the source's stream waits until the slot's last
// reader is done, copies the chunk into it and marks its work; the destination's stream waits
// for that mark, copies the slot out, and marks the slot free.
func (c *peerCopy) staged() (err error) {
	st := &c.d.peer
	st.staging.Lock()
	defer st.staging.Unlock()
	if err := bind(c.d); err != nil {
		return err
	}
	slots, err := c.stagingSlots()
	if err != nil {
		return err
	}
	queued := false
	defer func() {
		if err != nil && queued {
			err = errors.Join(err, c.drain()) // nothing may still write or read the slots
		}
	}()
	chunk := uint64(len(slots[0]))
	for off, i := uint64(0), 0; off < c.n; off, i = off+chunk, i^1 {
		m := min(chunk, c.n-off)
		slot := slots[i][:m]
		if err := bind(c.s); err != nil {
			return err
		}
		if err := c.s.compute.WaitEvent(st.slotFree[i]); err != nil {
			return fmt.Errorf("ep: staged peer copy: wait for staging slot %d: %w", i, err)
		}
		queued = true
		if err := c.s.compute.CopyDtoHAsync(slot, c.src+cudadrv.DevicePtr(off)); err != nil {
			return fmt.Errorf("ep: staged peer copy: device %d to host: %w", c.s.dev.Ordinal(), err)
		}
		if err := c.s.peer.ready.Record(c.s.compute); err != nil {
			return fmt.Errorf("ep: staged peer copy: mark the chunk on device %d: %w", c.s.dev.Ordinal(), err)
		}
		if err := bind(c.d); err != nil {
			return err
		}
		if err := c.d.compute.WaitEvent(c.s.peer.ready); err != nil {
			return fmt.Errorf("ep: staged peer copy: order device %d after the chunk: %w", c.d.dev.Ordinal(), err)
		}
		if err := c.d.compute.CopyHtoDAsync(c.dst+cudadrv.DevicePtr(off), slot); err != nil {
			return fmt.Errorf("ep: staged peer copy: host to device %d: %w", c.d.dev.Ordinal(), err)
		}
		if err := st.slotFree[i].Record(c.d.compute); err != nil {
			return fmt.Errorf("ep: staged peer copy: mark staging slot %d free: %w", i, err)
		}
	}
	// The first chunk's copy out of the source ran after the source's earlier work (stream
	// order); the source's later work must wait for the last chunk's copy out of the slot too.
	return c.copied()
}
