package partition

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

// TestPagingDecisionFollowsModeAndBudget: on always pages external data, auto pages what is over
// the budget, off refuses a partition over the budget, naming both options as the host does.
func TestPagingDecisionFollowsModeAndBudget(t *testing.T) {
	for _, c := range []struct {
		mode           PagingMode
		budget, weight uint64
		pages          bool
		fails          bool
	}{
		{PagingOn, 0, 100, true, false},
		{PagingOn, 0, 0, false, false}, // nothing external: nothing to page
		{PagingAuto, 0, 1 << 40, false, false},
		{PagingAuto, 1000, 1000, false, false},
		{PagingAuto, 1000, 1001, true, false},
		{PagingOff, 0, 1 << 40, false, false},
		{PagingOff, 1000, 1001, false, true},
	} {
		s := &Session{opts: Options{Paging: c.mode, WeightBudget: c.budget, KeyPrefix: "host."}}
		pages, err := s.pages(c.weight)
		if c.fails {
			require.Error(t, err, "%+v", c)
			assert.ErrorContains(t, err, "host.weight_budget_bytes=1000")
			assert.ErrorContains(t, err, "host.paging=off")
			continue
		}
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c.pages, pages, "%+v", c)
	}
}

// TestNewSessionRefusesAnUnknownPagingMode: the mode is named in the error, with the host's key.
func TestNewSessionRefusesAnUnknownPagingMode(t *testing.T) {
	_, err := NewSession(nil, Options{Paging: "sometimes", KeyPrefix: "host."}, nil, nil)
	assert.ErrorIs(t, err, ep.ErrInvalidArgument)
	assert.ErrorContains(t, err, `host.paging="sometimes"`)
}

func TestOpCountsListsOperatorsInFirstAppearanceOrder(t *testing.T) {
	nodes := []Node{{Op: "MatMul"}, {Op: "cudaep.WherePair"}, {Op: "MatMul"}, {Op: "Attention"}, {Op: "cudaep.WherePair"}, {Op: "MatMul"}}
	assert.Equal(t, "MatMul x3, cudaep.WherePair x2, Attention x1", opCounts(nodes))
	assert.Empty(t, opCounts(nil))
}
