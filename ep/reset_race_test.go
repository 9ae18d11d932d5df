package ep_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/graphs"
)

// TestNoReplayIsAdmittedAfterResetReturns is issue 11's first promise under stress: eight
// goroutines replay the primary slot while a ninth captures, resets and recaptures it. The
// captured step adds one to a device counter. The resetter bumps an epoch (odd: a graph may be
// installed, even: none) before each BeginCapture and after each ResetGraph returns; a replay
// that starts and finishes inside one even epoch must be refused, and the counter must not
// move between two reads of an even epoch while the replayers keep trying.
//
// The epoch is raised before BeginCapture on purpose: EndCapture publishes the new graph
// before it returns, so a harness that raises its flag after EndCapture counts the new
// generation's legitimate replays as replays after the reset.
func TestNoReplayIsAdmittedAfterResetReturns(t *testing.T) {
	p := newProvider(t)
	counter := upload(t, p, []float32{0})
	one := upload(t, p, []float32{1})
	add := getKernel(t, p, "Add", 14, f32(1), f32(1))
	step := func() error {
		return add.Execute([]ep.Tensor{tensor(counter, 1), tensor(one, 1)}, []ep.Tensor{tensor(counter, 1)})
	}

	var epoch atomic.Uint64 // even: nothing installed
	var stop atomic.Bool
	var violations, oks, attempts atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for !stop.Load() {
				e0 := epoch.Load()
				err := p.Replay(graphs.Primary)
				e1 := epoch.Load()
				attempts.Add(1)
				if err == nil {
					oks.Add(1)
					if e0 == e1 && e0%2 == 0 {
						violations.Add(1)
					}
				}
			}
		}()
	}
	read := func() float32 { return download(t, p, counter)[0] }
	deadline := time.Now().Add(stressDuration())
	rounds, moved := 0, 0
	for time.Now().Before(deadline) {
		epoch.Add(1)
		require.NoError(t, p.BeginCapture(graphs.Primary, []*ep.Kernel{add}, []*ep.Buffer{counter, one}))
		require.NoError(t, step())
		require.NoError(t, p.EndCapture(graphs.Primary))
		for a := attempts.Load(); attempts.Load() < a+64; {
			runtime.Gosched()
		}
		had, err := p.ResetGraph(graphs.Primary)
		require.NoError(t, err)
		require.True(t, had)
		epoch.Add(1)
		before := read()
		for a := attempts.Load(); attempts.Load() < a+64; {
			runtime.Gosched()
		}
		if read() != before {
			moved++
		}
		rounds++
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d capture/reset rounds, %d of %d replays enqueued", rounds, oks.Load(), attempts.Load())
	assert.Positive(t, oks.Load(), "the stress never replayed: it proves nothing")
	assert.Zero(t, violations.Load(), "replays admitted after ResetGraph returned")
	assert.Zero(t, moved, "the old graph ran after ResetGraph returned")
}

func stressDuration() time.Duration {
	if testing.Short() {
		return 300 * time.Millisecond
	}
	return 2 * time.Second
}
