package graphs_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/graphs"
)

// chain is an N-kernel decode step over two buffers: add_one a→b, b→a, a→b, …
type chain struct {
	r       *rig
	a, b    *cudadrv.DeviceBuffer
	n       int
	kernels int
}

func newChain(r *rig, kernels int) *chain {
	const n = 1024
	c := &chain{r: r, a: r.buf(n), b: r.buf(n), n: n, kernels: kernels}
	r.upload(c.a.Ptr(), pattern(n, 17))
	return c
}

// enqueue queues the step's kernels on the rig's stream.
func (c *chain) enqueue() {
	for k := range c.kernels {
		if k%2 == 0 {
			c.r.addOne(c.a.Ptr(), c.b.Ptr(), c.n)
		} else {
			c.r.addOne(c.b.Ptr(), c.a.Ptr(), c.n)
		}
	}
}

// rawCapture records the step with the driver wrappers alone and returns the graph.
func (c *chain) rawCapture(t testing.TB) *cudadrv.Graph {
	require.NoError(t, c.r.s.BeginCapture(cudadrv.CaptureModeThreadLocal))
	c.enqueue()
	g, err := c.r.s.EndCapture()
	require.NoError(t, err)
	return g
}

// rawReady is the raw capture→ready path: capture, instantiate with node priority, upload.
func (c *chain) rawReady(t testing.TB) (*cudadrv.Graph, *cudadrv.GraphExec) {
	g := c.rawCapture(t)
	e, err := g.Instantiate(cudadrv.InstantiateUseNodePriority)
	require.NoError(t, err)
	require.NoError(t, e.Upload(c.r.s))
	return g, e
}

func destroyRaw(t testing.TB, g *cudadrv.Graph, e *cudadrv.GraphExec) {
	require.NoError(t, e.Destroy())
	require.NoError(t, g.Destroy())
}

// measurement is the median per-iteration time of a case over repeats.
type measurement struct{ ours, base time.Duration }

// paired times ours and base alternately, reps times iters calls each after a warm-up, and
// returns each one's median per-call time. Each call returns the part of its time that
// counts (so teardown can be left out).
func paired(reps, iters int, ours, base func() time.Duration) measurement {
	run := func(f func() time.Duration, k int) time.Duration {
		var total time.Duration
		for range k {
			total += f()
		}
		return total / time.Duration(k)
	}
	run(ours, max(iters/4, 1))
	run(base, max(iters/4, 1))
	var o, b []time.Duration
	for rep := range reps {
		if rep%2 == 0 { // alternate the order so that drift favours neither side
			o = append(o, run(ours, iters))
			b = append(b, run(base, iters))
		} else {
			b = append(b, run(base, iters))
			o = append(o, run(ours, iters))
		}
	}
	return measurement{ours: median(o), base: median(b)}
}

