package paging

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Host copy fan-out. One goroutine copies file-backed memory into pinned memory at about
// 6 GB/s; sixteen reach about 35 GB/s (DESIGN.md, "Beyond the seeds"), so a staged layer is
// copied by several goroutines, and its H2D copies are queued chunk by chunk as the chunks
// land so that the link works while the host is still copying.
const (
	// minBytesPerWorker keeps each copying goroutine busy for ~100 µs or more, far above the
	// cost of starting it.
	minBytesPerWorker = 512 << 10
	// pieceBytes is the unit of work a copying goroutine takes at a time.
	pieceBytes = 1 << 20
)

type piece struct {
	dst, src []byte
	chunk    int
}

// copyGuarded copies src to dst and turns a fault while reading src (a mapped file truncated
// under us, an I/O error on a mapped page) into an error instead of a crash. The calling
// goroutine must have debug.SetPanicOnFault(true).
func copyGuarded(dst, src []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("paging: fault reading external data (truncated file or I/O error): %v", r)
		}
	}()
	copy(dst, src)
	return nil
}

// stageCopy copies the image from segment k, offset pos within it, to its end into staging
// (indexed by image offset) and calls enqueue(lo, hi) for each chunk of chunkBytes, in order,
// once the chunk is in staging. It uses up to workers goroutines, fewer for small copies, and
// returns the bytes it handed to enqueue. Every goroutine has finished when it returns.
func stageCopy(staging []byte, segs []Segment, k int, pos, chunkBytes uint64, workers int, enqueue func(lo, hi uint64) error) (uint64, error) {
	imgStart := segs[k].DstOffset + pos
	last := segs[len(segs)-1]
	imgEnd := last.DstOffset + last.Region.Len
	total := imgEnd - imgStart
	if total == 0 {
		return 0, nil
	}
	chunkBytes = max(chunkBytes, 1)
	nChunks := int((total + chunkBytes - 1) / chunkBytes)
	chunkOf := func(off uint64) int { return int((off - imgStart) / chunkBytes) }

	var pieces []piece
	for ; k < len(segs); k, pos = k+1, 0 {
		sg := segs[k]
		for pos < uint64(len(sg.Src)) {
			off := sg.DstOffset + pos
			n := min(uint64(len(sg.Src))-pos, pieceBytes)
			// Keep every piece inside one chunk.
			n = min(n, imgStart+uint64(chunkOf(off)+1)*chunkBytes-off)
			pieces = append(pieces, piece{dst: staging[off : off+n], src: sg.Src[pos : pos+n], chunk: chunkOf(off)})
			pos += n
		}
	}

	w := int(min(uint64(workers), (total+minBytesPerWorker-1)/minBytesPerWorker))
	if w <= 1 {
		return stageInline(pieces, imgStart, imgEnd, chunkBytes, enqueue)
	}

	left := make([]atomic.Int32, nChunks)
	done := make([]chan struct{}, nChunks)
	for i := range done {
		done[i] = make(chan struct{})
	}
	for _, p := range pieces {
		left[p.chunk].Add(1)
	}
	var (
		next  atomic.Int64
		stop  atomic.Bool
		fault atomic.Pointer[error]
		wg    sync.WaitGroup
	)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			debug.SetPanicOnFault(true)
			for {
				j := int(next.Add(1) - 1)
				if j >= len(pieces) {
					return
				}
				p := pieces[j]
				if !stop.Load() {
					if err := copyGuarded(p.dst, p.src); err != nil {
						fault.CompareAndSwap(nil, &err)
						stop.Store(true)
					}
				}
				if left[p.chunk].Add(-1) == 0 {
					close(done[p.chunk])
				}
			}
		}()
	}
	var n uint64
	var err error
	for c := 0; c < nChunks; c++ {
		<-done[c]
		if e := fault.Load(); e != nil {
			err = *e
			break
		}
		lo := imgStart + uint64(c)*chunkBytes
		hi := min(lo+chunkBytes, imgEnd)
		if err = enqueue(lo, hi); err != nil {
			break
		}
		n += hi - lo
	}
	stop.Store(true)
	wg.Wait()
	return n, err
}

// stageInline is stageCopy on the calling goroutine, for copies too small to fan out.
func stageInline(pieces []piece, imgStart, imgEnd, chunkBytes uint64, enqueue func(lo, hi uint64) error) (uint64, error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	var n uint64
	j := 0
	for lo := imgStart; lo < imgEnd; lo += chunkBytes {
		hi := min(lo+chunkBytes, imgEnd)
		c := pieces[j].chunk
		for ; j < len(pieces) && pieces[j].chunk == c; j++ {
			if err := copyGuarded(pieces[j].dst, pieces[j].src); err != nil {
				return n, err
			}
		}
		if err := enqueue(lo, hi); err != nil {
			return n, err
		}
		n += hi - lo
	}
	return n, nil
}
