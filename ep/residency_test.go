package ep_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cudaep/cudaep/cudadrv/drivertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/paging"
)

// writeLayers writes n layers of count random floats each into one external-data file, after
// a 100-byte header so that layers do not start on page boundaries.
func writeLayers(t *testing.T, n, count int) (string, [][]float32) {
	t.Helper()
	layers := make([][]float32, n)
	data := make([]byte, 100)
	for i := range data {
		data[i] = byte(i) | 0x80
	}
	for i := range layers {
		layers[i] = drivertest.RandomFloat32(count)
		data = append(data, drivertest.Float32Bytes(layers[i])...)
	}
	path := filepath.Join(t.TempDir(), "model.onnx.data")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path, layers
}

// readPaged copies a paged weight into a fresh buffer with Identity and reads it back.
func readPaged(t *testing.T, p *ep.Provider, w *ep.PagedWeight, count int) []float32 {
	t.Helper()
	out := alloc(t, p, uint64(4*count))
	id := getKernel(t, p, "Identity", 13, f32(int64(count)))
	in := ep.Tensor{TensorInfo: f32(int64(count)), Ptr: w.Ptr()}
	require.NoError(t, id.Execute([]ep.Tensor{in}, []ep.Tensor{tensor(out, int64(count))}))
	return download(t, p, out)
}

// TestResidencyPagesLayersAheadOfCompute prefetches layer N+1 before consuming layer N, for
// every layer of a real external-data file, and checks each page is byte-identical to the file.
func TestResidencyPagesLayersAheadOfCompute(t *testing.T) {
	p := newProvider(t, func(o *ep.Options) { o.PrefillDoubleBuffer = true })
	const n, count = 5, 3000
	path, layers := writeLayers(t, n, count)
	file, err := p.OpenExternalData(path)
	require.NoError(t, err)
	weights := make([]*ep.LazyWeight, n)
	for i := range weights {
		weights[i], err = p.NewLazyWeight(ep.WeightSpec{
			Boundary: paging.BoundaryMatMul, DType: paging.Float32, Shape: []int64{count},
			Regions: []paging.Region{{Mapping: file, Offset: uint64(100 + 4*count*i), Len: 4 * count}},
		})
		require.NoError(t, err)
	}
	routed := func(d ep.Decline, err error) {
		t.Helper()
		require.NoError(t, err)
		require.Equal(t, ep.DeclineNone, d.Reason, "declined: %v", d.Reason)
	}
	routed(p.PrefetchWeight(0, weights[0]))
	for i := 0; i < n; i++ {
		if i+1 < n {
			routed(p.PrefetchWeight(ep.LayerID(i+1), weights[i+1]))
		}
		pw, err := p.PageWeight(ep.LayerID(i))
		require.NoError(t, err)
		assert.Equal(t, uint64(4*count), pw.Len())
		assert.Equal(t, layers[i], readPaged(t, p, pw, count), "layer %d", i)
		require.NoError(t, pw.Release())
	}
	st, active := p.ResidencyStats()
	require.True(t, active)
	assert.Equal(t, uint64(n), st.Routed)
	assert.Equal(t, uint64(n), st.Consumed)
	assert.Equal(t, uint64(n), st.Released)
}

func TestResidencyIsOffByDefaultAndDeclinesTyped(t *testing.T) {
	t.Setenv(paging.EnvDoubleBuffer, "")
	p := newProvider(t)
	path, _ := writeLayers(t, 1, 256)
	file, err := p.OpenExternalData(path)
	require.NoError(t, err)
	w, err := p.NewLazyWeight(ep.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Float32, Shape: []int64{256},
		Regions: []paging.Region{{Mapping: file, Offset: 100, Len: 1024}}})
	require.NoError(t, err)
	d, err := p.PrefetchWeight(0, w)
	require.NoError(t, err, "a decline is a result, not an error")
	assert.Equal(t, paging.DeclineDisabled, d.Reason)
	_, active := p.ResidencyStats()
	assert.False(t, active, "a decline builds no pipeline")
}

