package paging_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
)

// The seed's provider-wiring tests: the pipeline routed through a Residency.

// requireDecline checks a Residency.Prefetch outcome, passed as requireDecline(t,
// reason)(res.Prefetch(…)): declined for reason, as a result beside a nil error.
func requireDecline(t *testing.T, reason paging.DeclineReason) func(paging.Decline, error) paging.Decline {
	return func(d paging.Decline, err error) paging.Decline {
		t.Helper()
		require.NoError(t, err, "a decline is a result, not an error")
		require.True(t, d.Declined(), "want a %s decline, the layer was routed", reason)
		require.Equal(t, reason, d.Reason, "decline: %v", d)
		return d
	}
}

// requireRouted checks a Residency.Prefetch outcome, passed as requireRouted(t,
// msg…)(res.Prefetch(…)): routed, with no decline and no error.
func requireRouted(t *testing.T, msgAndArgs ...any) func(paging.Decline, error) {
	return func(d paging.Decline, err error) {
		t.Helper()
		require.NoError(t, err, msgAndArgs...)
		require.Equal(t, paging.DeclineNone, d.Reason, "want routed, got %v", d)
		require.False(t, d.Declined())
	}
}

func assertPaged(t *testing.T, r *rig, p *paging.PagedWeight, src paging.RegionSource, w *paging.LazyWeight) {
	t.Helper()
	assert.Equal(t, canonical(t, src, w), r.readback(t, p.Ptr(), p.Len()), "paged bytes")
}

// Seed: disabled_by_default_declines_and_stays_byte_identical.
func TestDisabledByDefaultDeclines(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, 2*mib, 1, 1, 0)
	res := r.residency(t, 0, paging.GateFromEnv, paging.ModeZeroCopy)
	d, err := res.Prefetch(0, l.weights[0], l.src)
	if paging.DoubleBufferFromEnv() {
		requireRouted(t, "with the env gate set, the gated entry must route")(d, err)
		assert.True(t, res.Active())
		p, err := res.Page(0)
		require.NoError(t, err)
		require.NoError(t, p.Release())
		return
	}
	requireDecline(t, paging.DeclineDisabled)(d, err)
	assert.False(t, res.Enabled())
	assert.False(t, res.Active(), "the default-off gate never builds the pipeline")
}

func TestGateFollowsEnvUnlessForced(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	for _, c := range []struct {
		env  string
		gate paging.Gate
		want bool
	}{
		{"", paging.GateFromEnv, false},
		{"1", paging.GateFromEnv, true},
		{"true", paging.GateFromEnv, true},
		{"0", paging.GateFromEnv, false},
		{"1", paging.GateOff, false},
		{"", paging.GateOn, true},
	} {
		t.Setenv(paging.EnvDoubleBuffer, c.env)
		res := r.residency(t, 0, c.gate, paging.ModeZeroCopy)
		assert.Equal(t, c.want, res.Enabled(), "env %q gate %d", c.env, c.gate)
	}
}

// Seed: provider_double_buffers_across_wraparound_byte_identical.
func TestProviderDoubleBuffersAcrossWraparound(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		const regionBytes, layers = 2 * mib, 4
		l := writeLayered(t, regionBytes, 2, layers, 0)
		res := r.residency(t, 2*regionBytes*2, paging.GateOn, mode)

		requireRouted(t, "cold prime prefetch must route")(res.Prefetch(0, l.weights[0], l.src))
		for layer := 0; layer < layers; layer++ {
			if layer+1 < layers {
				requireRouted(t, "look-ahead prefetch of layer %d must route", layer+1)(res.Prefetch(paging.LayerID(layer+1), l.weights[layer+1], l.src))
			}
			p, err := res.Page(paging.LayerID(layer))
			require.NoError(t, err, "an in-pipeline layer must page")
			assert.Equal(t, uint64(2*regionBytes), p.Len())
			assert.Equal(t, paging.LayerID(layer), p.Layer())
			assert.Same(t, l.weights[layer], p.Weight())
			assertPaged(t, r, p, l.src, l.weights[layer])
			require.NoError(t, p.Release(), "releasing the binding frees the slot for the next look-ahead")
		}
		st, ok := res.Stats()
		require.True(t, ok, "an eligible layer built the pipeline")
		assert.Equal(t, uint64(layers), st.Routed)
		assert.Equal(t, uint64(layers), st.Consumed)
		assert.Equal(t, uint64(layers), st.Released)
		assert.Zero(t, st.Quarantined, "clean path quarantines nothing")
		if mode == paging.ModeZeroCopy {
			assert.Equal(t, uint64(layers), st.ZeroCopyLayers)
		} else {
			assert.Equal(t, uint64(layers), st.StagingLayers)
		}
	})
}

