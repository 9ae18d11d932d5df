package graphs

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cudaep/cudaep/cudadrv"
)

// Slots holds the lifecycles of one stream and one owner: [Primary], [Verify], and keyed
// lifecycles made on first use (for example one per captured batch size), at most
// [Config.MaxKeyedSlots] of them. Each slot captures, replays and resets independently; they
// share the stream, so a capture in one slot refuses replays of every slot (they would be
// recorded into it) and Reset or Close of one waits for, or refuses during, the others'
// captures.
//
// Methods take the slot and act on its installed generation, so the caller holds no tokens;
// use [Slots.Lifecycle] for token-level control. Replay and ReplaySegment take no lock and
// allocate nothing. All methods are safe for concurrent use, with the threading rules of
// [Lifecycle]. Close a Slots to destroy everything it holds.
type Slots struct {
	stream *cudadrv.Stream
	owner  Owner
	cfg    Config
	guard  *streamGuard

	primary, verify *Lifecycle

	mu     sync.Mutex // serializes changes to keyed
	keyed  atomic.Pointer[map[int64]*Lifecycle]
	closed bool // guarded by mu

	// keyedGen is the first generation of a keyed lifecycle made now (guarded by mu): past
	// every generation of the keyed lifecycles removed so far, so that a token of a removed
	// slot never names a generation of the lifecycle made when its key is used again.
	keyedGen uint64
}

// NewSlots returns the slots of stream for owner, with Primary and Verify ready and no keyed
// slot yet. It does not own the stream.
//
// # Errors
//
// A nil stream or zero owner wraps [ErrInvalidArgument].
func NewSlots(stream *cudadrv.Stream, owner Owner, cfg Config) (*Slots, error) {
	s := &Slots{stream: stream, owner: owner, cfg: cfg, guard: newStreamGuard()}
	var err error
	if s.primary, err = newLifecycle(stream, owner, Primary, cfg, s.guard); err != nil {
		return nil, err
	}
	if s.verify, err = newLifecycle(stream, owner, Verify, cfg, s.guard); err != nil {
		return nil, err
	}
	s.keyed.Store(&map[int64]*Lifecycle{})
	return s, nil
}

// Owner returns the owner of every lifecycle in s.
func (s *Slots) Owner() Owner { return s.owner }

// Stream returns the shared stream.
func (s *Slots) Stream() *cudadrv.Stream { return s.stream }

// lookup returns the lifecycle of slot, or nil. It takes no lock.
func (s *Slots) lookup(slot Slot) *Lifecycle {
	switch slot.kind {
	case slotPrimary:
		return s.primary
	case slotVerify:
		return s.verify
	case slotKeyed:
		return (*s.keyed.Load())[slot.key]
	}
	return nil
}

