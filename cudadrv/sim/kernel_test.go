package sim_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

const ptxHeader = ".version 8.5\n.target sm_90\n.address_size 64\n"

func TestModuleLoadData(t *testing.T) {
	e := newEnv(t, sim.Options{})
	tests := []struct {
		name  string
		image []byte
		want  cudadrv.Result
	}{
		{"ptx", []byte(testPTX), cudadrv.Success},
		{"nul-terminated ptx", append([]byte(testPTX), 0), cudadrv.Success},
		{"ptx without entries", []byte(ptxHeader), cudadrv.Success},
		{"cubin", []byte("\x7fELF\x02\x01\x01\x00\x00\x00"), cudadrv.ErrorInvalidImage},
		{"empty", nil, cudadrv.ErrorInvalidImage},
		{"not ptx", []byte("hello, world"), cudadrv.ErrorInvalidImage},
		{"invalid utf-8", []byte(".version 8.5\n\xff\xfe"), cudadrv.ErrorInvalidImage},
		{"no target", []byte(".version 8.5\n.visible .entry k() { ret; }"), cudadrv.ErrorInvalidPTX},
		{"duplicate entry", []byte(ptxHeader + ".entry k() {}\n.entry k() {}"), cudadrv.ErrorInvalidPTX},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.bind(t)
			m, err := e.d.ModuleLoadData(tt.image)
			if tt.want == cudadrv.Success {
				require.NoError(t, err)
				require.NoError(t, e.d.ModuleUnload(m))
				return
			}
			requireResult(t, err, tt.want)
		})
	}
	requireResult(t, e.d.ModuleUnload(0xabc), cudadrv.ErrorInvalidHandle)
}

func TestModuleGetFunction(t *testing.T) {
	e := newEnv(t, sim.Options{})
	f1, err := e.d.ModuleGetFunction(e.mod, "sim_test_fill")
	require.NoError(t, err)
	f2, err := e.d.ModuleGetFunction(e.mod, "sim_test_fill")
	require.NoError(t, err)
	assert.Equal(t, f1, f2)

	tests := []struct{ name, detail string }{
		{"sim_test_unregistered", "RegisterKernel"},
		{"sim_test_missing", "no entry \"sim_test_missing\""},
		{"sim_test_commented_out", "no entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.bind(t)
			_, err := e.d.ModuleGetFunction(e.mod, tt.name)
			requireResult(t, err, cudadrv.ErrorNotFound)
			assert.Contains(t, err.Error(), tt.name)
			assert.Contains(t, err.Error(), tt.detail)
		})
	}
	_, err = e.d.ModuleGetFunction(0x777, "sim_test_fill")
	requireResult(t, err, cudadrv.ErrorInvalidHandle)
}

func TestKernelsReadArgumentsAndMemory(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	const n = 64
	a, b, c := e.alloc(4*n), e.alloc(4*n), e.alloc(4*n)
	av, bv := make([]float32, n), make([]float32, n)
	for i := range av {
		av[i], bv[i] = float32(i)+0.5, float32(3*i)-7
	}
	e.put(a, f32bytes(av))
	e.put(b, f32bytes(bv))
	args := new(cudadrv.KernelArgs).Ptr(a).Ptr(b).Ptr(c).U32(n)
	require.NoError(t, e.d.LaunchKernel(e.fn("sim_test_add"), dim(1), dim(n), 0, s, args))
	args.Reset()
	args.Ptr(c).F32(-2.5).U32(n)
	require.NoError(t, e.d.LaunchKernel(e.fn("sim_test_scale"), dim(1), dim(n), 0, s, args))
	args.Reset()
	args.Ptr(a).U32(0xC0FFEE11).U64(n)
	require.NoError(t, e.d.LaunchKernel(e.fn("sim_test_fill"), dim(2), dim(32), 128, s, args))
	require.NoError(t, e.d.StreamSynchronize(s))

	got := bytesF32(e.get(c, 4*n))
	for i := range got {
		assert.Equal(t, (av[i]+bv[i])*-2.5, got[i], "element %d", i)
	}
	fill := e.get(a, 4*n)
	for i := 0; i < n; i++ {
		assert.Equal(t, []byte{0x11, 0xEE, 0xFF, 0xC0}, fill[4*i:4*i+4])
	}
}

