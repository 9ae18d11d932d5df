package handles_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/capi/handles"
)

type object struct {
	id        uint64
	finalized atomic.Int32
}

func newObjectTable(kind handles.Kind, name string) *handles.Table[*object] {
	return handles.NewTable(handles.Config[*object]{
		Kind: kind, Name: name,
		Finalize: func(o *object) error { o.finalized.Add(1); return nil },
	})
}

func TestInsertGetReturnsTheInsertedValue(t *testing.T) {
	tab := newObjectTable(11, "widget")
	a, b := &object{id: 0xA1A1}, &object{id: 0xB2B2}
	ha, err := tab.Insert(a)
	require.NoError(t, err)
	hb, err := tab.Insert(b)
	require.NoError(t, err)

	assert.NotEqual(t, ha, hb)
	assert.Equal(t, handles.Kind(11), ha.Kind())
	assert.Equal(t, uint32(1), ha.Generation())
	assert.Equal(t, 2, tab.Live())

	got, err := tab.Get(ha)
	require.NoError(t, err)
	assert.Same(t, a, got)
	got, err = tab.Get(hb)
	require.NoError(t, err)
	assert.Same(t, b, got)
}

func TestZeroHandleIsInvalid(t *testing.T) {
	tab := newObjectTable(12, "widget")
	_, err := tab.Insert(&object{id: 7})
	require.NoError(t, err)

	_, err = tab.Get(0)
	assert.ErrorIs(t, err, handles.ErrInvalid)
	assert.Contains(t, err.Error(), "null handle")
	_, err = tab.Acquire(0)
	assert.ErrorIs(t, err, handles.ErrInvalid)
	assert.ErrorIs(t, tab.Remove(0), handles.ErrInvalid)
	assert.Equal(t, 1, tab.Live())
}

func TestWrongTypeHandleIsInvalid(t *testing.T) {
	opts := newObjectTable(13, "options")
	provs := newObjectTable(14, "provider")
	o := &object{id: 0x5151}
	ho, err := opts.Insert(o)
	require.NoError(t, err)
	hp, err := provs.Insert(&object{id: 0x6262})
	require.NoError(t, err)
	require.Equal(t, ho.Index(), hp.Index(), "same slot and generation: only the kind differs")
	require.Equal(t, ho.Generation(), hp.Generation())

	_, err = provs.Get(ho)
	assert.ErrorIs(t, err, handles.ErrInvalid)
	assert.Contains(t, err.Error(), `wrong type: handle `+ho.String()+` is of type "options", want "provider"`)
	_, err = provs.Acquire(ho)
	assert.ErrorIs(t, err, handles.ErrInvalid)
	assert.ErrorIs(t, provs.Remove(ho), handles.ErrInvalid)

	got, err := opts.Get(ho)
	require.NoError(t, err)
	assert.Same(t, o, got, "a wrong-type remove must not touch either table")
	assert.Equal(t, int32(0), o.finalized.Load())
	assert.Equal(t, 1, provs.Live())
}

func TestForgedHandlesAreInvalid(t *testing.T) {
	tab := newObjectTable(15, "widget")
	h, err := tab.Insert(&object{id: 1})
	require.NoError(t, err)

	forged := map[string]handles.Handle{
		"index never used":         handles.Handle(uint64(15)<<56 | 1<<32 | 3),
		"index beyond every page":  handles.Handle(uint64(15)<<56 | 1<<32 | 0xFFFF_FFFE),
		"generation not yet given": h + 1<<32,
		"generation zero":          h &^ (handles.MaxGeneration << 32),
		"unregistered kind":        handles.Handle(uint64(0xEE)<<56 | 1<<32),
		"all ones":                 handles.Handle(^uint64(0)),
	}
	for name, f := range forged {
		t.Run(name, func(t *testing.T) {
			_, err := tab.Get(f)
			assert.ErrorIs(t, err, handles.ErrInvalid)
			assert.NotErrorIs(t, err, handles.ErrStale)
			_, err = tab.Acquire(f)
			assert.ErrorIs(t, err, handles.ErrInvalid)
			assert.ErrorIs(t, tab.Remove(f), handles.ErrInvalid)
		})
	}
	_, err = tab.Get(h)
	assert.NoError(t, err, "forged handles must not disturb the real one")
}

