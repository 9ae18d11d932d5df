package partition

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFusionGroupsAreConvexAndConnected: a supported chain broken by an unsupported node makes
// two groups, and an unconnected supported node is a group of its own.
func TestFusionGroupsAreConvexAndConnected(t *testing.T) {
	names := []string{"c", "a", "cpu", "b", "d", "e"}
	nodes := []NodeValues{
		{Inputs: []string{"x2"}, Outputs: []string{"y"}},        // 0, after the CPU node
		{Inputs: []string{"in"}, Outputs: []string{"x0"}},       // 1
		{Inputs: []string{"x1"}, Outputs: []string{"x2"}},       // 2, unsupported
		{Inputs: []string{"x0"}, Outputs: []string{"x1"}},       // 3
		{Inputs: []string{"other"}, Outputs: []string{"z"}},     // 4, independent
		{Inputs: []string{"x0", "z"}, Outputs: []string{"out"}}, // 5, joins a and d
	}
	supported := []bool{true, true, false, true, true, true}
	order := TopoOrder(nodes)
	pos := map[string]int{}
	for i, n := range order {
		pos[names[n]] = i
	}
	assert.Less(t, pos["a"], pos["b"])
	assert.Less(t, pos["b"], pos["cpu"])
	assert.Less(t, pos["cpu"], pos["c"])
	assert.Less(t, pos["d"], pos["e"])

	groups := FusionGroups(nodes, supported)
	grouped := make([][]string, len(groups))
	for i, g := range groups {
		for _, n := range g {
			grouped[i] = append(grouped[i], names[n])
		}
	}
	for _, g := range grouped {
		assert.NotContains(t, g, "cpu")
	}
	assert.Contains(t, grouped, []string{"c"}, "the node after the CPU node is its own partition")
	// a, b, d, e are all before the CPU node in this order and connected through e.
	var first []string
	for _, g := range grouped {
		if len(g) > 1 {
			first = g
		}
	}
	assert.ElementsMatch(t, []string{"a", "b", "d", "e"}, first)
}

// TestShareLayersJoinsSmallNeighboursUpToTheLargest: consecutive nodes' weights share a layer
// while it stays within the limit (a decoder's q, k, v and o projections join; its MLP
// matrices, each the limit, stay alone), in node order, and a node whose weights would start
// off layerAlign starts a layer of its own.
func TestShareLayersJoinsSmallNeighboursUpToTheLargest(t *testing.T) {
	const mb = 1 << 20
	g := func(node int, bytes uint64) nodeWeights { return nodeWeights{Node: node, Bytes: bytes} }
	nodes := func(layers [][]nodeWeights) [][]int {
		var out [][]int
		for _, l := range layers {
			var ns []int
			for _, x := range l {
				ns = append(ns, x.Node)
			}
			out = append(out, ns)
		}
		return out
	}
	layer := []nodeWeights{g(0, 8*mb), g(1, 2*mb), g(2, 2*mb), g(3, 8*mb), g(4, 32*mb), g(5, 32*mb), g(6, 32*mb), g(7, 8*mb), g(8, 2*mb)}
	assert.Equal(t, [][]int{{0, 1, 2, 3}, {4}, {5}, {6}, {7, 8}}, nodes(shareLayers(layer, 32*mb)))
	assert.Equal(t, [][]int{{0}, {1}, {2}}, nodes(shareLayers([]nodeWeights{g(0, 4), g(1, 4), g(2, 4)}, 4)), "each at the limit")
	assert.Equal(t, [][]int{{0, 1}, {2, 3}}, nodes(shareLayers([]nodeWeights{g(0, 256), g(1, 100), g(2, 256), g(3, 256)}, 1024)),
		"after 356 bytes the next node's weights would start unaligned")
	assert.Empty(t, shareLayers(nil, 1))
}

// when some pair of spans, one an output, overlaps.
func TestOutputOverlapsMatchesEveryPair(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 2000 {
		spans := make([]span, 1+rng.IntN(6))
		for i := range spans {
			lo := uint64(rng.IntN(40))
			spans[i] = span{Lo: lo, Hi: lo + 1 + uint64(rng.IntN(8)), Output: rng.IntN(3) == 0}
		}
		want := false
		for a, x := range spans {
			for _, y := range spans[a+1:] {
				want = want || (x.Output || y.Output) && x.Lo < y.Hi && y.Lo < x.Hi
			}
		}
		assert.Equal(t, want, outputOverlaps(slices.Clone(spans)), "case %d: %v", n, spans)
	}
}

// TestPlaceWeightsFollowsModeAndBudget: on always pages external data, auto pages what is over
// the budget, off refuses a partition over the budget.
func TestPlaceWeightsFollowsModeAndBudget(t *testing.T) {
	for _, c := range []struct {
		mode           PagingMode
		budget, weight uint64
		want           placement
	}{
		{PagingOn, 0, 100, placePaged},
		{PagingOn, 0, 0, placeResident},
		{PagingAuto, 0, 1 << 40, placeResident},
		{PagingAuto, 1000, 1000, placeResident},
		{PagingAuto, 1000, 1001, placePaged},
		{PagingOff, 0, 1 << 40, placeResident},
		{PagingOff, 1000, 1001, placeOverBudget},
	} {
		assert.Equal(t, c.want, placeWeights(c.mode, c.budget, c.weight), "%+v", c)
	}
}

// TestFreeListReusesByDeviceAndSizeUpToItsCap: a kept allocation is handed out once, only for
// its device and size, and nothing is kept past MaxCachedBytes.
func TestFreeListReusesByDeviceAndSizeUpToItsCap(t *testing.T) {
	var f FreeList[string]
	require.True(t, f.Keep(SizeKey{0, 4096}, "a"))
	_, ok := f.Take(SizeKey{1, 4096})
	assert.False(t, ok, "another device")
	_, ok = f.Take(SizeKey{0, 4095})
	assert.False(t, ok, "another size")
	v, ok := f.Take(SizeKey{0, 4096})
	assert.True(t, ok)
	assert.Equal(t, "a", v)
	assert.Zero(t, f.Bytes())
	require.True(t, f.Keep(SizeKey{0, MaxCachedBytes - 1}, "b"))
	assert.False(t, f.Keep(SizeKey{0, 2}, "c"), "past the cap")
	assert.Equal(t, []string{"b"}, f.Drain())
	assert.Zero(t, f.Bytes())
}
