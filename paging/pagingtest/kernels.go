package pagingtest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// KernelsPTX holds the two stream-holding kernels, hand-written for sm_75 and later and
// JIT-compiled by the driver; the simulated device runs the Go bodies registered by this
// package under the same names.
//
//   - pagingtest_spin(u64 ns): one thread spins on %globaltimer until ns nanoseconds have
//     passed, a kernel of fixed duration whatever the clocks: the benchmark's compute proxy.
//   - pagingtest_gate(u32* flag, u64 id, u64 limit_ns): one thread waits until the host sets
//     *flag non-zero, holding its stream, and everything queued behind it, until then. It
//     gives up after limit_ns (writing 2 to *flag), so that a test that never opens it fails
//     instead of hanging the device. The simulator's body waits on gate id instead.
const KernelsPTX = `.version 7.8
.target sm_75
.address_size 64

.visible .entry pagingtest_spin(
	.param .u64 pagingtest_spin_ns
)
{
	.reg .pred %p<2>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [pagingtest_spin_ns];
	mov.u64 %rd2, %globaltimer;
SPIN:
	mov.u64 %rd3, %globaltimer;
	sub.u64 %rd4, %rd3, %rd2;
	setp.lt.u64 %p1, %rd4, %rd1;
	@%p1 bra SPIN;
	ret;
}

.visible .entry pagingtest_gate(
	.param .u64 pagingtest_gate_flag,
	.param .u64 pagingtest_gate_id,
	.param .u64 pagingtest_gate_limit_ns
)
{
	.reg .pred %p<3>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<7>;

	ld.param.u64 %rd1, [pagingtest_gate_flag];
	ld.param.u64 %rd2, [pagingtest_gate_limit_ns];
	cvta.to.global.u64 %rd3, %rd1;
	mov.u64 %rd4, %globaltimer;
WAIT:
	ld.volatile.global.u32 %r1, [%rd3];
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra OPENED;
	nanosleep.u32 1000;
	mov.u64 %rd5, %globaltimer;
	sub.u64 %rd6, %rd5, %rd4;
	setp.lt.u64 %p2, %rd6, %rd2;
	@%p2 bra WAIT;
	mov.u32 %r2, 2;
	st.volatile.global.u32 [%rd3], %r2;
OPENED:
	ret;
}
`

// The entry points of KernelsPTX.
const (
	SpinEntry = "pagingtest_spin"
	GateEntry = "pagingtest_gate"
)

// GateLimit is how long a gate holds its stream at most. It is a guard against a test that
// fails before opening its gate, never a bound that a passing test depends on.
const GateLimit = 60 * time.Second

// maxGates is the number of gates one Kernels can hand out (one flag word each).
const maxGates = 1024

// simGates are the simulator's gates, by id: the simulated kernel waits on the channel (it
// never reads the flag in device memory, which the host writes from another goroutine).
var (
	simGates sync.Map // uint64 → *simGate
	gateIDs  atomic.Uint64
)

type simGate struct {
	open    chan struct{}
	expired atomic.Bool
}

func init() {
	sim.RegisterKernel(SpinEntry, func(l *sim.Launch) error {
		time.Sleep(time.Duration(l.U64Arg(0)))
		return nil
	})
	sim.RegisterKernel(GateEntry, func(l *sim.Launch) error {
		id := l.U64Arg(1)
		v, ok := simGates.Load(id)
		if !ok {
			return fmt.Errorf("pagingtest: gate %d was launched without being made by Kernels.Gate", id)
		}
		g := v.(*simGate)
		limit := time.NewTimer(time.Duration(l.U64Arg(2)))
		defer limit.Stop()
		select {
		case <-g.open:
		case <-limit.C:
			g.expired.Store(true)
		}
		simGates.Delete(id)
		return nil
	})
}