func TestExternalDataErrorsComeBeforeDeviceWork(t *testing.T) {
	p := newProvider(t)
	_, err := p.OpenExternalData(filepath.Join(t.TempDir(), "missing.data"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.data")

	path, _ := writeLayers(t, 1, 16)
	file, err := p.OpenExternalData(path)
	require.NoError(t, err)
	_, err = p.NewLazyWeight(ep.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Float32, Shape: []int64{64},
		Regions: []paging.Region{{Mapping: file, Offset: 100, Len: 256}}})
	require.Error(t, err, "a region past the end of the file")
	assert.Contains(t, err.Error(), "164", "the error names the file size")
}

// TestCloseReleasesPagedWeightsAndInFlightLayers is issue 12's first gap: a provider closed
// with a paged weight still held and a layer still in flight gives every slot, staging buffer,
// registration and mapping back, and reports no error ("staging pool closed with 2 buffer(s)
// still acquired" before).
func TestCloseReleasesPagedWeightsAndInFlightLayers(t *testing.T) {
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	opts.PrefillDoubleBuffer = true
	p, err := ep.New(opts)
	require.NoError(t, err)
	const count = 4096
	path, _ := writeLayers(t, 2, count)
	file, err := p.OpenExternalData(path)
	require.NoError(t, err)
	var ws [2]*ep.LazyWeight
	for i := range ws {
		ws[i], err = p.NewLazyWeight(ep.WeightSpec{
			Boundary: paging.BoundaryMatMul, DType: paging.Float32, Shape: []int64{count},
			Regions: []paging.Region{{Mapping: file, Offset: uint64(100 + 4*count*i), Len: 4 * count}},
		})
		require.NoError(t, err)
	}
	d, err := p.PrefetchWeight(0, ws[0])
	require.NoError(t, err)
	require.Equal(t, ep.DeclineNone, d.Reason)
	held, err := p.PageWeight(0)
	require.NoError(t, err)
	d, err = p.PrefetchWeight(1, ws[1]) // in flight at Close
	require.NoError(t, err)
	require.Equal(t, ep.DeclineNone, d.Reason)
	require.NoError(t, p.Close())
	c := ep.ContextOf(p).Counters()
	assert.Zero(t, c.PinnedLiveBytes, "staging buffers freed")
	assert.Zero(t, c.RegisteredLiveBytes, "registrations undone")
	assert.Zero(t, c.DeviceLiveBytes, "slots freed")
	assert.NoError(t, p.ReleasePagedWeight(held), "a release after Close succeeds: Close gave it back")
}

// TestExternalDataIsMappedOncePerPathAndClosesOnItsOwn is issue 12's second gap: opening a path
// twice returns the same mapping, and one file can be closed on its own once every opener has
// closed it; its id is refused afterwards.
func TestExternalDataIsMappedOncePerPathAndClosesOnItsOwn(t *testing.T) {
	p := newProvider(t)
	path, _ := writeLayers(t, 1, 64)
	a, err := p.OpenExternalData(path)
	require.NoError(t, err)
	b, err := p.OpenExternalData(path)
	require.NoError(t, err)
	assert.Equal(t, a, b, "one mapping per path")
	spec := ep.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Float32, Shape: []int64{64},
		Regions: []paging.Region{{Mapping: a, Offset: 100, Len: 256}}}
	require.NoError(t, p.CloseExternalData(a))
	_, err = p.NewLazyWeight(spec)
	require.NoError(t, err, "the second opener still holds the file")
	require.NoError(t, p.CloseExternalData(b))
	_, err = p.NewLazyWeight(spec)
	require.Error(t, err, "the file is unmapped after the last close")
	assert.Equal(t, ep.CodeInvalidArgument, ep.Code(err))
	assert.Equal(t, ep.CodeInvalidArgument, ep.Code(p.CloseExternalData(a)), "a closed id is unknown")
	c, err := p.OpenExternalData(path)
	require.NoError(t, err, "reopening after the close works")
	spec.Regions[0].Mapping = c
	_, err = p.NewLazyWeight(spec)
	require.NoError(t, err)
	n, err := p.RecoverWeights()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing quarantined, nothing recovered")
}

