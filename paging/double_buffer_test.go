package paging_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/paging"
	"github.com/cudaep/cudaep/paging/pagingtest"
)

// CPU unit tests of the generic state machine over the deterministic fake transfer.

func newFakePipeline(t *testing.T, slotBytes uint64) (*paging.DoubleBuffer, *fakeTransfer) {
	t.Helper()
	f := newFake()
	db, err := paging.NewDoubleBuffer(f, slotBytes)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, db.Close())
		assert.Empty(t, f.problems(), "fence violations")
	})
	return db, f
}

func fakeView(t *testing.T, f *fakeTransfer, v paging.SlotView) []byte {
	t.Helper()
	return f.slotMem(f.slotOf(v.Ptr), v.Len)
}

// Seed: whole_layer_prefill_is_byte_identical_across_wraparound (state machine half).
func TestFakeWraparoundByteIdentical(t *testing.T) {
	const regionBytes, regionsPerLayer, layers = 64 << 10, 2, 5
	l := writeLayered(t, regionBytes, regionsPerLayer, layers, 0)
	layerBytes := uint64(regionBytes * regionsPerLayer)
	db, f := newFakePipeline(t, layerBytes)

	pending, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	slotsUsed := map[int]int{}
	for layer := 0; layer < layers; layer++ {
		ticket := pending
		if layer+1 < layers {
			pending, err = db.Prefetch(paging.LayerID(layer+1), l.weights[layer+1], l.src)
			require.NoError(t, err, "look-ahead prefetch (incl. slot reuse) of layer %d", layer+1)
		}
		view, err := db.Wait(ticket)
		require.NoError(t, err)
		assert.Equal(t, layerBytes, view.Len, "layer %d byte count", layer)
		assert.Equal(t, paging.LayerID(layer), view.Layer)
		assert.Equal(t, db.SlotPtr(ticket.Slot()), view.Ptr, "a slot's buffer is stable")
		assert.Equal(t, canonical(t, l.src, l.weights[layer]), fakeView(t, f, view), "layer %d bytes", layer)
		slotsUsed[ticket.Slot()]++
		require.NoError(t, db.Release(ticket))
	}
	assert.Len(t, slotsUsed, 2, "both slots used")
	m := db.Metrics()
	assert.Equal(t, uint64(layers), m.LayersPrefetched)
	assert.Equal(t, uint64(layers), m.LayersConsumed)
	assert.Equal(t, uint64(layers), m.LayersReleased)
	assert.Equal(t, uint64(layers-2), m.SlotReuses, "every layer after the first two reuses a slot")
	assert.Zero(t, m.Poisoned, "clean path poisons nothing")
	assert.Zero(t, m.StaleRejected)
	assert.Zero(t, m.Cancelled)
	assert.Zero(t, db.Quarantined())
}

// Seed: single_and_final_layer_teardown_is_clean.
func TestFakeSingleAndFinalLayerTeardown(t *testing.T) {
	l := writeLayered(t, 128<<10, 1, 1, 0)
	f := newFake()
	db, err := paging.NewDoubleBuffer(f, l.weights[0].Bytes())
	require.NoError(t, err)

	ticket, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	assert.Equal(t, paging.SlotFilling, db.SlotState(ticket.Slot()), "copy queued, not run")
	f.complete(ticket.Slot())
	assert.Equal(t, paging.SlotReady, db.SlotState(ticket.Slot()))
	view, err := db.Wait(ticket)
	require.NoError(t, err)
	assert.Equal(t, canonical(t, l.src, l.weights[0]), fakeView(t, f, view))
	assert.Equal(t, paging.SlotFree, db.SlotState(1-ticket.Slot()), "the other slot was never claimed")

	require.NoError(t, db.Release(ticket))
	assert.Equal(t, paging.SlotDraining, db.SlotState(ticket.Slot()))
	assert.Zero(t, db.Quarantined())
	require.NoError(t, db.Close())
	assert.Empty(t, f.problems())
	assert.Equal(t, "close", f.callLog()[len(f.callLog())-1])
	assert.Zero(t, db.Metrics().DrainedAtClose, "a released layer needs no drain")
}

