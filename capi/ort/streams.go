package ort

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// CudaEp is stream-aware: ORT runs a session's CudaEp nodes on a sync stream the session's OrtEp
// makes (the session provider's compute stream), copies tensors on the streams it names, and
// orders work across streams with notifications. A partition's Compute then queues its work
// and returns without waiting; a notification is a fence recorded on the producing stream,
// which a consumer stream waits for on the device and a host consumer waits for on the host.
// At the end of a run ORT tells every stream, which then waits for its work, so that what a run
// leaves in device memory (outputs bound through IOBinding) is complete when Run returns.

// syncStream is a CudaEp stream ORT holds: the provider whose compute stream it is, and the
// session when it is a session's (nil for the factory's streams).
type syncStream struct {
	p *ep.Provider
	s *session
}

// enter waits until no run of the stream's session is capturing a graph (a capture forbids
// every other use of the provider's stream) and keeps it so until the returned func is called.
func (ss *syncStream) enter() func() {
	if ss.s == nil {
		return func() {}
	}
	return ss.s.ps.Share()
}

// notification is one of ORT's notifications on a stream: the fence of its last activation.
type notification struct {
	s     *syncStream
	mu    sync.Mutex
	fence *ep.Fence
}

const (
	kindStream       handles.Kind = 24
	kindNotification handles.Kind = 25
)

var (
	streamTable       = handles.NewTable(handles.Config[*syncStream]{Kind: kindStream, Name: "ORT sync stream"})
	notificationTable = handles.NewTable(handles.Config[*notification]{Kind: kindNotification, Name: "ORT notification",
		Finalize: (*notification).release})
)

func (n *notification) release() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.fence.Release()
	n.fence = nil
	return err
}

// newStream hands ORT a stream over p's compute stream (the provider of session s, if not nil).
func newStream(p *ep.Provider, s *session, out **C.OrtSyncStreamImpl) error {
	h, err := streamTable.Insert(&syncStream{p: p, s: s})
	if err != nil {
		return err
	}
	cs := C.cudaep_ort_new_stream(C.uint64_t(h), C.uint64_t(p.StreamHandle()))
	if cs == nil {
		_ = streamTable.Remove(h)
		return errors.New("cudaep: out of host memory")
	}
	*out = &cs.s
	return nil
}

// cudaepOrtSessionStream makes a sync stream for a session's nodes on CudaEp's device memory:
// the session provider's compute stream, which its partitions run on.
//
//export cudaepOrtSessionStream
func cudaepOrtSessionStream(e *C.CudaEpOrtEp, md *C.OrtMemoryDevice, out **C.OrtSyncStreamImpl) (st *C.OrtStatus) {
	defer recoverInto(&st)
	*out = nil
	s, err := epTable.Get(handles.Handle(e.handle))
	if err != nil {
		return statusOf(err)
	}
	var id C.int32_t
	if C.cudaep_ort_memory_device_ours(md, &id) == 0 {
		return statusOf(fmt.Errorf("%w: a CudaEp stream is for CudaEp device memory only", errInvalid))
	}
	if int(id) != s.p.Options().DeviceID {
		return statusOf(fmt.Errorf("%w: the session runs on device %d, ORT asks for a stream on device %d", errInvalid, s.p.Options().DeviceID, int(id)))
	}
	return statusOf(newStream(s.p, s, out))
}

// cudaepOrtFactoryStream makes a sync stream outside a session (ORT's own copies): the compute
// stream of the provider that owns the device memory of the device.
//
//export cudaepOrtFactoryStream
func cudaepOrtFactoryStream(md *C.OrtMemoryDevice, out **C.OrtSyncStreamImpl) (st *C.OrtStatus) {
	defer recoverInto(&st)
	*out = nil
	var id C.int32_t
	if C.cudaep_ort_memory_device_ours(md, &id) == 0 {
		return statusOf(fmt.Errorf("%w: a CudaEp stream is for CudaEp device memory only", errInvalid))
	}
	p, err := deviceProvider(int(id))
	if err != nil {
		return statusOf(err)
	}
	return statusOf(newStream(p, nil, out))
}

// cudaepOrtReleaseStream forgets a stream ORT released.
//
//export cudaepOrtReleaseStream
func cudaepOrtReleaseStream(h C.uint64_t) {
	defer recoverQuietly()
	_ = streamTable.Remove(handles.Handle(h))
}

// cudaepOrtStreamRunEnd waits for the stream's work at the end of a run.
//
//export cudaepOrtStreamRunEnd
func cudaepOrtStreamRunEnd(h C.uint64_t) (st *C.OrtStatus) {
	defer recoverInto(&st)
	s, err := streamTable.Get(handles.Handle(h))
	if err != nil {
		return statusOf(err)
	}
	defer s.enter()()
	return statusOf(s.p.SynchronizeCompute())
}

