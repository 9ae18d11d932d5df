package ep

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/graphs"
)

// Slot names one captured graph of a provider: graphs.Primary (the M=1 decode step),
// graphs.Verify (the fixed-width verify step) or graphs.Keyed(k) (e.g. per batch size).
type Slot = graphs.Slot

// The slots of a provider.
var (
	// Primary is the M=1 decode step's slot.
	Primary = graphs.Primary
	// Verify is the fixed-width verify step's slot.
	Verify = graphs.Verify
)

// Keyed returns the slot of key (for example a batch size); a provider holds at most 128 keyed
// slots at a time (RemoveGraph frees one).
func Keyed(key int64) Slot { return graphs.Keyed(key) }

// GraphStats are one slot's counters: lock acquisitions, completed captures, replay launches,
// updates, instantiations (Provider.GraphStats).
type GraphStats = graphs.Stats

// CaptureStatus is the driver's capture status of a stream, with the driver's values
// (Provider.CaptureStatus).
type CaptureStatus = cudadrv.CaptureStatus

// The capture statuses.
const (
	// CaptureStatusNone: the stream is not capturing.
	CaptureStatusNone = cudadrv.CaptureStatusNone
	// CaptureStatusActive: the stream is capturing.
	CaptureStatusActive = cudadrv.CaptureStatusActive
	// CaptureStatusInvalidated: the stream's capture was invalidated (a synchronizing call
	// elsewhere, a failed record); it must be aborted (Provider.AbortCapture).
	CaptureStatusInvalidated = cudadrv.CaptureStatusInvalidated
)

// BeginCapture audits kernels and begins recording the compute stream into slot: a new
// generation when none is installed, else a further segment of the installed one (segmented
// capture, with non-capturable seam kernels run eagerly between segment replays). Every
// kernel executed on this thread until EndCapture is recorded, not run. The buffers the
// recorded work touches are retained until the graph is destroyed, so releasing them meanwhile
// is safe.
//
// # Threads
//
// Capture is thread-local: BeginCapture, the recorded Executes and EndCapture or AbortCapture
// must run on one OS thread. A Go caller locks its goroutine (runtime.LockOSThread) for the
// whole capture; a C caller uses one thread.
//
// # Errors
//
// An Unsupported kernel rejects the sequence before begin-capture (graphs.ErrRejected: the
// stream never enters capture). A released buffer, a second concurrent capture or a driver
// failure is an error, and nothing is left capturing.
func (p *Provider) BeginCapture(slot Slot, kernels []*Kernel, retain []*Buffer) error {
	return p.capture(slot, "begin capture", p.slots.Begin, kernels, retain)
}

// Recapture retires slot's installed generation and begins capturing its successor (as
// BeginCapture does). When EndCapture finds the new step's topology unchanged, it updates the
// retired executable in place (cuGraphExecUpdate, tens of times cheaper than instantiation)
// instead of instantiating a new one; otherwise it instantiates. With nothing installed it is
// BeginCapture.
func (p *Provider) Recapture(slot Slot, kernels []*Kernel, retain []*Buffer) error {
	return p.capture(slot, "recapture", p.slots.Recapture, kernels, retain)
}

type beginFunc func(graphs.Slot, []graphs.Node, []graphs.Resource) (graphs.Token, error)

func (p *Provider) capture(slot Slot, what string, begin beginFunc, kernels []*Kernel, retain []*Buffer) error {
	nodes := make([]graphs.Node, len(kernels))
	for i, k := range kernels {
		if k == nil {
			return fmt.Errorf("ep: %s: kernel %d is nil", what, i)
		}
		nodes[i] = k
	}
	resources := make([]graphs.Resource, 0, len(retain))
	var err error
	for i, b := range retain {
		if b == nil {
			err = fmt.Errorf("ep: %s: buffer %d is nil", what, i)
			break
		}
		r, rerr := b.retain()
		if rerr != nil {
			err = fmt.Errorf("ep: %s: buffer %d: %w", what, i, rerr)
			break
		}
		resources = append(resources, r)
	}
	if err != nil {
		for _, r := range resources {
			r.Release()
		}
		return err
	}
	// begin owns resources on every path, success or not; they are released if the window
	// refuses the capture before begin runs.
	began := false
	err = p.beginWindow(what, func() error {
		began = true
		_, err := begin(slot, nodes, resources)
		return err
	})
	if !began {
		for _, r := range resources {
			r.Release()
		}
	}
	if err != nil {
		return fmt.Errorf("ep: %s in %v: %w", what, slot, err)
	}
	return nil
}