func median(xs []time.Duration) time.Duration {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// whole times all of f.
func whole(f func()) func() time.Duration {
	return func() time.Duration {
		start := time.Now()
		f()
		return time.Since(start)
	}
}

type benchRow struct {
	what, ours, base string
	n                int
	m                measurement
}

// TestBenchTable prints, for N-kernel steps measured side by side in one run, graphs against
// the raw driver loop: replay + sync, capture → ready, in-place update against
// re-instantiation, and the seam price. Timings are printed, never asserted. It runs only
// with CUDAEP_BENCH=1 (on sim here, on the GPU with CUDAEP_TEST_BACKEND=cuda).
func TestBenchTable(t *testing.T) {
	if os.Getenv("CUDAEP_BENCH") != "1" {
		t.Skip("set CUDAEP_BENCH=1 to run the benchmark table")
	}
	const reps = 11
	var rows []benchRow
	r := newRig(t) // one device for the whole table: every row is measured in the same run
	backend := backendName(r)
	for _, kernels := range []int{1, 4, 32} {
		c := newChain(r, kernels)
		iters := 400 / kernels
		iters = max(iters, 20)

		// Replay + sync: graphs' Replay against GraphExec.Launch, each followed by a
		// stream synchronize.
		l := r.lifecycle(graphs.Primary, graphs.Config{})
		tok, err := l.Begin(graphs.Token{}, capturable, nil)
		require.NoError(t, err)
		c.enqueue()
		require.NoError(t, l.End(tok))
		g, e := c.rawReady(t)
		rows = append(rows, benchRow{"replay + stream sync", "graphs.Replay", "GraphExec.Launch", kernels,
			paired(reps, iters*4,
				whole(func() { require.NoError(t, l.Replay(tok)); require.NoError(t, r.s.Synchronize()) }),
				whole(func() { require.NoError(t, e.Launch(r.s)); require.NoError(t, r.s.Synchronize()) }))})
		destroyRaw(t, g, e)
		_, err = l.Reset(tok)
		require.NoError(t, err)

		// Capture → ready: Begin, the launches, End (end-capture, instantiate, upload)
		// against the same sequence on the wrappers; teardown untimed.
		rows = append(rows, benchRow{"capture → ready", "graphs Begin…End", "raw capture+inst+upload", kernels,
			paired(reps, iters,
				func() time.Duration {
					start := time.Now()
					tok, err := l.Begin(graphs.Token{}, capturable, nil)
					require.NoError(t, err)
					c.enqueue()
					require.NoError(t, l.End(tok))
					d := time.Since(start)
					_, err = l.Reset(tok)
					require.NoError(t, err)
					return d
				},
				func() time.Duration {
					start := time.Now()
					g, e := c.rawReady(t)
					d := time.Since(start)
					require.NoError(t, r.s.Synchronize())
					destroyRaw(t, g, e)
					return d
				})})

		// Recapture with an unchanged topology (update in place) against reset + capture
		// (instantiate), both through graphs.
		tok, err = l.Begin(graphs.Token{}, capturable, nil)
		require.NoError(t, err)
		c.enqueue()
		require.NoError(t, l.End(tok))
		rows = append(rows, benchRow{"recapture a step", "Recapture (update)", "Reset+Begin (instantiate)", kernels,
			paired(reps, iters,
				func() time.Duration {
					start := time.Now()
					next, err := l.Recapture(tok, capturable, nil)
					require.NoError(t, err)
					c.enqueue()
					require.NoError(t, l.End(next))
					tok = next
					return time.Since(start)
				},
				func() time.Duration {
					start := time.Now()
					_, err := l.Reset(tok)
					require.NoError(t, err)
					next, err := l.Begin(graphs.Token{}, capturable, nil)
					require.NoError(t, err)
					c.enqueue()
					require.NoError(t, l.End(next))
					tok = next
					return time.Since(start)
				})})
		st := l.Stats()
		require.Positive(t, st.Updates)
		require.Zero(t, st.UpdateRefusals)

		// The driver calls alone: cuGraphExecUpdate against cuGraphInstantiate.
		g, e = c.rawReady(t)
		rows = append(rows, benchRow{"driver: exec from graph", "GraphExec.Update", "Graph.Instantiate", kernels,
			paired(reps, iters,
				func() time.Duration {
					g2 := c.rawCapture(t)
					start := time.Now()
					ok, err := e.Update(g2)
					d := time.Since(start)
					require.NoError(t, err)
					require.True(t, ok)
					require.NoError(t, g2.Destroy())
					return d
				},
				func() time.Duration {
					g2 := c.rawCapture(t)
					start := time.Now()
					e2, err := g2.Instantiate(cudadrv.InstantiateUseNodePriority)
					d := time.Since(start)
					require.NoError(t, err)
					destroyRaw(t, g2, e2)
					return d
				})})
		require.NoError(t, r.s.Synchronize())
		destroyRaw(t, g, e)
	}

	// The seam price of the seed: a 4-kernel step, monolithic against segmented around a
	// host seam, bit-identical outputs.
	{
		var mono, seam []time.Duration
		for range reps {
			m, s, monoOut, seamOut := seamPrice(t, r, 2560, 20, 200)
			require.Equal(t, monoOut, seamOut, "segmented + host-seam output is bit-identical to the monolithic one")
			mono, seam = append(mono, m), append(seam, s)
		}
		rows = append(rows, benchRow{"step with a host seam", "segmented+seam", "monolithic", 4,
			measurement{ours: median(seam), base: median(mono)}})
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\ngraphs benchmark table: backend %s, GOMAXPROCS %d, median of %d repeats after warm-up\n",
		backend, runtime.GOMAXPROCS(0), reps)
	fmt.Fprintf(&sb, "%-24s %3s  %-20s %10s  %-26s %10s  %6s\n", "case", "N", "ours", "time", "baseline", "time", "ratio")
	for _, row := range rows {
		fmt.Fprintf(&sb, "%-24s %3d  %-20s %10s  %-26s %10s  %6.2f\n", row.what, row.n,
			row.ours, fmtDur(row.m.ours), row.base, fmtDur(row.m.base), float64(row.m.ours)/float64(row.m.base))
	}
	fmt.Print(sb.String())
	t.Log(sb.String())
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond))
}