// Seed: provider_single_layer_pages_and_releases.
func TestProviderSingleLayerPagesAndReleases(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, 4*mib, 1, 1, 0)
	res := r.residency(t, 8*mib, paging.GateOn, paging.ModeZeroCopy)
	requireRouted(t)(res.Prefetch(0, l.weights[0], l.src))
	p, err := res.Page(0)
	require.NoError(t, err)
	assert.Equal(t, uint64(4*mib), p.Len())
	assertPaged(t, r, p, l.src, l.weights[0])
	require.NoError(t, p.Release())
	assert.ErrorIs(t, p.Release(), paging.ErrReleased)
	st, _ := res.Stats()
	assert.Equal(t, [3]uint64{1, 1, 1}, [3]uint64{st.Routed, st.Consumed, st.Released})
	assert.Zero(t, st.Quarantined)
}

// Seed: disabled_provider_path_builds_no_pipeline.
func TestDisabledProviderPathBuildsNoPipeline(t *testing.T) {
	t.Setenv(paging.EnvDoubleBuffer, "1") // forced off regardless of the environment
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, 2*mib, 1, 2, 0)
	before := r.ctx.Counters()
	res := r.residency(t, 4*mib, paging.GateOff, paging.ModeZeroCopy)
	requireDecline(t, paging.DeclineDisabled)(res.Prefetch(0, l.weights[0], l.src))
	assert.False(t, res.Active(), "the disabled path must not build the pipeline")
	_, ok := res.Stats()
	assert.False(t, ok, "no pipeline means no wiring stats")
	assert.Nil(t, res.Pipeline())
	_, err := res.Page(0)
	assert.ErrorIs(t, err, paging.ErrNotPrefetched)
	after := r.ctx.Counters()
	assert.Equal(t, before.DeviceAllocs, after.DeviceAllocs, "no CUDA work at all")
	assert.Equal(t, before.EventsCreated, after.EventsCreated)
}

// Seed: oversize_later_layer_declines_typed_and_pipeline_survives.
func TestOversizeLaterLayerDeclinesTypedAndPipelineSurvives(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	small := writeLayered(t, 2*mib, 1, 1, 0)
	large := writeLayered(t, 8*mib, 1, 1, 0x33)
	res := r.residency(t, 8*mib*4, paging.GateOn, paging.ModeZeroCopy)

	requireRouted(t, "the first small layer builds and sizes the pipeline")(res.Prefetch(0, small.weights[0], small.src))
	d := requireDecline(t, paging.DeclineOversize)(res.Prefetch(1, large.weights[0], large.src))
	assert.Equal(t, uint64(8*mib), d.LayerBytes)
	assert.Equal(t, uint64(2*mib), d.Capacity)
	st, _ := res.Stats()
	assert.Equal(t, uint64(1), st.Routed)
	assert.Equal(t, uint64(1), st.DeclinedOversize)

	p, err := res.Page(0)
	require.NoError(t, err, "the fitting layer still pages")
	assertPaged(t, r, p, small.src, small.weights[0])
	require.NoError(t, p.Release())
	st, _ = res.Stats()
	assert.Zero(t, st.Quarantined)
}

