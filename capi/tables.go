package main

import (
	"sync"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// The handle kinds. They are internal (hosts treat handles as opaque) but fixed, so that a
// handle printed in a message reads the same across builds.
const (
	kindOptions  handles.Kind = 1
	kindProvider handles.Kind = 2
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

var (
	// optionsTable holds options objects. They own nothing outside Go, so it has no finalizer
	// and lookups use Get.
	optionsTable = handles.NewTable(handles.Config[*optionsObject]{
		Kind: kindOptions, Name: "options",
	})

	// providerTable holds providers. Calls lease them (Acquire) so that a concurrent release
	// cannot close a provider under a call; children will lease their parent for life. The
	// provider is closed when its last reference goes.
	providerTable = handles.NewTable(handles.Config[*ep.Provider]{
		Kind: kindProvider, Name: "provider", Finalize: (*ep.Provider).Close,
	})
)

// liveHandles counts the handles of every table.
func liveHandles() int {
	return optionsTable.Live() + providerTable.Live()
}

// withProvider runs f on the provider h names, holding a lease for the duration. If the lease
// was the last reference (the handle was released meanwhile), the provider is closed here and
// a close error is returned in place of f's success, so callers write out-parameters only
// after withProvider returns nil.
func withProvider(h handles.Handle, f func(p *ep.Provider) error) error {
	lease, err := providerTable.Acquire(h)
	if err != nil {
		return err
	}
	err = f(lease.Value())
	if rerr := lease.Release(); err == nil {
		err = rerr
	}
	return err
}