// BenchmarkReplay measures one replay + stream synchronize of an N-kernel step through
// graphs and through the raw GraphExec.Launch loop.
func BenchmarkReplay(b *testing.B) {
	r := newRig(b)
	for _, kernels := range []int{1, 4, 32} {
		c := newChain(r, kernels)
		l := r.lifecycle(graphs.Primary, graphs.Config{})
		tok, err := l.Begin(graphs.Token{}, capturable, nil)
		require.NoError(b, err)
		c.enqueue()
		require.NoError(b, l.End(tok))
		g, e := c.rawReady(b)
		b.Cleanup(func() { destroyRaw(b, g, e) })
		bind := func(b *testing.B) {
			runtime.LockOSThread()
			b.Cleanup(runtime.UnlockOSThread)
			require.NoError(b, r.ctx.Bind())
		}
		b.Run(fmt.Sprintf("graphs/N=%d", kernels), func(b *testing.B) {
			bind(b)
			for b.Loop() {
				if err := l.Replay(tok); err != nil {
					b.Fatal(err)
				}
				if err := r.s.Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("raw/N=%d", kernels), func(b *testing.B) {
			bind(b)
			for b.Loop() {
				if err := e.Launch(r.s); err != nil {
					b.Fatal(err)
				}
				if err := r.s.Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplayEnqueue measures the enqueue alone (no synchronize) of a step of 4 kernels
// and of 224 (a fused Llama decode step's size), graphs against raw, synchronizing off the
// clock often enough (every 256 kernels' worth of launches) that the launch queue never fills
// and the host's launch call is what is timed.
func BenchmarkReplayEnqueue(b *testing.B) {
	for _, n := range []int{4, 224} {
		b.Run(fmt.Sprintf("kernels=%d", n), func(b *testing.B) { benchReplayEnqueue(b, n) })
	}
}

func benchReplayEnqueue(b *testing.B, kernels int) {
	r := newRig(b)
	c := newChain(r, kernels)
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(b, err)
	c.enqueue()
	require.NoError(b, l.End(tok))
	g, e := c.rawReady(b)
	b.Cleanup(func() { destroyRaw(b, g, e) })
	syncEvery := max(1, 256/kernels)
	for _, bc := range []struct {
		name   string
		launch func() error
	}{
		{"graphs", func() error { return l.Replay(tok) }},
		{"raw", func() error { return e.Launch(r.s) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			runtime.LockOSThread()
			b.Cleanup(runtime.UnlockOSThread)
			require.NoError(b, r.ctx.Bind())
			i := 0
			for b.Loop() {
				if err := bc.launch(); err != nil {
					b.Fatal(err)
				}
				if i++; i%syncEvery == 0 {
					b.StopTimer()
					if err := r.s.Synchronize(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
			b.StopTimer()
			require.NoError(b, r.s.Synchronize())
		})
	}
}

// BenchmarkReplayOverhead measures what graphs adds to a launch: on the simulated device the
// launch itself is stubbed out (see launchStub), so the figure is the admission epoch, the
// token checks and the wrappers. It runs on the simulated device only.
func BenchmarkReplayOverhead(b *testing.B) {
	r, stub := stubbedRig(b, newRig(b))
	if stub == nil {
		b.Skip("on the GPU the launch is real: BenchmarkReplayEnqueue measures it")
	}
	c := newChain(r, 4)
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(b, err)
	c.enqueue()
	require.NoError(b, l.End(tok))
	g, e := c.rawReady(b)
	b.Cleanup(func() { destroyRaw(b, g, e) })
	for _, bc := range []struct {
		name   string
		launch func() error
	}{
		{"graphs", func() error { return l.Replay(tok) }},
		{"raw", func() error { return e.Launch(r.s) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			runtime.LockOSThread()
			b.Cleanup(runtime.UnlockOSThread)
			require.NoError(b, r.ctx.Bind())
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.launch(); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, r.s.Synchronize())
		})
	}
}