func TestReleasedHandleIsStaleEvenAfterSlotReuse(t *testing.T) {
	tab := newObjectTable(16, "widget")
	first := &object{id: 0x1111}
	old, err := tab.Insert(first)
	require.NoError(t, err)
	require.NoError(t, tab.Remove(old))
	assert.Equal(t, int32(1), first.finalized.Load())

	_, err = tab.Get(old)
	assert.ErrorIs(t, err, handles.ErrStale)
	assert.Contains(t, err.Error(), "released")

	second := &object{id: 0x2222}
	reused, err := tab.Insert(second)
	require.NoError(t, err)
	require.Equal(t, old.Index(), reused.Index(), "the freed slot is reused")
	assert.Equal(t, old.Generation()+1, reused.Generation())

	_, err = tab.Get(old)
	assert.ErrorIs(t, err, handles.ErrStale, "the old handle must not alias the new object")
	_, err = tab.Acquire(old)
	assert.ErrorIs(t, err, handles.ErrStale)
	assert.ErrorIs(t, tab.Remove(old), handles.ErrStale)
	got, err := tab.Get(reused)
	require.NoError(t, err)
	assert.Same(t, second, got)
	assert.Equal(t, int32(0), second.finalized.Load())
}

func TestDoubleRemoveIsStaleAndFinalizesOnce(t *testing.T) {
	tab := newObjectTable(17, "widget")
	o := &object{id: 3}
	h, err := tab.Insert(o)
	require.NoError(t, err)
	require.NoError(t, tab.Remove(h))
	err = tab.Remove(h)
	assert.ErrorIs(t, err, handles.ErrStale)
	assert.Equal(t, int32(1), o.finalized.Load())
	assert.Equal(t, 0, tab.Live())
}

func TestFinalizeWaitsForTheLastLease(t *testing.T) {
	tab := newObjectTable(18, "provider")
	o := &object{id: 9}
	h, err := tab.Insert(o)
	require.NoError(t, err)

	child1, err := tab.Acquire(h)
	require.NoError(t, err)
	child2, err := tab.Acquire(h)
	require.NoError(t, err)
	assert.Same(t, o, child1.Value())

	require.NoError(t, tab.Remove(h))
	assert.Equal(t, int32(0), o.finalized.Load(), "live leases keep the parent alive")
	_, err = tab.Acquire(h)
	assert.ErrorIs(t, err, handles.ErrStale, "the handle itself is dead at once")

	require.NoError(t, child1.Release())
	assert.Equal(t, int32(0), o.finalized.Load())
	require.NoError(t, child1.Release(), "a second release of one lease does nothing")
	assert.Equal(t, int32(0), o.finalized.Load())
	assert.Nil(t, child1.Value())

	require.NoError(t, child2.Release())
	assert.Equal(t, int32(1), o.finalized.Load())
}

func TestFinalizeErrorIsReturnedToWhoeverDropsTheLastReference(t *testing.T) {
	boom := errors.New("close failed")
	tab := handles.NewTable(handles.Config[int]{Kind: 19, Name: "thing",
		Finalize: func(int) error { return boom }})

	h, err := tab.Insert(1)
	require.NoError(t, err)
	assert.ErrorIs(t, tab.Remove(h), boom)

	h, err = tab.Insert(2)
	require.NoError(t, err)
	lease, err := tab.Acquire(h)
	require.NoError(t, err)
	assert.NoError(t, tab.Remove(h))
	assert.ErrorIs(t, lease.Release(), boom)
}