// Seed: cancellation_frees_slot_for_reuse_without_quarantine.
func TestFakeCancelFreesSlotWithoutQuarantine(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 4, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())

	keep, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	doomed, err := db.Prefetch(1, l.weights[1], l.src)
	require.NoError(t, err)
	doomedView, err := db.Wait(doomed)
	require.NoError(t, err)

	require.NoError(t, db.Cancel(doomed), "cancel mid-use")
	assert.Equal(t, paging.SlotDraining, db.SlotState(doomed.Slot()))
	assert.Equal(t, uint64(1), db.Metrics().Cancelled)
	assert.Zero(t, db.Quarantined(), "cancel does not quarantine")

	reuse, err := db.Prefetch(2, l.weights[2], l.src)
	require.NoError(t, err, "the cancelled slot must be reusable")
	reuseView, err := db.Wait(reuse)
	require.NoError(t, err)
	assert.Equal(t, doomedView.Ptr, reuseView.Ptr, "same stable buffer as the cancelled layer")
	assert.Equal(t, canonical(t, l.src, l.weights[2]), fakeView(t, f, reuseView), "the new layer's bytes, not the cancelled one's")
	require.NoError(t, db.Release(reuse))

	// A layer cancelled while its copy is still in flight frees its slot too.
	_, err = db.Wait(keep)
	require.NoError(t, err)
	require.NoError(t, db.Release(keep))
	inflight, err := db.Prefetch(3, l.weights[3], l.src)
	require.NoError(t, err)
	require.Equal(t, paging.SlotFilling, db.SlotState(inflight.Slot()))
	require.NoError(t, db.Cancel(inflight))
	assert.Equal(t, uint64(2), db.Metrics().Cancelled)
	again, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	v, err := db.Wait(again)
	require.NoError(t, err)
	assert.Equal(t, canonical(t, l.src, l.weights[0]), fakeView(t, f, v))
	require.NoError(t, db.Release(again))
	assert.Zero(t, db.Quarantined())
}

// Seed: stale_ticket_after_reuse_is_refused.
func TestFakeStaleTicketRefused(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 3, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())

	ticketB, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	ticketA, err := db.Prefetch(1, l.weights[1], l.src)
	require.NoError(t, err)
	_, err = db.Wait(ticketA)
	require.NoError(t, err)
	require.NoError(t, db.Release(ticketA))
	reuse, err := db.Prefetch(2, l.weights[2], l.src)
	require.NoError(t, err)
	require.Equal(t, ticketA.Slot(), reuse.Slot(), "layer 2 reuses layer 1's slot")
	require.Greater(t, reuse.Generation(), ticketA.Generation())

	_, err = db.Wait(ticketA)
	var stale *paging.StaleGenerationError
	require.ErrorAs(t, err, &stale, "a stale ticket is refused, not served")
	assert.Equal(t, paging.LayerID(1), stale.Layer)
	assert.Equal(t, ticketA.Generation(), stale.TicketGen)
	assert.Equal(t, reuse.Generation(), stale.CurrentGen)
	assert.ErrorIs(t, err, paging.ErrStaleGeneration)
	assert.ErrorIs(t, db.Release(ticketA), paging.ErrStaleGeneration)
	assert.ErrorIs(t, db.Cancel(ticketA), paging.ErrStaleGeneration)
	assert.GreaterOrEqual(t, db.Metrics().StaleRejected, uint64(3))

	v, err := db.Wait(reuse)
	require.NoError(t, err)
	assert.Equal(t, canonical(t, l.src, l.weights[2]), fakeView(t, f, v))
	require.NoError(t, db.Release(reuse))
	v, err = db.Wait(ticketB)
	require.NoError(t, err)
	assert.Equal(t, canonical(t, l.src, l.weights[0]), fakeView(t, f, v))
	require.NoError(t, db.Release(ticketB))
}

// Seed: instances_are_isolated (the CPU test the GPU file names).
func TestFakeInstancesIsolated(t *testing.T) {
	a := writeLayered(t, 64<<10, 2, 3, 0x00)
	b := writeLayered(t, 64<<10, 2, 3, 0x24)
	dbA, fA := newFakePipeline(t, a.weights[0].Bytes())
	dbB, fB := newFakePipeline(t, b.weights[0].Bytes())
	for layer := 0; layer < 3; layer++ {
		ta, err := dbA.Prefetch(paging.LayerID(layer), a.weights[layer], a.src)
		require.NoError(t, err)
		tb, err := dbB.Prefetch(paging.LayerID(layer), b.weights[layer], b.src)
		require.NoError(t, err)
		_, err = dbB.Wait(ta)
		assert.ErrorIs(t, err, paging.ErrForeignTicket, "a ticket is only good for its own pipeline")
		va, err := dbA.Wait(ta)
		require.NoError(t, err)
		vb, err := dbB.Wait(tb)
		require.NoError(t, err)
		assert.Equal(t, canonical(t, a.src, a.weights[layer]), fakeView(t, fA, va))
		assert.Equal(t, canonical(t, b.src, b.weights[layer]), fakeView(t, fB, vb))
		assert.NotEqual(t, fakeView(t, fA, va), fakeView(t, fB, vb), "salted sets differ")
		require.NoError(t, dbA.Release(ta))
		require.NoError(t, dbB.Release(tb))
	}
}

