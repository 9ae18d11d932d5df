package graphs

import "fmt"

// Replay launches every installed segment of token's generation, in capture order, on the
// lifecycle's stream (cuGraphLaunch each). It enqueues only: synchronize the stream to wait.
//
// Replay takes no lock and allocates nothing (on success); it is safe to call from several
// goroutines at once and concurrently with Reset, which waits for it to finish enqueueing.
// The calling thread must have the stream's context bound.
//
// # Errors
//
//   - Nothing installed (never captured, reset, closed): [ErrNotInstalled].
//   - A token of another owner, slot or generation: [ErrTokenMismatch] naming both.
//   - The generation was retired while the replay was being admitted: [ErrRetired].
//   - A capture is live on the lifecycle's stream: [ErrStreamCapturing].
//   - A launch fails: a *[LaunchError] wrapping the driver's error, naming the segment and how
//     many earlier segments stay queued.
//
// In every case but the last, nothing was enqueued.
func (l *Lifecycle) Replay(token Token) error {
	set, err := l.admit("replay", token)
	if err != nil {
		return err
	}
	defer l.active.Add(-1)
	return l.launchAll(set)
}

// ReplaySegment launches one installed segment of token's generation, by its zero-based
// capture-order index. An executor of a segmented capture calls it per segment and runs the
// non-capturable seam nodes eagerly in between. Concurrency and allocation are as for
// Replay.
//
// # Errors
//
// Replay's, and an index outside the installed segments: [ErrSegmentIndex] naming the count.
func (l *Lifecycle) ReplaySegment(token Token, index int) error {
	set, err := l.admit("replay segment", token)
	if err != nil {
		return err
	}
	defer l.active.Add(-1)
	return l.launchOne(set, index)
}

// replayInstalled is Replay of whatever generation is installed now, for the lifecycle's
// Slots, which holds no token: one admission (admitInstalled), then the launches of the set
// it was admitted under. Its errors are Replay's but for ErrTokenMismatch, which it cannot
// meet.
func (l *Lifecycle) replayInstalled() error {
	set, err := l.admitInstalled("replay")
	if err != nil {
		return err
	}
	defer l.active.Add(-1)
	return l.launchAll(set)
}

// replaySegmentInstalled is ReplaySegment of whatever generation is installed now, as
// replayInstalled is Replay.
func (l *Lifecycle) replaySegmentInstalled(index int) error {
	set, err := l.admitInstalled("replay segment")
	if err != nil {
		return err
	}
	defer l.active.Add(-1)
	return l.launchOne(set, index)
}

// launchAll launches every segment of an admitted set, in capture order. A failed launch is a
// *LaunchError. The launches are counted once for the whole set (one atomic add per replay,
// not per segment), before the replay leaves its epoch.
func (l *Lifecycle) launchAll(set *replaySet) error {
	for i, seg := range set.segments {
		if err := l.launch(seg); err != nil {
			l.launches.Add(uint64(i))
			return &LaunchError{Token: set.token, Segment: i, Segments: len(set.segments), Enqueued: i, Err: err}
		}
	}
	l.launches.Add(uint64(len(set.segments)))
	return nil
}

// launchOne launches segment index of an admitted set. A failed launch is a *LaunchError.
func (l *Lifecycle) launchOne(set *replaySet, index int) error {
	if index < 0 || index >= len(set.segments) {
		return fmt.Errorf("%w: replay segment %d of slot %v: %d segment(s) installed", ErrSegmentIndex, index, l.slot, len(set.segments))
	}
	if err := l.launch(set.segments[index]); err != nil {
		return &LaunchError{Token: set.token, Segment: index, Err: err}
	}
	l.launches.Add(1)
	return nil
}

// launch enqueues one segment, between the test hooks; the caller counts it.
func (l *Lifecycle) launch(seg *segment) error {
	h := l.hooks
	if h != nil && h.beforeLaunch != nil {
		h.beforeLaunch()
	}
	if err := seg.exec.Launch(l.stream); err != nil {
		return err
	}
	if h != nil && h.afterLaunch != nil {
		h.afterLaunch()
	}
	return nil
}
