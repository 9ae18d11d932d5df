package partition

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

// TestFindReturnsTheAllocationHoldingAnAddress: a host may hand back addresses inside an
// allocation (several tensors in one); anything outside its allocations is refused.
func TestFindReturnsTheAllocationHoldingAnAddress(t *testing.T) {
	mem := &Memory{}
	mem.Add(Allocation{Base: 0x2000, Size: 0x40, Ordinal: 1})
	mem.Add(Allocation{Base: 0x1000, Size: 0x100, Ordinal: 0})
	a, off, err := mem.Find(0x1010, 0x20)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x1000), a.Base)
	assert.Equal(t, uint64(0x10), off)
	a, off, err = mem.Find(0x2000, 0x40)
	require.NoError(t, err)
	assert.Equal(t, 1, a.Ordinal)
	assert.Zero(t, off)
	for _, c := range []struct{ addr, n uint64 }{{0xfff, 1}, {0x10f0, 0x20}, {0x1100, 1}, {0x2040, 1}, {0x1800, 4}} {
		_, _, err := mem.Find(c.addr, c.n)
		assert.ErrorIs(t, err, ep.ErrInvalidArgument, "%#x+%d", c.addr, c.n)
	}
	mem.Reset()
	_, _, err = mem.Find(0x1010, 1)
	assert.ErrorIs(t, err, ep.ErrInvalidArgument, "a reset index holds nothing")
}

// TestFreedAllocationsAreReusedBySize: a host such as ONNX Runtime allocates a run's tensors
// anew every run; a freed allocation of the same size on the same device is handed out again
// (with its registration, so decisions that found it still hold) instead of a new one.
func TestFreedAllocationsAreReusedBySize(t *testing.T) {
	p := newProvider(t)
	mem := &Memory{}
	a := NewAllocation(alloc(t, p, 4096), 4096, 0)
	mem.Add(a)
	require.True(t, a.reg.live.Load())
	assert.False(t, mem.Free(a.Base+1), "only an allocation's base frees it")
	require.True(t, mem.Free(a.Base))
	assert.False(t, a.reg.live.Load(), "out of the index")
	assert.Equal(t, uint64(4096), mem.CachedBytes())
	_, _, err := mem.Find(a.Base, 1)
	assert.Error(t, err, "a freed allocation is not found")
	_, ok := mem.Reuse(1, 4096)
	assert.False(t, ok, "another device's allocation is not reused")
	_, ok = mem.Reuse(0, 4095)
	assert.False(t, ok, "another size is not reused")
	b, ok := mem.Reuse(0, 4096)
	require.True(t, ok)
	assert.Equal(t, a.Base, b.Base)
	assert.Same(t, a.reg, b.reg, "the allocation keeps its registration")
	assert.Zero(t, mem.CachedBytes())
	_, ok = mem.Reuse(0, 4096)
	assert.False(t, ok, "an allocation is handed out once")
	mem.Add(b)
	assert.True(t, a.reg.live.Load())
}