// EndCapture ends the capture of slot, instantiates and uploads it (updating the previous
// executable in place where a Recapture allows) and installs it as the slot's next segment.
// A failed end leaves the slot idle with nothing new installed.
func (p *Provider) EndCapture(slot Slot) error {
	return p.endCall(slot, "end capture", p.slots.End)
}

// AbortCapture ends a capture that failed mid-record (for example after a drain invalidated
// it) and discards it, so the compute stream works again. Without a live capture it does
// nothing.
func (p *Provider) AbortCapture(slot Slot) error {
	return p.endCall(slot, "abort capture", p.slots.Abort)
}

// Replay launches every installed segment of slot in capture order on the compute stream. It
// takes no lock, allocates nothing and makes one driver call per segment (cuGraphLaunch).
//
// # Threads
//
// Replay does not make the provider's context current on the calling thread first (that is a
// driver call of its own): its launches name the provider's own stream and executables, so
// the driver runs them in the provider's context or refuses them. When the first launch is
// refused, with nothing enqueued (the host, or a provider on another device, left another
// context current on the thread, or none), Replay binds the provider's context and launches
// once more. So the thread's current context is left as it was unless Replay had to bind.
//
// # Admission
//
// Replay does not enter the provider's capture window (a shared hold of a lock every other
// entry point takes): the graph layer's replay admission already refuses a replay while a
// capture is live on the compute stream (it is set before cuStreamBeginCapture, which waits
// for the replays admitted before it) and after the slots are closed (Close closes them, which
// waits for admitted replays, before it destroys the stream). Its refusals are reported as the
// window's would be: ErrCaptureLive during a capture, ErrClosed after Close, and
// ErrThreadCaptures on an OS thread that captures for another provider (checked first, with
// one atomic load while no thread captures).
func (p *Provider) Replay(slot Slot) error {
	if err := p.refuseForeignCapture("replay"); err != nil {
		return err
	}
	if err := p.slots.Replay(slot); err != nil {
		return p.replayFailed("replay", err, func() error { return p.slots.Replay(slot) })
	}
	return nil
}

// ReplaySegment launches one installed segment of slot by its capture-order index, as Replay
// launches them all (and with Replay's rules for the thread's context and admission).
func (p *Provider) ReplaySegment(slot Slot, index int) error {
	if err := p.refuseForeignCapture("replay a segment"); err != nil {
		return p.segmentIndexFirst(slot, index, err)
	}
	if err := p.slots.ReplaySegment(slot, index); err != nil {
		return p.segmentIndexFirst(slot, index, p.replayFailed("replay a segment", err, func() error { return p.slots.ReplaySegment(slot, index) }))
	}
	return nil
}

// segmentIndexFirst returns, in place of a refused segment replay's error, the argument error
// of an index past the installed segments (a capture refuses the replay before the graph layer
// looks at the index, and argument errors come first).
func (p *Provider) segmentIndexFirst(slot Slot, index int, err error) error {
	if n := p.slots.SegmentCount(slot); n > 0 && (index < 0 || index >= n) && !errors.Is(err, graphs.ErrSegmentIndex) {
		return fmt.Errorf("%w: replay segment %d of slot %v: %d segment(s) installed", graphs.ErrSegmentIndex, index, slot, n)
	}
	return err
}

