package graphs_test

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/graphs"
)

// Seed: exact_owner_token_and_reset_gate_linearize_replay_enqueue. A foreign owner's token
// can neither replay nor reset; a reset that starts while a replay is admitted waits for its
// enqueue; after reset returns, nothing more is enqueued. The interleaving is forced with the
// lifecycle's hooks, so the test is deterministic.
func TestExactOwnerTokenAndResetGateLinearizeReplayEnqueue(t *testing.T) {
	r := newRig(t)
	const n = 16
	x, y := r.buf(n), r.buf(n)
	input := pattern(n, 2)
	r.upload(x.Ptr(), input)
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, l.End(tok))

	wrongOwner := graphs.NewToken(graphs.NewOwner(), tok.Slot(), tok.Generation())
	err = l.Replay(wrongOwner)
	require.ErrorIs(t, err, graphs.ErrTokenMismatch, "another executor's token must not name this graph")
	assert.Contains(t, err.Error(), "token mismatch")
	assert.Contains(t, err.Error(), "installed "+tok.String())
	assert.Contains(t, err.Error(), "supplied "+wrongOwner.String())
	_, err = l.Reset(wrongOwner)
	require.ErrorIs(t, err, graphs.ErrTokenMismatch, "another executor's token must not reset this graph")
	require.True(t, l.HasExecutable(tok), "the refused reset left the graph installed")

	entered, release := make(chan struct{}), make(chan struct{})
	resetWaiting := make(chan struct{})
	var enqueues atomic.Int32
	graphs.SetLifecycleHooks(l, graphs.LifecycleHooks{
		BeforeLaunch: func() { close(entered); <-release },
		AfterLaunch:  func() { enqueues.Add(1) },
		ResetWaits:   func() { close(resetWaiting) },
	})

	replayed := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := r.ctx.Bind(); err != nil {
			replayed <- err
			return
		}
		replayed <- l.Replay(tok)
	}()
	<-entered // the replay owns the enqueue epoch

	type resetResult struct {
		had bool
		err error
	}
	resetDone := make(chan resetResult, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := r.ctx.Bind(); err != nil {
			resetDone <- resetResult{err: err}
			return
		}
		had, err := l.Reset(tok)
		resetDone <- resetResult{had, err}
	}()
	<-resetWaiting // the reset retired the generation and found the admitted replay
	select {
	case <-resetDone:
		t.Fatal("reset returned while a replay still owned the enqueue epoch")
	default:
	}

	close(release)
	require.NoError(t, <-replayed)
	assert.Equal(t, int32(1), enqueues.Load())
	res := <-resetDone
	require.NoError(t, res.err)
	assert.True(t, res.had)

	err = l.Replay(tok)
	require.ErrorIs(t, err, graphs.ErrNotInstalled, "a retired generation must not enqueue after reset returns")
	assert.Contains(t, err.Error(), "no executable is installed")
	assert.Equal(t, int32(1), enqueues.Load(), "no launch may be newly enqueued after reset returns")
	assert.Equal(t, plus(input, 1), r.read(y.Ptr(), n))
}