// Seed: oversized_layer_declines_pool_capacity_without_reserving (state machine half: the
// gate runs before Reserve).
func TestFakeCapacityGateRunsBeforeReserve(t *testing.T) {
	f := newFake()
	f.retainCap = 512 * mib
	_, err := paging.NewDoubleBuffer(f, 300*mib)
	var pc *paging.PoolCapacityError
	require.ErrorAs(t, err, &pc)
	assert.Equal(t, uint64(300*mib), pc.LayerBytes)
	assert.ErrorIs(t, err, paging.ErrDeclined)
	assert.Equal(t, []string{"admit 314572800"}, f.callLog(), "nothing reserved on the declined path")

	db, err := paging.NewDoubleBuffer(f, 256*mib)
	require.NoError(t, err, "two 256 MiB buffers fit a 512 MiB cap")
	assert.Equal(t, []string{"admit 314572800", "admit 268435456", "reserve 268435456"}, f.callLog())
	require.NoError(t, db.Close())
}

func TestFakeFailedFillQuarantinesAndPipelineKeepsServing(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 4, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())

	f.failFill = errors.New("injected H2D failure")
	_, err := db.Prefetch(0, l.weights[0], l.src)
	var fe *paging.FillError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, paging.LayerID(0), fe.Layer)
	assert.ErrorIs(t, err, paging.ErrQuarantined)
	assert.Equal(t, 1, db.Quarantined())
	assert.Equal(t, paging.SlotQuarantined, db.SlotState(fe.Slot))
	assert.Equal(t, uint64(1), db.Metrics().Poisoned)

	// The other slot keeps serving, one layer at a time, and the bad one is never handed out.
	for layer := 1; layer < 4; layer++ {
		tk, err := db.Prefetch(paging.LayerID(layer), l.weights[layer], l.src)
		require.NoError(t, err)
		assert.NotEqual(t, fe.Slot, tk.Slot())
		v, err := db.Wait(tk)
		require.NoError(t, err)
		assert.Equal(t, canonical(t, l.src, l.weights[layer]), fakeView(t, f, v))
		if layer == 3 {
			_, err = db.Prefetch(0, l.weights[0], l.src)
			assert.ErrorIs(t, err, paging.ErrNoFreeSlot, "one slot in use, the other quarantined")
		}
		require.NoError(t, db.Release(tk))
	}
	assert.Equal(t, 1, db.Quarantined())
}

