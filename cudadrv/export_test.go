package cudadrv

import "sync/atomic"

// SetCompletionWord makes w's latest signalled number, and the word itself, v: as if v
// signals had run. Tests use it to reach the wrap-around at 2^32 in a few calls.
func SetCompletionWord(w *CompletionWord, v uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = v
	atomic.StoreUint32(w.word, v)
}
