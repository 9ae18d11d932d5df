// Package graphs owns the CUDA graphs captured on a stream: audited, gated, thread-checked
// capture of decode steps (whole or segmented), lock-free replay under stale-proof tokens,
// in-place update, abort, reset and destruction in the order that keeps embedded memory safe.
//
// # Model
//
// A [Lifecycle] holds the executables captured for one slot of one stream: [Primary] (the
// M=1 decode step), [Verify] (the fixed-width verify step) or a keyed slot ([Keyed], e.g. the
// batch size). A [Slots] holds Primary, Verify and any number of keyed lifecycles on one
// stream and routes calls by [Slot].
//
// A capture installs a generation. [Lifecycle.Begin] with no installation starts a new one
// and returns its [Token] (owner, slot, generation); Begin with that token appends another
// segment to it (segmented capture: the non-capturable seam nodes run eagerly between segment
// replays). Every later call names the token, and a token from another owner, slot or
// generation is refused with an error that names both sides. [Lifecycle.Reset] retires the
// generation; [Lifecycle.Recapture] retires it and captures its successor, updating the
// retired executables in place (cuGraphExecUpdate) where the topology is unchanged.
//
// # Threads
//
// Capture uses CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: Begin, End and Abort of one capture must
// run on one OS thread. Callers lock their goroutine to its thread (runtime.LockOSThread) for
// the whole capture; the lifecycle records the thread in Begin and refuses End or Abort from
// another thread before it calls the driver. The package never binds a CUDA context: every
// goroutine that calls into it has the stream's context bound on its (locked) thread.
//
// # The capture gate
//
// While a capture is live, a device-synchronizing call anywhere in the process invalidates
// it. Every capture holds its device's [Gate] shared from before begin-capture until
// end-capture has returned; forced drains run through [Gate.Drain], which waits for every
// live capture on the device to end.
package graphs