// TestSlotReplayRacingResetNeverLaunchesAfterResetReturns: Slots.Replay, which admits itself
// into whatever generation is installed, races Slots.Reset in both orders, forced with the
// lifecycle's hooks. A replay admitted first holds Reset back until it has enqueued; a replay
// that found the generation installed but entered the epoch only after Reset retired it
// (even after a new generation was installed) backs out with ErrRetired. Either way nothing
// is launched after Reset returned.
func TestSlotReplayRacingResetNeverLaunchesAfterResetReturns(t *testing.T) {
	r := newRig(t)
	const n = 16
	x, y, y2 := r.buf(n), r.buf(n), r.buf(n)
	input := pattern(n, 3)
	r.upload(x.Ptr(), input)

	// setup returns slots with Primary installed (y = x + 1) and its lifecycle.
	setup := func() (*graphs.Slots, *graphs.Lifecycle) {
		slots := r.slots(graphs.Config{})
		_, err := slots.Begin(graphs.Primary, capturable, nil)
		require.NoError(t, err)
		r.addOne(x.Ptr(), y.Ptr(), n)
		require.NoError(t, slots.End(graphs.Primary))
		l, err := slots.Lifecycle(graphs.Primary)
		require.NoError(t, err)
		return slots, l
	}
	// replayAsync runs slots.Replay(Primary) on its own locked OS thread.
	replayAsync := func(slots *graphs.Slots) <-chan error {
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := r.ctx.Bind(); err != nil {
				done <- err
				return
			}
			done <- slots.Replay(graphs.Primary)
		}()
		return done
	}

	// An admitted replay holds reset back.
	{
		slots, l := setup()
		r.poison(y)
		entered, release, resetWaiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var launched atomic.Int32
		graphs.SetLifecycleHooks(l, graphs.LifecycleHooks{
			BeforeLaunch: func() { close(entered); <-release },
			AfterLaunch:  func() { launched.Add(1) },
			ResetWaits:   func() { close(resetWaiting) },
		})
		replayed := replayAsync(slots)
		<-entered
		resetDone := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := r.ctx.Bind(); err != nil {
				resetDone <- err
				return
			}
			_, err := slots.Reset(graphs.Primary)
			resetDone <- err
		}()
		<-resetWaiting // the reset retired the generation and found the admitted replay
		select {
		case <-resetDone:
			t.Fatal("reset returned while a slot replay was still admitted")
		default:
		}
		close(release)
		require.NoError(t, <-replayed)
		require.NoError(t, <-resetDone)
		assert.Equal(t, int32(1), launched.Load(), "the admitted replay launched before reset returned")

		require.ErrorIs(t, slots.Replay(graphs.Primary), graphs.ErrNotInstalled)
		assert.Equal(t, int32(1), launched.Load(), "nothing launched after reset returned")
		assert.Equal(t, plus(input, 1), r.read(y.Ptr(), n))
	}

	retiredBeforeEntering := []struct {
		name      string
		recapture bool // install a new generation before the replay enters
	}{
		{"a replay retired before it entered backs out", false},
		{"a replay retired and replaced before it entered backs out", true},
	}
	for _, tc := range retiredBeforeEntering {
		func() {
			slots, l := setup()
			found, release := make(chan struct{}), make(chan struct{})
			var launched atomic.Int32
			graphs.SetLifecycleHooks(l, graphs.LifecycleHooks{
				BeforeEnter: func() { close(found); <-release },
				AfterLaunch: func() { launched.Add(1) },
			})
			replayed := replayAsync(slots)
			<-found // the replay read the installed generation and has not entered yet
			had, err := slots.Reset(graphs.Primary)
			require.NoError(t, err, tc.name)
			require.True(t, had, tc.name)
			if tc.recapture {
				// A new generation (y2 = x + 1) is installed before the stale replay enters.
				_, err := slots.Begin(graphs.Primary, capturable, nil)
				require.NoError(t, err)
				r.addOne(x.Ptr(), y2.Ptr(), n)
				require.NoError(t, slots.End(graphs.Primary))
			}
			r.poison(y)
			r.poison(y2)
			close(release)
			err = <-replayed
			require.ErrorIs(t, err, graphs.ErrRetired, "%s: the replay entered after reset retired its generation", tc.name)
			assert.Contains(t, err.Error(), "slot primary", tc.name)
			assert.Zero(t, launched.Load(), "%s: nothing launched after reset returned", tc.name)
			for _, b := range []*cudadrv.DeviceBuffer{y, y2} {
				got := r.read(b.Ptr(), n)
				assert.True(t, math.IsNaN(float64(got[0])), "%s: the poisoned output was not written", tc.name)
			}
		}()
	}
}

