package cudadrv

import (
	"errors"
	"fmt"
	"sync"
)

// The process's shared drivers. CUDA has one driver per process: every library in it sees the
// same devices and the same primary context per device, so one library's work can use another's
// memory and streams. A backend opened from Go is an object instead, private to whoever made it
// (a simulated device above all); the shared drivers give Go code CUDA's rule. ep opens its
// backends here, under their names ("cuda", "sim"), and code that makes driver calls of its own
// beside ep's providers (a benchmark's raw baselines) acquires the same driver by name and
// retains the same primary contexts, rather than being handed a provider's.

// ErrNotShared is wrapped by AcquireShared's error for a name the process has no shared driver
// of, when the caller gave no way to open one.
var ErrNotShared = errors.New("cudadrv: no shared driver of that name is open")

var shared struct {
	sync.Mutex
	m map[string]*sharedDriver
}

// sharedDriver is one shared driver, its reference count and what runs when it closes.
type sharedDriver struct {
	drv     *Driver
	refs    int
	onClose func(Backend)
}

// AcquireShared returns the process's shared driver named name, with a reference taken. When
// the process has none, open makes it (an initialized driver: NewDriver over its backend) and
// it is shared under name until its last reference is released; onClose, when not nil, is kept
// to run then. With open nil, a name that is not open is an error wrapping ErrNotShared.
//
// # Notes
//
// Safe for concurrent use: open runs under the registry's lock, so two callers never open two
// drivers of one name (and open must not call AcquireShared or ReleaseShared). Every reference
// is released with ReleaseShared; a Driver made with NewDriver is not shared and is not
// released there.
func AcquireShared(name string, open func() (*Driver, error), onClose func(Backend)) (*Driver, error) {
	shared.Lock()
	defer shared.Unlock()
	if s := shared.m[name]; s != nil {
		s.refs++
		return s.drv, nil
	}
	if open == nil {
		return nil, fmt.Errorf("%w: %q (open a provider on it first)", ErrNotShared, name)
	}
	drv, err := open()
	if err != nil {
		return nil, err
	}
	if drv == nil {
		return nil, fmt.Errorf("cudadrv: opening the shared driver %q returned no driver", name)
	}
	if shared.m == nil {
		shared.m = map[string]*sharedDriver{}
	}
	shared.m[name] = &sharedDriver{drv: drv, refs: 1, onClose: onClose}
	return drv, nil
}

// ReleaseShared drops one reference AcquireShared took on d. The last one forgets the driver,
// runs its onClose and closes its backend (calls its Close method, where it has one), after
// which AcquireShared opens a new one. Safe for concurrent use.
//
// # Errors
//
// A driver that is not shared (or no longer is: one release too many) is an error; the
// backend's Close error is returned.
func ReleaseShared(d *Driver) error {
	shared.Lock()
	defer shared.Unlock()
	for name, s := range shared.m {
		if s.drv != d {
			continue
		}
		s.refs--
		if s.refs > 0 {
			return nil
		}
		delete(shared.m, name)
		if s.onClose != nil {
			s.onClose(d.b)
		}
		if c, ok := d.b.(interface{ Close() error }); ok {
			return c.Close()
		}
		return nil
	}
	return errors.New("cudadrv: release of a driver that is not shared (released once too often?)")
}

// SharedOpen reports whether the process has a shared driver named name.
func SharedOpen(name string) bool {
	shared.Lock()
	defer shared.Unlock()
	return shared.m[name] != nil
}
