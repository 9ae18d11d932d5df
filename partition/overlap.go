package partition

import (
	"cmp"
	"slices"
)

// span is the bytes [Lo, Hi) of a run's device tensor; Output marks one the run writes.
type span struct {
	Lo, Hi uint64
	Output bool
}

// outputOverlaps reports whether an output's span overlaps another span (every span
// non-empty): a run whose outputs overlap what it reads or another output cannot use the
// tensors' memory in place. It sorts spans by start: a span overlaps an earlier one exactly
// when it starts before the end of one, so one pass keeps the furthest end of all spans and of
// the outputs so far.
func outputOverlaps(spans []span) bool {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.Lo, b.Lo) })
	var end, outEnd uint64
	for _, y := range spans {
		if y.Output && y.Lo < end || y.Lo < outEnd {
			return true
		}
		end = max(end, y.Hi)
		if y.Output {
			outEnd = max(outEnd, y.Hi)
		}
	}
	return false
}
