package kernels

import (
	"fmt"
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	simKernelSets = append(simKernelSets, func(m map[string]cudadrv.KernelBody) {
		for _, dt := range floatTypes {
			for pro, name := range gemvEntries {
				m[name+"_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simGemv(l, dt, gemvPrologue(pro)) }
			}
		}
	})
}

// simGemv is cudaep_gemv[_<prologue>]_<t>(a, partials, counters, k, rows, y0…y3, b0…b3,
// n0…n3, a2, gamma, sum, eps) (cuda/gemv.cu): first the prologue's row (simGemvRow), then, in
// the kernel's order of float32 operations: per column, each warp's fused
// multiply-adds over its rows of a chunk (rounded through float64, which matches the device
// but for rare double roundings), the warps added in order, and with K split the chunks'
// partials, stored in partials at the column's place among the group's tiles, added by slices
// as the tile's last block does. It fails the launch where the CUDA kernel would go wrong: a
// block that is not 256 threads, a grid that is not the group's tiles × chunks, an n_i not
// whole 16-byte packs, a matrix after an absent one (n_i = 0), or, with K split, a counter
// that is not zero at launch (a launch that did not finish, or another kernel writing the
// counters); the counters are left zero, as the kernel's last blocks leave them.
func simGemv(l *cudadrv.KernelLaunch, dt DType, pro gemvPrologue) error {
	if l.Block != (cudadrv.Dim3{X: gemvThreads, Y: 1, Z: 1}) {
		return fmt.Errorf("%s: block %v: the kernel needs %d threads", l.Name, l.Block, gemvThreads)
	}
	k, rows := l.U64Arg(3), l.U64Arg(4)
	v := uint64(16 / dt.Size())
	tc := 32 * v
	var ns []uint64
	tiles := uint64(0)
	for i := range gemvGroup {
		n := l.U64Arg(5 + 2*gemvGroup + i)
		if n == 0 {
			continue
		}
		if len(ns) < i {
			return fmt.Errorf("%s: matrix %d (n %d) follows an absent one", l.Name, i, n)
		}
		if n%v != 0 {
			return fmt.Errorf("%s: n%d %d must be a multiple of %d", l.Name, i, n, v)
		}
		ns = append(ns, n)
		tiles += (n + tc - 1) / tc
	}
	if k == 0 || rows == 0 || len(ns) == 0 {
		return fmt.Errorf("%s: k %d, rows %d, %d matrices: each must be positive", l.Name, k, rows, len(ns))
	}
	chunks := (k + rows - 1) / rows
	if uint64(l.Grid.X) != tiles || uint64(l.Grid.Y) != chunks || l.Grid.Z != 1 {
		return fmt.Errorf("%s: grid %v for k %d, n %v, rows %d: want %d × %d", l.Name, l.Grid, k, ns, rows, tiles, chunks)
	}
	ld := tiles * tc
	var partials []float32
	if chunks > 1 {
		counters, err := l.Uint32s(l.PtrArg(2), int(tiles))
		if err != nil {
			return err
		}
		for t, c := range counters {
			if c != 0 {
				return fmt.Errorf("%s: counter of tile %d is %d at launch; the kernel needs it 0", l.Name, t, c)
			}
		}
		if partials, err = l.Float32s(l.PtrArg(1), int(chunks*ld)); err != nil {
			return err
		}
	}
	a, err := simGemvRow(l, dt, pro, int(k))
	if err != nil {
		return err
	}
	first := uint64(0) // the matrix's first column among the group's tiles
	for i, n := range ns {
		views, err := simViewsOf(l, []int{5 + i, 5 + gemvGroup + i}, []DType{dt, dt}, []int{int(n), int(k * n)})
		if err != nil {
			return err
		}
		simGemvMatrix(views[0], views[1], a, k, n, rows, chunks, partials, ld, first)
		first += (n + tc - 1) / tc * tc
	}
	return nil
}

// simGemvMatrix computes y = a · b for one matrix of simGemv's group, its partial sums (with
// K split) at column first + col of each chunk's row of partials.
func simGemvMatrix(y, b simTensor, av []float32, k, n, rows, chunks uint64, partials []float32, ld, first uint64) {
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
				partials[c*ld+first+col] = sum
			}
		}
	}
	if chunks == 1 {
		return
	}
	slices := gemvThreads / (32 * 16 / uint64(y.dt.Size()) / 4)
	for col := range n {
		total := float32(0)
		for s := range slices {
			part := float32(0)
			for c := s; c < chunks; c += slices {
				part += partials[c*ld+first+col]
			}
			total += part
		}
		y.setFloat(int64(col), float64(total))
	}
}

