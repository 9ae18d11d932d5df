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
					out.setFloat(int64(base+i), refRotated(xv, i, rot, interleaved, cos, sin, p, maxPos))
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
					pk.setFloat(at(int(p))+int64(i), refRotated(kx, i, g.rot, g.interleaved, cos, sin, pos, g.maxPos))
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
func simGQAQuery(q simTensor, dt DType, g simGQAShape, b, s, h int, pos int64, cos, sin func(int) float64) []float64 {
	base := int64(((b*g.seq+s)*g.heads + h) * g.headSize)
	qx := func(i int) float64 { return q.float(base + int64(i)) }
	row := make([]float64, g.headSize)
	for i := range row {
		row[i] = refRoundTo(dt, refRotated(qx, i, g.rot, g.interleaved, cos, sin, pos, g.maxPos))
	}
	return row
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
	acc := make([]float64, D)
	for b := range g.batch {
		past, tot := gqaLengths(seqlens[b], total, g.seq)
		for s := range g.seq {
			end := gqaKeyEnd(past, tot, s, g.capacity)
			chunk := (end + splits - 1) / splits
			for h := range g.heads {
				qr := simGQAQuery(q, dt, g, b, s, h, gqaPosition(past, tot, s), cos, sin)
				base := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.capacity * D)
				for sp := range splits {
					m, sum := math.Inf(-1), 0.0
					clear(acc)
					for j := sp * chunk; j < min(sp*chunk+chunk, end); j++ {
						dot := 0.0
						for i := range D {
							dot += qr[i] * pk.float(base+int64(j*D+i))
						}
						sc := dot * scale
						mn := max(m, sc)
						corr, p := math.Exp(m-mn), math.Exp(sc-mn)
						sum = sum*corr + p
						for i := range D {
							acc[i] = acc[i]*corr + p*pv.float(base+int64(j*D+i))
						}
						m = mn
					}
					out := part[(((b*g.seq+s)*g.heads+h)*splits+sp)*(D+2):]
					out[0], out[1] = float32(m), float32(sum)
					for i := range D {
						out[2+i] = float32(acc[i])
					}
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

// simSplitRows is split_finish's reduce of every row (cuda/attention.cu): the splits' partial
// results of each of rows rows (part) combined into out, rows of D elements of dt, a row
// without weight (all of its keys masked) being empty (GroupQueryAttention 0, Attention NaN).
func simSplitRows(l *cudadrv.KernelLaunch, dt DType, at cudadrv.DevicePtr, part []float32, rows, D, splits int, empty float64) error {
	out, err := simView(l, at, dt, rows*D)
	if err != nil {
		return err
	}
	for r := range rows {
		pr := part[r*splits*(D+2):]
		m := math.Inf(-1)
		for sp := range splits {
			m = max(m, float64(pr[sp*(D+2)]))
		}
		for i := range D {
			sum, a := 0.0, 0.0
			for sp := range splits {
				p := pr[sp*(D+2):]
				if math.IsInf(float64(p[0]), -1) {
					continue
				}
				w := math.Exp(float64(p[0]) - m)
				sum += float64(p[1]) * w
				a += float64(p[2+i]) * w
			}
			v := empty
			if sum > 0 {
				v = a / sum
			}
			out.setFloat(int64(r*D+i), v)
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
	var scores []float64
	for b := range g.batch {
		past, tot := gqaLengths(seqlens[b], total, g.seq)
		for s := range g.seq {
			end := gqaKeyEnd(past, tot, s, g.capacity)
			for h := range g.heads {
				qr := simGQAQuery(q, dt, g, b, s, h, gqaPosition(past, tot, s), cos, sin)
				base := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.capacity * D)
				scores = scores[:0]
				for j := range end {
					dot := 0.0
					for i := range D {
						dot += qr[i] * pk.float(base+int64(j*D+i))
					}
					scores = append(scores, dot*scale)
				}
				if end > 0 {
					refSoftmaxLine(scores, scores)
				}
				dst := int64(((b*g.seq+s)*g.heads + h) * D)
				for i := range D {
					v := 0.0
					for j, p := range scores {
						v += p * pv.float(base+int64(j*D+i))
					}
					out.setFloat(dst+int64(i), v)
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
func simAttnInputs(l *cudadrv.KernelLaunch, dt DType, g simAttnShape) (q, k, v simTensor, bias func(b, h, s, j int) float64, err error) {
	views, err := simViewsOf(l, []int{1, 2, 3}, []DType{dt, dt, dt},
		[]int{g.batch * g.heads * g.seq * g.dk, g.batch * g.kvHeads * g.kvSeq * g.dk, g.batch * g.kvHeads * g.kvSeq * g.dv})
	if err != nil {
		return
	}
	q, k, v = views[0], views[1], views[2]
	bias = func(int, int, int, int) float64 { return 0 }
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
	bias = func(b, h, s, j int) float64 {
		i := int64(b)*st[0] + int64(h)*st[1] + int64(s)*st[2] + int64(j)*st[3]
		if g.maskKind == attnAddMask {
			return mask.float(i)
		}
		if mask.b8[i] != 0 {
			return 0
		}
		return math.Inf(-1)
	}
	return
}

// simAttnScores fills scores with row s of head h's scores of keys 0 … len(scores)-1.
func simAttnScores(scores []float64, q, k simTensor, bias func(b, h, s, j int) float64, g simAttnShape, b, h, s int) {
	qb := int64(((b*g.heads+h)*g.seq + s) * g.dk)
	kb := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.kvSeq * g.dk)
	for j := range scores {
		dot := 0.0
		for d := range int64(g.dk) {
			dot += q.float(qb+d) * k.float(kb+int64(j*g.dk)+d)
		}
		scores[j] = dot*g.scale + bias(b, h, s, j)
	}
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
	acc := make([]float64, g.dv)
	for b := range g.batch {
		for h := range g.heads {
			vb := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.kvSeq * g.dv)
			for s := range g.seq {
				end := attnKeys(s, g.kvSeq, g.causal)
				chunk := ((end+splits-1)/splits + 31) / 32 * 32
				scores := make([]float64, end)
				simAttnScores(scores, q, k, bias, g, b, h, s)
				for sp := range splits {
					m, sum := math.Inf(-1), 0.0
					clear(acc)
					for j := sp * chunk; j < min(sp*chunk+chunk, end); j++ {
						sc := scores[j]
						if math.IsInf(sc, -1) {
							continue // weighs exp(-inf) = 0
						}
						mn := max(m, sc)
						corr, p := math.Exp(m-mn), math.Exp(sc-mn)
						sum = sum*corr + p
						for d := range g.dv {
							acc[d] = acc[d]*corr + p*v.float(vb+int64(j*g.dv+d))
						}
						m = mn
					}
					out := part[(((b*g.heads+h)*g.seq+s)*splits+sp)*(g.dv+2):]
					out[0], out[1] = float32(m), float32(sum)
					for d := range g.dv {
						out[2+d] = float32(acc[d])
					}
				}
			}
		}
	}
	return simSplitRows(l, dt, l.PtrArg(19), part, rows, g.dv, splits, math.NaN())
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
	if int(l.Grid.X) != (g.seq+gqaPrefillTile-1)/gqaPrefillTile || int(l.Grid.Y) != g.heads {
		return fmt.Errorf("%s: grid %v for %d rows of %d heads", l.Name, l.Grid, g.seq, g.heads)
	}
	out, err := simView(l, l.PtrArg(0), dt, g.batch*g.heads*g.seq*g.dv)
	if err != nil {
		return err
	}
	q, k, v, bias, err := simAttnInputs(l, dt, g)
	if err != nil {
		return err
	}
	for b := range g.batch {
		for h := range g.heads {
			vb := int64((b*g.kvHeads + h/(g.heads/g.kvHeads)) * g.kvSeq * g.dv)
			for s := range g.seq {
				scores := make([]float64, attnKeys(s, g.kvSeq, g.causal))
				simAttnScores(scores, q, k, bias, g, b, h, s)
				refSoftmaxLine(scores, scores)
				dst := int64(((b*g.heads+h)*g.seq + s) * g.dv)
				for d := range int64(g.dv) {
					y := 0.0
					for j, p := range scores {
						y += p * v.float(vb+int64(j*g.dv)+d)
					}
					out.setFloat(dst+d, y)
				}
			}
		}
	}
	return nil
}
