package kernels

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	simKernelSets = append(simKernelSets, func(m map[string]cudadrv.KernelBody) {
		for _, bits := range []int64{4, 8} {
			for _, dt := range floatTypes {
				m[nbitsEntry("gemv", bits, dt)] = func(l *cudadrv.KernelLaunch) error { return simNBitsGemv(l, bits, dt) }
				m[nbitsEntry("dequant", bits, dt)] = func(l *cudadrv.KernelLaunch) error { return simNBitsDequant(l, bits, dt) }
			}
		}
		m[nbitsEntry("mma", 4, Float16)] = simNBitsMMA
	})
}

// simNBitsLayout is what the MatMulNBits kernels derive from K, block_size and bits: blocks a
// column, bytes a column of B and of packed zero points, and the chunks (16 bytes, 128 / bits
// weights) holding a weight below K.
type simNBitsLayout struct {
	k, bs, bits, kBlocks, rowBytes, zpRow, chunks uint64
}

func simNBitsLayoutOf(l *cudadrv.KernelLaunch, k, bs uint64, bits int64, zpMode uint64) (simNBitsLayout, error) {
	if k == 0 || bs < nbitsMinBlock || bs&(bs-1) != 0 || zpMode > uint64(nbitsZPTyped) {
		return simNBitsLayout{}, fmt.Errorf("%s: k %d, block_size %d, zp_mode %d: the kernel needs k > 0, a power-of-two block_size >= 16 and zp_mode 0 to 2", l.Name, k, bs, zpMode)
	}
	b := uint64(bits)
	lay := simNBitsLayout{k: k, bs: bs, bits: b, kBlocks: (k-1)/bs + 1}
	lay.rowBytes = lay.kBlocks * bs * b / 8
	lay.zpRow = (lay.kBlocks*b + 7) / 8
	lay.chunks = (k + 128/b - 1) / (128 / b)
	return lay, nil
}

// simNBitsColumn is one column of B as the kernels see it: per group of 16 weights (ks = 16·g
// below K), the scale and d_j = float(q_j) − zp, both float32.
type simNBitsColumn struct {
	scale []float32
	d     [][16]float32
}

// column reads column col of B (its bytes at row, its scales and zero points in the views; zp
// the packed bytes or the typed view by zpMode, both unused for nbitsZPNone).
func (lay simNBitsLayout) column(row []byte, scales simTensor, zpMode nbitsZP, zpBytes []byte, zpTyped simTensor, col uint64) simNBitsColumn {
	groups := (lay.k + 15) / 16
	c := simNBitsColumn{scale: make([]float32, groups), d: make([][16]float32, groups)}
	for g := range groups {
		kb := 16 * g / lay.bs
		c.scale[g] = float32(scales.float(int64(col*lay.kBlocks + kb)))
		z := float32(int64(1) << (lay.bits - 1))
		switch zpMode {
		case nbitsZPPacked:
			if lay.bits == 4 {
				v := zpBytes[col*lay.zpRow+kb/2]
				z = float32(v & 15)
				if kb&1 == 1 {
					z = float32(v >> 4)
				}
			} else {
				z = float32(zpBytes[col*lay.zpRow+kb])
			}
		case nbitsZPTyped:
			z = float32(zpTyped.float(int64(col*lay.kBlocks + kb)))
		}
		for j := range uint64(16) {
			kk := 16*g + j
			if kk >= lay.k {
				break
			}
			var q byte
			if lay.bits == 4 {
				q = row[kk/2] >> (4 * (kk & 1)) & 15
			} else {
				q = row[kk]
			}
			c.d[g][j] = float32(q) - z
		}
	}
	return c
}

// views returns the views of a matrix's scales and zero points for cols columns from
// column first (ptr arguments scalesArg and zpArg).
func (lay simNBitsLayout) views(l *cudadrv.KernelLaunch, dt DType, scalesArg, zpArg int, zpMode nbitsZP, first, cols uint64) (scales simTensor, zpBytes []byte, zpTyped simTensor, err error) {
	size := uint64(dt.Size())
	if scales, err = simView(l, l.PtrArg(scalesArg)+cudadrv.DevicePtr(first*lay.kBlocks*size), dt, int(cols*lay.kBlocks)); err != nil {
		return
	}
	switch zpMode {
	case nbitsZPPacked:
		zpBytes, err = l.Bytes(l.PtrArg(zpArg)+cudadrv.DevicePtr(first*lay.zpRow), cols*lay.zpRow)
	case nbitsZPTyped:
		zpTyped, err = simView(l, l.PtrArg(zpArg)+cudadrv.DevicePtr(first*lay.kBlocks*size), dt, int(cols*lay.kBlocks))
	}
	return
}

