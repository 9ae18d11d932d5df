package ep_test

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/paging"
)

// syncingOps are the driver calls that make the host wait for the device, or (cuMemAlloc,
// cuMemFree, page-locking, synchronous copies and memsets, all of which CUDA lists among the
// implicit synchronizations) make the device serialize streams: none may happen inside a
// prefill loop, or the copy of layer l+1 stops overlapping the compute of layer l.
var syncingOps = []string{
	sim.OpCtxSynchronize, sim.OpStreamSynchronize, sim.OpEventSynchronize, sim.OpStreamQuery,
	sim.OpMemAlloc, sim.OpMemFree, sim.OpMemHostAlloc, sim.OpMemFreeHost,
	sim.OpMemHostRegister, sim.OpMemHostUnregister,
	sim.OpMemcpyHtoD, sim.OpMemcpyDtoH, sim.OpMemcpyDtoD, sim.OpMemcpyDtoHAsync, sim.OpMemsetD8,
	sim.OpModuleLoadData, sim.OpStreamCreate, sim.OpEventCreate,
}

// TestPrefillLoopOverlapsCopyWithCompute runs the prefill loop a host (and cmd/cudaep-demo)
// runs: PrefetchWeight(l+1), PageWeight(l), MatMul + Add + Relu on the paged weight (W then
// b), ReleasePagedWeight. It holds each layer's Relu on the device (a simulator kernel body
// that blocks) and checks, with device-side ordering only:
//
//   - the host queues the whole prefill while layer 0's compute is held: the loop never
//     waits for the compute stream;
//   - the loop makes none of syncingOps;
//   - while layer l's compute is held, layer l+1's copy completes (its bytes are in its slot:
//     the copy is not ordered after layer l's compute), and layer l's slot still holds layer
//     l's bytes (the copy of layer l+2 into it waits for layer l's release fence).
func TestPrefillLoopOverlapsCopyWithCompute(t *testing.T) {
	if drivertest.BackendName() != ep.BackendSim {
		t.Skip("the held kernel is a simulator body")
	}
	const layers, width, rows = 5, 32, 4
	count := width*width + width // W then b
	relu := "cudaep_relu_f32"
	body := kernels.SimKernels()[relu]
	require.NotNil(t, body, "the simulator has no body for %s", relu)
	started := make(chan int, layers)
	proceed := make([]chan struct{}, layers)
	for i := range proceed {
		proceed[i] = make(chan struct{})
	}
	calls := 0 // only the compute stream's worker runs Relu, one launch at a time
	ep.UseSimOptions(t, sim.Options{Kernels: map[string]cudadrv.KernelBody{
		relu: func(l *cudadrv.KernelLaunch) error {
			n := calls
			calls++
			if n < layers {
				started <- n
				<-proceed[n]
			}
			return body(l)
		},
	}})
	p := newProvider(t, func(o *ep.Options) {
		o.PrefillDoubleBuffer = true
		o.ResidencySlotBytes = uint64(4 * count)
	})
	d := simOf(p)
	require.NotNil(t, d)

	path, images := writeLayers(t, layers, count)
	file, err := p.OpenExternalData(path)
	require.NoError(t, err)
	lazy := make([]*ep.LazyWeight, layers)
	for l := range lazy {
		lazy[l], err = p.NewLazyWeight(ep.WeightSpec{
			Boundary: paging.BoundaryMatMul, DType: paging.Float32, Shape: []int64{int64(count)},
			Regions: []paging.Region{{Mapping: file, Offset: uint64(100 + 4*count*l), Len: uint64(4 * count)}},
		})
		require.NoError(t, err)
	}
	matmul := getKernel(t, p, "MatMul", 13, f32(rows, width), f32(width, width))
	add := getKernel(t, p, "Add", 14, f32(rows, width), f32(width))
	reluK := getKernel(t, p, "Relu", 14, f32(rows, width))
	x := drivertest.RandomFloat32(rows * width)
	in, pre, out := upload(t, p, x), alloc(t, p, 4*rows*width), alloc(t, p, 4*rows*width)
	require.NoError(t, p.ForceSynchronize())

	before := map[string]uint64{}
	for _, op := range syncingOps {
		before[op] = d.Calls(op)
	}
	// Registered after every other cleanup, so it runs first: a test failing early releases the
	// held kernels before buffers are freed and the provider drains.
	released := 0
	t.Cleanup(func() {
		for ; released < layers; released++ {
			close(proceed[released])
		}
	})
	slot := make([]cudadrv.DevicePtr, layers) // where each layer was paged
	loop := make(chan error, 1)
	go func() {
		// The loop's driver calls bind the provider's context on whatever thread runs them.
		loop <- func() error {
			if _, err := p.PrefetchWeight(0, lazy[0]); err != nil {
				return err
			}
			a, b := in, out
			for l := range layers {
				if l+1 < layers {
					if _, err := p.PrefetchWeight(ep.LayerID(l+1), lazy[l+1]); err != nil {
						return err
					}
				}
				pw, err := p.PageWeight(ep.LayerID(l))
				if err != nil {
					return err
				}
				slot[l] = pw.Ptr()
				w := ep.Tensor{TensorInfo: f32(width, width), Ptr: pw.Ptr()}
				bias := ep.Tensor{TensorInfo: f32(width), Ptr: pw.Ptr() + cudadrv.DevicePtr(4*width*width)}
				if err := matmul.Execute([]ep.Tensor{tensor(a, rows, width), w}, []ep.Tensor{tensor(pre, rows, width)}); err != nil {
					return err
				}
				if err := add.Execute([]ep.Tensor{tensor(pre, rows, width), bias}, []ep.Tensor{tensor(pre, rows, width)}); err != nil {
					return err
				}
				if err := reluK.Execute([]ep.Tensor{tensor(pre, rows, width)}, []ep.Tensor{tensor(b, rows, width)}); err != nil {
					return err
				}
				if err := p.ReleasePagedWeight(pw); err != nil {
					return err
				}
				a, b = b, a
			}
			return nil
		}()
	}()

	require.Equal(t, 0, recvWithin(t, started), "layer 0's Relu never ran")
	select {
	case err := <-loop:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the prefill loop waited for the compute stream: it did not return while layer 0's compute was held")
	}
	for _, op := range syncingOps {
		assert.Equal(t, before[op], d.Calls(op), "the prefill loop called %s", op)
	}

	// Device memory is read on the legacy stream, which the provider's non-blocking streams do
	// not wait for (nor it for them): it sees the slots while the compute stream is held.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := ep.ContextOf(p)
	require.NoError(t, ctx.Bind())
	holds := func(ptr cudadrv.DevicePtr, l int) bool {
		got := make([]byte, 4*count)
		require.NoError(t, ctx.CopyDtoH(got, ptr))
		return bytes.Equal(got, drivertest.Float32Bytes(images[l]))
	}
	for l := range layers {
		if l > 0 {
			require.Equal(t, l, recvWithin(t, started), "layer %d's Relu", l)
		}
		// Layer l's compute is held now.
		assert.True(t, holds(slot[l], l), "layer %d's slot was overwritten while its compute ran", l)
		if l+1 < layers {
			require.NotEqual(t, slot[l], slot[l+1], "layers %d and %d share a slot", l, l+1)
			// Polled on this thread (it has the context bound); the deadline only bounds a
			// deadlock, the simulator copies in microseconds.
			deadline := time.Now().Add(30 * time.Second)
			for !holds(slot[l+1], l+1) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			assert.True(t, holds(slot[l+1], l+1),
				"layer %d's copy did not complete while layer %d's compute was held: the copy waits for the compute", l+1, l)
		}
		close(proceed[l])
		released++
	}
	result := out
	if layers%2 == 0 {
		result = in
	}
	want := x
	for l := range layers {
		want = denseRelu(want, images[l], rows, width)
	}
	var norm float64
	for _, v := range want {
		norm = max(norm, float64(v))
	}
	require.Positive(t, norm, "the reference output is all zero: pick another seed")
	assert.InDeltaSlice(t, want, download(t, p, result), 1e-5*norm, "the prefill's output")
}

// denseRelu is the host reference of one layer: relu(x·W + b), W row-major [width, width]
// followed by b in img.
func denseRelu(x, img []float32, rows, width int) []float32 {
	y := make([]float32, rows*width)
	for r := range rows {
		for j := range width {
			s := float64(img[width*width+j])
			for k := range width {
				s += float64(x[r*width+k]) * float64(img[k*width+j])
			}
			y[r*width+j] = float32(max(s, 0))
		}
	}
	return y
}

// recvWithin receives from c, failing t when nothing arrives in 30 s (a deadlock, not a
// timing: the simulator runs this in microseconds).
func recvWithin(t *testing.T, c <-chan int) int {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("nothing arrived: the device is stuck")
		return -1
	}
}