// The device byte budget holds both slots: a first layer above half of it is declined as
// oversize before anything is built.
func TestBudgetDeclinesOversizeBeforeBuilding(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, 4*mib, 1, 1, 0)
	res := r.residency(t, 6*mib, paging.GateOn, paging.ModeZeroCopy)
	d := requireDecline(t, paging.DeclineOversize)(res.Prefetch(0, l.weights[0], l.src))
	assert.Equal(t, uint64(4*mib), d.LayerBytes)
	assert.Equal(t, uint64(3*mib), d.Capacity)
	assert.False(t, res.Active())
	st, ok := res.Stats()
	assert.False(t, ok)
	assert.Equal(t, uint64(1), st.DeclinedOversize)
}

func TestResidencyPoolCapacityDeclineBuildsNothing(t *testing.T) {
	r := newRig(t, sim.Options{}, 8*mib)
	l := writeLayered(t, 5*mib, 1, 1, 0)
	before := r.ctx.Counters()
	res := r.residency(t, 0, paging.GateOn, paging.ModeZeroCopy)
	d := requireDecline(t, paging.DeclinePoolCapacity)(res.Prefetch(0, l.weights[0], l.src))
	assert.Equal(t, uint64(5*mib), d.LayerBytes)
	assert.Equal(t, uint64(4*mib), d.Capacity)
	var pc *paging.PoolCapacityError
	assert.ErrorAs(t, d.Err, &pc)
	assert.False(t, res.Active())
	assert.Equal(t, before, r.ctx.Counters(), "nothing reserved")
}

// Seed: ineligible_boundary_declines_typed_without_building.
func TestIneligibleBoundaryDeclinesTypedWithoutBuilding(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, 1024, 1, 1, 0)
	// The seed's ineligible boundary was MatMul; here dense MatMul weights page (prefill
	// streams them), and the embedding table read by Gather is the one that stays resident.
	table, err := paging.NewLazyWeight(paging.WeightSpec{
		Boundary: paging.BoundaryGather, DType: paging.Uint8, Shape: []int64{1024},
		Regions: []paging.Region{{Mapping: l.id, Offset: prefix, Len: 1024}},
	})
	require.NoError(t, err)
	res := r.residency(t, mib, paging.GateOn, paging.ModeZeroCopy)
	d := requireDecline(t, paging.DeclineBoundary)(res.Prefetch(7, table, l.src))
	assert.Equal(t, paging.BoundaryGather, d.Boundary)
	assert.Equal(t, paging.LayerID(7), d.Layer)
	assert.False(t, res.Active(), "an ineligible-boundary decline must not build the pipeline")
}

// Seed: two_enabled_residencies_are_isolated.
func TestTwoEnabledResidenciesAreIsolated(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		const layers = 3
		a := writeLayered(t, 2*mib, 2, layers, 0x00)
		b := writeLayered(t, 2*mib, 2, layers, 0x24)
		resA := r.residency(t, 4*mib*layers, paging.GateOn, mode)
		resB := r.residency(t, 4*mib*layers, paging.GateOn, mode)
		read := func(res *paging.Residency, layer int, l *layered) {
			requireRouted(t, "layer %d must route", layer)(res.Prefetch(paging.LayerID(layer), l.weights[layer], l.src))
			p, err := res.Page(paging.LayerID(layer))
			require.NoError(t, err)
			assertPaged(t, r, p, l.src, l.weights[layer])
			require.NoError(t, p.Release())
		}
		for layer := 0; layer < layers; layer++ {
			read(resA, layer, a)
			read(resB, layer, b)
		}
		for _, res := range []*paging.Residency{resA, resB} {
			st, ok := res.Stats()
			require.True(t, ok)
			assert.Zero(t, st.Quarantined)
			assert.Equal(t, uint64(layers), st.Consumed)
		}
		assert.NotEqual(t, resA.Pipeline().SlotPtr(0), resB.Pipeline().SlotPtr(0), "own stable buffers")
	})
}

