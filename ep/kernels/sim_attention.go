package kernels

import (
	"fmt"
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	simKernelSets = append(simKernelSets, func(m map[string]cudadrv.KernelBody) {
		for _, dt := range floatTypes {
			m["cudaep_rotary_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simRotary(l, dt) }
			m["cudaep_gqa_append_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simGQAAppend(l, dt) }
			m["cudaep_gqa_decode_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simGQADecode(l, dt) }
			m["cudaep_gqa_prefill_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simGQAPrefill(l, dt) }
			m["cudaep_attn_decode_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simAttnDecode(l, dt) }
			m["cudaep_attn_prefill_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simAttnPrefill(l, dt) }
		}
		for _, dt := range []DType{Float16, BFloat16} {
			for _, d := range flashHeads {
				m[fmt.Sprintf("cudaep_attn_flash%d_%s", d, dt.suffix())] = func(l *cudadrv.KernelLaunch) error { return simAttnFlash(l, dt, int(d)) }
			}
		}
	})
}

// simRotary is cudaep_rotary_<t>(out, x, pos, cos, sin, batch, seq, heads, headSize, rot,
// maxPos, transposed, interleaved, perToken, fault, id): a position outside [0, maxPos) is
// recorded in the fault word (input 1, the value position_ids holds).
func simRotary(l *cudadrv.KernelLaunch, dt DType) error {
	batch, seq, heads, headSize := int(l.U64Arg(5)), int(l.U64Arg(6)), int(l.U64Arg(7)), int(l.U64Arg(8))
	rot, maxPos := int(l.U64Arg(9)), int(l.U64Arg(10))
	transposed, interleaved, perToken := l.U32Arg(11) != 0, l.U32Arg(12) != 0, l.U32Arg(13) != 0
	if rot < 2 || rot%2 != 0 || rot > headSize || maxPos < 1 {
		return fmt.Errorf("%s: rotary dimension %d, head size %d, %d cache rows", l.Name, rot, headSize, maxPos)
	}
	n := batch * seq * heads * headSize
	npos := 1
	if perToken {
		npos = batch * seq
	}
	v, err := simViewsOf(l, []int{0, 1, 2, 3, 4}, []DType{dt, dt, Int64, dt, dt}, []int{n, n, npos, maxPos * rot / 2, maxPos * rot / 2})
	if err != nil {
		return err
	}
	out, x, pos, cosT, sinT := v[0], v[1], v[2], v[3], v[4]
	cos := func(i int) float64 { return cosT.float(int64(i)) }
	sin := func(i int) float64 { return sinT.float(int64(i)) }
	for b := range batch {
		for s := range seq {
			held := pos.int(0)
			p := int64(uint64(held) + uint64(s)) // wrapping, as the kernel's
			if perToken {
				held = pos.int(int64(b*seq + s))
				p = held
			}
			if p < 0 || p >= int64(maxPos) {
				if err := simRecordFault(l, 14, 1, held); err != nil {
					return err
				}
			}
			for h := range heads {
				base := ((b*seq+s)*heads + h) * headSize
				if transposed {
					base = ((b*heads+h)*seq + s) * headSize
				}
				xv := func(i int) float64 { return x.float(int64(base + i)) }
				for i := range headSize {
					out.setFloat(int64(base+i), simRotated(xv, i, rot, interleaved, cos, sin, p, maxPos))
				}
			}
		}
	}
	return nil
}

// simGQAShape is what the GroupQueryAttention kernels share of their arguments.
type simGQAShape struct {
	batch, seq, heads, kvHeads, headSize, capacity, rot, maxPos int
	interleaved                                                 bool
}

// simGQALengths reads seqlens_k (batch values) and total_sequence_length at the pointer
// arguments seqArg and seqArg+1.
func simGQALengths(l *cudadrv.KernelLaunch, seqArg, batch int) ([]int32, int32, error) {
	seqlens, err := l.Int32s(l.PtrArg(seqArg), batch)
	if err != nil {
		return nil, 0, err
	}
	total, err := l.Int32s(l.PtrArg(seqArg+1), 1)
	if err != nil {
		return nil, 0, err
	}
	return seqlens, total[0], nil
}

// simGQACaches returns the cos and sin readers at pointer arguments arg and arg+1 (nil when
// the rotary dimension is 0).
func simGQACaches(l *cudadrv.KernelLaunch, arg int, dt DType, g simGQAShape) (cos, sin func(int) float64, err error) {
	if g.rot == 0 {
		return nil, nil, nil
	}
	if g.rot%2 != 0 || g.rot > g.headSize || g.maxPos < 1 {
		return nil, nil, fmt.Errorf("%s: rotary dimension %d, head size %d, %d cache rows", l.Name, g.rot, g.headSize, g.maxPos)
	}
	v, err := simViewsOf(l, []int{arg, arg + 1}, []DType{dt, dt}, []int{g.maxPos * g.rot / 2, g.maxPos * g.rot / 2})
	if err != nil {
		return nil, nil, err
	}
	return func(i int) float64 { return v[0].float(int64(i)) }, func(i int) float64 { return v[1].float(int64(i)) }, nil
}

// simGQAAppend is cudaep_gqa_append_<t>(pk, pv, pastK, pastV, k, v, seqlens, total, cos, sin,
// batch, kvHeads, seq, headSize, pastCap, cap, rot, maxPos, interleaved, aliased, fault, id),
// which first records the lengths it cannot honour in the fault word (simGQACheck).
func simGQAAppend(l *cudadrv.KernelLaunch, dt DType) error {
	g := simGQAShape{batch: int(l.U64Arg(10)), kvHeads: int(l.U64Arg(11)), seq: int(l.U64Arg(12)), headSize: int(l.U64Arg(13)),
		capacity: int(l.U64Arg(15)), rot: int(l.U64Arg(16)), maxPos: int(l.U64Arg(17)), interleaved: l.U32Arg(18) != 0}
	pastCap, aliased := int(l.U64Arg(14)), l.U32Arg(19) != 0
	D := g.headSize
	present := g.batch * g.kvHeads * g.capacity * D
	newN := g.batch * g.seq * g.kvHeads * D
	pastN := g.batch * g.kvHeads * pastCap * D
	if aliased && (pastCap != g.capacity || l.PtrArg(0) != l.PtrArg(2) || l.PtrArg(1) != l.PtrArg(3)) {
		return fmt.Errorf("%s: aliased, but the past (capacity %d) is not the present (capacity %d)", l.Name, pastCap, g.capacity)
	}
	v, err := simViewsOf(l, []int{0, 1, 4, 5}, []DType{dt, dt, dt, dt}, []int{present, present, newN, newN})
	if err != nil {
		return err
	}
	pk, pv, k, val := v[0], v[1], v[2], v[3]
	var pastK, pastV simTensor
	if !aliased && pastN > 0 {
		views, err := simViewsOf(l, []int{2, 3}, []DType{dt, dt}, []int{pastN, pastN})
		if err != nil {
			return err
		}
		pastK, pastV = views[0], views[1]
	}
	seqlens, total, err := simGQALengths(l, 6, g.batch)
	if err != nil {
		return err
	}
	cos, sin, err := simGQACaches(l, 8, dt, g)
	if err != nil {
		return err
	}
	if err := simGQACheck(l, 20, seqlens, total, g); err != nil {
		return err
	}
	for b := range g.batch {
		past, tot := gqaLengths(seqlens[b], total, g.seq)
		for kvh := range g.kvHeads {
			at := func(p int) int64 { return int64(((b*g.kvHeads+kvh)*g.capacity + p) * D) }
			if !aliased {
				for p := range g.capacity {
					for i := range D {
						dst := at(p) + int64(i)
						switch {
						case int64(p) < past && p < pastCap:
							src := int64(((b*g.kvHeads+kvh)*pastCap+p)*D + i)
							pk.copyElem(dst, pastK, src)
							pv.copyElem(dst, pastV, src)
						case int64(p) < past || int64(p) >= past+int64(g.seq):
							pk.setFloat(dst, 0)
							pv.setFloat(dst, 0)
						}
					}
				}
			}
			for s := range g.seq {
				p := past + int64(s)
				if p < 0 || p >= int64(g.capacity) {
					continue
				}
				src := int64(((b*g.seq+s)*g.kvHeads + kvh) * D)
				kx := func(i int) float64 { return k.float(src + int64(i)) }
				pos := gqaPosition(past, tot, s)
				for i := range D {
					pk.setFloat(at(int(p))+int64(i), simRotated(kx, i, g.rot, g.interleaved, cos, sin, pos, g.maxPos))
					pv.copyElem(at(int(p))+int64(i), val, src+int64(i))
				}
			}
		}
	}
	return nil
}

// simGQACheck is cuda/attention.cu's gqa_check, the fault word at argument arg: the first of
// total_sequence_length outside [1, capacity] (input 6), a seqlens_k outside [0, capacity) or
// below seq − 1 after the first prompt (input 5), a new token's rotary position at or past
// the caches' rows (input 7, the position), in the order the kernel's thread 0 meets them.
func simGQACheck(l *cudadrv.KernelLaunch, arg int, seqlens []int32, total int32, g simGQAShape) error {
	if total < 1 || int(total) > g.capacity {
		if err := simRecordFault(l, arg, 6, int64(total)); err != nil {
			return err
		}
	}
	for b := range g.batch {
		past, tot := gqaLengths(seqlens[b], total, g.seq)
		sk := int64(seqlens[b])
		switch {
		case sk < 0 || sk >= int64(g.capacity) || past < 0:
			if err := simRecordFault(l, arg, 5, sk); err != nil {
				return err
			}
		case g.rot > 0:
			if last := min(past+int64(g.seq)-1, tot-1); last >= int64(g.maxPos) {
				if err := simRecordFault(l, arg, 7, last); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// simGQAAttnArgs reads the arguments the decode and prefill kernels share: (first, q, pk, pv,
// seqlens, total, cos, sin, heads, kvHeads, seq, headSize, cap, rot, maxPos, interleaved,
// scale, last); the batch is the grid's Z extent.
func simGQAAttnArgs(l *cudadrv.KernelLaunch) (simGQAShape, float64, error) {
	g := simGQAShape{batch: int(l.Grid.Z), heads: int(l.U64Arg(8)), kvHeads: int(l.U64Arg(9)), seq: int(l.U64Arg(10)),
		headSize: int(l.U64Arg(11)), capacity: int(l.U64Arg(12)), rot: int(l.U64Arg(13)), maxPos: int(l.U64Arg(14)),
		interleaved: l.U32Arg(15) != 0}
	if l.Block != (cudadrv.Dim3{X: gqaThreads, Y: 1, Z: 1}) {
		return g, 0, fmt.Errorf("%s: block %v: the kernel needs %d threads", l.Name, l.Block, gqaThreads)
	}
	if g.kvHeads < 1 || g.heads%g.kvHeads != 0 || g.headSize < 1 || g.headSize > gqaMaxHead {
		return g, 0, fmt.Errorf("%s: %d heads, %d kv heads, head size %d", l.Name, g.heads, g.kvHeads, g.headSize)
	}
	return g, float64(l.F32Arg(16)), nil
}

// simGQAQuery returns the rotated query row of token s, head h, rounded to dt as the kernels
// round it.
func simGQAQuery(q simTensor, dt DType, g simGQAShape, b, s, h int, pos int64, cos, sin func(int) float64) []float32 {
	base := int64(((b*g.seq+s)*g.heads + h) * g.headSize)
	qx := func(i int) float64 { return q.float(base + int64(i)) }
	row := make([]float32, g.headSize)
	for i := range row {
		row[i] = float32(refRoundTo(dt, simRotated(qx, i, g.rot, g.interleaved, cos, sin, pos, g.maxPos)))
	}
	return row
}

// simRotated is cuda/attention.cu's rotated: element i of a head vector (x(i) reads element
// i, a value of the data type) at position pos, rotated in float32 (x_i·cos + (±x_j)·sin,
// one fused multiply-add) when i < rot, NaN for a position outside the maxPos cache rows.
func simRotated(x func(int) float64, i, rot int, interleaved bool, cos, sin func(int) float64, pos int64, maxPos int) float64 {
	if i >= rot {
		return x(i)
	}
	if pos < 0 || pos >= int64(maxPos) {
		return math.NaN()
	}
	half := rot / 2
	c, j, sign := i, i+half, float32(-1)
	switch {
	case interleaved && i%2 == 0:
		c, j = i/2, i+1
	case interleaved:
		c, j, sign = i/2, i-1, 1
	case i >= half:
		c, j, sign = i-half, i-half, 1
	}
	row := int(pos) * half
	return float64(simFMA32(float32(x(i)), float32(cos(row+c)), float32(sign*float32(x(j)))*float32(sin(row+c))))
}

// simExp is expf (through float64: within the device's ulps, and never of another class).
func simExp(x float32) float32 { return float32(math.Exp(float64(x))) }

// simNegInf is float32 −∞, the kernels' NEG_INF.
var simNegInf = float32(math.Inf(-1))

// simAttnState is a running softmax of the attention kernels: the maximum score m, the sum l
// of exp(score − m) and the sums acc of exp(score − m)·value, in float32.
type simAttnState struct {
	m, l float32
	acc  []float32
}

// reset empties the state for n value dimensions.
func (st *simAttnState) reset(n int) {
	st.m, st.l = simNegInf, 0
	if cap(st.acc) < n {
		st.acc = make([]float32, n)
	}
	st.acc = st.acc[:n]
	clear(st.acc)
}

// simWritePartial is attn_write_partial: the warps' states merged into out (the maximum, the
// sum of exponentials, then n weighted sums), as the kernel merges them.
func simWritePartial(out []float32, warps []simAttnState, n int) {
	M := simNegInf
	for _, w := range warps {
		M = simFmaxf(M, w.m)
	}
	var wt [gqaThreads / 32]float32
	L := float32(0)
	for i, w := range warps {
		if w.m != simNegInf {
			wt[i] = simExp(w.m - M)
		}
		L = simFMA32(w.l, wt[i], L)
	}
	out[0], out[1] = M, L
	for d := range n {
		a := float32(0)
		for i, w := range warps {
			a = simFMA32(w.acc[d], wt[i], a)
		}
		out[2+d] = a
	}
}

// simLaneDot is the dot product of GroupQueryAttention's decode blocks: lane l of a warp sums
// (fused) the products of dimensions l, l + 32, …, and the warp adds its lanes' sums
// (warp_reduce).
func simLaneDot(q []float32, k func(d int) float32) float32 {
	var lanes [32]float32
	for lane := range lanes {
		for d := lane; d < len(q); d += 32 {
			lanes[lane] = simFMA32(q[d], k(d), lanes[lane])
		}
	}
	return simWarpReduce(lanes[:], simSumOp)
}

// simGQAViews returns the views of q, the present key and value caches and the rotary caches.
func simGQAViews(l *cudadrv.KernelLaunch, dt DType, g simGQAShape) (q, pk, pv simTensor, cos, sin func(int) float64, err error) {
	present := g.batch * g.kvHeads * g.capacity * g.headSize
	v, err := simViewsOf(l, []int{1, 2, 3}, []DType{dt, dt, dt}, []int{g.batch * g.seq * g.heads * g.headSize, present, present})
	if err != nil {
		return
	}
	cos, sin, err = simGQACaches(l, 6, dt, g)
	return v[0], v[1], v[2], cos, sin, err
}

// simGQADecode is cudaep_gqa_decode_<t>(part, q, pk, pv, seqlens, total, cos, sin, heads,
// kvHeads, seq, headSize, cap, rot, maxPos, interleaved, scale, splits, out, counters), grid
// (splits, seq * heads, batch): each block's partial result (max, sum of exponentials,
// weighted values) of its even share of the keys, as the kernel splits them, then every row's
// reduce into out (simCountersZero, simSplitRows).
func simGQADecode(l *cudadrv.KernelLaunch, dt DType) error {
	g, scale, err := simGQAAttnArgs(l)
	if err != nil {
		return err
	}
	splits := int(l.U32Arg(17))
	if splits < 1 || int(l.Grid.X) != splits || int(l.Grid.Y) != g.seq*g.heads {
		return fmt.Errorf("%s: grid %v for %d splits, %d tokens of %d heads", l.Name, l.Grid, splits, g.seq, g.heads)
	}
	D := g.headSize
	rows := g.batch * g.seq * g.heads
	part, err := l.Float32s(l.PtrArg(0), rows*splits*(D+2))
	if err != nil {
		return err
	}
	if err := simCountersZero(l, 19, rows); err != nil {
		return err
	}
	q, pk, pv, cos, sin, err := simGQAViews(l, dt, g)
	if err != nil {
		return err
	}
	seqlens, total, err := simGQALengths(l, 4, g.batch)
	if err != nil {
		return err
	}
	warps := make([]simAttnState, gqaThreads/32)
	for b := range g.batch {
		past, tot := gqaLengths(seqlens[b], total, g.seq)
		for s := range g.seq {
			end := gqaKeyEnd(past, tot, s, g.capacity)
			chunk := (end + splits - 1) / splits
			for h := range g.heads {
				qr := simGQAQuery(q, dt, g, b, s, h, gqaPosition(past, tot, s), cos, sin)
				base := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.capacity * D)
				for sp := range splits {
					// Warp w takes keys start + w, start + w + 4, … with a running softmax of
					// its own, in the kernel's float32 operations.
					start, stop := sp*chunk, min(sp*chunk+chunk, end)
					for w := range warps {
						st := &warps[w]
						st.reset(D)
						for j := start + w; j < stop; j += len(warps) {
							row := base + int64(j*D)
							sc := simLaneDot(qr, func(d int) float32 { return float32(pk.float(row + int64(d))) }) * float32(scale)
							mn := simFmaxf(st.m, sc)
							corr, p := simExp(st.m-mn), simExp(sc-mn)
							st.l = simFMA32(st.l, corr, p)
							for d := range D {
								st.acc[d] = simFMA32(st.acc[d], corr, p*float32(pv.float(row+int64(d))))
							}
							st.m = mn
						}
					}
					simWritePartial(part[(((b*g.seq+s)*g.heads+h)*splits+sp)*(D+2):], warps, D)
				}
			}
		}
	}
	return simSplitRows(l, dt, l.PtrArg(18), part, rows, D, splits, 0)
}

// simCountersZero fails a split decode launch whose counters (argument arg, one per row) are
// not all zero at launch: a launch that did not finish, or another kernel writing them. The
// kernel's last blocks leave them zero, and so do the simulated kernels, which never touch
// them.
func simCountersZero(l *cudadrv.KernelLaunch, arg, rows int) error {
	counters, err := l.Uint32s(l.PtrArg(arg), rows)
	if err != nil {
		return err
	}
	for r, c := range counters {
		if c != 0 {
			return fmt.Errorf("%s: counter of row %d is %d at launch; the kernel needs it 0", l.Name, r, c)
		}
	}
	return nil
}

// simSplitRows is split_finish's reduce of every row (cuda/attention.cu's split_reduce_row):
// the splits' partial results of each of rows rows (part) combined into out, rows of D
// elements of dt, a row without weight (all of its keys masked) being empty (GroupQueryAttention
// 0, Attention NaN). In the kernel's float32 order: lane j of warp 0 takes splits j, j + 32, …
// for the maximum M and the weighted sum L (warp trees), and dimension d adds the splits in
// groups of the block's threads (split g, g + G, …), the groups in order.
func simSplitRows(l *cudadrv.KernelLaunch, dt DType, at cudadrv.DevicePtr, part []float32, rows, D, splits int, empty float64) error {
	out, err := simView(l, at, dt, rows*D)
	if err != nil {
		return err
	}
	groups := 1
	if D < gqaThreads {
		groups = gqaThreads / D
	}
	w := make([]float32, splits)
	var lanes [32]float32
	for r := range rows {
		pr := part[r*splits*(D+2):]
		for i := range lanes {
			lanes[i] = simNegInf
		}
		for sp := range splits {
			lanes[sp%32] = simFmaxf(lanes[sp%32], pr[sp*(D+2)])
		}
		M := simWarpReduce(lanes[:], simFmaxf)
		clear(lanes[:])
		for sp := range splits {
			w[sp] = 0
			if m := pr[sp*(D+2)]; m != simNegInf {
				w[sp] = simExp(m - M)
			}
			lanes[sp%32] = simFMA32(pr[sp*(D+2)+1], w[sp], lanes[sp%32])
		}
		L := simWarpReduce(lanes[:], simSumOp)
		for d := range D {
			total := float32(0)
			for g := range groups {
				a := float32(0)
				for sp := g; sp < splits; sp += groups {
					a = simFMA32(pr[sp*(D+2)+2+d], w[sp], a)
				}
				if g == 0 {
					total = a
				} else {
					total += a
				}
			}
			v := empty
			if L > 0 {
				v = float64(total / L)
			}
			out.setFloat(int64(r*D+d), v)
		}
	}
	return nil
}

// simGQAPrefill is cudaep_gqa_prefill_<t>(out, q, pk, pv, seqlens, total, cos, sin, heads,
// kvHeads, seq, headSize, cap, rot, maxPos, interleaved, scale, keyTile), grid
// (ceil(seq / 16), heads, batch): every query row's attention over the keys it sees. It checks
// the grid and that the dynamic shared memory covers the kernel's tiles.
func simGQAPrefill(l *cudadrv.KernelLaunch, dt DType) error {
	g, scale, err := simGQAAttnArgs(l)
	if err != nil {
		return err
	}
	bk := int(l.U32Arg(17))
	D := g.headSize
	need := 4 * (gqaPrefillTile*D + bk*(D+1) + bk*D + gqaPrefillTile*32)
	if bk < 1 || bk > 32 || int(l.SharedMem) < need || need > gqaSharedLimit {
		return fmt.Errorf("%s: key tile %d with %d bytes of shared memory (the tiles need %d)", l.Name, bk, l.SharedMem, need)
	}
	if int(l.Grid.X) != (g.seq+gqaPrefillTile-1)/gqaPrefillTile || int(l.Grid.Y) != g.heads {
		return fmt.Errorf("%s: grid %v for %d tokens of %d heads", l.Name, l.Grid, g.seq, g.heads)
	}
	out, err := simView(l, l.PtrArg(0), dt, g.batch*g.seq*g.heads*D)
	if err != nil {
		return err
	}
	q, pk, pv, cos, sin, err := simGQAViews(l, dt, g)
	if err != nil {
		return err
	}
	seqlens, total, err := simGQALengths(l, 4, g.batch)
	if err != nil {
		return err
	}
	var st simAttnState
	var sc, p [32]float32
	for b := range g.batch {
		past, tot := gqaLengths(seqlens[b], total, g.seq)
		for s := range g.seq {
			end := gqaKeyEnd(past, tot, s, g.capacity)
			s0 := s / gqaPrefillTile * gqaPrefillTile
			kmax := gqaKeyEnd(past, tot, min(s0+gqaPrefillTile, g.seq)-1, g.capacity) // the block's last row's
			for h := range g.heads {
				qr := simGQAQuery(q, dt, g, b, s, h, gqaPosition(past, tot, s), cos, sin)
				base := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.capacity * D)
				st.reset(D)
				// Tiles of bk keys up to the block's end: lane j scores key kt + j (a fused
				// dot product in order), the tile's maximum (NaN wins) and sum are warp trees.
				for kt := 0; kt < kmax; kt += bk {
					for lane := range sc {
						sc[lane] = simNegInf
						if key := kt + lane; lane < bk && key < end {
							dot := float32(0)
							for d := range D {
								dot = simFMA32(qr[d], float32(pk.float(base+int64(key*D+d))), dot)
							}
							sc[lane] = dot * float32(scale)
						}
					}
					mn := simFmaxf(st.m, simWarpReduce(sc[:], simMaxOp))
					for lane := range p {
						p[lane] = 0
						if sc[lane] != simNegInf {
							p[lane] = simExp(sc[lane] - mn)
						}
					}
					corr := float32(0)
					if st.m != simNegInf {
						corr = simExp(st.m - mn)
					}
					st.l = simFMA32(st.l, corr, simWarpReduce(p[:], simSumOp))
					for d := range st.acc {
						st.acc[d] *= corr
					}
					st.m = mn
					for j := range bk {
						if key := kt + j; key < kmax { // staged values past kmax are 0
							for d := range D {
								st.acc[d] = simFMA32(p[j], float32(pv.float(base+int64(key*D+d))), st.acc[d])
							}
						}
					}
				}
				inv := float32(0)
				if st.l > 0 {
					inv = 1 / st.l
				}
				dst := int64(((b*g.seq+s)*g.heads + h) * D)
				for d := range D {
					out.setFloat(dst+int64(d), float64(st.acc[d]*inv))
				}
			}
		}
	}
	return nil
}

// simAttnShape is what the Attention kernels share of their arguments: (first, q, k, v, mask,
// heads, kvHeads, seq, kvSeq, dk, dv, maskStrides[4], maskKind, causal, scale, last), the
// batch being the grid's Z extent.
type simAttnShape struct {
	batch, heads, kvHeads, seq, kvSeq, dk, dv int
	maskStrides                               [4]int64
	maskKind                                  uint32
	causal                                    bool
	scale                                     float64
}

// simAttnArgs reads and checks the shared arguments and the block.
func simAttnArgs(l *cudadrv.KernelLaunch) (simAttnShape, error) {
	g := simAttnShape{batch: int(l.Grid.Z), heads: int(l.U64Arg(5)), kvHeads: int(l.U64Arg(6)), seq: int(l.U64Arg(7)),
		kvSeq: int(l.U64Arg(8)), dk: int(l.U64Arg(9)), dv: int(l.U64Arg(10)), maskKind: l.U32Arg(15),
		causal: l.U32Arg(16) != 0, scale: float64(l.F32Arg(17))}
	for i := range g.maskStrides {
		g.maskStrides[i] = l.I64Arg(11 + i)
	}
	if l.Block != (cudadrv.Dim3{X: gqaThreads, Y: 1, Z: 1}) {
		return g, fmt.Errorf("%s: block %v: the kernel needs %d threads", l.Name, l.Block, gqaThreads)
	}
	switch {
	case g.kvHeads < 1 || g.heads%g.kvHeads != 0 || g.seq < 1 || g.kvSeq < 1:
		return g, fmt.Errorf("%s: %d heads, %d kv heads, %d rows, %d keys", l.Name, g.heads, g.kvHeads, g.seq, g.kvSeq)
	case g.dk < 1 || g.dk > gqaMaxHead || g.dv < 1 || g.dv > gqaMaxHead:
		return g, fmt.Errorf("%s: head sizes %d and %d", l.Name, g.dk, g.dv)
	case g.maskKind > attnBoolMask || l.U32Arg(16) > 1:
		return g, fmt.Errorf("%s: mask kind %d, causal %d", l.Name, g.maskKind, l.U32Arg(16))
	}
	return g, nil
}

// simAttnInputs returns views of q, k and v and the mask's term of (b, h, s, j).
func simAttnInputs(l *cudadrv.KernelLaunch, dt DType, g simAttnShape) (q, k, v simTensor, bias func(b, h, s, j int) float32, err error) {
	views, err := simViewsOf(l, []int{1, 2, 3}, []DType{dt, dt, dt},
		[]int{g.batch * g.heads * g.seq * g.dk, g.batch * g.kvHeads * g.kvSeq * g.dk, g.batch * g.kvHeads * g.kvSeq * g.dv})
	if err != nil {
		return
	}
	q, k, v = views[0], views[1], views[2]
	bias = func(int, int, int, int) float32 { return 0 }
	if g.maskKind == attnNoMask {
		return
	}
	extent := int64(1)
	for i, d := range []int{g.batch, g.heads, g.seq, g.kvSeq} {
		if g.maskStrides[i] < 0 {
			return q, k, v, nil, fmt.Errorf("%s: negative mask stride", l.Name)
		}
		extent += int64(d-1) * g.maskStrides[i]
	}
	mdt := dt
	if g.maskKind == attnBoolMask {
		mdt = Bool
	}
	mask, err := simView(l, l.PtrArg(4), mdt, int(extent))
	if err != nil {
		return
	}
	st := g.maskStrides
	bias = func(b, h, s, j int) float32 {
		i := int64(b)*st[0] + int64(h)*st[1] + int64(s)*st[2] + int64(j)*st[3]
		if g.maskKind == attnAddMask {
			return float32(mask.float(i))
		}
		if mask.b8[i] != 0 {
			return 0
		}
		return simNegInf
	}
	return
}

// simAttnRow returns query row s of head h of batch b as float32, and the reader of element d
// of key j of its kv head.
func simAttnRow(q, k simTensor, g simAttnShape, b, h, s int) ([]float32, func(j, d int) float32) {
	qb := int64(((b*g.heads+h)*g.seq + s) * g.dk)
	kb := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.kvSeq * g.dk)
	qr := make([]float32, g.dk)
	for d := range qr {
		qr[d] = float32(q.float(qb + int64(d)))
	}
	return qr, func(j, d int) float32 { return float32(k.float(kb + int64(j*g.dk+d))) }
}

// simAttnDecode is cudaep_attn_decode_<t>(part, q, k, v, mask, heads, kvHeads, seq, kvSeq, dk,
// dv, maskStrides[4], maskKind, causal, scale, splits, out, counters), grid (splits, heads *
// seq, batch): each block's partial result (max, sum of exponentials, weighted values) of its
// share of the keys, whole tiles of 32 as the kernel splits them, then every row's reduce into
// out (simCountersZero, simSplitRows).
func simAttnDecode(l *cudadrv.KernelLaunch, dt DType) error {
	g, err := simAttnArgs(l)
	if err != nil {
		return err
	}
	splits := int(l.U32Arg(18))
	if splits < 1 || int(l.Grid.X) != splits || int(l.Grid.Y) != g.heads*g.seq {
		return fmt.Errorf("%s: grid %v for %d splits, %d rows of %d heads", l.Name, l.Grid, splits, g.seq, g.heads)
	}
	rows := g.batch * g.heads * g.seq
	part, err := l.Float32s(l.PtrArg(0), rows*splits*(g.dv+2))
	if err != nil {
		return err
	}
	if err := simCountersZero(l, 20, rows); err != nil {
		return err
	}
	q, k, v, bias, err := simAttnInputs(l, dt, g)
	if err != nil {
		return err
	}
	// The kernel's path (attn_decode_split): a group of lanes per key when both rows are whole
	// 16-byte packs (at most 32 of them, a power of two) of aligned tensors, else a lane per key.
	vsz := 16 / dt.Size()
	groups := g.dk / vsz
	packed := g.dk%vsz == 0 && simAligned16(l, 2) && g.dv == g.dk && simAligned16(l, 3) && groups <= 32 && groups&(groups-1) == 0
	warps := make([]simAttnState, gqaThreads/32)
	for b := range g.batch {
		for h := range g.heads {
			vb := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.kvSeq * g.dv)
			val := func(j, d int) float32 { return float32(v.float(vb + int64(j*g.dv+d))) }
			for s := range g.seq {
				end := attnKeys(s, g.kvSeq, g.causal)
				chunk := ((end+splits-1)/splits + 31) / 32 * 32
				qr, key := simAttnRow(q, k, g, b, h, s)
				bj := func(j int) float32 { return bias(b, h, s, j) }
				for sp := range splits {
					start, stop := sp*chunk, min(sp*chunk+chunk, end)
					for w := range warps {
						if packed {
							simAttnDecodePacked(&warps[w], qr, key, val, bj, w, start, stop, vsz, float32(g.scale))
						} else {
							simAttnDecodeLanes(&warps[w], qr, key, val, bj, w, start, stop, g.dv, float32(g.scale))
						}
					}
					simWritePartial(part[(((b*g.heads+h)*g.seq+s)*splits+sp)*(g.dv+2):], warps, g.dv)
				}
			}
		}
	}
	return simSplitRows(l, dt, l.PtrArg(19), part, rows, g.dv, splits, math.NaN())
}

// simAttnDot is attn_dot: the query with one key row, fused products in order.
func simAttnDot(q []float32, key func(j, d int) float32, j int) float32 {
	dot := float32(0)
	for d, x := range q {
		dot = simFMA32(x, key(j, d), dot)
	}
	return dot
}

// simAttnDecodeLanes is warp w's share of attn_decode_split's lane-per-key loop over keys
// [start, stop): tiles of 32 keys, every 4th one the warp's, each scored by a lane, the running
// softmax updated once per tile with the tile's maximum (NaN wins) and sum (warp trees), a
// tile whose maximum is −∞ skipped.
func simAttnDecodeLanes(st *simAttnState, q []float32, key, val func(j, d int) float32, bias func(j int) float32, w, start, stop, dv int, scale float32) {
	st.reset(dv)
	var sc, p [32]float32
	for j0 := start + 32*w; j0 < stop; j0 += 32 * gqaThreads / 32 {
		for lane := range sc {
			sc[lane] = simNegInf
			if j := j0 + lane; j < stop {
				sc[lane] = simFMA32(simAttnDot(q, key, j), scale, bias(j))
			}
		}
		mn := simMaxOp(st.m, simWarpReduce(sc[:], simMaxOp))
		if mn == simNegInf {
			continue
		}
		for lane := range p {
			p[lane] = simExp(sc[lane] - mn)
		}
		corr := simExp(st.m - mn)
		st.l = simFMA32(st.l, corr, simWarpReduce(p[:], simSumOp))
		st.m = mn
		for d := range st.acc {
			st.acc[d] *= corr
		}
		for jj := range min(stop-j0, 32) {
			for d := range dv {
				st.acc[d] = simFMA32(p[jj], val(j0+jj, d), st.acc[d])
			}
		}
	}
}

// simAttnDecodePacked is warp w's share of attn_decode_packed over keys [start, stop), rows of
// n = len(q) elements in packs of vsz: G = n / vsz lanes hold a key (each its pack's products,
// fused in order, then a tree over the G lanes), the warp's 32 / G groups each keep a running
// softmax over their keys (two steps of keys per loop), and the groups merge by xor shuffles;
// st gets group 0's merged state, as the kernel's lane 0 and lanes below G hold it.
func simAttnDecodePacked(st *simAttnState, q []float32, key, val func(j, d int) float32, bias func(j int) float32, w, start, stop, vsz int, scale float32) {
	n := len(q)
	G := n / vsz
	per := 32 / G
	step := per * gqaThreads / 32
	groups := make([]simAttnState, per)
	for i := range groups {
		groups[i].reset(n)
	}
	lanes := make([]float32, G)
	for j0 := start + w*per; j0 < stop; j0 += 2 * step {
		for u := range 2 {
			for slot := range groups {
				j := j0 + u*step + slot
				sc := simNegInf
				if j < stop {
					for pk := range lanes {
						lanes[pk] = 0
						for e := range vsz {
							lanes[pk] = simFMA32(q[pk*vsz+e], key(j, pk*vsz+e), lanes[pk])
						}
					}
					for o := G / 2; o > 0; o /= 2 {
						next := make([]float32, G)
						for i := range lanes {
							next[i] = lanes[i] + lanes[i^o]
						}
						copy(lanes, next)
					}
					sc = simFMA32(lanes[0], scale, bias(j))
				}
				g := &groups[slot]
				mn := simFmaxf(g.m, sc)
				if mn == simNegInf {
					continue
				}
				corr, p := float32(0), float32(0)
				if g.m != simNegInf {
					corr = simExp(g.m - mn)
				}
				if sc != simNegInf {
					p = simExp(sc - mn)
				}
				g.l = simFMA32(g.l, corr, p)
				for d := range n {
					pv := float32(0)
					if p != 0 {
						pv = p * val(j, d)
					}
					g.acc[d] = simFMA32(g.acc[d], corr, pv)
				}
				g.m = mn
			}
		}
	}
	// Merge the groups: at lane offsets G, 2G, … (group offsets 1, 2, …) every group combines
	// with its partner's state of the step before.
	for o := 1; o < per; o *= 2 {
		next := make([]simAttnState, per)
		for i := range groups {
			a, b := groups[i], groups[i^o]
			M := simFmaxf(a.m, b.m)
			c1, c2 := float32(0), float32(0)
			if a.m != simNegInf {
				c1 = simExp(a.m - M)
			}
			if b.m != simNegInf {
				c2 = simExp(b.m - M)
			}
			next[i] = simAttnState{m: M, l: simFMA32(a.l, c1, b.l*c2), acc: make([]float32, n)}
			for d := range n {
				next[i].acc[d] = simFMA32(a.acc[d], c1, b.acc[d]*c2)
			}
		}
		groups = next
	}
	st.m, st.l = groups[0].m, groups[0].l
	st.acc = append(st.acc[:0], groups[0].acc...)
}

// simAttnPrefill is cudaep_attn_prefill_<t>(out, q, k, v, mask, heads, kvHeads, seq, kvSeq,
// dk, dv, maskStrides[4], maskKind, causal, scale, keyTile), grid (ceil(seq / 16), heads,
// batch): every query row's attention over the keys it sees (NaN for a row whose keys are
// all masked). It checks the grid and that the dynamic shared memory covers the kernel's
// tiles.
func simAttnPrefill(l *cudadrv.KernelLaunch, dt DType) error {
	g, err := simAttnArgs(l)
	if err != nil {
		return err
	}
	bk := int(l.U32Arg(18))
	need := 4 * (gqaPrefillTile*g.dk + bk*int(attnKeyStride(int64(g.dk))) + bk*g.dv + gqaPrefillTile*32)
	if bk < 1 || bk > 32 || int(l.SharedMem) < need || need > gqaSharedLimit {
		return fmt.Errorf("%s: key tile %d with %d bytes of shared memory (the tiles need %d)", l.Name, bk, l.SharedMem, need)
	}
	out, q, k, v, bias, err := simAttnPrefillViews(l, dt, g, gqaPrefillTile)
	if err != nil {
		return err
	}
	for b := range g.batch {
		for h := range g.heads {
			vb := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.kvSeq * g.dv)
			val := func(j, d int) float32 { return float32(v.float(vb + int64(j*g.dv+d))) }
			for s0 := 0; s0 < g.seq; s0 += gqaPrefillTile {
				y := simAttnPrefillBlock(q, k, val, bias, g, b, h, s0, bk)
				for r, row := range y {
					dst := int64(((b*g.heads+h)*g.seq + s0 + r) * g.dv)
					for d, x := range row {
						out.setFloat(dst+int64(d), float64(x))
					}
				}
			}
		}
	}
	return nil
}

// simAttnPrefillViews checks a prefill launch's grid (ceil(seq / rows), heads, batch) for
// blocks of rows query rows and returns its output's view and simAttnInputs'.
func simAttnPrefillViews(l *cudadrv.KernelLaunch, dt DType, g simAttnShape, rows int) (out, q, k, v simTensor, bias func(b, h, s, j int) float32, err error) {
	if int(l.Grid.X) != (g.seq+rows-1)/rows || int(l.Grid.Y) != g.heads {
		err = fmt.Errorf("%s: grid %v for %d rows of %d heads", l.Name, l.Grid, g.seq, g.heads)
		return
	}
	if out, err = simView(l, l.PtrArg(0), dt, g.batch*g.heads*g.seq*g.dv); err != nil {
		return
	}
	q, k, v, bias, err = simAttnInputs(l, dt, g)
	return
}

// simAttnPrefillBlock is attn_prefill's block of query rows s0 … s0+15 (those below seq) of head
// h: it returns their outputs. Tiles of bk keys up to the block's last row's end; a tile is
// skipped when no row needs it (past every row's end, or with a mask when every row that sees
// it has a maximum above −1e29 and the mask gives none of its keys more than −1e30). Lane j
// scores key kt + j for the warp's 4 rows (the query's and key's products fused by 4 when dk
// is a multiple of 4, else in order), each row's running softmax takes the tile's maximum (NaN
// wins) and sum, and a warp whose weights are all 0 in a tile adds no values.
func simAttnPrefillBlock(q, k simTensor, val func(j, d int) float32, bias func(b, h, s, j int) float32, g simAttnShape, b, h, s0, bk int) [][]float32 {
	const rowsPerWarp = gqaPrefillTile / (gqaThreads / 32)
	rows := min(gqaPrefillTile, g.seq-s0)
	kmax := attnKeys(s0+rows-1, g.kvSeq, g.causal)
	qs := make([][]float32, rows)
	kend := make([]int, gqaPrefillTile)
	st := make([]simAttnState, gqaPrefillTile)
	var key func(j, d int) float32
	for r := range gqaPrefillTile {
		st[r].reset(g.dv)
		if r < rows {
			qs[r], key = simAttnRow(q, k, g, b, h, s0+r)
			kend[r] = attnKeys(s0+r, g.kvSeq, g.causal)
		}
	}
	dot := func(qr []float32, j int) float32 {
		acc := float32(0)
		if g.dk%4 == 0 {
			for d := 0; d < g.dk; d += 4 {
				t := simFMA32(qr[d+3], key(j, d+3), simFMA32(qr[d+2], key(j, d+2), simFMA32(qr[d], key(j, d), qr[d+1]*key(j, d+1))))
				acc += t
			}
			return acc
		}
		for d, x := range qr {
			acc = simFMA32(x, key(j, d), acc)
		}
		return acc
	}
	var p [gqaPrefillTile][32]float32
	var sc [32]float32
	for kt := 0; kt < kmax; kt += bk {
		need := false
		for r := range rows {
			if kt >= kend[r] {
				continue
			}
			if g.maskKind == attnNoMask || !(st[r].m > -1e29) {
				need = true
			}
			for lane := 0; lane < bk && !need; lane++ {
				need = kt+lane < kend[r] && bias(b, h, s0+r, kt+lane) > -1e30
			}
		}
		if !need {
			continue
		}
		for w := range gqaThreads / 32 {
			any := false
			for r := w * rowsPerWarp; r < (w+1)*rowsPerWarp; r++ {
				for lane := range sc {
					sc[lane] = simNegInf
					if j := kt + lane; r < rows && lane < bk && j < kend[r] {
						sc[lane] = simFMA32(dot(qs[r], j), float32(g.scale), bias(b, h, s0+r, j))
					}
				}
				mn := simMaxOp(st[r].m, simWarpReduce(sc[:], simMaxOp))
				clear(p[r][:])
				if mn != simNegInf {
					for lane := range sc {
						p[r][lane] = simExp(sc[lane] - mn)
					}
					corr := simExp(st[r].m - mn)
					st[r].l = simFMA32(st[r].l, corr, simWarpReduce(p[r][:], simSumOp))
					for d := range st[r].acc {
						st[r].acc[d] *= corr
					}
					st[r].m = mn
				}
				for _, x := range p[r] {
					any = any || x != 0
				}
			}
			if !any {
				continue
			}
			for j := range bk {
				for d := range g.dv {
					vd := float32(0) // staged values past kmax are 0
					if kt+j < kmax {
						vd = val(kt+j, d)
					}
					for r := w * rowsPerWarp; r < (w+1)*rowsPerWarp; r++ {
						st[r].acc[d] = simFMA32(p[r][j], vd, st[r].acc[d])
					}
				}
			}
		}
	}
	out := make([][]float32, rows)
	for r := range out {
		out[r] = make([]float32, g.dv)
		for d := range out[r] {
			out[r][d] = float32(math.NaN())
			if st[r].l > 0 {
				out[r][d] = st[r].acc[d] / st[r].l
			}
		}
	}
	return out
}

// simAttnFlash is cudaep_attn_flash<D>_<t>(out, q, k, v, mask, heads, kvHeads, seq, kvSeq, dk,
// dv, maskStrides[4], maskKind, causal, scale), grid (ceil(seq / 64), heads, batch): every
// query row's attention over the keys it sees in tiles of 64 (cuda/flash_attention.cu). Each
// tile's scores (the dot product in float32, then · scale + the mask's term, fused), the row's
// running maximum (NaN wins) and sum rescaled once a tile, and the weights p added to the
// values as p_hi·v + p_lo·v, p_hi = p rounded to the dtype and p_lo what rounding left,
// rounded too. The tiles the kernel skips (see there) add nothing to a row whose state they
// leave unchanged, so every tile is walked here. It checks the grid, the head sizes and that
// the dynamic shared memory covers Q's rows and a tile of K and V.
func simAttnFlash(l *cudadrv.KernelLaunch, dt DType, D int) error {
	g, err := simAttnArgs(l)
	if err != nil {
		return err
	}
	if g.dk != D || g.dv != D {
		return fmt.Errorf("%s: head sizes %d and %d for a kernel of %d", l.Name, g.dk, g.dv, D)
	}
	if need := (flashRows + 2*flashKeys) * D * 2; int(l.SharedMem) < need {
		return fmt.Errorf("%s: %d bytes of shared memory (the tiles need %d)", l.Name, l.SharedMem, need)
	}
	out, q, k, v, bias, err := simAttnPrefillViews(l, dt, g, flashRows)
	if err != nil {
		return err
	}
	round := func(x float32) float32 { return cudadrv.BFloat16Value(cudadrv.BFloat16Bits(x)) }
	if dt == Float16 {
		round = func(x float32) float32 { return cudadrv.Float16Value(cudadrv.Float16Bits(x)) }
	}
	var st simAttnState
	var sc, p [flashKeys]float32
	for b := range g.batch {
		for h := range g.heads {
			vb := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.kvSeq * g.dv)
			for s := range g.seq {
				qr, key := simAttnRow(q, k, g, b, h, s)
				end := attnKeys(s, g.kvSeq, g.causal)
				st.reset(D)
				for kt := 0; kt < end; kt += flashKeys {
					mx := simNegInf
					for j := range sc {
						sc[j] = simNegInf
						if kt+j < end {
							sc[j] = simFMA32(simAttnDot(qr, key, kt+j), float32(g.scale), bias(b, h, s, kt+j))
						}
						mx = simMaxOp(mx, sc[j])
					}
					mn := simMaxOp(st.m, mx)
					corr := simAttnWeight(st.m, mn)
					st.m, st.l = mn, st.l*corr
					for d := range st.acc {
						st.acc[d] *= corr
					}
					for j := range p {
						p[j] = simAttnWeight(sc[j], mn)
						st.l += p[j]
					}
					for j := range min(flashKeys, end-kt) {
						hi := round(p[j])
						lo := round(p[j] - hi)
						for d := range D {
							x := float32(v.float(vb + int64((kt+j)*D+d)))
							st.acc[d] = simFMA32(lo, x, simFMA32(hi, x, st.acc[d]))
						}
					}
				}
				dst := int64(((b*g.heads+h)*g.seq + s) * D)
				for d, x := range st.acc {
					y := math.NaN()
					if st.l > 0 {
						y = float64(x * (1 / st.l))
					}
					out.setFloat(dst+int64(d), y)
				}
			}
		}
	}
	return nil
}

// simAttnWeight is the flash kernel's fa_weight: exp(x − M), 0 for x = −∞.
func simAttnWeight(x, M float32) float32 {
	if x == simNegInf {
		return 0
	}
	return simExp(x - M)
}