// simNBitsGemv is cudaep_mmnb_gemv_q<bits>_<t>(a, rows, k, block_size, zp_mode, wpc, then
// y_i, b_i, scales_i, zp_i, bias_i, n_i for 3 matrices) (cuda/matmul_nbits.cu), in the
// kernel's float32 operations and order: for each column and row of A, each lane of each of
// the column's wpc warps its chunks (p·32 + lane, (p + wpc)·32 + lane, …) and in each chunk
// its groups of 16 weights below K, p = Σ_j fma(a_j, d_j, p) in j order and acc = fma(p,
// scale, acc); each warp's lanes summed as warp_reduce sums them, the warps' sums added in
// order, then the bias, rounded once on store. It fails the launch where the CUDA kernel would
// go wrong: a block that is not 256 threads, a wpc that is not 1, 2, 4 or 8, a grid that is
// not the group's column tiles × ceil(rows / 8), a matrix after an absent one (n_i = 0).
func simNBitsGemv(l *cudadrv.KernelLaunch, bits int64, dt DType) error {
	if l.Block != (cudadrv.Dim3{X: nbitsThreads, Y: 1, Z: 1}) {
		return fmt.Errorf("%s: block %v: the kernel needs %d threads", l.Name, l.Block, nbitsThreads)
	}
	rows, k, bs, zpMode, wpc := l.U64Arg(1), l.U64Arg(2), l.U64Arg(3), l.U64Arg(4), l.U64Arg(5)
	lay, err := simNBitsLayoutOf(l, k, bs, bits, zpMode)
	if err != nil {
		return err
	}
	if rows == 0 || (wpc != 1 && wpc != 2 && wpc != 4 && wpc != 8) {
		return fmt.Errorf("%s: rows %d, wpc %d: the kernel needs rows > 0 and wpc 1, 2, 4 or 8", l.Name, rows, wpc)
	}
	per := uint64(128/bits) / 16 // groups of 16 a chunk
	var lanes [32]float32
	return simNBitsRun(l, dt, lay, zpMode, rows, (rows+nbitsRows-1)/nbitsRows,
		func(n uint64) uint64 { return uint64(nbitsTiles(int64(n), int64(wpc))) },
		func(c simNBitsColumn, ar []float32) float32 {
			total := float32(0)
			for part := range wpc {
				for lane := range uint64(32) {
					acc := float32(0)
					for ch := part*32 + lane; ch < lay.chunks; ch += wpc * 32 {
						for g := ch * per; g < (ch+1)*per && 16*g < k; g++ {
							p := float32(0)
							for j := uint64(0); j < 16 && 16*g+j < k; j++ {
								p = simFMA32(ar[16*g+j], c.d[g][j], p)
							}
							acc = simFMA32(p, c.scale[g], acc)
						}
					}
					lanes[lane] = acc
				}
				total += simWarpReduce(lanes[:], simSumOp)
			}
			return total
		})
}

// simNBitsMMA is cudaep_mmnb_mma_q4_f16(a, rows, k, block_size, zp_mode, kw, then y_i, b_i,
// scales_i, zp_i, bias_i, n_i for 3 matrices) (cuda/matmul_nbits.cu), in the kernel's float32
// order but for the inside of an mma: for each column and row of A, each of the block's kw
// warps its steps of 256 weights (w, w + kw, …), in each step its blocks in order, a block's
// exact (q − zp)·a products summed in float32 per 32-weight sub-block and the sub-blocks added
// into acc, then total_w = fma(acc, scale, total_w); the warps' totals added in order, then the
// bias, rounded once on store. (The tensor cores sum the 8 products of an mma in an order of
// their own; the bound of the tests covers the difference.) It fails the launch where the CUDA
// kernel would go wrong: a block that is not 32·kw threads for kw 1, 2, 4, 8 or 16, rows not
// 1 to 8, K not a multiple of 32, a block size below 32, unpacked zero points, a grid that is
// not the group's 16-column tiles, a matrix after an absent one.
func simNBitsMMA(l *cudadrv.KernelLaunch) error {
	rows, k, bs, zpMode, kw := l.U64Arg(1), l.U64Arg(2), l.U64Arg(3), l.U64Arg(4), l.U64Arg(5)
	if kw == 0 || kw > nbitsMMAMaxWarps || kw&(kw-1) != 0 || l.Block != (cudadrv.Dim3{X: uint32(32 * kw), Y: 1, Z: 1}) {
		return fmt.Errorf("%s: block %v, kw %d: the kernel needs kw 1, 2, 4, 8 or 16 and 32·kw threads", l.Name, l.Block, kw)
	}
	lay, err := simNBitsLayoutOf(l, k, bs, 4, zpMode)
	if err != nil {
		return err
	}
	if rows == 0 || rows > nbitsRows || k%32 != 0 || bs < 32 || nbitsZP(zpMode) == nbitsZPTyped {
		return fmt.Errorf("%s: rows %d, k %d, block_size %d, zp_mode %d: the kernel needs 1 to 8 rows, k a multiple of 32, block_size >= 32 and zero points absent or packed", l.Name, rows, k, bs, zpMode)
	}
	steps, perStep, subs := (k+nbitsMMAStep-1)/nbitsMMAStep, nbitsMMAStep/bs, bs/32
	return simNBitsRun(l, Float16, lay, zpMode, rows, 1,
		func(n uint64) uint64 { return uint64(nbitsMMATiles(int64(n))) },
		func(c simNBitsColumn, ar []float32) float32 {
			total := float32(0)
			for w := range kw {
				warp := float32(0)
				for st := w; st < steps; st += kw {
					for kb := st * perStep; kb < (st+1)*perStep && kb < lay.kBlocks; kb++ {
						acc := float32(0)
						for sb := kb * subs; sb < (kb+1)*subs && 32*sb < k; sb++ {
							p := float32(0)
							for j := 32 * sb; j < 32*sb+32; j++ {
								p += ar[j] * c.d[j/16][j%16]
							}
							acc += p
						}
						warp = simFMA32(acc, c.scale[kb*bs/16], warp)
					}
				}
				total += warp
			}
			return total
		})
}