// Seed: teardown_with_inflight_and_unconsumed_slots_no_leak.
func TestTeardownWithInflightAndUnconsumedSlotsNoLeak(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, 2*mib, 1, 2, 0)
		baseline := r.ctx.Counters()
		res, err := paging.NewResidency(paging.ResidencyConfig{Context: r.ctx, CopyStream: r.copy,
			ComputeStream: r.compute, Pool: r.pool, BudgetBytes: 4 * mib, DoubleBuffer: paging.GateOn, Mode: mode})
		require.NoError(t, err)

		requireRouted(t)(res.Prefetch(0, l.weights[0], l.src))
		requireRouted(t)(res.Prefetch(1, l.weights[1], l.src))
		paged0, err := res.Page(0)
		require.NoError(t, err)
		st, _ := res.Stats()
		assert.Zero(t, st.Quarantined, "an in-flight slot is not quarantined")

		// Close the residency while the paged weight is held: the binding keeps it alive.
		require.NoError(t, res.Close())
		assert.True(t, res.Active(), "teardown waits for the outstanding paged weight")
		_, err = res.Page(1)
		assert.ErrorIs(t, err, paging.ErrClosed)
		assertPaged(t, r, paged0, l.src, l.weights[0]) // still valid up to its release

		// Releasing the last binding drains the pipeline, including the unconsumed layer 1.
		require.NoError(t, paged0.Release())
		assert.False(t, res.Active())
		m := res.Pipeline().Metrics()
		assert.Equal(t, uint64(1), m.DrainedAtClose, "the unconsumed fill was drained")
		after := r.ctx.Counters()
		assert.Equal(t, baseline.DeviceLiveBytes, after.DeviceLiveBytes, "device memory back to baseline")
		assert.Zero(t, r.pool.RegistrationStats().InUse, "no registration still read by a copy")
		require.NoError(t, l.src.Close(l.id))
		assert.Equal(t, baseline.RegisteredLiveBytes, r.ctx.Counters().RegisteredLiveBytes, "registrations back to baseline once the file is closed")
		assert.Equal(t, after.EventsCreated, after.EventsDestroyed)
		assert.ErrorIs(t, res.Close(), paging.ErrClosed)
	})
}

func TestResidencyBookkeeping(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, mib, 1, 4, 0)
	other := writeLayered(t, mib, 1, 1, 0x7)
	res := r.residency(t, 0, paging.GateOn, paging.ModeZeroCopy)

	requireRouted(t)(res.Prefetch(0, l.weights[0], l.src))
	requireRouted(t, "prefetching a pending layer again is a no-op")(res.Prefetch(0, l.weights[0], l.src))
	d, err := res.Prefetch(0, other.weights[0], other.src)
	assert.Error(t, err, "a pending layer id with another weight")
	assert.False(t, d.Declined(), "a failure is not a decline")
	requireRouted(t)(res.Prefetch(1, l.weights[1], l.src))
	d = requireDecline(t, paging.DeclineBusy)(res.Prefetch(2, l.weights[2], l.src))
	assert.ErrorIs(t, d.Err, paging.ErrNoFreeSlot)
	assert.Zero(t, d.Quarantined, "busy with layers, not with quarantined slots")

	require.NoError(t, res.Cancel(1))
	assert.ErrorIs(t, res.Cancel(1), paging.ErrNotPrefetched)
	_, err = res.Page(1)
	assert.ErrorIs(t, err, paging.ErrNotPrefetched, "a cancelled layer does not page")
	requireRouted(t, "the cancelled slot is reused")(res.Prefetch(2, l.weights[2], l.src))
	for _, layer := range []paging.LayerID{2, 0} {
		p, err := res.Page(layer)
		require.NoError(t, err)
		assertPaged(t, r, p, l.src, l.weights[layer])
		require.NoError(t, p.Release())
	}
	_, err = res.Page(0)
	assert.ErrorIs(t, err, paging.ErrNotPrefetched, "a layer pages once")
	st, _ := res.Stats()
	assert.Equal(t, uint64(3), st.Routed)
	assert.Equal(t, uint64(1), st.Cancelled)
	assert.Equal(t, uint64(1), st.DeclinedBusy)
	assert.Equal(t, uint64(2), st.Consumed)
	assert.Equal(t, uint64(2), st.Released)
}
