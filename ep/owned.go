package ep

import (
	"errors"
	"sync"

	"github.com/cudaep/cudaep/paging"
)

// owned tracks what a provider made for a host that Close must give back: user modules (loaded
// code, unloaded after the graphs that may launch it), double buffers (slots, staging and
// registrations, drained and freed) and paged weights (residency slots, released so the
// residency can tear down). Buffers need no tracking: their memory goes with the context.
type owned struct {
	mu      sync.Mutex
	modules map[*UserModule]struct{}
	doubles map[*DoubleBuffer]struct{}
	paged   map[*PagedWeight]struct{}
}

func (o *owned) add(v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch v := v.(type) {
	case *UserModule:
		if o.modules == nil {
			o.modules = map[*UserModule]struct{}{}
		}
		o.modules[v] = struct{}{}
	case *DoubleBuffer:
		if o.doubles == nil {
			o.doubles = map[*DoubleBuffer]struct{}{}
		}
		o.doubles[v] = struct{}{}
	case *PagedWeight:
		if o.paged == nil {
			o.paged = map[*PagedWeight]struct{}{}
		}
		o.paged[v] = struct{}{}
	}
}

func (o *owned) remove(v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch v := v.(type) {
	case *UserModule:
		delete(o.modules, v)
	case *DoubleBuffer:
		delete(o.doubles, v)
	case *PagedWeight:
		delete(o.paged, v)
	}
}

// releasePaged releases every paged weight a host still holds, so that the residency's slots,
// staging buffers and registrations can go. Close calls it before the residency closes.
func (o *owned) releasePaged() error {
	o.mu.Lock()
	paged := o.paged
	o.paged = nil
	o.mu.Unlock()
	var errs []error
	for w := range paged {
		if err := w.Release(); err != nil && !errors.Is(err, paging.ErrReleased) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeDoubleBuffers drains and frees every double buffer a host left open. Close calls it
// before the graphs and the staging pool go.
func (o *owned) closeDoubleBuffers() error {
	o.mu.Lock()
	doubles := o.doubles
	o.doubles = nil
	o.mu.Unlock()
	var errs []error
	for d := range doubles {
		errs = append(errs, d.db.Close())
	}
	return errors.Join(errs...)
}

// unloadModules unloads every module still loaded: those a host left loaded and those kept for
// the graphs that recorded their launches. Close calls it after the graphs are destroyed.
func (o *owned) unloadModules() error {
	o.mu.Lock()
	modules := o.modules
	o.modules = nil
	o.mu.Unlock()
	var errs []error
	for m := range modules {
		m.mu.Lock()
		m.unloaded = true
		m.mu.Unlock()
		errs = append(errs, m.unload())
	}
	return errors.Join(errs...)
}