// simNBitsRun is what the decode kernels' simulations share, for a launch of lay's layout:
// the group's matrices (n_i of the argument lists, a matrix after an absent one refused), the
// grid (X the matrices' tiles(n_i) summed, Y gridY), A (rows × K, as float32) and for each
// matrix, column and row of A, y = sum(the column, the row of A), plus the bias, rounded once
// on store.
func simNBitsRun(l *cudadrv.KernelLaunch, dt DType, lay simNBitsLayout, zpMode, rows, gridY uint64,
	tiles func(n uint64) uint64, sum func(c simNBitsColumn, ar []float32) float32) error {
	var ns []uint64
	total := uint64(0)
	for i := range nbitsGroup {
		n := l.U64Arg(6 + 6*i + 5)
		if n == 0 {
			continue
		}
		if len(ns) < i {
			return fmt.Errorf("%s: matrix %d (n %d) follows an absent one", l.Name, i, n)
		}
		ns = append(ns, n)
		total += tiles(n)
	}
	if len(ns) == 0 {
		return fmt.Errorf("%s: no matrix (every n_i is 0)", l.Name)
	}
	if uint64(l.Grid.X) != total || uint64(l.Grid.Y) != gridY || l.Grid.Z != 1 {
		return fmt.Errorf("%s: grid %v for n %v and %d rows: want %d × %d", l.Name, l.Grid, ns, rows, total, gridY)
	}
	k := lay.k
	a, err := simView(l, l.PtrArg(0), dt, int(rows*k))
	if err != nil {
		return err
	}
	av := make([]float32, rows*k)
	for i := range av {
		av[i] = float32(a.float(int64(i)))
	}
	for i, n := range ns {
		base := 6 + 6*i
		y, err := simView(l, l.PtrArg(base), dt, int(rows*n))
		if err != nil {
			return err
		}
		b, err := l.Bytes(l.PtrArg(base+1), n*lay.rowBytes)
		if err != nil {
			return err
		}
		scales, zpBytes, zpTyped, err := lay.views(l, dt, base+2, base+3, nbitsZP(zpMode), 0, n)
		if err != nil {
			return err
		}
		var bias simTensor
		hasBias := l.PtrArg(base+4) != 0
		if hasBias {
			if bias, err = simView(l, l.PtrArg(base+4), dt, int(n)); err != nil {
				return err
			}
		}
		for col := range n {
			c := lay.column(b[col*lay.rowBytes:(col+1)*lay.rowBytes], scales, nbitsZP(zpMode), zpBytes, zpTyped, col)
			for m := range rows {
				total := sum(c, av[m*k:(m+1)*k])
				if hasBias {
					total += float32(bias.float(int64(col)))
				}
				y.setFloat(int64(m*n+col), float64(total))
			}
		}
	}
	return nil
}

// simNBitsDequant is cudaep_mmnb_dequant_q<bits>_<t>(w, b, scales, zp, k, block_size, zp_mode,
// n0, nt) (cuda/matmul_nbits.cu): w[j, kk] = round((float(q) − zp) · scale) for column n0 + j
// of B, j < nt and kk < K, in float32. The kernel is a grid-stride loop, correct on any grid.
func simNBitsDequant(l *cudadrv.KernelLaunch, bits int64, dt DType) error {
	k, bs, zpMode, n0, nt := l.U64Arg(4), l.U64Arg(5), l.U64Arg(6), l.U64Arg(7), l.U64Arg(8)
	lay, err := simNBitsLayoutOf(l, k, bs, bits, zpMode)
	if err != nil {
		return err
	}
	if nt == 0 {
		return nil
	}
	w, err := simView(l, l.PtrArg(0), dt, int(nt*k))
	if err != nil {
		return err
	}
	b, err := l.Bytes(l.PtrArg(1)+cudadrv.DevicePtr(n0*lay.rowBytes), nt*lay.rowBytes)
	if err != nil {
		return err
	}
	scales, zpBytes, zpTyped, err := lay.views(l, dt, 2, 3, nbitsZP(zpMode), n0, nt)
	if err != nil {
		return err
	}
	for j := range nt {
		c := lay.column(b[j*lay.rowBytes:(j+1)*lay.rowBytes], scales, nbitsZP(zpMode), zpBytes, zpTyped, j)
		for kk := range k {
			w.setFloat(int64(j*k+kk), float64(c.d[kk/16][kk%16]*c.scale[kk/16]))
		}
	}
	return nil
}
