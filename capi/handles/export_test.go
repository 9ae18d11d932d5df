package handles

// SetSlotGeneration forces the generation recorded for a free slot, so tests can reach
// generation exhaustion without 2^24 insert/remove cycles.
func SetSlotGeneration[T any](t *Table[T], index uint32, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slotAt(index).state.Store(gen << 1)
}

// MaxGeneration is the largest generation a handle can carry.
const MaxGeneration = maxGen
