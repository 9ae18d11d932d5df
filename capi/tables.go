package main

import (
	"errors"
	"sync"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// The handle kinds. They are internal (hosts treat handles as opaque) but fixed, so that a
// handle printed in a message reads the same across builds.
const (
	kindOptions      handles.Kind = 1
	kindProvider     handles.Kind = 2
	kindBuffer       handles.Kind = 3
	kindKernel       handles.Kind = 4
	kindModule       handles.Kind = 5
	kindFunction     handles.Kind = 6
	kindLazyWeight   handles.Kind = 7
	kindPagedWeight  handles.Kind = 8
	kindDoubleBuffer handles.Kind = 9
	kindTicket       handles.Kind = 10
)

// optionsObject is what an options handle names: ep.Options behind a lock, because C callers
// may set options on one object from several threads.
type optionsObject struct {
	mu   sync.Mutex
	opts ep.Options
}

// snapshot returns a copy of the options.
func (o *optionsObject) snapshot() ep.Options {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opts
}

// child is embedded by every object made from a provider: the provider, and the lease that
// keeps it alive (not closed) for the child's whole life, so releasing the provider's handle
// first is safe. The lease is released by the child's finalizer, after the child's own
// resources.
type child struct {
	p      *ep.Provider
	parent handles.Lease[*ep.Provider]
}

// adopt leases the provider h names for a new child.
func adopt(h handles.Handle) (child, error) {
	lease, err := providerTable.Acquire(h)
	if err != nil {
		return child{}, err
	}
	return child{p: lease.Value(), parent: lease}, nil
}

// sameProvider refuses an object of another provider than want's.
func (c *child) sameProvider(want *ep.Provider, what string) error {
	if c.p != want {
		return argError("%s belongs to another provider", what)
	}
	return nil
}

// bufferObject is device memory; its finalizer gives up the owner's reference (the memory
// outlives it while captured graphs embed it).
type bufferObject struct {
	child
	buf *ep.Buffer
}

func (b *bufferObject) finalize() error {
	err := b.buf.Release()
	if errors.Is(err, ep.ErrReleased) {
		err = nil
	}
	return errors.Join(err, b.parent.Release())
}

// kernelObject is an operator kernel. ep.Kernel is not safe for concurrent use, so calls on
// one kernel serialize on mu.
type kernelObject struct {
	child
	mu   sync.Mutex
	k    *ep.Kernel
	args tensorArgs // decoding scratch of Execute and NonZeroCount, guarded by mu
}

func (k *kernelObject) finalize() error { return k.parent.Release() }

// moduleObject is user device code; it is given up when its handle and every function taken
// from it are released (ep keeps the code loaded while a graph may launch it).
type moduleObject struct {
	child
	m *ep.UserModule
}

func (m *moduleObject) finalize() error {
	err := m.m.Unload()
	if errors.Is(err, ep.ErrUnloaded) {
		err = nil
	}
	return errors.Join(err, m.parent.Release())
}

// functionObject is one entry point; it holds its module for its life.
type functionObject struct {
	mod    *moduleObject
	module handles.Lease[*moduleObject]
	f      *ep.UserFunction
}

func (f *functionObject) finalize() error { return f.module.Release() }

// lazyWeightObject is a weight in external-data files of its provider.
type lazyWeightObject struct {
	child
	w *ep.LazyWeight
}

func (w *lazyWeightObject) finalize() error { return w.parent.Release() }

// pagedWeightObject is a layer's image in a residency slot; its finalizer records the slot's
// release fence.
type pagedWeightObject struct {
	child
	pw *ep.PagedWeight
}

func (w *pagedWeightObject) finalize() error {
	err := w.p.ReleasePagedWeight(w.pw)
	if ep.Code(err) == ep.CodeReleased {
		err = nil
	}
	return errors.Join(err, w.parent.Release())
}

// doubleBufferObject is a directly driven pipeline; its finalizer drains and frees it.
type doubleBufferObject struct {
	child
	db *ep.DoubleBuffer
}

func (d *doubleBufferObject) finalize() error { return errors.Join(d.db.Close(), d.parent.Release()) }

// ticketObject is the claim on one prefetched layer. It holds its double buffer for its life
// and remembers the view its last successful wait returned, which makes the ticket usable as
// tensor memory until the layer is released or cancelled.
type ticketObject struct {
	dbo    *doubleBufferObject
	lease  handles.Lease[*doubleBufferObject]
	ticket ep.Ticket

	mu     sync.Mutex
	view   ep.SlotView
	inView bool // waited for, not yet released or cancelled
}

func (t *ticketObject) finalize() error { return t.lease.Release() }

var (
	// optionsTable holds options objects. They own nothing outside Go, so it has no finalizer
	// and lookups use Get.
	optionsTable = handles.NewTable(handles.Config[*optionsObject]{
		Kind: kindOptions, Name: "options",
	})

	// providerTable holds providers. Calls lease them (Acquire) so that a concurrent release
	// cannot close a provider under a call; children lease their parent for life. The
	// provider is closed when its last reference goes.
	providerTable = handles.NewTable(handles.Config[*ep.Provider]{
		Kind: kindProvider, Name: "provider", Finalize: finalizeProvider,
	})

	bufferTable = handles.NewTable(handles.Config[*bufferObject]{
		Kind: kindBuffer, Name: "buffer", Finalize: (*bufferObject).finalize,
	})
	kernelTable = handles.NewTable(handles.Config[*kernelObject]{
		Kind: kindKernel, Name: "kernel", Finalize: (*kernelObject).finalize,
	})
	moduleTable = handles.NewTable(handles.Config[*moduleObject]{
		Kind: kindModule, Name: "module", Finalize: (*moduleObject).finalize,
	})
	functionTable = handles.NewTable(handles.Config[*functionObject]{
		Kind: kindFunction, Name: "function", Finalize: (*functionObject).finalize,
	})
	lazyWeightTable = handles.NewTable(handles.Config[*lazyWeightObject]{
		Kind: kindLazyWeight, Name: "lazy weight", Finalize: (*lazyWeightObject).finalize,
	})
	pagedWeightTable = handles.NewTable(handles.Config[*pagedWeightObject]{
		Kind: kindPagedWeight, Name: "paged weight", Finalize: (*pagedWeightObject).finalize,
	})
	doubleBufferTable = handles.NewTable(handles.Config[*doubleBufferObject]{
		Kind: kindDoubleBuffer, Name: "double buffer", Finalize: (*doubleBufferObject).finalize,
	})
	ticketTable = handles.NewTable(handles.Config[*ticketObject]{
		Kind: kindTicket, Name: "ticket", Finalize: (*ticketObject).finalize,
	})
)

// liveHandles counts the handles of every table.
func liveHandles() int {
	return optionsTable.Live() + providerTable.Live() + bufferTable.Live() + kernelTable.Live() +
		moduleTable.Live() + functionTable.Live() + lazyWeightTable.Live() + pagedWeightTable.Live() +
		doubleBufferTable.Live() + ticketTable.Live()
}

// with runs f on the value h names in t, holding a lease for the duration. If the lease was
// the last reference (the handle was released meanwhile), the object is finalized here and a
// finalizer error is returned in place of f's success, so callers write out-parameters only
// after with returns nil.
func with[T any](t *handles.Table[T], h handles.Handle, f func(v T) error) error {
	lease, err := t.Acquire(h)
	if err != nil {
		return err
	}
	err = f(lease.Value())
	if rerr := lease.Release(); err == nil {
		err = rerr
	}
	return err
}

// withProvider runs f on the provider h names (see with).
func withProvider(h handles.Handle, f func(p *ep.Provider) error) error {
	return with(providerTable, h, f)
}

// insertChild stores a new child object in t. On failure (a full table) the object is
// finalized, giving back what it holds, and the table error is returned.
func insertChild[T any](t *handles.Table[T], v T, finalize func(T) error) (handles.Handle, error) {
	h, err := t.Insert(v)
	if err != nil {
		_ = finalize(v) // the table-full error is the one to report
		return 0, err
	}
	return h, nil
}
