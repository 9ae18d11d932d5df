package kernels

import (
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

// Reference implementations of com.microsoft's RotaryEmbedding and GroupQueryAttention, on the
// host, in float64, from shapes alone. The simulated device's kernels (sim_attention.go) use
// the scalar helpers here; the tests compare device results with refRotary and refGQA.

// refRoundTo returns v as a kernel stores it in dt: rounded to float32, then to the 16-bit
// type (float64 keeps v).
func refRoundTo(dt DType, v float64) float64 {
	f := float32(v)
	switch dt {
	case Float16:
		return float64(cudadrv.Float16Value(cudadrv.Float16Bits(f)))
	case BFloat16:
		return float64(cudadrv.BFloat16Value(cudadrv.BFloat16Bits(f)))
	case Float64:
		return v
	}
	return float64(f)
}

// refRotated returns element i of a head vector (x(i) reads element i) at position pos,
// rotated when i < rot with the cache rows of pos (cos and sin are [maxPos, rot/2] row-major):
// the halves [0, rot/2) and [rot/2, rot) pair up, or with interleaved the neighbours 2k and
// 2k+1. A position outside [0, maxPos) yields NaN; elements from rot on are x unchanged.
func refRotated(x func(int) float64, i, rot int, interleaved bool, cos, sin func(int) float64, pos int64, maxPos int) float64 {
	if i >= rot {
		return x(i)
	}
	if pos < 0 || pos >= int64(maxPos) {
		return math.NaN()
	}
	half := rot / 2
	var c, j int
	var sign float64
	if interleaved {
		c, j, sign = i/2, i+1, -1
		if i%2 == 1 {
			j, sign = i-1, 1
		}
	} else {
		c, j, sign = i, i+half, -1
		if i >= half {
			c, j, sign = i-half, i-half, 1
		}
	}
	row := int(pos) * half
	return x(i)*cos(row+c) + sign*x(j)*sin(row+c)
}

// rotaryRef is the problem refRotary solves: RotaryEmbedding of X (shape [batch, seq,
// heads*HeadSize], or [batch, heads, seq, HeadSize] when Transposed) with positions Pos (one
// start position, or batch*seq of them) and the caches Cos and Sin ([maxPos, RotaryDim/2]).
type rotaryRef struct {
	X           []float64
	Shape       []int64
	Transposed  bool
	Pos         []int64
	Cos, Sin    []float64
	HeadSize    int
	RotaryDim   int
	Interleaved bool
}

// refRotary returns RotaryEmbedding's output: the first RotaryDim elements of every head
// vector of token s of batch b rotated at position Pos[b*seq+s] (or Pos[0]+s), the rest
// copied.
func refRotary(a rotaryRef) []float64 {
	batch, seq, heads := int(a.Shape[0]), int(a.Shape[1]), int(a.Shape[2])/a.HeadSize
	if a.Transposed {
		heads, seq = int(a.Shape[1]), int(a.Shape[2])
	}
	maxPos := len(a.Cos) / (a.RotaryDim / 2)
	out := make([]float64, len(a.X))
	cos := func(i int) float64 { return a.Cos[i] }
	sin := func(i int) float64 { return a.Sin[i] }
	for b := range batch {
		for s := range seq {
			pos := a.Pos[0] + int64(s)
			if len(a.Pos) > 1 {
				pos = a.Pos[b*seq+s]
			}
			for h := range heads {
				base := ((b*seq+s)*heads + h) * a.HeadSize
				if a.Transposed {
					base = ((b*heads+h)*seq + s) * a.HeadSize
				}
				x := func(i int) float64 { return a.X[base+i] }
				for i := range a.HeadSize {
					out[base+i] = refRotated(x, i, a.RotaryDim, a.Interleaved, cos, sin, pos, maxPos)
				}
			}
		}
	}
	return out
}

// gqaLengths returns, for a batch whose seqlens_k entry is seqlen, how many tokens precede the
// seq new ones in the cache (past) and how many are there with them (total), as ONNX Runtime
// defines them: total = seqlen + 1, past = total - seq, or 0 in the first prompt (seq equal
// to total_sequence_length).
func gqaLengths(seqlen, totalSeq int32, seq int) (past, total int64) {
	total = int64(seqlen) + 1
	if int64(totalSeq) == int64(seq) {
		return 0, total
	}
	return total - int64(seq), total
}

// gqaPosition is the rotary position of new token s: past + s, or 1 for a padding token.
func gqaPosition(past, total int64, s int) int64 {
	if p := past + int64(s); p < total {
		return p
	}
	return 1
}

// gqaKeyEnd is how many cached keys query s sees (causal), within [0, capacity].
func gqaKeyEnd(past, total int64, s, capacity int) int {
	e := min(past+int64(s)+1, total, int64(capacity))
	return int(max(e, 0))
}

// gqaRef is the problem refGQA solves: GroupQueryAttention of Query [Batch, Seq,
// Heads*HeadSize], Key and Value [Batch, Seq, KVHeads*HeadSize], the caches PastKey and
// PastValue [Batch, KVHeads, PastCap, HeadSize], SeqlensK (Batch values) and Total (the
// total_sequence_length), with rotary when Cos and Sin are set ([maxPos, RotaryDim/2]) and
// the attention scale Scale (0: 1/sqrt(HeadSize)). The present caches hold PresentCap
// positions; Shared says they are the past buffers themselves (PresentCap == PastCap). DType
// is the data type, to which the rotated query and key are rounded, as stored.
type gqaRef struct {
	DType                                         DType
	Query, Key, Value, PastKey, PastValue         []float64
	SeqlensK                                      []int32
	Total                                         int32
	Cos, Sin                                      []float64
	RotaryDim                                     int
	Interleaved                                   bool
	Batch, Seq, Heads, KVHeads, HeadSize, PastCap int
	PresentCap                                    int
	Scale                                         float64
	Shared                                        bool
}

// refGQA returns GroupQueryAttention's outputs: the attention output [Batch, Seq,
// Heads*HeadSize] (unrounded) and the present key and value caches. New token s of batch b
// goes to position past_b + s (gqaLengths); a shared present keeps what the past held
// elsewhere, a separate one holds the past's first past_b positions, the new tokens, and
// zeros. Query s of head h attends, with a causal mask, to the keys before gqaKeyEnd of kv
// head h / (Heads / KVHeads).
func refGQA(a gqaRef) (out, presentK, presentV []float64) {
	D, capacity := a.HeadSize, a.PresentCap
	presentK = make([]float64, a.Batch*a.KVHeads*capacity*D)
	presentV = make([]float64, len(presentK))
	if a.Shared {
		copy(presentK, a.PastKey)
		copy(presentV, a.PastValue)
	}
	rot, maxPos := 0, 0
	if a.Cos != nil {
		rot = a.RotaryDim
		maxPos = len(a.Cos) / (rot / 2)
	}
	cos := func(i int) float64 { return a.Cos[i] }
	sin := func(i int) float64 { return a.Sin[i] }
	scale := a.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(D))
	}
	out = make([]float64, a.Batch*a.Seq*a.Heads*D)
	for b := range a.Batch {
		past, total := gqaLengths(a.SeqlensK[b], a.Total, a.Seq)
		for kvh := range a.KVHeads {
			at := func(p int) int { return ((b*a.KVHeads+kvh)*capacity + p) * D }
			if !a.Shared {
				for p := 0; int64(p) < past && p < a.PastCap && p < capacity; p++ {
					src := ((b*a.KVHeads+kvh)*a.PastCap + p) * D
					copy(presentK[at(p):at(p)+D], a.PastKey[src:src+D])
					copy(presentV[at(p):at(p)+D], a.PastValue[src:src+D])
				}
			}
			for s := range a.Seq {
				p := past + int64(s)
				if p < 0 || p >= int64(capacity) {
					continue
				}
				src := ((b*a.Seq+s)*a.KVHeads + kvh) * D
				k := func(i int) float64 { return a.Key[src+i] }
				pos := gqaPosition(past, total, s)
				for i := range D {
					presentK[at(int(p))+i] = refRoundTo(a.DType, refRotated(k, i, rot, a.Interleaved, cos, sin, pos, maxPos))
					presentV[at(int(p))+i] = a.Value[src+i]
				}
			}
		}
		q := make([]float64, D)
		var scores []float64
		for s := range a.Seq {
			end := gqaKeyEnd(past, total, s, capacity)
			pos := gqaPosition(past, total, s)
			for h := range a.Heads {
				src := ((b*a.Seq+s)*a.Heads + h) * D
				qx := func(i int) float64 { return a.Query[src+i] }
				for i := range D {
					q[i] = refRoundTo(a.DType, refRotated(qx, i, rot, a.Interleaved, cos, sin, pos, maxPos))
				}
				kvh := h / (a.Heads / a.KVHeads)
				base := (b*a.KVHeads + kvh) * capacity * D
				scores = scores[:0]
				for j := range end {
					dot := 0.0
					for i := range D {
						dot += q[i] * presentK[base+j*D+i]
					}
					scores = append(scores, dot*scale)
				}
				if end > 0 {
					refSoftmaxLine(scores, scores)
				}
				dst := out[src : src+D]
				for j, p := range scores {
					for i := range D {
						dst[i] += p * presentV[base+j*D+i]
					}
				}
			}
		}
	}
	return out, presentK, presentV
}