// Kernels is KernelsPTX loaded in a context, with the device words its gates wait on. Its
// methods are safe for concurrent use. Close it after the streams it launched on are drained.
type Kernels struct {
	ctx        *cudadrv.Context
	mod        *cudadrv.Module
	spin, gate *cudadrv.Function
	flags      *cudadrv.DeviceBuffer // one zeroed uint32 per gate

	mu    sync.Mutex
	args  cudadrv.KernelArgs
	gates int
}

// LoadKernels loads KernelsPTX in ctx, which must be current on the calling thread.
func LoadKernels(ctx *cudadrv.Context) (*Kernels, error) {
	mod, err := ctx.LoadModule([]byte(KernelsPTX))
	if err != nil {
		return nil, fmt.Errorf("pagingtest: load kernels: %w", err)
	}
	k := &Kernels{ctx: ctx, mod: mod}
	if k.spin, err = mod.Function(SpinEntry); err != nil {
		return nil, errors.Join(err, mod.Unload())
	}
	if k.gate, err = mod.Function(GateEntry); err != nil {
		return nil, errors.Join(err, mod.Unload())
	}
	if k.flags, err = ctx.Alloc(4 * maxGates); err != nil {
		return nil, errors.Join(err, mod.Unload())
	}
	if err := ctx.Memset8(k.flags.Ptr(), 0, 4*maxGates); err != nil {
		return nil, errors.Join(err, k.flags.Free(), mod.Unload())
	}
	return k, nil
}

var one = cudadrv.Dim3{X: 1, Y: 1, Z: 1}

// Spin queues pagingtest_spin(d) on s: a kernel that occupies s for d on either backend.
func (k *Kernels) Spin(s *cudadrv.Stream, d time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.args.Reset()
	k.args.U64(uint64(d))
	return s.Launch(k.spin, one, one, 0, &k.args)
}

// Gate queues a closed gate on s: the work queued on s after it waits until Open, so a test
// orders events instead of timing them. s must be a non-blocking stream (the host opens the
// gate with a synchronous copy on the legacy stream, which would otherwise wait for s).
func (k *Kernels) Gate(s *cudadrv.Stream) (*Gate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gates == maxGates {
		return nil, fmt.Errorf("pagingtest: all %d gates of these kernels are used", maxGates)
	}
	g := &Gate{k: k, flag: k.flags.Ptr() + cudadrv.DevicePtr(4*k.gates), id: gateIDs.Add(1),
		sim: &simGate{open: make(chan struct{})}}
	simGates.Store(g.id, g.sim)
	k.args.Reset()
	k.args.Ptr(g.flag).U64(g.id).U64(uint64(GateLimit))
	if err := s.Launch(k.gate, one, one, 0, &k.args); err != nil {
		simGates.Delete(g.id)
		return nil, err
	}
	k.gates++
	return g, nil
}

// Close frees the gates' words and unloads the module. Open every gate and drain the streams
// the kernels were queued on first.
func (k *Kernels) Close() error {
	return errors.Join(k.flags.Free(), k.mod.Unload())
}

// Gate is one queued pagingtest_gate kernel.
type Gate struct {
	k    *Kernels
	flag cudadrv.DevicePtr
	id   uint64
	sim  *simGate
	once sync.Once
	err  error
}

// Open releases the gate's stream. It is idempotent and returns the first call's result: an
// error when the gate had already given up at GateLimit (the work behind it then ran without
// waiting for the test, so the test's ordering did not hold) or when the flag cannot be
// written. The calling thread must have the kernels' context current.
func (g *Gate) Open() error {
	g.once.Do(func() {
		var word [4]byte
		if err := g.k.ctx.CopyDtoH(word[:], g.flag); err != nil {
			g.err = err
			return
		}
		if word[0] == 2 || g.sim.expired.Load() {
			g.err = fmt.Errorf("pagingtest: gate %d gave up after %v before it was opened", g.id, GateLimit)
		}
		word = [4]byte{1}
		g.err = errors.Join(g.err, g.k.ctx.CopyHtoD(g.flag, word[:]))
		close(g.sim.open)
	})
	return g.err
}