// TestTokenMismatchNamesBothSides: a token of another owner, slot or generation is refused
// by every operation with an error naming the installed and the supplied token, and leaves
// the installation untouched.
func TestTokenMismatchNamesBothSides(t *testing.T) {
	r := newRig(t)
	const n = 16
	x, y := r.buf(n), r.buf(n)
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, l.End(tok))

	foreign := []struct {
		name string
		tok  graphs.Token
	}{
		{"another owner", graphs.NewToken(graphs.NewOwner(), graphs.Primary, tok.Generation())},
		{"another slot", graphs.NewToken(tok.Owner(), graphs.Verify, tok.Generation())},
		{"an old generation", graphs.NewToken(tok.Owner(), graphs.Primary, tok.Generation()-1)},
		{"a future generation", graphs.NewToken(tok.Owner(), graphs.Primary, tok.Generation()+1)},
	}
	ops := []struct {
		name string
		call func(graphs.Token) error
	}{
		{"replay", l.Replay},
		{"replay segment", func(t graphs.Token) error { return l.ReplaySegment(t, 0) }},
		{"reset", func(t graphs.Token) error { _, err := l.Reset(t); return err }},
		{"begin", func(t graphs.Token) error { _, err := l.Begin(t, capturable, nil); return err }},
		{"recapture", func(t graphs.Token) error { _, err := l.Recapture(t, capturable, nil); return err }},
	}
	for _, f := range foreign {
		for _, op := range ops {
			t.Run(op.name+" with "+f.name, func(t *testing.T) {
				err := op.call(f.tok)
				require.ErrorIs(t, err, graphs.ErrTokenMismatch)
				assert.Contains(t, err.Error(), "installed "+tok.String())
				assert.Contains(t, err.Error(), "supplied "+f.tok.String())
				assert.True(t, l.HasExecutable(tok), "the installation is untouched")
			})
		}
	}
	// End and abort of a live capture with a foreign token.
	tok2, err := l.Begin(tok, capturable, nil)
	require.NoError(t, err)
	for _, f := range foreign[:3] {
		err := l.End(f.tok)
		require.ErrorIs(t, err, graphs.ErrTokenMismatch, "end with %s", f.name)
		assert.Contains(t, err.Error(), "supplied "+f.tok.String())
		require.ErrorIs(t, l.Abort(f.tok), graphs.ErrTokenMismatch, "abort with %s", f.name)
		assert.True(t, l.Capturing())
	}
	require.NoError(t, l.Abort(tok2))
	assert.ErrorIs(t, l.ReplaySegment(tok, 1), graphs.ErrSegmentIndex)
	assert.ErrorIs(t, l.ReplaySegment(tok, -1), graphs.ErrSegmentIndex)
	require.NoError(t, l.ReplaySegment(tok, 0))
}