// attnKeys is how many keys query row s of ONNX's Attention sees: all kvSeq, or with
// is_causal the keys 0 … s (the upper-left alignment).
func attnKeys(s, kvSeq int, causal bool) int {
	if causal {
		return min(s+1, kvSeq)
	}
	return kvSeq
}

// attnRef is the problem refAttention solves: ONNX's Attention of Q [B, Hq, S, D], K [B, Hkv,
// T, D] and V [B, Hkv, T, Dv] (row-major values and shapes), with the mask Mask of shape
// MaskShape (nil for none; for a bool mask, BoolMask and values 1 for true and 0 for false),
// is_causal, and Scale (0: the default 1/√D).
type attnRef struct {
	Q, K, V                []float64
	QShape, KShape, VShape []int64
	Mask                   []float64
	MaskShape              []int64
	BoolMask               bool
	Causal                 bool
	Scale                  float64
}

// refAttention returns Attention's output Y [B, Hq, S, Dv] (unrounded): query row s of head h
// scores key j of head h / (Hq/Hkv) as q·k·scale plus the mask's element broadcast to (b, h,
// s, j) (a false bool: −∞); with Causal, keys after s are −∞ too; the scores' softmax weighs
// the values. A row whose scores are all −∞ is NaN (its softmax is 0/0), as in ONNX's
// reference implementation.
func refAttention(a attnRef) []float64 {
	batch, heads, seq, dk := int(a.QShape[0]), int(a.QShape[1]), int(a.QShape[2]), int(a.QShape[3])
	kvHeads, kvSeq, dv := int(a.KShape[1]), int(a.KShape[2]), int(a.VShape[3])
	scale := a.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dk))
	}
	out := make([]float64, batch*heads*seq*dv)
	scores := make([]float64, kvSeq)
	for b := range batch {
		for h := range heads {
			kvh := h / (heads / kvHeads)
			kb, vb := (b*kvHeads+kvh)*kvSeq*dk, (b*kvHeads+kvh)*kvSeq*dv
			for s := range seq {
				qr := a.Q[((b*heads+h)*seq+s)*dk:]
				for j := range scores {
					if a.Causal && j > s {
						scores[j] = math.Inf(-1)
						continue
					}
					dot := 0.0
					for d := range dk {
						dot += qr[d] * a.K[kb+j*dk+d]
					}
					scores[j] = dot * scale
					if a.Mask != nil {
						m := a.Mask[refIndex(a.MaskShape, []int64{int64(b), int64(h), int64(s), int64(j)})]
						switch {
						case !a.BoolMask:
							scores[j] += m
						case m == 0:
							scores[j] = math.Inf(-1)
						}
					}
				}
				refSoftmaxLine(scores, scores)
				y := out[((b*heads+h)*seq+s)*dv:]
				for j, p := range scores {
					for d := range dv {
						y[d] += p * a.V[vb+j*dv+d]
					}
				}
			}
		}
	}
	return out
}
