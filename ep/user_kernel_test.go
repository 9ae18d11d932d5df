package ep_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/graphs"
)

// axpbPTX is a hand-written kernel, out[i] = a·x[i] + b for i < n, one element per thread.
// On the GPU the driver JIT-compiles it; on sim the body registered below runs.
const axpbPTX = `
.version 7.5
.target sm_75
.address_size 64

// user_axpb_f32(float* out, const float* x, float a, float b, unsigned long long n)
.visible .entry user_axpb_f32(
	.param .u64 p_out,
	.param .u64 p_x,
	.param .f32 p_a,
	.param .f32 p_b,
	.param .u64 p_n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .f32 %f<5>;
	.reg .b64 %rd<10>;

	ld.param.u64 %rd1, [p_out];
	ld.param.u64 %rd2, [p_x];
	ld.param.f32 %f1, [p_a];
	ld.param.f32 %f2, [p_b];
	ld.param.u64 %rd3, [p_n];
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ntid.x;
	mov.u32 %r3, %tid.x;
	mul.wide.u32 %rd4, %r1, %r2;
	cvt.u64.u32 %rd5, %r3;
	add.s64 %rd6, %rd4, %rd5;
	setp.ge.u64 %p1, %rd6, %rd3;
	@%p1 bra DONE;
	shl.b64 %rd7, %rd6, 2;
	cvta.to.global.u64 %rd8, %rd2;
	add.s64 %rd8, %rd8, %rd7;
	ld.global.f32 %f3, [%rd8];
	fma.rn.f32 %f4, %f3, %f1, %f2;
	cvta.to.global.u64 %rd9, %rd1;
	add.s64 %rd9, %rd9, %rd7;
	st.global.f32 [%rd9], %f4;
DONE:
	ret;
}

// A by-value struct parameter, which typed arguments cannot pass.
.visible .entry user_takes_struct(
	.param .align 8 .b8 p_s[16]
)
{
	ret;
}
`

func init() {
	sim.RegisterKernel("user_axpb_f32", func(l *sim.Launch) error {
		n := int(l.U64Arg(4))
		out, err := l.Float32s(l.PtrArg(0), n)
		if err != nil {
			return err
		}
		x, err := l.Float32s(l.PtrArg(1), n)
		if err != nil {
			return err
		}
		a, b := l.F32Arg(2), l.F32Arg(3)
		for i := range out {
			out[i] = a*x[i] + b
		}
		return nil
	})
}

// assertAxpb checks got against a·x + b computed in float64. The device may fuse the multiply
// and add (one rounding) where Go rounds twice, so the bound is float32 rounding, not bit
// equality; a NaN (an unwritten element) never passes.
func assertAxpb(t *testing.T, got, x []float32, a, b float32, msg string) {
	t.Helper()
	require.Len(t, got, len(x))
	ref := make([]float64, len(x))
	for i, v := range x {
		ref[i] = float64(a)*float64(v) + float64(b)
	}
	assert.Less(t, drivertest.RelErr(got, ref), 1e-6, msg)
}

func loadAxpb(t *testing.T, p *ep.Provider) (*ep.UserModule, *ep.UserFunction) {
	t.Helper()
	m, err := p.LoadUserModule([]byte(axpbPTX))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Unload() })
	assert.Equal(t, []string{"user_axpb_f32", "user_takes_struct"}, m.Entries())
	f, err := m.Function("user_axpb_f32")
	require.NoError(t, err)
	assert.Equal(t, "user_axpb_f32", f.Name())
	assert.Equal(t, []string{".u64", ".u64", ".f32", ".f32", ".u64"}, paramNames(f.Params()))
	return m, f
}

func paramNames(ps []ep.ParamType) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func TestUserKernelLaunchesWithTypedArgs(t *testing.T) {
	p := newProvider(t)
	_, f := loadAxpb(t, p)
	const n = 1000
	x := drivertest.RandomFloat32(n)
	xb := upload(t, p, x)
	out := alloc(t, p, 4*n+64)
	require.NoError(t, p.Memset(out, 0, out.Size(), 0xA5))

	// Into the buffer at a 64-byte offset, through a checked buffer argument.
	grid, block := ep.Dim3{X: (n + 255) / 256, Y: 1, Z: 1}, ep.Dim3{X: 256, Y: 1, Z: 1}
	require.NoError(t, f.Launch(grid, block, 0,
		ep.ArgBuffer(out, 64), ep.ArgPtr(xb.Ptr()), ep.ArgF32(1.5), ep.ArgF32(-0.25), ep.ArgU64(n)))
	got := download(t, p, out)
	assertAxpb(t, got[16:], x, 1.5, -0.25, "out[i] = a·x[i] + b")
	for i := 0; i < 16; i++ {
		assert.Equal(t, uint32(0xA5A5A5A5), mathBits(got[i]), "bytes before the offset are untouched")
	}
}

