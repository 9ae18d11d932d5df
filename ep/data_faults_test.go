package ep_test

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
)

// gatherWithIndex is a Gather of a [4, 2] float32 table by one int64 index, with the index
// and the output in provider buffers.
type gatherWithIndex struct {
	k              *ep.Kernel
	data, idx, out *ep.Buffer
}

func newGatherWithIndex(t *testing.T, p *ep.Provider, name string) *gatherWithIndex {
	t.Helper()
	k, err := p.GetKernel(ep.Spec{Name: name, Op: "Gather", Opset: 13, Inputs: []ep.TensorInfo{
		f32(4, 2), {DType: kernels.Int64, Shape: []int64{1}}}})
	require.NoError(t, err)
	return &gatherWithIndex{k: k, data: upload(t, p, drivertest.RandomFloat32(8)), idx: alloc(t, p, 8), out: alloc(t, p, 8)}
}

func (g *gatherWithIndex) run(t *testing.T, p *ep.Provider, index int64) {
	t.Helper()
	require.NoError(t, p.CopyToDevice(g.idx, 0, binary.LittleEndian.AppendUint64(nil, uint64(index))))
	ins := []ep.Tensor{tensor(g.data, 4, 2), {TensorInfo: ep.TensorInfo{DType: kernels.Int64, Shape: []int64{1}}, Ptr: g.idx.Ptr()}}
	require.NoError(t, g.k.Execute(ins, []ep.Tensor{tensor(g.out, 1, 2)}))
}

// TestWaitsReportBadDeviceData: a kernel that meets a value it cannot use in device data (here
// a Gather index outside the table) makes the first call that waits for its work fail with an
// error that names the node, the input and the value, coded INVALID_ARGUMENT; the fault is
// reported once, and valid data reports nothing.
func TestWaitsReportBadDeviceData(t *testing.T) {
	p := newProvider(t)
	g := newGatherWithIndex(t, p, "embed")
	waits := map[string]func() error{
		"SynchronizeCompute": p.SynchronizeCompute,
		"ForceSynchronize":   p.ForceSynchronize,
		"CopyToHost":         func() error { return p.CopyToHost(make([]byte, 8), g.out, 0) },
		// A host that waits another way (an event, here a bounded poll) asks itself.
		"TakeDataFault": func() error {
			for i := 0; i < 5000; i++ {
				if err := p.TakeDataFault(); err != nil {
					return err
				}
				time.Sleep(time.Millisecond)
			}
			return nil
		},
	}
	for name, wait := range waits {
		t.Run(name, func(t *testing.T) {
			g.run(t, p, 3)
			if name != "TakeDataFault" { // it would poll to its bound: waiting for nothing
				require.NoError(t, wait(), "a valid index reports nothing")
			}

			g.run(t, p, 9)
			err := wait()
			require.Error(t, err)
			assert.ErrorIs(t, err, ep.ErrDataFault)
			assert.Equal(t, ep.CodeInvalidArgument, ep.Code(err))
			var f *ep.DataFault
			require.True(t, errors.As(err, &f))
			assert.Equal(t, "embed", f.Node)
			assert.Equal(t, int64(9), f.Value)
			assert.Contains(t, err.Error(), "node 'embed' (Gather): input 'indices' holds 9")
			require.NoError(t, p.SynchronizeCompute(), "a fault is reported once")
		})
	}
}

// TestTakeDataFaultAllocatesNothing: the check every healthy run makes costs no allocation.
func TestTakeDataFaultAllocatesNothing(t *testing.T) {
	p := newProvider(t)
	newGatherWithIndex(t, p, "embed").run(t, p, 1) // a kernel that records faults: the word exists
	require.NoError(t, p.SynchronizeCompute())
	allocs := testing.AllocsPerRun(50, func() {
		if err := p.TakeDataFault(); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// TestBenchDataFaultCheck prints what the data-fault check adds to a wait (CUDAEP_BENCH=1):
// the time of TakeDataFault with no fault (the check every SynchronizeCompute, ForceSynchronize
// and CopyToHost makes, and ORT's OnRunEnd), beside a replayed one-kernel step waited for with
// SynchronizeCompute. It asserts nothing about the times.
func TestBenchDataFaultCheck(t *testing.T) {
	if os.Getenv("CUDAEP_BENCH") != "1" {
		t.Skip("set CUDAEP_BENCH=1 to run the benchmark")
	}
	p := newProvider(t)
	g := newGatherWithIndex(t, p, "embed")
	g.run(t, p, 1)
	require.NoError(t, p.SynchronizeCompute())
	const checks = 1_000_000
	start := time.Now()
	for i := 0; i < checks; i++ {
		if err := p.TakeDataFault(); err != nil {
			t.Fatal(err)
		}
	}
	check := time.Since(start) / checks

	require.NoError(t, p.BeginCapture(ep.Primary, []*ep.Kernel{g.k}, []*ep.Buffer{g.data, g.idx, g.out}))
	ins := []ep.Tensor{tensor(g.data, 4, 2), {TensorInfo: ep.TensorInfo{DType: kernels.Int64, Shape: []int64{1}}, Ptr: g.idx.Ptr()}}
	require.NoError(t, g.k.Execute(ins, []ep.Tensor{tensor(g.out, 1, 2)}))
	require.NoError(t, p.EndCapture(ep.Primary))
	const steps = 2000
	start = time.Now()
	for i := 0; i < steps; i++ {
		require.NoError(t, p.Replay(ep.Primary))
		require.NoError(t, p.SynchronizeCompute())
	}
	step := time.Since(start) / steps
	t.Logf("data-fault check (TakeDataFault, no fault): %v per wait; a replayed 1-kernel step + SynchronizeCompute "+
		"(which makes the check once): %v; the check is %.3f %% of that step, %.4f %% of a 1.14 ms decode step "+
		"that makes it twice (its stream's wait and ORT's OnRunEnd)",
		check, step, 100*float64(check)/float64(step), 100*2*float64(check)/float64(1140*time.Microsecond))
}