// TestStressReplayWhileResetAndRecapture: eight goroutines replay by slot (and drain through
// the gate now and then) while another resets, recaptures in place and captures anew, over
// and over. Every replay either launches or is refused with a documented error; every launch
// is counted; none happens between a Reset or Recapture returning and the next End; the final
// graph computes the right answer and nothing leaks. Run it with -race.
func TestStressReplayWhileResetAndRecapture(t *testing.T) {
	r := newRig(t)
	const (
		n         = 256
		replayers = 8
		rounds    = 60
	)
	x := r.buf(n)
	y0, y1 := r.buf(n), r.buf(n)
	input := pattern(n, 4)
	r.upload(x.Ptr(), input)
	slots := r.slots(graphs.Config{})
	l, err := slots.Lifecycle(graphs.Primary)
	require.NoError(t, err)
	gate := l.Gate()

	var (
		stop      atomic.Bool
		successes atomic.Int64
		wg        sync.WaitGroup
		failures  = make(chan error, replayers)
	)
	for range replayers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := r.ctx.Bind(); err != nil {
				failures <- err
				return
			}
			for i := 0; !stop.Load(); i++ {
				err := slots.Replay(graphs.Primary)
				switch {
				case err == nil:
					successes.Add(1)
				case errors.Is(err, graphs.ErrNotInstalled), errors.Is(err, graphs.ErrRetired),
					errors.Is(err, graphs.ErrStreamCapturing):
					// Not ErrTokenMismatch: the slot path admits whatever generation is
					// installed, once, and has no token to mismatch.
					runtime.Gosched()
				default:
					failures <- err
					return
				}
				if i%16 == 15 {
					// Keep the queue short: a forced drain waits for any live capture.
					if err := gate.Drain(r.s.Synchronize); err != nil {
						failures <- err
						return
					}
				}
			}
		}()
	}

	// capture records the new generation's kernels and ends the capture. retiredAt is the
	// launch count when the Reset or Recapture that retired the old generation returned: no
	// replay may launch from then until End publishes the new one.
	capture := func(tok graphs.Token, out uint64, kernels int, retiredAt uint64) {
		y := y0
		if out == 1 {
			y = y1
		}
		for k := range kernels {
			if k == 0 {
				r.addOne(x.Ptr(), y.Ptr(), n)
			} else {
				r.addOne(y.Ptr(), y.Ptr(), n)
			}
		}
		require.Equal(t, retiredAt, l.Stats().ReplayLaunches, "a replay launched after the reset or recapture returned")
		require.NoError(t, l.End(tok))
	}
	last := int64(0)
	for round := range rounds {
		for round > 0 && successes.Load() <= last { // until the installed graph was replayed
			select {
			case err := <-failures:
				t.Fatal(err)
			default:
			}
			runtime.Gosched()
		}
		last = successes.Load()
		var (
			tok       graphs.Token
			retiredAt uint64
		)
		switch round % 3 {
		case 0: // reset, then a new generation
			if round > 0 {
				_, err := slots.Reset(graphs.Primary)
				require.NoError(t, err)
			}
			retiredAt = l.Stats().ReplayLaunches
			tok, err = slots.Begin(graphs.Primary, capturable, nil)
		default: // recapture in place (same topology: one kernel)
			tok, err = slots.Recapture(graphs.Primary, capturable, nil)
			retiredAt = l.Stats().ReplayLaunches
		}
		require.NoError(t, err)
		capture(tok, uint64(round%2), 1, retiredAt)
	}
	for successes.Load() <= last {
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	close(failures)
	for err := range failures {
		require.NoError(t, err)
	}

	st := l.Stats()
	assert.Equal(t, uint64(successes.Load()), st.ReplayLaunches, "every successful replay launched its one segment, no other launched")
	assert.Equal(t, uint64(rounds), st.Captures)
	assert.Positive(t, st.Updates, "recaptures of an unchanged topology updated in place")
	final := y0
	if (rounds-1)%2 == 1 {
		final = y1
	}
	require.NoError(t, slots.Replay(graphs.Primary))
	assert.Equal(t, plus(input, 1), r.read(final.Ptr(), n))
}

// TestDestructionOrder: reset destroys the executable and the graph exactly once, then
// synchronizes the stream, and only then releases retained resources, each exactly once.
func TestDestructionOrder(t *testing.T) {
	r := newRig(t)
	const n = 4096
	x, y := r.buf(n), r.buf(n)
	r.upload(x.Ptr(), pattern(n, 6))
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	p := &probe{ctx: r.ctx, s: r.s}
	q := &probe{ctx: r.ctx, s: r.s}
	tok, err := l.Begin(graphs.Token{}, capturable, []graphs.Resource{p, q, p})
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, l.End(tok))
	assert.Equal(t, 1, p.released, "the duplicate reference is surplus and released at once")
	p.released = 0
	before := r.ctx.Counters()

	for range 8 {
		require.NoError(t, l.Replay(tok)) // queued, not waited for
	}
	had, err := l.Reset(tok)
	require.NoError(t, err)
	require.True(t, had)

	for _, pr := range []*probe{p, q} {
		assert.Equal(t, 1, pr.released, "released exactly once")
		assert.Equal(t, before.GraphExecsDestroyed+1, pr.at.GraphExecsDestroyed, "the executable was destroyed before the release")
		assert.Equal(t, before.GraphsDestroyed+1, pr.at.GraphsDestroyed, "the graph was destroyed before the release")
		assert.True(t, pr.idle, "the stream had drained before the release")
	}
	// Nothing is destroyed or released twice, whatever follows.
	_, err = l.Reset(tok)
	require.ErrorIs(t, err, graphs.ErrNotInstalled)
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Close(), graphs.ErrClosed)
	after := r.ctx.Counters()
	assert.Equal(t, before.GraphExecsDestroyed+1, after.GraphExecsDestroyed)
	assert.Equal(t, before.GraphsDestroyed+1, after.GraphsDestroyed)
	assert.Equal(t, 1, p.released)
	assert.Equal(t, 1, q.released)
	assert.NoError(t, l.CleanupErr())
	err = l.Replay(tok)
	assert.ErrorIs(t, err, graphs.ErrNotInstalled)
	assert.ErrorIs(t, err, graphs.ErrClosed)
}

