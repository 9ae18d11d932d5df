package kernels

import (
	"fmt"
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	simKernelSets = append(simKernelSets, func(m map[string]cudadrv.KernelBody) {
		for _, dt := range floatTypes {
			m["cudaep_gemv_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simGemv(l, dt) }
		}
	})
}

// simGemv is cudaep_gemv_<t>(y, a, b, partials, counters, k, n, rows) (cuda/gemv.cu), in the
// kernel's order of float32 operations: per column, each warp's fused multiply-adds over its
// rows of a chunk (rounded through float64, which matches the device but for rare double
// roundings), the warps added in order, and with K split the chunks' partials, stored in
// partials, added by slices as the tile's last block does. It fails the launch where the CUDA
// kernel would go wrong: a block that is not 256 threads, a grid that is not tiles × chunks,
// n not whole 16-byte packs, b not 16-byte aligned, or, with K split, a counter that is not
// zero at launch (a launch that did not finish, or another kernel writing the counters);
// the counters are left zero, as the kernel's last blocks leave them.
func simGemv(l *cudadrv.KernelLaunch, dt DType) error {
	if l.Block != (cudadrv.Dim3{X: gemvThreads, Y: 1, Z: 1}) {
		return fmt.Errorf("%s: block %v: the kernel needs %d threads", l.Name, l.Block, gemvThreads)
	}
	k, n, rows := l.U64Arg(5), l.U64Arg(6), l.U64Arg(7)
	v := uint64(16 / dt.Size())
	tc := 32 * v
	if k == 0 || n == 0 || rows == 0 || n%v != 0 {
		return fmt.Errorf("%s: k %d, n %d, rows %d: n must be a positive multiple of %d", l.Name, k, n, rows, v)
	}
	tiles, chunks := (n+tc-1)/tc, (k+rows-1)/rows
	if uint64(l.Grid.X) != tiles || uint64(l.Grid.Y) != chunks || l.Grid.Z != 1 {
		return fmt.Errorf("%s: grid %v for k %d, n %d, rows %d: want %d × %d", l.Name, l.Grid, k, n, rows, tiles, chunks)
	}
	if l.PtrArg(2)%16 != 0 {
		return &cudadrv.AccessError{Addr: l.PtrArg(2), Len: 16, Misaligned: true, Align: 16}
	}
	views, err := simViewsOf(l, []int{0, 1, 2}, []DType{dt, dt, dt}, []int{int(n), int(k), int(k * n)})
	if err != nil {
		return err
	}
	y, a, b := views[0], views[1], views[2]
	ld := tiles * tc
	var partials []float32
	if chunks > 1 {
		counters, err := l.Uint32s(l.PtrArg(4), int(tiles))
		if err != nil {
			return err
		}
		for t, c := range counters {
			if c != 0 {
				return fmt.Errorf("%s: counter of tile %d is %d at launch; the kernel needs it 0", l.Name, t, c)
			}
		}
		if partials, err = l.Float32s(l.PtrArg(3), int(chunks*ld)); err != nil {
			return err
		}
	}
	av := make([]float32, k)
	for i := range av {
		av[i] = float32(a.float(int64(i)))
	}
	// Row by row (the device's order per column, and a cache-friendly walk here).
	acc := make([][]float32, gemvWarps)
	for w := range acc {
		acc[w] = make([]float32, n)
	}
	for c := range chunks {
		r0, r1 := c*rows, min(k, (c+1)*rows)
		for w, aw := range acc {
			clear(aw)
			for r := r0 + uint64(w); r < r1; r += gemvWarps {
				ar, row := float64(av[r]), int64(r*n)
				for col := range aw {
					aw[col] = float32(math.FMA(ar, b.float(row+int64(col)), float64(aw[col])))
				}
			}
		}
		for col := range n {
			sum := float32(0)
			for _, aw := range acc {
				sum += aw[col]
			}
			if chunks == 1 {
				y.setFloat(int64(col), float64(sum))
			} else {
				partials[c*ld+col] = sum
			}
		}
	}
	if chunks == 1 {
		return nil
	}
	slices := gemvThreads / (tc / 4)
	for col := range n {
		total := float32(0)
		for s := range slices {
			part := float32(0)
			for c := s; c < chunks; c += slices {
				part += partials[c*ld+col]
			}
			total += part
		}
		y.setFloat(int64(col), float64(total))
	}
	return nil
}
