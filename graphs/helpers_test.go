package graphs_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/graphs"
)

// rig is one test's device: the drivertest env, a non-blocking stream and the add_one kernel.
type rig struct {
	t    testing.TB
	env  *drivertest.Env
	ctx  *cudadrv.Context
	s    *cudadrv.Stream
	fn   *cudadrv.Function
	args *cudadrv.KernelArgs
}

func newRig(t testing.TB) *rig {
	t.Helper()
	env := drivertest.Open(t)
	fn := env.AddOne(t)
	s, err := env.Context.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Destroy()) })
	return &rig{t: t, env: env, ctx: env.Context, s: s, fn: fn, args: new(cudadrv.KernelArgs)}
}

// buf allocates room for n float32s, poisoned with NaN, freed at cleanup.
func (r *rig) buf(n int) *cudadrv.DeviceBuffer {
	r.t.Helper()
	b, err := r.ctx.Alloc(uint64(4 * n))
	require.NoError(r.t, err)
	r.t.Cleanup(func() { require.NoError(r.t, b.Free()) })
	r.poison(b)
	return b
}

// poison fills b with 0xff bytes (NaN floats).
func (r *rig) poison(b *cudadrv.DeviceBuffer) {
	r.t.Helper()
	require.NoError(r.t, r.s.Synchronize())
	require.NoError(r.t, r.ctx.Memset8(b.Ptr(), 0xff, b.Size()))
}

// upload writes vals to p after draining the stream (the legacy-stream copy does not wait for
// a non-blocking stream).
func (r *rig) upload(p cudadrv.DevicePtr, vals []float32) {
	r.t.Helper()
	require.NoError(r.t, r.s.Synchronize())
	require.NoError(r.t, r.ctx.CopyHtoD(p, drivertest.Float32Bytes(vals)))
}

// read drains the stream and returns n float32s at p.
func (r *rig) read(p cudadrv.DevicePtr, n int) []float32 {
	r.t.Helper()
	require.NoError(r.t, r.s.Synchronize())
	b := make([]byte, 4*n)
	require.NoError(r.t, r.ctx.CopyDtoH(b, p))
	return drivertest.BytesFloat32(b)
}

// addOne enqueues y = x + 1 over n floats on the rig's stream.
func (r *rig) addOne(x, y cudadrv.DevicePtr, n int) {
	r.t.Helper()
	require.NoError(r.t, drivertest.LaunchAddOne(r.s, r.fn, r.args, x, y, uint64(n)))
}

// lifecycle returns a lifecycle on the rig's stream, closed at cleanup.
func (r *rig) lifecycle(slot graphs.Slot, cfg graphs.Config) *graphs.Lifecycle {
	r.t.Helper()
	l, err := graphs.NewLifecycle(r.s, graphs.NewOwner(), slot, cfg)
	require.NoError(r.t, err)
	r.t.Cleanup(func() {
		if err := l.Close(); !errors.Is(err, graphs.ErrClosed) {
			require.NoError(r.t, err)
		}
	})
	return l
}

// slots returns the slots of the rig's stream, closed at cleanup.
func (r *rig) slots(cfg graphs.Config) *graphs.Slots {
	r.t.Helper()
	s, err := graphs.NewSlots(r.s, graphs.NewOwner(), cfg)
	require.NoError(r.t, err)
	r.t.Cleanup(func() { require.NoError(r.t, s.Close()) })
	return s
}

// onOtherThread runs f on a fresh goroutine locked to its own OS thread with the rig's
// context bound, and waits for it.
func (r *rig) onOtherThread(f func()) {
	r.t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := r.ctx.Bind(); err != nil {
			r.t.Errorf("bind on another thread: %v", err)
			return
		}
		f()
	}()
	<-done
}

// leakedGraphs returns the graphs and executables created and not destroyed.
func leakedGraphs(c cudadrv.Counters) (graphs, execs uint64) {
	return c.GraphsCreated - c.GraphsDestroyed, c.GraphExecsCreated - c.GraphExecsDestroyed
}

// pattern returns n distinct, non-zero, exactly representable floats starting at base.
func pattern(n int, base float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = base + float32(i)*0.5 + 0.25
	}
	return v
}

// plus returns v with k added to each element.
func plus(v []float32, k float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x + k
	}
	return out
}

// node is a graphs.Node with a fixed capture support.
type node struct {
	name    string
	support graphs.CaptureSupport
}

func (n node) Name() string                          { return n.name }
func (n node) CaptureSupport() graphs.CaptureSupport { return n.support }

// capturable is the node list of a step whose every kernel can be captured.
var capturable = []graphs.Node{node{name: "add_one", support: graphs.Supported}}

// probe is a Resource that records when and how often it is released.
type probe struct {
	ctx      *cudadrv.Context
	s        *cudadrv.Stream
	released int
	at       cudadrv.Counters // the context's counters at the first release
	idle     bool             // whether the stream had drained at the first release
}

func (p *probe) Release() {
	p.released++
	if p.released == 1 {
		p.at = p.ctx.Counters()
		p.idle, _ = p.s.Query()
	}
}
