package drivertest

import (
	"testing"

	"github.com/cudaep/cudaep/cudadrv"
)

// AddOnePTX is the test kernel add_one(const float* x, float* y, unsigned long long n):
// y[i] = x[i] + 1 for every i < n, one thread per element. Hand-written PTX for sm_75 and
// later, JIT-compiled by the driver for the actual device.
const AddOnePTX = `.version 7.8
.target sm_75
.address_size 64

.visible .entry add_one(
	.param .u64 add_one_x,
	.param .u64 add_one_y,
	.param .u64 add_one_n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<10>;
	.reg .f32 %f<3>;

	ld.param.u64 %rd1, [add_one_x];
	ld.param.u64 %rd2, [add_one_y];
	ld.param.u64 %rd3, [add_one_n];
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ntid.x;
	mov.u32 %r3, %tid.x;
	cvt.u64.u32 %rd4, %r3;
	mad.wide.u32 %rd5, %r1, %r2, %rd4;
	setp.ge.u64 %p1, %rd5, %rd3;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd6, %rd1;
	cvta.to.global.u64 %rd7, %rd2;
	shl.b64 %rd8, %rd5, 2;
	add.s64 %rd6, %rd6, %rd8;
	add.s64 %rd7, %rd7, %rd8;
	ld.global.f32 %f1, [%rd6];
	add.f32 %f2, %f1, 0f3F800000;
	st.global.f32 [%rd7], %f2;
DONE:
	ret;
}
`

// addOne is add_one for the simulated device: the same arithmetic over the same index space.
func addOne(l *cudadrv.KernelLaunch) error {
	n := l.U64Arg(2)
	threads := uint64(l.Grid.X) * uint64(l.Block.X)
	if threads < n {
		n = threads
	}
	x, err := l.Float32s(l.PtrArg(0), int(n))
	if err != nil {
		return err
	}
	y, err := l.Float32s(l.PtrArg(1), int(n))
	if err != nil {
		return err
	}
	for i := range y {
		y[i] = x[i] + 1
	}
	return nil
}

// AddOne loads add_one into the env's context and returns it; the module is unloaded at
// cleanup.
func (env *Env) AddOne(t testing.TB) *cudadrv.Function {
	t.Helper()
	mod, err := env.Context.LoadModule([]byte(AddOnePTX))
	if err != nil {
		t.Fatalf("drivertest: load add_one: %v", err)
	}
	t.Cleanup(func() {
		if err := mod.Unload(); err != nil {
			t.Errorf("drivertest: unload add_one: %v", err)
		}
	})
	fn, err := mod.Function("add_one")
	if err != nil {
		t.Fatalf("drivertest: get add_one: %v", err)
	}
	return fn
}

// LaunchAddOne queues add_one(x, y, n) on s with 256-thread blocks.
func LaunchAddOne(s *cudadrv.Stream, fn *cudadrv.Function, args *cudadrv.KernelArgs, x, y cudadrv.DevicePtr, n uint64) error {
	args.Reset()
	args.Ptr(x).Ptr(y).U64(n)
	const block = 256
	grid := uint32((n + block - 1) / block)
	return s.Launch(fn, cudadrv.Dim3{X: grid, Y: 1, Z: 1}, cudadrv.Dim3{X: block, Y: 1, Z: 1}, 0, args)
}