func TestLaunchSeesConfigurationAndTypedArguments(t *testing.T) {
	var got struct {
		name                 string
		grid, block          cudadrv.Dim3
		shared               uint32
		threads              uint64
		n                    int
		i32                  int32
		i64                  int64
		f64                  float64
		beyond               uint64
		negView, misaligned  error
		i32s, i64s, u16s, fs error
	}
	sim.RegisterKernel("sim_test_config", func(l *sim.Launch) error {
		got.name, got.grid, got.block, got.shared, got.threads = l.Name, l.Grid, l.Block, l.SharedMem, l.Threads()
		got.n, got.i32, got.i64, got.f64, got.beyond = l.NumArgs(), l.I32Arg(0), l.I64Arg(1), l.F64Arg(2), l.Arg(99)
		_, got.negView = l.Float32s(l.PtrArg(3), -1)
		_, got.misaligned = l.Int64s(l.PtrArg(3)+4, 1)
		_, got.i32s = l.Int32s(l.PtrArg(3), 4)
		_, got.i64s = l.Int64s(l.PtrArg(3), 2)
		_, got.u16s = l.Uint16s(l.PtrArg(3), 8)
		_, got.fs = l.Float64s(l.PtrArg(3), 2)
		return nil
	})
	defer sim.RegisterKernel("sim_test_config", nil)
	e := newEnv(t, sim.Options{})
	m, err := e.d.ModuleLoadData([]byte(ptxHeader + ".visible .entry sim_test_config(.param .u32 a, .param .u64 b, .param .f64 c, .param .u64 d) { ret; }"))
	require.NoError(t, err)
	f, err := e.d.ModuleGetFunction(m, "sim_test_config")
	require.NoError(t, err)
	p := e.alloc(16)
	args := new(cudadrv.KernelArgs).I32(-7).I64(-1 << 40).F64(math.Pi).Ptr(p)
	require.NoError(t, e.d.LaunchKernel(f, cudadrv.Dim3{X: 3, Y: 2, Z: 1}, cudadrv.Dim3{X: 4, Y: 4, Z: 2}, 1024, 0, args))
	require.NoError(t, e.d.StreamSynchronize(0))
	assert.Equal(t, "sim_test_config", got.name)
	assert.Equal(t, cudadrv.Dim3{X: 3, Y: 2, Z: 1}, got.grid)
	assert.Equal(t, cudadrv.Dim3{X: 4, Y: 4, Z: 2}, got.block)
	assert.Equal(t, uint32(1024), got.shared)
	assert.Equal(t, uint64(6*32), got.threads)
	assert.Equal(t, 4, got.n)
	assert.Equal(t, int32(-7), got.i32)
	assert.Equal(t, int64(-1<<40), got.i64)
	assert.Equal(t, math.Pi, got.f64)
	assert.Zero(t, got.beyond)
	assert.Error(t, got.negView)
	var ae *sim.AccessError
	require.ErrorAs(t, got.misaligned, &ae)
	assert.True(t, ae.Misaligned)
	assert.NoError(t, got.i32s)
	assert.NoError(t, got.i64s)
	assert.NoError(t, got.u16s)
	assert.NoError(t, got.fs)
}

