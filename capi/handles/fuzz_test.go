package handles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/capi/handles"
)

const (
	fuzzKind  handles.Kind = 0x5A
	fuzzOther handles.Kind = 0x5B
)

// slotModel is what the table's history says about one slot index: the last generation it
// issued and whether that generation is live.
type slotModel struct {
	gen  uint32
	live bool
	obj  *object
}

// fuzzTable builds a table with a history that history (a fuzzed byte) chooses: some handles
// issued, some released and their slots reused under newer generations, one possibly left
// released. It returns the table and a model of every slot, built from the handles it issued.
func fuzzTable(t testing.TB, history uint8) (*handles.Table[*object], map[uint32]*slotModel, []handles.Handle) {
	tab := newObjectTable(fuzzKind, "fuzzed")
	_ = newObjectTable(fuzzOther, "other") // a second kind, so wrong-type handles name a type
	model := map[uint32]*slotModel{}
	var issued []handles.Handle
	insert := func(id uint64) handles.Handle {
		o := &object{id: id}
		h, err := tab.Insert(o)
		require.NoError(t, err)
		model[h.Index()] = &slotModel{gen: h.Generation(), live: true, obj: o}
		issued = append(issued, h)
		return h
	}
	remove := func(h handles.Handle) {
		require.NoError(t, tab.Remove(h))
		model[h.Index()].live = false
	}
	n := 3 + int(history%5)
	live := make([]handles.Handle, n)
	for i := range live {
		live[i] = insert(uint64(0xA000 + i))
	}
	for k := 0; k < int(history>>3); k++ {
		i := k % n
		remove(live[i])
		live[i] = insert(uint64(0xB000 + k))
	}
	if history&1 != 0 {
		remove(live[n-1])
	}
	return tab, model, issued
}

// want classifies h against the model as the table must: the live object, handles.ErrStale
// (a generation this slot issued and has since retired) or handles.ErrInvalid (zero, another
// kind, a slot or generation never issued).
func want(model map[uint32]*slotModel, h handles.Handle) (*object, error) {
	if h.Kind() != fuzzKind {
		return nil, handles.ErrInvalid
	}
	s := model[h.Index()]
	switch {
	case s == nil || h.Generation() == 0 || h.Generation() > s.gen:
		return nil, handles.ErrInvalid
	case s.live && h.Generation() == s.gen:
		return s.obj, nil
	}
	return nil, handles.ErrStale
}

// FuzzHandleLookup decodes arbitrary 64-bit values as handles of a table with a fuzzed
// history: Get, Acquire and Remove of any value return the object it names or an error
// wrapping ErrInvalid or ErrStale, as the model of the table's history says, and never panic;
// a refused Remove changes nothing.
func FuzzHandleLookup(f *testing.F) {
	_, _, issued := fuzzTable(f, 0x0b)
	f.Add(uint64(0), uint8(0))
	f.Add(^uint64(0), uint8(0xff))
	for _, h := range issued {
		f.Add(uint64(h), uint8(0x0b))
		f.Add(uint64(h)+1<<32, uint8(0x0b)) // the next generation
		f.Add(uint64(h)^uint64(fuzzKind^fuzzOther)<<56, uint8(0x0b))
	}
	f.Add(uint64(fuzzKind)<<56|1<<32|255, uint8(3))    // a slot of an allocated page, never issued
	f.Add(uint64(fuzzKind)<<56|1<<32|1<<31, uint8(4))  // an index far past every page
	f.Add(uint64(fuzzKind)<<56|0xffffff<<32, uint8(5)) // the last generation of slot 0
	f.Fuzz(func(t *testing.T, raw uint64, history uint8) {
		tab, model, _ := fuzzTable(t, history)
		h := handles.Handle(raw)
		obj, wantErr := want(model, h)
		liveBefore := tab.Live()

		got, err := tab.Get(h)
		if wantErr != nil {
			require.ErrorIs(t, err, wantErr, "Get(%s)", h)
			assert.Nil(t, got)
		} else {
			require.NoError(t, err, "Get(%s)", h)
			require.Same(t, obj, got)
		}

		lease, err := tab.Acquire(h)
		if wantErr != nil {
			require.ErrorIs(t, err, wantErr, "Acquire(%s)", h)
			assert.Nil(t, lease.Value())
		} else {
			require.NoError(t, err, "Acquire(%s)", h)
			require.Same(t, obj, lease.Value())
			require.NoError(t, lease.Release())
		}

		err = tab.Remove(h)
		if wantErr != nil {
			require.ErrorIs(t, err, wantErr, "Remove(%s)", h)
			assert.Equal(t, liveBefore, tab.Live(), "a refused Remove changed the table")
			return
		}
		require.NoError(t, err, "Remove(%s)", h)
		assert.Equal(t, liveBefore-1, tab.Live())
		assert.Equal(t, int32(1), obj.finalized.Load())
		_, err = tab.Get(h)
		require.ErrorIs(t, err, handles.ErrStale, "a removed handle is stale")
	})
}