// Recover puts a quarantined slot back in service: it waits for what the failed fill left on
// the device, returns the slot to free, makes the failed layer's tickets stale and keeps the
// counters. Without Recover the pipeline would be down to one slot for good.
func TestFakeRecoverResetsQuarantinedSlots(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 6, 0x19)
	db, f := newFakePipeline(t, l.weights[0].Bytes())

	n, err := db.Recover()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing to recover on a healthy pipeline")

	// Both slots fail: the first synchronously, the second on the device.
	f.failFill = errors.New("injected H2D failure")
	_, err = db.Prefetch(0, l.weights[0], l.src)
	require.ErrorIs(t, err, paging.ErrQuarantined)
	failed, err := db.Prefetch(1, l.weights[1], l.src)
	require.NoError(t, err)
	f.failFillDone = errors.New("copy failed on the device")
	_, err = db.Wait(failed)
	var fe *paging.FillError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, paging.LayerID(1), fe.Layer)
	assert.Equal(t, 2, db.Quarantined())
	_, err = db.Prefetch(2, l.weights[2], l.src)
	require.ErrorIs(t, err, paging.ErrNoFreeSlot, "both slots quarantined")

	// A slot whose device work cannot be waited for stays quarantined; the other is reset.
	f.failRecover = errors.New("context is faulted")
	n, err = db.Recover()
	assert.Equal(t, 1, n)
	require.ErrorContains(t, err, "context is faulted")
	assert.ErrorContains(t, err, "recover slot 0", "the error names the slot that stays quarantined")
	assert.Equal(t, 1, db.Quarantined())
	n, err = db.Recover()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Zero(t, db.Quarantined())
	assert.Equal(t, paging.SlotFree, db.SlotState(0))
	assert.Equal(t, paging.SlotFree, db.SlotState(1))
	assert.Equal(t, []string{"recover 0", "recover 1", "recover 0"}, recoverCalls(f.callLog()))

	_, err = db.Wait(failed)
	var stale *paging.StaleGenerationError
	assert.ErrorAs(t, err, &stale, "the failed layer's ticket is stale after the reset")
	assert.ErrorAs(t, db.Cancel(failed), &stale)

	// Both slots serve again, byte-identical, across reuse.
	pending, err := db.Prefetch(2, l.weights[2], l.src)
	require.NoError(t, err)
	slots := map[int]bool{}
	for layer := 2; layer < 6; layer++ {
		tk := pending
		if layer+1 < 6 {
			pending, err = db.Prefetch(paging.LayerID(layer+1), l.weights[layer+1], l.src)
			require.NoError(t, err, "look-ahead prefetch of layer %d after recovery", layer+1)
		}
		v, err := db.Wait(tk)
		require.NoError(t, err)
		assert.Equal(t, canonical(t, l.src, l.weights[layer]), fakeView(t, f, v), "layer %d", layer)
		slots[tk.Slot()] = true
		require.NoError(t, db.Release(tk))
	}
	assert.Len(t, slots, 2, "both slots back in service")
	m := db.Metrics()
	assert.Equal(t, uint64(2), m.Poisoned, "the failures are still counted")
	assert.Equal(t, uint64(2), m.Recovered)
	assert.Equal(t, uint64(4), m.LayersConsumed)
}

func recoverCalls(calls []string) []string {
	var out []string
	for _, c := range calls {
		if len(c) > 8 && c[:8] == "recover " {
			out = append(out, c)
		}
	}
	return out
}

// A file stays open while the fake device has not run a fill read from it (or a fill sits
// unconsumed whose completion the pipeline has not seen): Close refuses with ErrFileBusy, then
// succeeds once the copy ran, asking the pipeline rather than waiting for its next call.
func TestFakeFileCloseWaitsForTheFill(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 2, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())
	tk, err := db.Prefetch(1, l.weights[1], l.src)
	require.NoError(t, err)
	err = l.src.Close(l.id)
	require.ErrorIs(t, err, paging.ErrFileBusy)
	assert.ErrorContains(t, err, "layers [1]")
	f.complete(tk.Slot())
	require.NoError(t, l.src.Close(l.id))
	v, err := db.Wait(tk)
	require.NoError(t, err, "the copied layer is still served")
	assert.Equal(t, byte(pagingtest.PatternByte(2, 0, 0)), fakeView(t, f, v)[0])
	require.NoError(t, db.Release(tk))
}

func TestFakeAsyncFillFailureQuarantines(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 1, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())
	tk, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	f.failFillDone = errors.New("copy failed on the device")
	assert.Equal(t, paging.SlotQuarantined, db.SlotState(tk.Slot()))
	_, err = db.Wait(tk)
	assert.ErrorIs(t, err, paging.ErrQuarantined)
	assert.NoError(t, db.Cancel(tk), "cancelling a quarantined layer is a no-op")
	assert.Equal(t, 1, db.Quarantined())
}

func TestFakeFenceFailureNeverServesTheSlot(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 1, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())
	tk, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	f.failFence = errors.New("cuStreamWaitEvent failed")
	_, err = db.Wait(tk)
	assert.ErrorIs(t, err, paging.ErrQuarantined)
	assert.Equal(t, 1, db.Quarantined())
}

func TestFakeTicketStateRules(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 2, 0)
	db, _ := newFakePipeline(t, l.weights[0].Bytes())
	tk, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)

	var se *paging.SlotStateError
	require.ErrorAs(t, db.Release(tk), &se, "release before wait")
	assert.Equal(t, "release", se.Op)
	v1, err := db.Wait(tk)
	require.NoError(t, err)
	v2, err := db.Wait(tk)
	require.NoError(t, err, "waiting again on an in-use ticket")
	assert.Equal(t, v1, v2)
	assert.Equal(t, uint64(1), db.Metrics().LayersConsumed)
	require.NoError(t, db.Release(tk))
	assert.ErrorAs(t, db.Release(tk), &se, "double release")
	_, err = db.Wait(tk)
	assert.ErrorAs(t, err, &se, "wait after release")
	assert.ErrorAs(t, db.Cancel(tk), &se, "cancel after release")
	_, err = db.Wait(paging.Ticket{})
	assert.ErrorIs(t, err, paging.ErrForeignTicket, "the zero ticket")
}