func TestLaunchValidation(t *testing.T) {
	e := newEnv(t, sim.Options{})
	p := e.alloc(16)
	good := func() *cudadrv.KernelArgs { return new(cudadrv.KernelArgs).Ptr(p).U64(16) }
	over := new(cudadrv.KernelArgs)
	for i := 0; i <= cudadrv.MaxKernelArgs; i++ {
		over.U64(1)
	}
	touch := e.fn("sim_test_touch")
	tests := []struct {
		name        string
		f           cudadrv.RawFunction
		grid, block cudadrv.Dim3
		shared      uint32
		args        *cudadrv.KernelArgs
		want        cudadrv.Result
	}{
		{"zero grid", touch, cudadrv.Dim3{X: 0, Y: 1, Z: 1}, dim(1), 0, good(), cudadrv.ErrorInvalidValue},
		{"zero block z", touch, dim(1), cudadrv.Dim3{X: 1, Y: 1}, 0, good(), cudadrv.ErrorInvalidValue},
		{"block over 1024 threads", touch, dim(1), cudadrv.Dim3{X: 64, Y: 32, Z: 1}, 0, good(), cudadrv.ErrorInvalidValue},
		{"block z over 64", touch, dim(1), cudadrv.Dim3{X: 1, Y: 1, Z: 65}, 0, good(), cudadrv.ErrorInvalidValue},
		{"grid y over 65535", touch, cudadrv.Dim3{X: 1, Y: 65536, Z: 1}, dim(1), 0, good(), cudadrv.ErrorInvalidValue},
		{"shared over 48 KiB", touch, dim(1), dim(1), 48<<10 + 1, good(), cudadrv.ErrorInvalidValue},
		{"too few arguments", touch, dim(1), dim(1), 0, new(cudadrv.KernelArgs).Ptr(p), cudadrv.ErrorInvalidValue},
		{"nil arguments", touch, dim(1), dim(1), 0, nil, cudadrv.ErrorInvalidValue},
		{"overflowed arguments", touch, dim(1), dim(1), 0, over, cudadrv.ErrorInvalidValue},
		{"unknown function", 0x5151, dim(1), dim(1), 0, good(), cudadrv.ErrorInvalidHandle},
		{"good", touch, dim(1), dim(1), 48 << 10, good(), cudadrv.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.bind(t)
			err := e.d.LaunchKernel(tt.f, tt.grid, tt.block, tt.shared, 0, tt.args)
			if tt.want == cudadrv.Success {
				require.NoError(t, err)
				return
			}
			requireResult(t, err, tt.want)
		})
	}
	require.NoError(t, e.d.CtxSynchronize())
	f, err := e.d.ModuleGetFunction(e.mod, "sim_test_panic")
	require.NoError(t, err)
	requireResult(t, e.d.LaunchKernel(f, dim(1), dim(1), 0, 0, good()), cudadrv.ErrorInvalidValue, "sim_test_panic declares no parameters")
}

func TestOutOfBoundsKernelFaultsTheContextStickily(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s, other := e.stream(), e.stream()
	p := e.alloc(100)
	touch := e.fn("sim_test_touch")
	require.NoError(t, e.launchTouch(s, p, 101))
	err := e.d.StreamSynchronize(s)
	requireResult(t, err, cudadrv.ErrorIllegalAddress)
	var de *cudadrv.Error
	require.ErrorAs(t, err, &de)
	assert.Equal(t, sim.OpStreamSynchronize, de.Op)
	assert.Contains(t, de.Detail, "sim_test_touch")
	assert.Contains(t, de.Detail, fmt.Sprintf("base %#x, size 100", uint64(p)))
	assert.Contains(t, de.Detail, fmt.Sprintf("[%#x, +101)", uint64(p)))

	for name, call := range map[string]func() error{
		"MemAlloc":          func() error { _, err := e.d.MemAlloc(8); return err },
		"other stream sync": func() error { return e.d.StreamSynchronize(other) },
		"CtxSynchronize":    e.d.CtxSynchronize,
		"launch": func() error {
			return e.d.LaunchKernel(touch, dim(1), dim(1), 0, other, new(cudadrv.KernelArgs).Ptr(p).U64(1))
		},
		"EventCreate": func() error { _, err := e.d.EventCreate(0); return err },
	} {
		requireResult(t, call(), cudadrv.ErrorIllegalAddress, name)
	}
	requireResult(t, e.d.StreamDestroy(other), cudadrv.ErrorIllegalAddress, "destroy reports the fault")
	assert.Equal(t, 1, e.d.Stats().Streams, "but still destroys")
	e.onThread(true, func() {
		requireResult(t, e.d.MemcpyHtoD(p, []byte{1}), cudadrv.ErrorIllegalAddress, "every thread of the context")
	})

	// Tearing the context down and retaining it again clears the fault.
	require.NoError(t, e.d.PrimaryCtxRelease(0))
	ctx, err := e.d.PrimaryCtxRetain(0)
	require.NoError(t, err)
	require.NoError(t, e.d.CtxSetCurrent(ctx))
	_, err = e.d.MemAlloc(8)
	require.NoError(t, err)
	e.ctx = ctx
}