// lazyLayers builds n float32 MatMul weights of count elements over the layers writeLayers
// wrote into file.
func lazyLayers(t *testing.T, p *ep.Provider, file ep.MappingID, n, count int) []*ep.LazyWeight {
	t.Helper()
	ws := make([]*ep.LazyWeight, n)
	for i := range ws {
		var err error
		ws[i], err = p.NewLazyWeight(ep.WeightSpec{
			Boundary: paging.BoundaryMatMul, DType: paging.Float32, Shape: []int64{int64(count)},
			Regions: []paging.Region{{Mapping: file, Offset: uint64(100 + 4*count*i), Len: uint64(4 * count)}},
		})
		require.NoError(t, err)
	}
	return ws
}

// prefill pages every layer one ahead through the residency and returns each layer's path;
// check, when not nil, sees every paged weight before its release.
func prefill(t *testing.T, p *ep.Provider, ws []*ep.LazyWeight, check func(i int, pw *ep.PagedWeight)) []paging.Path {
	t.Helper()
	routed := func(d ep.Decline, err error) {
		t.Helper()
		require.NoError(t, err)
		require.Equal(t, ep.DeclineNone, d.Reason, "declined: %v", d)
	}
	var paths []paging.Path
	routed(p.PrefetchWeight(0, ws[0]))
	for i := range ws {
		if i+1 < len(ws) {
			routed(p.PrefetchWeight(ep.LayerID(i+1), ws[i+1]))
		}
		pw, err := p.PageWeight(ep.LayerID(i))
		require.NoError(t, err)
		paths = append(paths, pw.Path())
		if check != nil {
			check(i, pw)
		}
		require.NoError(t, pw.Release())
	}
	return paths
}

// With residency_slot_bytes the provider reserves the pipeline when it is created, and with
// the double buffer on it registers an external-data file when it opens it: the first prefill
// then allocates, creates and registers nothing, and every layer goes zero-copy with exact
// bytes. Closing the file undoes its registrations.
func TestFirstPrefillSetsNothingUp(t *testing.T) {
	const n, count = 4, 3000
	p := newProvider(t, func(o *ep.Options) {
		o.PrefillDoubleBuffer = true
		o.ResidencySlotBytes = 4 * count
	})
	_, active := p.ResidencyStats()
	assert.True(t, active, "the pipeline is reserved when the provider is created")
	path, layers := writeLayers(t, n, count)
	file, err := p.OpenExternalData(path)
	require.NoError(t, err)
	rep, ok := p.ExternalDataRegistration(file)
	require.True(t, ok, "registered when opened")
	assert.Empty(t, rep.Stopped)
	assert.GreaterOrEqual(t, rep.Bytes, uint64(100+4*count*n), "the whole file")
	assert.Equal(t, rep.Bytes, ep.ContextOf(p).Counters().RegisteredLiveBytes)
	ws := lazyLayers(t, p, file, n, count)

	before := ep.ContextOf(p).Counters()
	paths := prefill(t, p, ws, nil)
	require.NoError(t, p.ForceSynchronize())
	after := ep.ContextOf(p).Counters()
	assert.Equal(t, []paging.Path{paging.PathZeroCopy, paging.PathZeroCopy, paging.PathZeroCopy, paging.PathZeroCopy}, paths)
	assert.Equal(t, before.DeviceAllocs, after.DeviceAllocs, "no device allocation in the first prefill")
	assert.Equal(t, before.PinnedAllocs, after.PinnedAllocs, "no pinned allocation in the first prefill")
	assert.Equal(t, before.EventsCreated, after.EventsCreated, "no event created in the first prefill")
	assert.Equal(t, before.Registrations, after.Registrations, "no registration in the first prefill")

	prefill(t, p, ws, func(i int, pw *ep.PagedWeight) {
		assert.Equal(t, layers[i], readPaged(t, p, pw, count), "layer %d", i)
	})
	st, _ := p.ResidencyStats()
	require.Len(t, st.Layers, n)
	for l, lp := range st.Layers {
		assert.Equal(t, paging.PathZeroCopy, lp.Path, "layer %d", l)
	}
	assert.Equal(t, rep.Bytes, st.Registered.Bytes)

	require.NoError(t, p.CloseExternalData(file))
	assert.Zero(t, ep.ContextOf(p).Counters().RegisteredLiveBytes, "closing the file undid its registrations")
	_, ok = p.ExternalDataRegistration(file)
	assert.False(t, ok)
}