func mathBits(f float32) uint32 { return math.Float32bits(f) }

func TestUserKernelRefusesMismatchedLaunches(t *testing.T) {
	p := newProvider(t)
	m, f := loadAxpb(t, p)
	b := alloc(t, p, 64)
	one := ep.Dim3{X: 1, Y: 1, Z: 1}
	good := []ep.KernelArg{ep.ArgBuffer(b, 0), ep.ArgBuffer(b, 0), ep.ArgF32(1), ep.ArgF32(2), ep.ArgU64(16)}

	tests := []struct {
		name        string
		grid, block ep.Dim3
		args        []ep.KernelArg
		want        string
	}{
		{"too few arguments", one, one, good[:4], "declares 5 parameters, launched with 4"},
		{"an int for a float", one, one, replaceArg(good, 2, ep.ArgI32(1)), "argument 2 is i32, parameter 2 is .f32"},
		{"a float for a pointer", one, one, replaceArg(good, 0, ep.ArgF64(1)), "argument 0 is f64"},
		{"a 32-bit count for a 64-bit one", one, one, replaceArg(good, 4, ep.ArgU32(16)), "argument 4 is u32, parameter 4 is .u64"},
		{"the zero argument", one, one, replaceArg(good, 1, ep.KernelArg{}), "argument 1 is ArgKind(0)"},
		{"an offset past the buffer", one, one, replaceArg(good, 0, ep.ArgBuffer(b, 65)), "outside the 64-byte buffer"},
		{"a zero grid", ep.Dim3{X: 0, Y: 1, Z: 1}, one, good, "zero grid or block extent"},
		{"a zero block", one, ep.Dim3{X: 1, Y: 0, Z: 1}, good, "zero grid or block extent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.Launch(tt.grid, tt.block, 0, tt.args...)
			require.ErrorIs(t, err, ep.ErrInvalidLaunch)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	released := alloc(t, p, 64)
	require.NoError(t, released.Release())
	err := f.Launch(one, one, 0, replaceArg(good, 1, ep.ArgBuffer(released, 0))...)
	assert.ErrorIs(t, err, ep.ErrReleased)

	_, err = m.Function("user_takes_struct")
	require.ErrorIs(t, err, cudadrv.ErrUnsupported)
	assert.Contains(t, err.Error(), "by-value aggregate")
	_, err = m.Function("nope")
	require.ErrorIs(t, err, ep.ErrInvalidLaunch)
	assert.Contains(t, err.Error(), "user_axpb_f32, user_takes_struct")

	require.NoError(t, m.Unload())
	assert.ErrorIs(t, m.Unload(), cudadrv.ErrDestroyed)
	assert.ErrorIs(t, f.Launch(one, one, 0, good...), cudadrv.ErrDestroyed)
	_, err = m.Function("user_axpb_f32")
	assert.ErrorIs(t, err, cudadrv.ErrDestroyed)
}

func replaceArg(args []ep.KernelArg, i int, a ep.KernelArg) []ep.KernelArg {
	out := append([]ep.KernelArg(nil), args...)
	out[i] = a
	return out
}

// TestUserEntriesReadParameterTypes reads the parameter declarations NVRTC and hand-written
// PTX use, including pointer attributes, as ParamTypes, and marks the entries typed arguments
// cannot serve with the reason (the PTX reader itself is tested in cudadrv).
func TestUserEntriesReadParameterTypes(t *testing.T) {
	entries, bad, err := ep.UserEntries([]byte(`
.version 7.5
.target sm_75
// .entry commented_out(.param .u32 x)
.visible .entry k(
	.param .u64 .ptr.global.align 16 p,
	.param .f32 a, .param .s32 b, .param .b64 c, .param .u8 d
)
{ ret; }
.entry by_value(.param .align 8 .b8 s[16]) { ret; }
.entry none() { ret; }
`))
	require.NoError(t, err)
	assert.Equal(t, []string{".u64", ".f32", ".s32", ".b64", ".u8"}, paramNames(entries["k"]))
	assert.Equal(t, ep.ParamType{Name: "f32", Size: 4, Float: true}, entries["k"][1])
	assert.Empty(t, entries["none"])
	assert.Contains(t, entries, "by_value")
	assert.Nil(t, entries["by_value"])
	assert.Contains(t, bad["by_value"], "by-value aggregate")
	assert.Contains(t, bad["by_value"], ".param .align 8 .b8 s[16]", "the reason names the parameter")
	assert.NotContains(t, entries, "commented_out")
	assert.Len(t, entries, 3)
	assert.Len(t, bad, 1)
}

func TestLoadUserModuleRefusesWhatItCannotCheck(t *testing.T) {
	p := newProvider(t)
	for _, tt := range []struct {
		name  string
		image []byte
		want  string
	}{
		{"cubin-like bytes", []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0xff, 0xfe}, "the module is not PTX text"},
		{"only NULs", []byte{0, 0}, "the module is empty"},
		{"no .version", []byte(".target sm_75\n.visible .entry k() { ret; }"), "no .version directive"},
		{"no entry", []byte(".version 7.5\n.target sm_75\n.address_size 64\n"), "no .entry"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.LoadUserModule(tt.image)
			require.ErrorIs(t, err, ep.ErrInvalidLaunch)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestUserKernelIsCapturedAndReplaysOnLiveBuffers records a user launch into a graph and
// replays it: the replay reads the input buffer as it is at replay time.
func TestUserKernelIsCapturedAndReplaysOnLiveBuffers(t *testing.T) {
	p := newProvider(t)
	m, f := loadAxpb(t, p)
	const n = 64
	x := drivertest.RandomFloat32(n)
	xb := upload(t, p, x)
	out := alloc(t, p, 4*n)
	one := ep.Dim3{X: 1, Y: 1, Z: 1}
	block := ep.Dim3{X: n, Y: 1, Z: 1}

	require.NoError(t, p.BeginCapture(graphs.Primary, nil, []*ep.Buffer{xb, out}))
	require.NoError(t, f.Launch(one, block, 0, ep.ArgBuffer(out, 0), ep.ArgBuffer(xb, 0), ep.ArgF32(2), ep.ArgF32(1), ep.ArgU64(n)))
	require.NoError(t, p.EndCapture(graphs.Primary))
	assert.True(t, m.Recorded(), "a captured launch marks its module")

	for step := 0; step < 3; step++ {
		x = drivertest.RandomFloat32(n)
		require.NoError(t, p.CopyToDevice(xb, 0, drivertest.Float32Bytes(x)))
		require.NoError(t, p.Memset(out, 0, out.Size(), 0x5A))
		require.NoError(t, p.Replay(graphs.Primary))
		assertAxpb(t, download(t, p, out), x, 2, 1, fmt.Sprintf("replay %d", step))
	}
	_, err := p.ResetGraph(graphs.Primary)
	require.NoError(t, err)
}

// TestAGraphNeverOutlivesTheCodeItLaunches: unloading a module whose launch a graph recorded
// succeeds and stops new launches, but the code stays loaded, so replays keep running it,
// until the provider closes (after its graphs). An unload during a capture does not touch the
// driver.
func TestAGraphNeverOutlivesTheCodeItLaunches(t *testing.T) {
	p := newProvider(t)
	m, f := loadAxpb(t, p)
	const n = 64
	xb := upload(t, p, drivertest.RandomFloat32(n))
	out := alloc(t, p, 4*n)
	one, block := ep.Dim3{X: 1, Y: 1, Z: 1}, ep.Dim3{X: n, Y: 1, Z: 1}
	args := []ep.KernelArg{ep.ArgBuffer(out, 0), ep.ArgBuffer(xb, 0), ep.ArgF32(3), ep.ArgF32(-1), ep.ArgU64(n)}
	require.NoError(t, p.BeginCapture(graphs.Primary, nil, []*ep.Buffer{xb, out}))
	require.NoError(t, f.Launch(one, block, 0, args...))
	require.NoError(t, m.Unload(), "an unload during a capture is not refused")
	require.NoError(t, p.EndCapture(graphs.Primary))
	unloaded := ep.ContextOf(p).Counters().ModulesUnloaded

	assert.ErrorIs(t, f.Launch(one, block, 0, args...), cudadrv.ErrDestroyed, "no new launch after Unload")
	assert.ErrorIs(t, m.Unload(), cudadrv.ErrDestroyed)
	x := drivertest.RandomFloat32(n)
	require.NoError(t, p.CopyToDevice(xb, 0, drivertest.Float32Bytes(x)))
	require.NoError(t, p.Replay(graphs.Primary))
	assertAxpb(t, download(t, p, out), x, 3, -1, "replay after the unload")
	assert.Equal(t, unloaded, ep.ContextOf(p).Counters().ModulesUnloaded, "the graph still launches the code")
	_, err := p.ResetGraph(graphs.Primary)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	c := ep.ContextOf(p).Counters()
	assert.Equal(t, c.ModulesLoaded, c.ModulesUnloaded, "Close unloads the module after the graphs")
}

// TestCloseGivesBackWhatTheHostLeftOpen: modules and double buffers a host never released are
// unloaded and freed by Close, after the graphs and before the context goes.
func TestCloseGivesBackWhatTheHostLeftOpen(t *testing.T) {
	p := newProvider(t)
	loadAxpb(t, p)
	_, err := p.NewDoubleBuffer(1<<16, ep.ModeStaging)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	c := ep.ContextOf(p).Counters()
	assert.Equal(t, c.ModulesLoaded, c.ModulesUnloaded, "every module unloaded")
	assert.Zero(t, c.DeviceLiveBytes, "every device allocation freed")
	assert.Zero(t, c.PinnedLiveBytes, "every pinned allocation freed")
	assert.Zero(t, c.RegisteredLiveBytes, "every registration undone")
}

// TestUnloadWaitsForQueuedLaunches unloads a module right after queueing launches of it: the
// launches complete, and the stream carries no fault.
func TestUnloadWaitsForQueuedLaunches(t *testing.T) {
	p := newProvider(t)
	m, f := loadAxpb(t, p)
	assert.False(t, m.Recorded())
	const n = 4096
	x := drivertest.RandomFloat32(n)
	xb := upload(t, p, x)
	out := alloc(t, p, 4*n)
	for i := 0; i < 8; i++ {
		require.NoError(t, f.Launch(ep.Dim3{X: n / 256, Y: 1, Z: 1}, ep.Dim3{X: 256, Y: 1, Z: 1}, 0,
			ep.ArgBuffer(out, 0), ep.ArgBuffer(xb, 0), ep.ArgF32(float32(i)), ep.ArgF32(1), ep.ArgU64(n)))
	}
	require.NoError(t, m.Unload())
	assertAxpb(t, download(t, p, out), x, 7, 1, "the last of 8 queued launches")
}

const axpbSource = `
extern "C" __global__ void user_axpb_f32(float* out, const float* x, float a, float b, unsigned long long n) {
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = a * x[i] + b;
}
`

func TestCompileUserModule(t *testing.T) {
	p := newProvider(t)
	if p.BackendName() == ep.BackendSim {
		_, err := p.CompileUserModule(axpbSource, "axpb.cu", nil)
		require.ErrorIs(t, err, cudadrv.ErrUnsupported)
		assert.Contains(t, err.Error(), "simulated device has no NVRTC")
		return
	}
	m, err := p.CompileUserModule(axpbSource, "axpb.cu", []string{"--std=c++17"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, m.Unload()) }()
	assert.Contains(t, string(m.PTX()), ".entry user_axpb_f32")
	f, err := m.Function("user_axpb_f32")
	require.NoError(t, err)
	const n = 300
	x := drivertest.RandomFloat32(n)
	xb := upload(t, p, x)
	out := alloc(t, p, 4*n)
	require.NoError(t, f.Launch(ep.Dim3{X: 2, Y: 1, Z: 1}, ep.Dim3{X: 256, Y: 1, Z: 1}, 0,
		ep.ArgBuffer(out, 0), ep.ArgBuffer(xb, 0), ep.ArgF32(-3), ep.ArgF32(0.5), ep.ArgU64(n)))
	assertAxpb(t, download(t, p, out), x, -3, 0.5, "the NVRTC-compiled kernel")

	_, err = p.CompileUserModule("extern \"C\" __global__ void broken( { }", "broken.cu", nil)
	var ce *cudadrv.CompileError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "broken.cu")
	assert.NotEmpty(t, ce.Log, "the compiler's log is carried")
}
