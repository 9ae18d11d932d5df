package graphs

import "fmt"

// admit enters the replay epoch for token: on success the caller must leave it
// (l.active.Add(-1)) once its launches are enqueued. It allocates nothing unless it fails.
func (l *Lifecycle) admit(op string, token Token) error {
	if token.owner != l.owner || token.slot != l.slot {
		return l.admitMismatch(op, token)
	}
	gen := l.installed.Load()
	if gen == 0 {
		return l.notInstalled(op, token)
	}
	if gen != token.generation {
		return l.admitMismatch(op, token)
	}
	l.active.Add(1)
	// Recheck after entering: a Reset that retired gen before our increment may not have
	// seen us, so we back out; one that retires after it waits for us to leave.
	if l.installed.Load() != gen {
		l.active.Add(-1)
		return l.retired(op, token)
	}
	if l.guard.capturing.Load() {
		l.active.Add(-1)
		return l.streamCapturing(op, token)
	}
	return nil
}

// The failure paths are kept out of line so that admit stays small and allocation-free.

func (l *Lifecycle) admitMismatch(op string, token Token) error {
	installed := Token{}
	if gen := l.installed.Load(); gen != 0 {
		installed = Token{owner: l.owner, slot: l.slot, generation: gen}
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