// paging_path picks the transfer path: staging registers nothing, zero_copy and auto copy
// from registered pages; every layer's bytes are exact either way.
func TestPagingPathOption(t *testing.T) {
	for _, c := range []struct {
		path     string
		want     paging.Path
		register bool
	}{
		{ep.PagingAuto, paging.PathZeroCopy, true},
		{ep.PagingZeroCopy, paging.PathZeroCopy, true},
		{ep.PagingStaging, paging.PathStaging, false},
	} {
		t.Run(c.path, func(t *testing.T) {
			const n, count = 3, 2048
			p := newProvider(t, func(o *ep.Options) {
				o.PrefillDoubleBuffer = true
				o.PagingPath = c.path
			})
			path, layers := writeLayers(t, n, count)
			file, err := p.OpenExternalData(path)
			require.NoError(t, err)
			_, registered := p.ExternalDataRegistration(file)
			assert.Equal(t, c.register, registered)
			ws := lazyLayers(t, p, file, n, count)
			paths := prefill(t, p, ws, func(i int, pw *ep.PagedWeight) {
				assert.Equal(t, layers[i], readPaged(t, p, pw, count), "layer %d", i)
			})
			for i, got := range paths {
				assert.Equal(t, c.want, got, "layer %d", i)
			}
			if !c.register {
				assert.Zero(t, ep.ContextOf(p).Counters().Registrations, "staging registers nothing")
			}
		})
	}
}

// register_cap_bytes caps what stays registered: a file half again as large as the cap pages
// zero-copy through a sliding window, never holding more than the cap. (The cap leaves room
// for four layers: a layer in flight may hold its neighbour's whole range through the page
// they share, and the next layer registers beside them.)
func TestRegisterCapOption(t *testing.T) {
	const n, count = 6, 16384 // 64 KiB layers
	const regCap = 256 << 10
	p := newProvider(t, func(o *ep.Options) {
		o.PrefillDoubleBuffer = true
		o.RegisterCapBytes = regCap
	})
	path, layers := writeLayers(t, n, count)
	file, err := p.OpenExternalData(path)
	require.NoError(t, err)
	rep, ok := p.ExternalDataRegistration(file)
	require.True(t, ok)
	assert.Contains(t, rep.Stopped, "cap", "the file is larger than the cap")
	ws := lazyLayers(t, p, file, n, count)
	for pass := range 2 {
		paths := prefill(t, p, ws, func(i int, pw *ep.PagedWeight) {
			assert.LessOrEqual(t, ep.ContextOf(p).Counters().RegisteredLiveBytes, uint64(regCap))
			assert.Equal(t, layers[i], readPaged(t, p, pw, count), "pass %d layer %d", pass, i)
		})
		for i, got := range paths {
			assert.Equal(t, paging.PathZeroCopy, got, "pass %d layer %d", pass, i)
		}
	}
	st, _ := p.ResidencyStats()
	assert.Equal(t, uint64(regCap), st.Registered.Cap)
	assert.LessOrEqual(t, st.Registered.Peak, uint64(regCap))
	assert.NotZero(t, st.Registered.Evicted, "the window slid")
}

// residency_slot_bytes that can never be built fails the provider's creation with an error
// naming the options.
func TestResidencySlotBytesOptionErrors(t *testing.T) {
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	opts.PrefillDoubleBuffer = true
	opts.ResidencySlotBytes, opts.ResidencyBudgetBytes = 3<<20, 4<<20
	_, err := ep.New(opts)
	require.Error(t, err)
	assert.Equal(t, ep.CodeInvalidArgument, ep.Code(err))
	assert.ErrorContains(t, err, "residency_slot_bytes=3145728 exceeds half of residency_budget_bytes=4194304")

	opts = ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	opts.PrefillDoubleBuffer = true
	opts.ResidencySlotBytes, opts.StagingPoolCapBytes = 1<<20, 1<<20
	_, err = ep.New(opts)
	require.Error(t, err)
	assert.Equal(t, ep.CodeDeclined, ep.Code(err), "two staging buffers exceed the pool's cap")
	assert.ErrorContains(t, err, "residency_slot_bytes=1048576")
}