func TestMaxLive(t *testing.T) {
	tab := handles.NewTable(handles.Config[int]{Kind: 20, Name: "thing", MaxLive: 3})
	var hs []handles.Handle
	for i := range 3 {
		h, err := tab.Insert(i + 100)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	_, err := tab.Insert(4)
	assert.ErrorIs(t, err, handles.ErrFull)
	require.NoError(t, tab.Remove(hs[1]))
	_, err = tab.Insert(5)
	assert.NoError(t, err)
}

func TestExhaustedGenerationRetiresTheSlot(t *testing.T) {
	tab := handles.NewTable(handles.Config[int]{Kind: 21, Name: "thing"})
	h, err := tab.Insert(1)
	require.NoError(t, err)
	require.NoError(t, tab.Remove(h))
	handles.SetSlotGeneration(tab, h.Index(), handles.MaxGeneration-1)

	last, err := tab.Insert(2)
	require.NoError(t, err)
	require.Equal(t, h.Index(), last.Index())
	require.Equal(t, uint32(handles.MaxGeneration), last.Generation())
	require.NoError(t, tab.Remove(last))

	next, err := tab.Insert(3)
	require.NoError(t, err)
	assert.NotEqual(t, h.Index(), next.Index(), "a slot out of generations is never reused")
	_, err = tab.Get(last)
	assert.ErrorIs(t, err, handles.ErrStale)
}

func TestManyHandlesSpanPages(t *testing.T) {
	tab := handles.NewTable(handles.Config[uint64]{Kind: 22, Name: "thing"})
	const n = 1000
	hs := make([]handles.Handle, n)
	for i := range n {
		var err error
		hs[i], err = tab.Insert(uint64(i)*7 + 1)
		require.NoError(t, err)
	}
	for i, h := range hs {
		v, err := tab.Get(h)
		require.NoError(t, err)
		require.Equal(t, uint64(i)*7+1, v)
	}
	for _, h := range hs {
		require.NoError(t, tab.Remove(h))
	}
	assert.Equal(t, 0, tab.Live())
}

// TestConcurrentCreateLookupRelease runs writers that insert, check and remove their own
// handles while readers look up (and lease) handles published by others, which may be live or
// already released. A reader must see either the handle's own value or ErrStale — never
// another object's value, never a finalized object under a lease.
func TestConcurrentCreateLookupRelease(t *testing.T) {
	type rec struct {
		h handles.Handle
		o *object
	}
	var finalized atomic.Int64
	tab := handles.NewTable(handles.Config[*object]{Kind: 23, Name: "widget",
		Finalize: func(o *object) error {
			if o.finalized.Add(1) != 1 {
				return fmt.Errorf("object %x finalized twice", o.id)
			}
			finalized.Add(1)
			return nil
		}})

	const writers, readers, rounds = 8, 8, 400
	var published [64]atomic.Pointer[rec]
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				o := &object{id: uint64(w)<<32 | uint64(i) + 1}
				h, err := tab.Insert(o)
				if err != nil {
					errs <- err
					return
				}
				published[(w*rounds+i)%len(published)].Store(&rec{h, o})
				if got, err := tab.Get(h); err != nil || got != o {
					errs <- fmt.Errorf("own lookup of %s: %v", h, err)
					return
				}
				if err := tab.Remove(h); err != nil {
					errs <- err
					return
				}
				if _, err := tab.Get(h); !errors.Is(err, handles.ErrStale) {
					errs <- fmt.Errorf("after remove %s: %v", h, err)
					return
				}
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 99))
			for range rounds * 4 {
				p := published[rng.IntN(len(published))].Load()
				if p == nil {
					continue
				}
				lease, err := tab.Acquire(p.h)
				if err != nil {
					if !errors.Is(err, handles.ErrStale) {
						errs <- fmt.Errorf("acquire %s: %v", p.h, err)
						return
					}
					continue
				}
				if lease.Value() != p.o || p.o.finalized.Load() != 0 {
					errs <- fmt.Errorf("lease on %s saw a foreign or finalized object", p.h)
					return
				}
				if err := lease.Release(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, 0, tab.Live())
	assert.Equal(t, int64(writers*rounds), finalized.Load(), "every object finalized exactly once")
}

func TestLookupAllocatesNothing(t *testing.T) {
	tab := newObjectTable(24, "widget")
	h, err := tab.Insert(&object{id: 42})
	require.NoError(t, err)
	var sink *object
	allocs := testing.AllocsPerRun(1000, func() {
		sink, _ = tab.Get(h)
	})
	assert.Equal(t, 0.0, allocs, "Get")
	allocs = testing.AllocsPerRun(1000, func() {
		lease, _ := tab.Acquire(h)
		sink = lease.Value()
		_ = lease.Release()
	})
	assert.Equal(t, 0.0, allocs, "Acquire+Release")
	assert.Equal(t, uint64(42), sink.id)
}

func BenchmarkGet(b *testing.B) {
	tab := newObjectTable(25, "widget")
	hs := make([]handles.Handle, 1024)
	for i := range hs {
		hs[i], _ = tab.Insert(&object{id: uint64(i)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	var sink *object
	for i := 0; b.Loop(); i++ {
		sink, _ = tab.Get(hs[i&1023])
	}
	_ = sink
}

func BenchmarkAcquireRelease(b *testing.B) {
	tab := newObjectTable(26, "widget")
	h, _ := tab.Insert(&object{id: 1})
	b.ReportAllocs()
	for b.Loop() {
		lease, _ := tab.Acquire(h)
		_ = lease.Release()
	}
}

func BenchmarkGetParallel(b *testing.B) {
	tab := newObjectTable(27, "widget")
	h, _ := tab.Insert(&object{id: 1})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := tab.Get(h); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestRemoveIfRefusalKeepsTheHandle(t *testing.T) {
	finalized := 0
	tab := handles.NewTable(handles.Config[int]{Kind: 3, Name: "thing", Finalize: func(int) error { finalized++; return nil }})
	h, err := tab.Insert(7)
	require.NoError(t, err)
	busy := errors.New("busy")
	assert.ErrorIs(t, tab.RemoveIf(h, func(v int) error { assert.Equal(t, 7, v); return busy }), busy)
	v, err := tab.Get(h)
	require.NoError(t, err, "a refused removal leaves the handle valid")
	assert.Equal(t, 7, v)
	assert.Zero(t, finalized)

	lease, err := tab.Acquire(h)
	require.NoError(t, err)
	require.NoError(t, tab.RemoveIf(h, func(int) error { return nil }))
	clone := lease.Clone()
	require.NoError(t, lease.Release())
	assert.Zero(t, finalized, "the clone still holds the value")
	require.NoError(t, clone.Release())
	assert.Equal(t, 1, finalized)
	_, err = tab.Get(h)
	assert.ErrorIs(t, err, handles.ErrStale)
}