func TestFakeNoFreeSlotTouchesNothing(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 3, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())
	_, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	_, err = db.Prefetch(1, l.weights[1], l.src)
	require.NoError(t, err)
	before := len(f.callLog())
	_, err = db.Prefetch(2, l.weights[2], l.src)
	assert.ErrorIs(t, err, paging.ErrNoFreeSlot)
	assert.Len(t, f.callLog(), before, "no transfer call")
	assert.Zero(t, db.Quarantined())
}

func TestFakeRefusesBeforeAnyDeviceWork(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 2, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes()/2)
	_, err := db.Prefetch(0, l.weights[0], l.src)
	var ls *paging.LayerSizeError
	require.ErrorAs(t, err, &ls)
	assert.Equal(t, l.weights[0].Bytes(), ls.LayerBytes)

	past, err := paging.NewLazyWeight(paging.WeightSpec{
		Boundary: paging.BoundaryBlockQuantizedMoe, DType: paging.Uint8, Shape: []int64{4096},
		Regions: []paging.Region{{Mapping: l.id, Offset: prefix + 2*(64<<10) - 100, Len: 4096}},
	})
	require.NoError(t, err)
	_, err = db.Prefetch(1, past, l.src)
	var re *paging.RegionError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, l.path, re.Path)

	unknown, err := paging.NewLazyWeight(paging.WeightSpec{
		Boundary: paging.BoundaryBlockQuantizedMoe, DType: paging.Uint8, Shape: []int64{16},
		Regions: []paging.Region{{Mapping: 7, Offset: 0, Len: 16}},
	})
	require.NoError(t, err)
	_, err = db.Prefetch(2, unknown, l.src)
	require.ErrorAs(t, err, &re)
	assert.Equal(t, paging.MappingID(7), re.Mapping)

	for _, c := range f.callLog() {
		assert.NotContains(t, c, "fill", "no fill was attempted")
	}
	assert.Equal(t, paging.SlotFree, db.SlotState(0))
	assert.Equal(t, paging.SlotFree, db.SlotState(1))
}

func TestFakeCloseDrainsInflightAndUnconsumed(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 2, 0)
	f := newFake()
	db, err := paging.NewDoubleBuffer(f, l.weights[0].Bytes())
	require.NoError(t, err)
	inUse, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	_, err = db.Wait(inUse)
	require.NoError(t, err)
	unconsumed, err := db.Prefetch(1, l.weights[1], l.src)
	require.NoError(t, err)

	require.NoError(t, db.Close())
	assert.Empty(t, f.problems(), "both slots fenced before they were freed")
	assert.Equal(t, uint64(2), db.Metrics().DrainedAtClose)
	require.NoError(t, db.Close(), "Close is idempotent")
	assert.Equal(t, 1, countOf(f.callLog(), "close"), "the transfer is closed once")

	_, err = db.Wait(unconsumed)
	assert.ErrorIs(t, err, paging.ErrClosed)
	assert.ErrorIs(t, db.Release(inUse), paging.ErrClosed)
	_, err = db.Prefetch(0, l.weights[0], l.src)
	assert.ErrorIs(t, err, paging.ErrClosed)
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func TestFakeReusesTheOldestDrainingSlot(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 3, 0)
	db, _ := newFakePipeline(t, l.weights[0].Bytes())
	t0, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	t1, err := db.Prefetch(1, l.weights[1], l.src)
	require.NoError(t, err)
	for _, tk := range []paging.Ticket{t1, t0} { // release slot of layer 1 first
		_, err = db.Wait(tk)
		require.NoError(t, err)
		require.NoError(t, db.Release(tk))
	}
	t2, err := db.Prefetch(2, l.weights[2], l.src)
	require.NoError(t, err)
	assert.Equal(t, t1.Slot(), t2.Slot(), "the slot released first has the most slack")
}

