package partition

// PagingMode says when a partition's external-data weights are paged (streamed to the device
// one layer ahead of compute) rather than kept resident.
type PagingMode string

const (
	// PagingAuto pages the weights when they are over the weight budget.
	PagingAuto PagingMode = "auto"
	// PagingOn always pages external-data weights.
	PagingOn PagingMode = "on"
	// PagingOff never pages: weights over the budget are refused.
	PagingOff PagingMode = "off"
)

// Placement is where a partition's external-data weights live.
type Placement int

const (
	// Resident weights are loaded to the device once.
	Resident Placement = iota
	// Paged weights stream through a double buffer at every run.
	Paged
	// OverBudget weights neither fit the budget nor may be paged: the partition is refused.
	OverBudget
)

// PlaceWeights decides where a partition with extBytes of external-data weights keeps them,
// under mode and a device budget of budget bytes (0 for none).
func PlaceWeights(mode PagingMode, budget, extBytes uint64) Placement {
	switch {
	case extBytes == 0:
		return Resident
	case mode == PagingOn:
		return Paged
	case budget == 0 || extBytes <= budget:
		return Resident
	case mode == PagingOff:
		return OverBudget
	}
	return Paged
}

// NodeWeights are the external-data initializers one node reads (by name), and their bytes.
type NodeWeights struct {
	Node  int
	Names []string
	Bytes uint64
}

// LayerAlign is the alignment at which a node's initializers start in a layer shared with the
// nodes before it (the GEMV reads its matrix in 16-byte loads; cuBLAS prefers 256).
const LayerAlign = 256

// ShareLayers splits groups (in node order) into the groups of each paged layer: consecutive
// groups share a layer while it stays within limit bytes (the largest group's: the slots' size
// anyway) and each group starts at a multiple of LayerAlign. A layer pays a fence and a copy's
// fixed costs, which small layers (a decoder's key and value projections, 2 MB) do not amortize.
func ShareLayers(groups []NodeWeights, limit uint64) [][]NodeWeights {
	var layers [][]NodeWeights
	var bytes uint64
	for i, g := range groups {
		if i == 0 || bytes+g.Bytes > limit || bytes%LayerAlign != 0 {
			layers, bytes = append(layers, nil), 0
		}
		layers[len(layers)-1] = append(layers[len(layers)-1], g)
		bytes += g.Bytes
	}
	return layers
}