func TestKernelFaultKinds(t *testing.T) {
	sim.RegisterKernel("sim_test_misaligned", func(l *sim.Launch) error {
		_, err := l.Float32s(l.PtrArg(0)+2, 1)
		return err
	})
	sim.RegisterKernel("sim_test_own_error", func(l *sim.Launch) error { return errors.New("kernel gave up") })
	sim.RegisterKernel("sim_test_sticky_result", func(l *sim.Launch) error {
		return fmt.Errorf("trap: %w", cudadrv.ErrorIllegalInstruction)
	})
	tests := []struct {
		kernel string
		want   cudadrv.Result
		detail string
	}{
		{"sim_test_misaligned", cudadrv.ErrorMisalignedAddress, "misaligned"},
		{"sim_test_own_error", cudadrv.ErrorLaunchFailed, "kernel gave up"},
		{"sim_test_sticky_result", cudadrv.ErrorIllegalInstruction, "trap"},
		{"sim_test_panic", cudadrv.ErrorLaunchFailed, "panicked: boom"},
	}
	ptx := ptxHeader + `.entry sim_test_misaligned(.param .u64 p) {}
.entry sim_test_own_error(.param .u64 p) {}
.entry sim_test_sticky_result(.param .u64 p) {}
.entry sim_test_panic(.param .u64 p) {}`
	for _, tt := range tests {
		t.Run(tt.kernel, func(t *testing.T) {
			e := newEnv(t, sim.Options{})
			m, err := e.d.ModuleLoadData([]byte(ptx))
			require.NoError(t, err)
			f, err := e.d.ModuleGetFunction(m, tt.kernel)
			require.NoError(t, err)
			require.NoError(t, e.d.LaunchKernel(f, dim(1), dim(1), 0, 0, new(cudadrv.KernelArgs).Ptr(e.alloc(8))))
			err = e.d.CtxSynchronize()
			requireResult(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.detail)
			assert.True(t, tt.want.Sticky())
		})
	}
}

func TestRegisterKernelReplacesAndRemoves(t *testing.T) {
	const name = "sim_test_replaceable"
	ptx := []byte(ptxHeader + ".entry " + name + "(.param .u64 p) {}")
	fill := func(v byte) sim.KernelFunc {
		return func(l *sim.Launch) error {
			b, err := l.Bytes(l.PtrArg(0), 4)
			copy(b, []byte{v, v, v, v})
			return err
		}
	}
	sim.RegisterKernel(name, fill(0x11))
	defer sim.RegisterKernel(name, nil)
	e := newEnv(t, sim.Options{})
	p := e.alloc(4)
	run := func() []byte {
		m, err := e.d.ModuleLoadData(ptx)
		require.NoError(t, err)
		f, err := e.d.ModuleGetFunction(m, name)
		require.NoError(t, err)
		require.NoError(t, e.d.LaunchKernel(f, dim(1), dim(1), 0, 0, new(cudadrv.KernelArgs).Ptr(p)))
		return e.get(p, 4)
	}
	assert.Equal(t, []byte{0x11, 0x11, 0x11, 0x11}, run())
	sim.RegisterKernel(name, fill(0x22))
	assert.Equal(t, []byte{0x22, 0x22, 0x22, 0x22}, run())

	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sim.RegisterKernel(fmt.Sprintf("sim_test_concurrent_%d", i), fill(byte(i)))
			sim.RegisterKernel(name, fill(0x33))
			sim.RegisterKernel(fmt.Sprintf("sim_test_concurrent_%d", i), nil)
		}(i)
	}
	wg.Wait()
	assert.Equal(t, []byte{0x33, 0x33, 0x33, 0x33}, run())

	sim.RegisterKernel(name, nil)
	m, err := e.d.ModuleLoadData(ptx)
	require.NoError(t, err)
	_, err = e.d.ModuleGetFunction(m, name)
	requireResult(t, err, cudadrv.ErrorNotFound)
}

func TestModuleUnloadInvalidatesItsFunctions(t *testing.T) {
	e := newEnv(t, sim.Options{})
	m, err := e.d.ModuleLoadData([]byte(testPTX))
	require.NoError(t, err)
	f, err := e.d.ModuleGetFunction(m, "sim_test_touch")
	require.NoError(t, err)
	p := e.alloc(8)
	require.NoError(t, e.d.ModuleUnload(m))
	requireResult(t, e.d.LaunchKernel(f, dim(1), dim(1), 0, 0, new(cudadrv.KernelArgs).Ptr(p).U64(8)), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.d.ModuleUnload(m), cudadrv.ErrorInvalidHandle, "twice")
	assert.Equal(t, 1, e.d.Stats().Modules, "the env's module is left")
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

func bytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return v
}
