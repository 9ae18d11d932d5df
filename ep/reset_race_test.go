package ep_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/graphs"
)

// TestNoReplayIsAdmittedAfterResetReturns is issue 11's first promise under stress: eight
// goroutines replay the primary slot while a ninth captures, resets and recaptures it. The
// resetter bumps an epoch counter (odd: a graph may be installed, even: none) before each
// BeginCapture and after each ResetGraph returns; a replay that starts and finishes inside one even epoch found
// nothing installed and must not succeed.
func TestNoReplayIsAdmittedAfterResetReturns(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	relu := getKernel(t, p, "Relu", 14, f32(64))

	var epoch atomic.Uint64 // even: nothing installed
	var stop atomic.Bool
	var violations, oks atomic.Int64
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
				if err == nil {
					oks.Add(1)
					if e0 == e1 && e0%2 == 0 {
						violations.Add(1)
					}
				}
			}
		}()
	}
	deadline := time.Now().Add(stressDuration())
	rounds := 0
	for time.Now().Before(deadline) {
		epoch.Add(1) // odd from before the capture begins: a graph may be installed
		require.NoError(t, p.BeginCapture(graphs.Primary, []*ep.Kernel{relu}, []*ep.Buffer{x, y}))
		require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 64)}, []ep.Tensor{tensor(y, 64)}))
		require.NoError(t, p.EndCapture(graphs.Primary))
		for i := 0; i < 50; i++ {
			runtime.Gosched()
		}
		had, err := p.ResetGraph(graphs.Primary)
		require.NoError(t, err)
		require.True(t, had)
		epoch.Add(1)
		for i := 0; i < 50; i++ {
			runtime.Gosched()
		}
		rounds++
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d capture/reset rounds, %d successful replays", rounds, oks.Load())
	assert.Positive(t, oks.Load(), "the stress never replayed: it proves nothing")
	assert.Zero(t, violations.Load(), "replays admitted after ResetGraph returned")
}

func stressDuration() time.Duration {
	if testing.Short() {
		return 300 * time.Millisecond
	}
	return 2 * time.Second
}