// Lifecycle returns the lifecycle of slot, making a keyed one on first use.
//
// # Errors
//
// An invalid slot: [ErrInvalidArgument]. A new key past the maximum: [ErrTooManySlots]
// naming the key and the bound. A closed Slots: [ErrClosed].
func (s *Slots) Lifecycle(slot Slot) (*Lifecycle, error) {
	if !slot.Valid() {
		return nil, fmt.Errorf("%w: invalid slot", ErrInvalidArgument)
	}
	if l := s.lookup(slot); l != nil {
		return l, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: slots of stream", ErrClosed)
	}
	old := *s.keyed.Load()
	if l := old[slot.key]; l != nil {
		return l, nil
	}
	if max := s.cfg.MaxKeyedSlots(); len(old) >= max {
		return nil, fmt.Errorf("%w: slot %v would be keyed slot %d, the maximum is %d (remove one first)",
			ErrTooManySlots, slot, len(old)+1, max)
	}
	l, err := newLifecycle(s.stream, s.owner, slot, s.cfg, s.guard)
	if err != nil {
		return nil, err
	}
	// l is not published yet: no other goroutine can reach its state.
	l.st.nextGeneration = max(l.st.nextGeneration, s.keyedGen)
	// Copy on write: replays read the map without a lock.
	m := make(map[int64]*Lifecycle, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[slot.key] = l
	s.keyed.Store(&m)
	return l, nil
}

// Keys returns the keys of the keyed slots held now, in increasing order.
func (s *Slots) Keys() []int64 {
	m := *s.keyed.Load()
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Remove closes the keyed slot's lifecycle (destroying what it holds, as Reset does) and
// forgets the key, making room for another. Removing a key not held does nothing. A key
// used again after Remove gets a new lifecycle whose generations continue past the removed
// one's: tokens of the removed slot stay stale ([ErrTokenMismatch]).
//
// # Errors
//
// Primary or Verify: [ErrInvalidArgument] (they are permanent). A live capture in the slot
// or in another slot of the shared stream: [ErrCaptureActive], and the slot stays.
func (s *Slots) Remove(slot Slot) error {
	key, ok := slot.Key()
	if !ok {
		return fmt.Errorf("%w: only keyed slots can be removed, not %v", ErrInvalidArgument, slot)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.keyed.Load()
	l := old[key]
	if l == nil {
		return nil
	}
	if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
		if errors.Is(err, ErrCaptureActive) {
			return err
		}
		s.forgetLocked(old, key)
		return err
	}
	s.forgetLocked(old, key)
	return nil
}

// forgetLocked drops key from the keyed slots, after its lifecycle was closed.
func (s *Slots) forgetLocked(old map[int64]*Lifecycle, key int64) {
	s.retireGenerationsLocked(old[key])
	m := make(map[int64]*Lifecycle, len(old))
	for k, v := range old {
		if k != key {
			m[k] = v
		}
	}
	s.keyed.Store(&m)
}

// Begin audits nodes and begins capturing a segment into slot's installed generation, or into
// a new generation when none is installed (see [Lifecycle.Begin], whose rules apply: lock
// the OS thread for the whole capture). It returns the generation's token.
func (s *Slots) Begin(slot Slot, nodes []Node, resources []Resource) (Token, error) {
	l, err := s.Lifecycle(slot)
	if err != nil {
		releaseAll(nonNil(resources))
		return Token{}, err
	}
	cur, _ := l.Current()
	return l.Begin(cur, nodes, resources)
}

// Recapture retires slot's installed generation and begins capturing its successor, to be
// updated in place by End where the topology is unchanged (see [Lifecycle.Recapture]). With
// nothing installed it is Begin.
func (s *Slots) Recapture(slot Slot, nodes []Node, resources []Resource) (Token, error) {
	l, err := s.Lifecycle(slot)
	if err != nil {
		releaseAll(nonNil(resources))
		return Token{}, err
	}
	cur, ok := l.Current()
	if !ok {
		return l.Begin(Token{}, nodes, resources)
	}
	return l.Recapture(cur, nodes, resources)
}

// End ends slot's live capture and installs it (see [Lifecycle.End]).
func (s *Slots) End(slot Slot) error {
	l := s.lookup(slot)
	if l == nil {
		return fmt.Errorf("%w: end slot %v: no capture was begun", ErrNotCapturing, slot)
	}
	cur, _ := l.Current()
	return l.End(cur)
}

// Abort discards slot's live capture, if any (see [Lifecycle.Abort]).
func (s *Slots) Abort(slot Slot) error {
	l := s.lookup(slot)
	if l == nil {
		return nil
	}
	cur, ok := l.Current()
	if !ok {
		return nil
	}
	return l.Abort(cur)
}

// Replay launches every installed segment of slot in capture order (see [Lifecycle.Replay]).
// It admits itself once, into whatever generation is installed now, and launches the set it
// was admitted under; it takes no lock and allocates nothing.
//
// # Errors
//
// [Lifecycle.Replay]'s, naming the slot, but for [ErrTokenMismatch]: there is no token to
// mismatch. A slot that holds no lifecycle (a key never used, or removed): [ErrNotInstalled].
func (s *Slots) Replay(slot Slot) error {
	l := s.lookup(slot)
	if l == nil {
		return noLifecycle("replay", slot)
	}
	return l.replayInstalled()
}

// ReplaySegment launches one installed segment of slot by index (see
// [Lifecycle.ReplaySegment]), admitted as Replay is. It takes no lock and allocates nothing.
//
// # Errors
//
// Replay's, and an index outside the installed segments: [ErrSegmentIndex].
func (s *Slots) ReplaySegment(slot Slot, index int) error {
	l := s.lookup(slot)
	if l == nil {
		return noLifecycle("replay segment", slot)
	}
	return l.replaySegmentInstalled(index)
}

// noLifecycle is the error for an operation on a slot that holds no lifecycle.
func noLifecycle(op string, slot Slot) error {
	return fmt.Errorf("%w: cannot %s slot %v: it holds no lifecycle", ErrNotInstalled, op, slot)
}

// Reset resets slot's installed generation (see [Lifecycle.Reset]) and reports whether it
// held any segment. With nothing installed it returns false, nil.
func (s *Slots) Reset(slot Slot) (bool, error) {
	l := s.lookup(slot)
	if l == nil {
		return false, nil
	}
	cur, ok := l.Current()
	if !ok {
		return false, nil
	}
	return l.Reset(cur)
}

// HasExecutable reports whether slot has an installed executable to replay.
func (s *Slots) HasExecutable(slot Slot) bool {
	l := s.lookup(slot)
	if l == nil {
		return false
	}
	set := l.replay.Load()
	return set != nil && l.HasExecutable(set.token)
}

// SegmentCount returns the number of segments installed in slot.
func (s *Slots) SegmentCount(slot Slot) int {
	l := s.lookup(slot)
	if l == nil {
		return 0
	}
	set := l.replay.Load()
	if set == nil {
		return 0
	}
	return l.SegmentCount(set.token)
}

// CaptureStatus returns the capture status of the shared stream, as the driver reports it.
func (s *Slots) CaptureStatus() (cudadrv.CaptureStatus, error) {
	return s.stream.CaptureStatus()
}

// Capturing reports whether any slot of s is capturing on the shared stream (from the
// moment its capture lease takes effect until end-capture returned). It is one atomic load,
// no driver call: callers use it to refuse stream work that a capture would record or that
// would invalidate the capture.
func (s *Slots) Capturing() bool { return s.guard.capturing.Load() }

// Close closes every lifecycle (Primary, Verify, then the keyed ones in key order),
// destroying what each holds, and forgets the keyed slots.
//
// # Errors
//
// The joined errors of the lifecycles' Close; a lifecycle with a live capture stays open
// ([ErrCaptureActive]) and can be closed by a later Close once aborted.
func (s *Slots) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, l := range []*Lifecycle{s.primary, s.verify} {
		if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	old := *s.keyed.Load()
	m := map[int64]*Lifecycle{}
	for _, k := range s.Keys() {
		l := old[k]
		if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
			if errors.Is(err, ErrCaptureActive) {
				m[k] = l
				continue
			}
		}
		s.retireGenerationsLocked(l)
	}
	s.keyed.Store(&m)
	s.closed = len(errs) == 0
	return errors.Join(errs...)
}

// retireGenerationsLocked makes the keyed lifecycles made from now on start past every
// generation l used or will use (it is closed).
func (s *Slots) retireGenerationsLocked(l *Lifecycle) {
	l.lock()
	defer l.mu.Unlock()
	s.keyedGen = max(s.keyedGen, l.st.nextGeneration)
}