// replayFailed is the slow path of Replay and ReplaySegment, kept out of line: a launch
// refused with nothing enqueued is retried once with the context bound (rebound); a refusal of
// admission is reported as the capture window would report it.
func (p *Provider) replayFailed(what string, err error, again func() error) error {
	if nothingLaunched(err) {
		return p.rebound(what, err, again)
	}
	if p.closed.Load() {
		return fmt.Errorf("%w: cannot %s", ErrClosed, what)
	}
	if tid := p.win.capture.Load(); tid != 0 || errors.Is(err, graphs.ErrStreamCapturing) {
		if tid == 0 { // the capture is beginning: the graph layer refused first
			return fmt.Errorf("%w: cannot %s inside a capture: %w", ErrCaptureLive, what, err)
		}
		return p.captureLive(what, tid)
	}
	return err
}

// nothingLaunched reports whether err is a replay's failed launch that left nothing enqueued,
// so that the replay may run again. Refusals before any launch (nothing installed, retired, a
// capture on the stream) are not launch failures: they would fail the same way again.
func nothingLaunched(err error) bool {
	var le *graphs.LaunchError
	return errors.As(err, &le) && le.Enqueued == 0
}

// ResetGraph retires slot's installed generation, waits for replays already admitted, and
// destroys its segments (then releases the buffers they retained). No launch of the
// generation is enqueued after it returns. It reports whether a graph was installed.
//
// # Errors
//
// A live capture on the provider, in any slot, is refused with ErrCaptureLive (end or abort it
// first).
func (p *Provider) ResetGraph(slot Slot) (bool, error) {
	e, err := p.enter("reset a graph", accessDriver)
	if err != nil {
		return false, err
	}
	defer e.leave()
	had, err := p.slots.Reset(slot)
	if err != nil {
		return false, fmt.Errorf("ep: reset %v: %w", slot, err)
	}
	return had, nil
}

// RemoveGraph resets a keyed slot (as ResetGraph does) and forgets its key, making room for
// another: a provider holds at most 128 keyed slots at a time. Removing a key that is not held
// does nothing.
//
// # Errors
//
// Primary or Verify: ErrInvalidArgument (they are permanent; reset them instead). A live
// capture on the provider: ErrCaptureLive.
func (p *Provider) RemoveGraph(slot Slot) error {
	if _, keyed := slot.Key(); !keyed {
		return fmt.Errorf("%w: remove graph: only keyed slots can be removed, not %v (reset it instead)", ErrInvalidArgument, slot)
	}
	e, err := p.enter("remove a graph slot", accessDriver)
	if err != nil {
		return err
	}
	defer e.leave()
	if err := p.slots.Remove(slot); err != nil {
		return fmt.Errorf("ep: remove %v: %w", slot, err)
	}
	return nil
}

// HasExecutable reports whether slot has an installed executable to replay.
func (p *Provider) HasExecutable(slot Slot) bool { return p.slots.HasExecutable(slot) }

// SegmentCount returns the number of installed segments of slot (1 for a whole-step capture).
func (p *Provider) SegmentCount(slot Slot) int { return p.slots.SegmentCount(slot) }

// CaptureStatus returns the driver's capture status of the compute stream. CaptureLive, one
// atomic load, answers whether a capture is live without a driver call.
func (p *Provider) CaptureStatus() (CaptureStatus, error) {
	e, err := p.enter("query the capture status", accessQuery)
	if err != nil {
		return CaptureStatusNone, err
	}
	defer e.leave()
	return p.slots.CaptureStatus()
}

// GraphKeys returns the keys of the keyed slots the provider holds, in increasing order.
func (p *Provider) GraphKeys() []int64 { return p.slots.Keys() }

// GraphStats returns slot's counters (lock acquisitions, completed captures, replay launches,
// updates, instantiations). A keyed slot never used reads as zero counters: asking does not
// create it (keyed slots are bounded).
func (p *Provider) GraphStats(slot Slot) (GraphStats, error) {
	if key, keyed := slot.Key(); keyed && !slices.Contains(p.slots.Keys(), key) {
		return GraphStats{}, nil
	}
	l, err := p.slots.Lifecycle(slot)
	if err != nil {
		return GraphStats{}, err
	}
	return l.Stats(), nil
}

func (p *Provider) endCall(slot Slot, what string, call func(Slot) error) error {
	if err := p.endWindow(what, func() error { return call(slot) }); err != nil {
		return fmt.Errorf("ep: %s in %v: %w", what, slot, err)
	}
	return nil
}