// TestRetainedBufferOutlivesItsOwnerUntilTheGraphIsGone: a device buffer embedded in a graph
// and released by its owner stays allocated (replays still read it) until reset destroys the
// graph; then it is freed exactly once.
func TestRetainedBufferOutlivesItsOwnerUntilTheGraphIsGone(t *testing.T) {
	r := newRig(t)
	const n = 512
	x := r.buf(n)
	input := pattern(n, 8)
	r.upload(x.Ptr(), input)
	raw, err := r.ctx.Alloc(4 * n)
	require.NoError(t, err)
	out := graphs.NewSharedBuffer(raw)
	l := r.lifecycle(graphs.Primary, graphs.Config{})

	tok, err := l.Begin(graphs.Token{}, capturable, []graphs.Resource{out.Retain(), out.Retain()})
	require.NoError(t, err)
	assert.Equal(t, int64(2), out.Refs(), "the owner's reference and one for the graph; the surplus is released")
	r.addOne(x.Ptr(), out.Ptr(), n)
	require.NoError(t, l.End(tok))

	frees := r.ctx.Counters().DeviceFrees
	out.Release() // the owner is done with it, while the graph still embeds the address
	assert.Equal(t, int64(1), out.Refs())
	assert.Equal(t, frees, r.ctx.Counters().DeviceFrees, "not freed while the graph embeds it")

	require.NoError(t, l.Replay(tok))
	assert.Equal(t, plus(input, 1), r.read(out.Ptr(), n), "the replay wrote the still-live buffer")

	_, err = l.Reset(tok)
	require.NoError(t, err)
	assert.Equal(t, frees+1, r.ctx.Counters().DeviceFrees, "freed once the graph is gone")
	assert.Zero(t, out.Refs())
	assert.NoError(t, out.Err())
	out.Release()
	assert.Error(t, out.Err(), "an over-release is reported, not a double free")
	assert.Equal(t, frees+1, r.ctx.Counters().DeviceFrees)
}

// TestBeginRefusesResourcesWithoutIdentity: a nil or non-comparable resource is an argument
// error before anything is begun, and the others are released.
func TestBeginRefusesResourcesWithoutIdentity(t *testing.T) {
	r := newRig(t)
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	p := &probe{ctx: r.ctx, s: r.s}
	_, err := l.Begin(graphs.Token{}, capturable, []graphs.Resource{p, nil})
	require.ErrorIs(t, err, graphs.ErrInvalidArgument)
	assert.Equal(t, 1, p.released)
	_, err = l.Begin(graphs.Token{}, capturable, []graphs.Resource{sliceResource{}})
	require.ErrorIs(t, err, graphs.ErrInvalidArgument)
	capturing, err := r.s.IsCapturing()
	require.NoError(t, err)
	assert.False(t, capturing)
}

// sliceResource has no identity: a slice-typed value cannot be compared.
type sliceResource []int

func (sliceResource) Release() {}
