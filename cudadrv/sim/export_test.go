package sim

import "time"

// SetSleep makes d spend its modelled time (Options.CopyBandwidth, Options.KernelDuration)
// by calling f on the worker that executes the work, instead of time.Sleep. Call it before
// queuing work on d: the workers read it without a lock, after taking the work from its queue.
func SetSleep(d *Device, f func(time.Duration)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sleepHook = f
}

// ReadModule is readModule: the entry points of a PTX image and their parameter counts, or the
// result and reason ModuleLoadData refuses it with.
var ReadModule = readModule
