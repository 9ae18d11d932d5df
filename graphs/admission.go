package graphs

import "fmt"

// The replay epoch has two doors, and a replay goes through exactly one of them, once:
//
//   - admit, for a caller holding a token (Lifecycle.Replay, Lifecycle.ReplaySegment): the
//     token must name this lifecycle's owner, slot and installed generation.
//   - admitInstalled, for the lifecycle's own Slots (Slots.Replay, Slots.ReplaySegment): it
//     admits whatever generation is installed now; owner and slot are the lifecycle's own, so
//     there is nothing to check them against.
//
// Both return the published set the replay was admitted under, and the replay launches that
// set and nothing else: the set is loaded once, after entering, so it cannot belong to a
// generation other than the admitted one. On success the caller must leave the epoch
// (l.active.Add(-1)) once its launches are enqueued. Neither takes a lock; neither allocates
// unless it fails.

// admit enters the replay epoch for token and returns the published set it was admitted
// under.
func (l *Lifecycle) admit(op string, token Token) (*replaySet, error) {
	if token.owner != l.owner || token.slot != l.slot {
		return nil, l.admitMismatch(op, token)
	}
	gen := l.installed.Load()
	if gen == 0 {
		return nil, l.notInstalled(op, token)
	}
	if gen != token.generation {
		return nil, l.admitMismatch(op, token)
	}
	return l.enter(op, gen)
}

// admitInstalled enters the replay epoch for the generation installed now and returns the
// published set it was admitted under. Errors name the slot, and the generation when one was
// found installed.
func (l *Lifecycle) admitInstalled(op string) (*replaySet, error) {
	gen := l.installed.Load()
	if gen == 0 {
		return nil, l.notInstalled(op, Token{})
	}
	return l.enter(op, gen)
}

// enter admits a replay into generation gen, which was installed when the caller loaded it,
// and loads the published set.
func (l *Lifecycle) enter(op string, gen uint64) (*replaySet, error) {
	h := l.hooks
	if h != nil && h.beforeEnter != nil {
		h.beforeEnter()
	}
	l.active.Add(1)
	// Recheck after entering: a Reset that retired gen before our increment may not have
	// seen us, so we back out; one that retires after it waits for us to leave.
	if l.installed.Load() != gen {
		l.active.Add(-1)
		return nil, l.retired(op, l.tokenOf(gen))
	}
	if l.guard.capturing.Load() {
		l.active.Add(-1)
		return nil, l.streamCapturing(op, l.tokenOf(gen))
	}
	// End publishes a generation's set before the generation, and a retirement unpublishes
	// it only after waiting for us, so the set loaded now belongs to gen. (The End of a
	// segmented capture may publish a longer set of gen meanwhile; this replay launches the
	// immutable one it loaded.)
	set := l.replay.Load()
	if set == nil || set.token.generation != gen {
		l.active.Add(-1)
		return nil, l.setMismatch(op, l.tokenOf(gen), set)
	}
	if h != nil && h.admitted != nil {
		h.admitted()
	}
	return set, nil
}

// tokenOf returns the token of the lifecycle's generation gen.
func (l *Lifecycle) tokenOf(gen uint64) Token {
	return Token{owner: l.owner, slot: l.slot, generation: gen}
}

// The failure paths are kept out of line so that admission stays small and allocation-free.

func (l *Lifecycle) admitMismatch(op string, token Token) error {
	installed := Token{}
	if gen := l.installed.Load(); gen != 0 {
		installed = l.tokenOf(gen)
	}
	return mismatch(op, l.slot, installed, token)
}

func (l *Lifecycle) notInstalled(op string, token Token) error {
	if l.closed.Load() {
		return fmt.Errorf("%w: %s slot %v with token %v: %w", ErrNotInstalled, op, l.slot, token, ErrClosed)
	}
	return fmt.Errorf("%w: cannot %s slot %v with token %v", ErrNotInstalled, op, l.slot, token)
}

func (l *Lifecycle) retired(op string, token Token) error {
	return fmt.Errorf("%w: %s slot %v with token %v", ErrRetired, op, l.slot, token)
}

func (l *Lifecycle) streamCapturing(op string, token Token) error {
	return fmt.Errorf("%w: %s slot %v with token %v refused: a capture on the shared stream would record it", ErrStreamCapturing, op, l.slot, token)
}

// setMismatch reports a published set that does not belong to the admitted generation.
// Admission makes it unreachable; it is kept so that a broken invariant is an error, not a
// crash or a launch of the wrong graph.
func (l *Lifecycle) setMismatch(op string, token Token, set *replaySet) error {
	if set == nil {
		return l.notInstalled(op, token)
	}
	return mismatch(op, l.slot, set.token, token)
}
