package kernels_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
)

// EnvBench enables TestBenchTable.
const EnvBench = "CUDAEP_BENCH"

// TestBenchTable prints, never asserts, how the library's Execute compares with the raw
// cudadrv calls it wraps, measured side by side in one run: an eager elementwise kernel
// against a raw Stream.Launch of the same function (host cost per call, launch-bound), and
// MatMul against a raw BLAS.Sgemm of the same product (TFLOP/s from device events), with
// default and TF32 math. Medians of repeats after a warm-up; ours and raw alternate.
func TestBenchTable(t *testing.T) {
	if os.Getenv(EnvBench) != "1" {
		t.Skip("set " + EnvBench + "=1 to print the benchmark table")
	}
	var rows []string
	row := func(format string, args ...any) { rows = append(rows, fmt.Sprintf(format, args...)) }

	f := newFixture(t)
	sim := f.env.Sim != nil
	backend := "cuda"
	if sim {
		backend = "sim"
	}

	// Elementwise: Add of two 64×64 tensors, launch-bound.
	calls, repeats := 2000, 15
	if sim {
		calls, repeats = 300, 7
	}
	shape := []int64{64, 64}
	add := f.get(kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(shape...), f32Info(shape...)}})
	a, b := f.uploadF32(shape, f.random(64*64)), f.uploadF32(shape, f.random(64*64))
	out := f.outputs(add)[0]
	ins, outs := []kernels.Tensor{a, b}, []kernels.Tensor{out}
	fn := kernels.LibraryFunction(f.lib, "cudaep_add_f32")
	args := new(cudadrv.KernelArgs)
	n := uint64(64 * 64)
	grid := cudadrv.Dim3{X: uint32((n + 255) / 256), Y: 1, Z: 1}
	block := cudadrv.Dim3{X: 256, Y: 1, Z: 1}
	ours := func() error { return add.Execute(ins, outs) }
	raw := func() error {
		args.Reset()
		args.Ptr(out.Ptr).Ptr(a.Ptr).Ptr(b.Ptr).U64(n)
		return f.stream.Launch(fn, grid, block, 0, args)
	}
	perCall := func(launch func() error) float64 {
		start := time.Now()
		for range calls {
			if err := launch(); err != nil {
				t.Fatal(err)
			}
		}
		require.NoError(t, f.stream.Synchronize())
		return float64(time.Since(start).Nanoseconds()) / float64(calls)
	}
	perCall(ours)
	perCall(raw)
	var oursNs, rawNs []float64
	for range repeats {
		oursNs = append(oursNs, perCall(ours))
		rawNs = append(rawNs, perCall(raw))
	}
	mo, mr := median(oursNs), median(rawNs)
	row("%-44s %12.0f ns/call %12.0f ns/call %7.3fx", "Add 64x64 eager (Execute vs Stream.Launch)", mo, mr, mo/mr)

	// MatMul against raw SGEMM.
	m, k, nn := int64(2048), int64(4096), int64(4096)
	reps, mmRepeats := 10, 7
	if sim {
		m, k, nn, reps, mmRepeats = 64, 128, 128, 2, 3
	}
	for _, tf32 := range []bool{false, true} {
		g := f
		if tf32 {
			g = f.variant(fixtureOpts{tf32: true})
		}
		spec := kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(m, k), f32Info(k, nn)}}
		mm := g.get(spec)
		ta, tb := g.uploadF32([]int64{m, k}, g.random(m*k)), g.uploadF32([]int64{k, nn}, g.random(k*nn))
		ty := g.outputs(mm)[0]
		mmIns, mmOuts := []kernels.Tensor{ta, tb}, []kernels.Tensor{ty}
		p := &cudadrv.GemmParams{TransA: cudadrv.OpN, TransB: cudadrv.OpN, M: int(nn), N: int(m), K: int(k),
			Alpha: 1, A: tb.Ptr, B: ta.Ptr, C: ty.Ptr, LDA: int(nn), LDB: int(k), LDC: int(nn)}
		start, end := g.event(), g.event()
		timed := func(launch func() error) float64 {
			require.NoError(t, start.Record(g.stream))
			for range reps {
				if err := launch(); err != nil {
					t.Fatal(err)
				}
			}
			require.NoError(t, end.Record(g.stream))
			require.NoError(t, end.Synchronize())
			d, err := end.ElapsedSince(start)
			require.NoError(t, err)
			return 2 * float64(m*k*nn) * float64(reps) / d.Seconds() / 1e12
		}
		oursMM := func() error { return mm.Execute(mmIns, mmOuts) }
		rawMM := func() error { return g.blas.Sgemm(p) }
		timed(oursMM)
		timed(rawMM)
		var oursT, rawT []float64
		for range mmRepeats {
			oursT = append(oursT, timed(oursMM))
			rawT = append(rawT, timed(rawMM))
		}
		mode := "fp32"
		if tf32 {
			mode = "tf32"
		}
		mo, mr := median(oursT), median(rawT)
		row("%-44s %12.4g TFLOP/s %12.4g TFLOP/s %7.3fx", fmt.Sprintf("MatMul %dx%dx%d %s (Execute vs Sgemm)", m, k, nn, mode), mo, mr, mo/mr)
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\nep/kernels benchmark on %s (medians; ratio = ours / raw)\n", backend)
	fmt.Fprintf(&sb, "%-44s %20s %20s %8s\n", "case", "ours", "raw", "ratio")
	for _, r := range rows {
		sb.WriteString(r + "\n")
	}
	fmt.Print(sb.String())
	t.Log(sb.String())
}

// event returns a timing event destroyed at cleanup.
func (f *fixture) event() *cudadrv.Event {
	f.t.Helper()
	e, err := f.env.Context.NewEvent(cudadrv.EventDefault)
	require.NoError(f.t, err)
	f.t.Cleanup(func() {
		if err := e.Destroy(); err != nil {
			f.t.Errorf("destroy event: %v", err)
		}
	})
	return e
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