// TestFakeCancelLaterAbandonsNowAndFencesLater: the two-halved cancel (what a caller does
// during a CUDA graph capture) checks the ticket and abandons the layer at once — a second
// cancel, a wait or a release of it is refused then, not when the fence runs — and no fill
// claims the slot until the fence is recorded.
func TestFakeCancelLaterAbandonsNowAndFencesLater(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 3, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())
	a, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	b, err := db.Prefetch(1, l.weights[1], l.src)
	require.NoError(t, err)
	_, err = db.Wait(a)
	require.NoError(t, err)

	fence, err := db.CancelLater(a)
	require.NoError(t, err)
	require.NotNil(t, fence)
	assert.Equal(t, 0, countOf(f.callLog(), "release 0")+countOf(f.callLog(), "release 1"), "no fence before the driver half runs")
	assert.Equal(t, paging.SlotDraining, db.SlotState(a.Slot()))
	assert.Equal(t, uint64(1), db.Metrics().Cancelled)
	var se *paging.SlotStateError
	_, err = db.CancelLater(a)
	assert.ErrorAs(t, err, &se, "a second cancel is refused at the call")
	_, err = db.Wait(a)
	assert.ErrorAs(t, err, &se)
	_, err = db.Prefetch(2, l.weights[2], l.src)
	assert.ErrorIs(t, err, paging.ErrNoFreeSlot, "the cancelled slot waits for its fence")

	require.NoError(t, fence())
	require.NoError(t, fence(), "a second run does nothing")
	assert.Equal(t, 1, countOf(f.callLog(), fmt.Sprintf("release %d", a.Slot())))
	c, err := db.Prefetch(2, l.weights[2], l.src)
	require.NoError(t, err, "reusable once fenced")
	assert.Equal(t, a.Slot(), c.Slot())
	require.NoError(t, db.Cancel(b))
	require.NoError(t, db.Cancel(c))
	assert.Empty(t, f.problems())
}

// TestFakeDeferredFenceAtClose: a layer released or cancelled with its fence deferred gets the
// fence from Close, and the deferred half run afterwards does nothing.
func TestFakeDeferredFenceAtClose(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 2, 0)
	f := newFake()
	db, err := paging.NewDoubleBuffer(f, l.weights[0].Bytes())
	require.NoError(t, err)
	a, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	b, err := db.Prefetch(1, l.weights[1], l.src)
	require.NoError(t, err)
	_, err = db.Wait(a)
	require.NoError(t, err)
	released, err := db.ReleaseLater(a)
	require.NoError(t, err)
	_, err = db.ReleaseLater(a)
	var se *paging.SlotStateError
	assert.ErrorAs(t, err, &se, "a second release is refused at the call")
	cancelled, err := db.CancelLater(b)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	assert.Empty(t, f.problems(), "Close recorded both deferred fences before freeing")
	assert.Equal(t, 2, countOf(f.callLog(), "release 0")+countOf(f.callLog(), "release 1"))
	require.NoError(t, released())
	require.NoError(t, cancelled())
	assert.Equal(t, 2, countOf(f.callLog(), "release 0")+countOf(f.callLog(), "release 1"), "nothing more after Close")
}

// TestFakeDeferredFenceFailureQuarantines: a deferred fence that cannot be recorded
// quarantines its slot, as an immediate one does.
func TestFakeDeferredFenceFailureQuarantines(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 1, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())
	a, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	fence, err := db.CancelLater(a)
	require.NoError(t, err)
	f.mu.Lock()
	f.failRelease = errors.New("fake: record failed")
	f.mu.Unlock()
	assert.ErrorIs(t, fence(), paging.ErrQuarantined)
	assert.Equal(t, paging.SlotQuarantined, db.SlotState(a.Slot()))
	n, err := db.Recover()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// TestFakeLastSlotStateAsksNothing: LastSlotState reports what the pipeline last saw, without
// polling the transfer, where SlotState polls.
func TestFakeLastSlotStateAsksNothing(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 1, 0)
	db, f := newFakePipeline(t, l.weights[0].Bytes())
	a, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	f.complete(a.Slot())
	assert.Equal(t, paging.SlotFilling, db.LastSlotState(a.Slot()), "not polled")
	assert.Equal(t, paging.SlotReady, db.SlotState(a.Slot()), "polled")
	assert.Equal(t, paging.SlotReady, db.LastSlotState(a.Slot()))
	assert.Equal(t, paging.SlotQuarantined, db.LastSlotState(2))
	require.NoError(t, db.Cancel(a))
}