// cudaepOrtCreateNotification makes a notification on a stream.
//
//export cudaepOrtCreateNotification
func cudaepOrtCreateNotification(h C.uint64_t, out **C.OrtSyncNotificationImpl) (st *C.OrtStatus) {
	defer recoverInto(&st)
	*out = nil
	s, err := streamTable.Get(handles.Handle(h))
	if err != nil {
		return statusOf(err)
	}
	nh, err := notificationTable.Insert(&notification{s: s})
	if err != nil {
		return statusOf(err)
	}
	n := C.cudaep_ort_new_notification(C.uint64_t(nh))
	if n == nil {
		_ = notificationTable.Remove(nh)
		return statusOf(errors.New("cudaep: out of host memory"))
	}
	*out = &n.n
	return nil
}

// cudaepOrtReleaseNotification releases a notification's fence.
//
//export cudaepOrtReleaseNotification
func cudaepOrtReleaseNotification(h C.uint64_t) {
	defer recoverQuietly()
	_ = notificationTable.Remove(handles.Handle(h))
}

// cudaepOrtActivate records the notification's fence after the work queued on its stream.
//
//export cudaepOrtActivate
func cudaepOrtActivate(h C.uint64_t) (st *C.OrtStatus) {
	defer recoverInto(&st)
	n, err := notificationTable.Get(handles.Handle(h))
	if err != nil {
		return statusOf(err)
	}
	leave := n.s.enter()
	f, err := n.s.p.RecordFence()
	leave()
	if err != nil {
		return statusOf(err)
	}
	counters.notifications.Add(1)
	n.mu.Lock()
	old := n.fence
	n.fence = f
	n.mu.Unlock()
	return statusOf(old.Release())
}

// activated returns the notification's fence, or an error when it was never activated.
func (n *notification) activated() (*ep.Fence, func(), error) {
	n.mu.Lock()
	if n.fence == nil {
		n.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: ORT waits on a notification it never activated", errInvalid)
	}
	return n.fence, n.mu.Unlock, nil
}

// cudaepOrtWaitOnDevice makes a consumer stream wait for the notification's fence: on the
// device when the consumer is a CudaEp stream, on the host for any other (ORT passes no stream
// for a consumer on the CPU, and cudaep cannot queue a wait on a stream it does not know).
//
//export cudaepOrtWaitOnDevice
func cudaepOrtWaitOnDevice(h C.uint64_t, consumer C.uint64_t) (st *C.OrtStatus) {
	defer recoverInto(&st)
	n, err := notificationTable.Get(handles.Handle(h))
	if err != nil {
		return statusOf(err)
	}
	if consumer == 0 {
		return statusOf(n.waitOnHost())
	}
	c, err := streamTable.Get(handles.Handle(consumer))
	if err != nil {
		return statusOf(err)
	}
	f, unlock, err := n.activated()
	if err != nil {
		return statusOf(err)
	}
	defer unlock()
	defer c.enter()()
	return statusOf(f.WaitOn(c.p))
}

// waitOnHost blocks until the notification's fence is reached.
func (n *notification) waitOnHost() error {
	f, unlock, err := n.activated()
	if err != nil {
		return err
	}
	defer unlock()
	defer n.s.enter()()
	return f.Synchronize()
}

// cudaepOrtWaitOnHost blocks until the notification's fence is reached.
//
//export cudaepOrtWaitOnHost
func cudaepOrtWaitOnHost(h C.uint64_t) (st *C.OrtStatus) {
	defer recoverInto(&st)
	n, err := notificationTable.Get(handles.Handle(h))
	if err != nil {
		return statusOf(err)
	}
	return statusOf(n.waitOnHost())
}

// streamOf returns the CudaEp stream behind one of ORT's streams, or nil for none or another's.
func streamOf(s *C.OrtSyncStream) *syncStream {
	cs := C.cudaep_ort_our_stream(s)
	if cs == nil {
		return nil
	}
	ss, err := streamTable.Get(handles.Handle(cs.handle))
	if err != nil {
		return nil
	}
	return ss
}

// streamProvider returns the provider whose stream ORT runs a partition's node on, from the
// node's native stream (own, the session's provider, in the common case, found without a
// search), or nil when ORT gave the node no CudaEp stream.
func streamProvider(native unsafe.Pointer, own *ep.Provider) *ep.Provider {
	switch h := uint64(uintptr(native)); {
	case native == nil:
		return nil
	case h == own.StreamHandle():
		return own
	default:
		return providerOfStream(h)
	}
}

// providerOfStream finds the live provider whose compute stream has the native handle.
func providerOfStream(native uint64) *ep.Provider {
	live.mu.Lock()
	for s := range live.sessions {
		if s.p.StreamHandle() == native {
			live.mu.Unlock()
			return s.p
		}
	}
	live.mu.Unlock()
	ortMemory.mu.Lock()
	defer ortMemory.mu.Unlock()
	for _, p := range ortMemory.providers {
		if p.StreamHandle() == native {
			return p
		}
	}
	return nil
}