// simGemvRow returns the row of k elements a GEMV launch multiplies, as its prologue computes
// it (cuda/gemv.cu): a itself (argument 0); for gemvRMSNorm, h = a + a2 (argument 17, may be
// 0) normalized by 1 / sqrt(mean(h²) + eps) (argument 20) and scaled by gamma (18), each
// element rounded to dt, with h rounded to dt stored into sum (19) when it is not 0; for
// gemvSilu, a · sigmoid(a) · a2 rounded to dt. The mean of squares is summed as gemv_row_inv
// sums it: in float32, each of the block's threads its elements (fused multiply-adds, 16-byte
// packs when k and the addresses allow), each warp its lanes' (warp_reduce), the warps' added
// in warp order; inv = 1/sqrt(fma(total, 1/k, eps)).
func simGemvRow(l *cudadrv.KernelLaunch, dt DType, pro gemvPrologue, k int) ([]float32, error) {
	const a2Arg, gammaArg, sumArg, epsArg = 5 + 3*gemvGroup, 6 + 3*gemvGroup, 7 + 3*gemvGroup, 8 + 3*gemvGroup
	args, dts, lens := []int{0}, []DType{dt}, []int{k}
	if pro != gemvPlain && l.PtrArg(a2Arg) != 0 {
		args, dts, lens = append(args, a2Arg), append(dts, dt), append(lens, k)
	}
	if pro == gemvSilu && len(args) < 2 {
		return nil, fmt.Errorf("%s: the silu prologue needs a2", l.Name)
	}
	if pro == gemvRMSNorm {
		args, dts, lens = append(args, gammaArg), append(dts, dt), append(lens, k)
	}
	v, err := simViewsOf(l, args, dts, lens)
	if err != nil {
		return nil, err
	}
	row := make([]float32, k)
	for i := range row {
		row[i] = float32(v[0].float(int64(i)))
	}
	switch pro {
	case gemvSilu:
		for i, g := range row {
			row[i] = float32(refRoundTo(dt, refSiluMul(float64(g), v[1].float(int64(i)))))
		}
	case gemvRMSNorm:
		gamma := v[len(v)-1]
		if len(v) == 3 {
			for i := range row {
				row[i] += float32(v[1].float(int64(i)))
			}
		}
		if l.PtrArg(sumArg) != 0 {
			sv, err := simViewsOf(l, []int{sumArg}, []DType{dt}, []int{k})
			if err != nil {
				return nil, err
			}
			for i, h := range row {
				sv[0].setFloat(int64(i), float64(h))
			}
		}
		pack := 16 / dt.Size()
		if k%pack != 0 || !simAligned16(l, 0, a2Arg, sumArg) {
			pack = 1
		}
		part := make([]float32, gemvThreads)
		simThreadWalk(k, gemvThreads, pack, func(t, j int) { part[t] = simFMA32(row[j], row[j], part[t]) })
		total := float32(0)
		for w := range gemvWarps {
			total += simWarpReduce(part[32*w:32*w+32], simSumOp)
		}
		inv := simRsqrt(simFMA32(total, 1/float32(k), l.F32Arg(epsArg)))
		for i, h := range row {
			row[i] = float32(refRoundTo(dt, float64(float32(h*inv)*float32(gamma.float(int64(i))))))
		}
	}
	return row, nil
}
