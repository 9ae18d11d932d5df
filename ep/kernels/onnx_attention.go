package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	builders["Attention"] = builder{inputNames: attentionInputs, build: buildAttention}
	modules = append(modules, ptxModule{"ptx/flash_attention.ptx", flashEntries()})
}

// flashHeads are the head sizes of cuda/flash_attention.cu's kernels, cudaep_attn_flash<D>_<t>.
var flashHeads = []int64{64, 128}

// flashEntries are the entry points of ptx/flash_attention.ptx.
func flashEntries() []string {
	var stems []string
	for _, d := range flashHeads {
		stems = append(stems, fmt.Sprintf("cudaep_attn_flash%d", d))
	}
	return typedEntries(stems, []DType{Float16, BFloat16})
}

// onnxAttentionEntries are Attention's entry points in ptx/attention.ptx (rotary.go lists the
// module).
func onnxAttentionEntries() []string {
	return typedEntries([]string{"cudaep_attn_decode", "cudaep_attn_prefill"}, floatTypes)
}

// attentionInputs are Attention's inputs in ONNX's order; past_key, past_value and
// nonpad_kv_seqlen are refused.
var attentionInputs = []string{"Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"}

// Plan limits of the Attention kernels (cuda/attention.cu's attn_decode and attn_prefill; the
// block, tile and head limits are GroupQueryAttention's).
const (
	attnDecodeMaxSeq = gqaPrefillTile // fewer query rows take the split decode path
	attnTargetBlocks = 1024           // decode: split the keys until about this many blocks run
	attnMaxSplits    = 128
	attnMinChunk     = 32 // decode: a split gets at least one warp tile of keys
)

// The mask kinds of the Attention kernels' mask_kind argument.
const (
	attnNoMask   = 0
	attnAddMask  = 1 // a float mask of Q's dtype, added to the scores
	attnBoolMask = 2 // a bool mask: false leaves the key out
)

// attentionKernel is ONNX's Attention on 4-D inputs. With fewer than attnDecodeMaxSeq query
// rows it launches cudaep_attn_decode_<t> (grid (splits, heads·seq, batch): each block a
// share of one row's keys, partial results in scratch, and the last block of a row, counted in
// the Library's counters, adds the row's partials into Y). With more, float16 or bfloat16
// data and a head size of flashHeads for Q, K and V alike, on a device of compute capability
// 8.0 or later, cudaep_attn_flash<D>_<t> (grid (ceil(seq/64), heads, batch): tiles of 64 query
// rows on tensor cores against tiles of 64 keys; cuda/flash_attention.cu); otherwise
// cudaep_attn_prefill_<t> (grid (ceil(seq/16), heads, batch): tiles of 16 query rows against
// shared-memory tiles of keys, in float32). Every block is gqaThreads threads.
type attentionKernel struct {
	kernelBase
	attnFn                            *cudadrv.Function
	batch, heads, kvHeads, seq, kvSeq uint64
	dk, dv                            uint64
	maskStrides                       [4]int64 // element strides of the mask along batch, head, query, key
	maskKind, causal                  uint32
	scale                             float32
	decode, flash                     bool
	splits                            uint32            // decode
	partials, counters                cudadrv.DevicePtr // decode: scratch, one counter per row
	keyTile, shared                   uint32            // prefill
	attnGrid                          cudadrv.Dim3
	args                              cudadrv.KernelArgs
}

// buildAttention builds ONNX's Attention (opset 23 and later) for 4-D inputs:
//
//   - Q [B, Hq, S, D], K [B, Hkv, T, D] and V [B, Hkv, T, Dv], float32, float16 or bfloat16,
//     all alike, with Hq a multiple of Hkv (query head h reads key and value head h /
//     (Hq/Hkv)) and D, Dv <= 256. 3-D inputs are refused.
//   - attn_mask (optional) of Q's dtype (added to the scores) or bool (true: the key takes
//     part), of rank <= 4, broadcasting (numpy rules) to exactly [B, Hq, S, T]. From opset 24
//     on, a mask whose last dimension is not T is refused (that opset pads a shorter one).
//   - past_key, past_value (inputs 4 and 5), nonpad_kv_seqlen (input 6) and every output but
//     Y (Spec.NumOutputs > 1: present_key, present_value, qk_matmul_output) are refused.
//   - Attributes: scale (default 1/√D; any finite value), is_causal (0 or 1: query s sees keys
//     0 … s, the upper-left alignment of a square mask, which with a mask also applies, as in
//     ONNX's reference implementation), q_num_heads and kv_num_heads (checked against Hq and
//     Hkv when given), softcap 0 only, qk_matmul_output_mode 0 only, softmax_precision 1
//     (float32), 10 or 16 (the softmax runs in float32, at least the precision asked for).
//
// Y [B, Hq, S, Dv] of Q's dtype is softmax(Q·Kᵀ·scale + mask)·V, the softmax over the keys in
// float32 and each element rounded once. A query row with no key left (all masked, -inf or
// false) is NaN, as ONNX's reference implementation gives; a mask's large finite negative
// values are added like any other.
func buildAttention(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(23, "Attention entered ONNX in opset 23"); err != nil {
		return nil, err
	}
	if len(s.Inputs) > 4 {
		return nil, s.errorf("%s is not supported: the key and value caches must be concatenated outside the op (K and V holding every key)", s.input(4))
	}
	if err := s.checkInputCount(3, 4); err != nil {
		return nil, err
	}
	if s.NumOutputs > 1 {
		return nil, s.errorf("the node has %d outputs; only output 0 (Y) is supported (present_key, present_value and qk_matmul_output are not)", s.NumOutputs)
	}
	if err := s.checkAttrs(map[string]AttrKind{"scale": AttrFloat, "is_causal": AttrInt, "q_num_heads": AttrInt, "kv_num_heads": AttrInt,
		"softcap": AttrFloat, "qk_matmul_output_mode": AttrInt, "softmax_precision": AttrInt}); err != nil {
		return nil, err
	}
	causal, err := s.boolAttr("is_causal")
	if err != nil {
		return nil, err
	}
	if v := s.floatAttr("softcap", 0); v != 0 {
		return nil, s.errorf(`attribute "softcap" is %g; only 0 (no soft capping) is supported`, v)
	}
	if v := s.intAttr("qk_matmul_output_mode", 0); v != 0 {
		return nil, s.errorf(`attribute "qk_matmul_output_mode" is %d; only 0 is supported`, v)
	}
	if a, ok := s.Attrs["softmax_precision"]; ok {
		if p := DType(a.Int()); int64(p) != a.Int() || (p != Float32 && p != Float16 && p != BFloat16) {
			return nil, s.errorf(`attribute "softmax_precision" is %d; supported are 1 (float32), 10 (float16) and 16 (bfloat16), all computed in float32`, a.Int())
		}
	}
	for i := range 3 {
		if err := s.checkInput(i, floatTypes, 0, anyRank); err != nil {
			return nil, err
		}
		if r := len(s.Inputs[i].Shape); r != 4 {
			return nil, s.errorf("%s has shape %s; only 4-D Q, K and V ([batch, heads, sequence, head size]) are supported", s.input(i), shapeString(s.Inputs[i].Shape))
		}
		if err := s.checkSameDType(0, i); err != nil {
			return nil, err
		}
	}
	q, k, v := s.Inputs[0].Shape, s.Inputs[1].Shape, s.Inputs[2].Shape
	batch, heads, seq, dk := q[0], q[1], q[2], q[3]
	kvHeads, kvSeq, dv := k[1], k[2], v[3]
	if k[0] != batch || k[3] != dk {
		return nil, s.errorf("%s has shape %s; for %s %s it must be [%d, kv heads, kv sequence, %d]", s.input(1), shapeString(k), s.input(0), shapeString(q), batch, dk)
	}
	if v[0] != batch || v[1] != kvHeads || v[2] != kvSeq {
		return nil, s.errorf("%s has shape %s; for %s %s it must be [%d, %d, %d, v head size]", s.input(2), shapeString(v), s.input(1), shapeString(k), batch, kvHeads, kvSeq)
	}
	if heads%kvHeads != 0 {
		return nil, s.errorf("%s has %d heads, not a multiple of %s's %d", s.input(0), heads, s.input(1), kvHeads)
	}
	for _, c := range []struct {
		name string
		want int64
	}{{"q_num_heads", heads}, {"kv_num_heads", kvHeads}} {
		if a, ok := s.Attrs[c.name]; ok && a.Int() != c.want {
			return nil, s.errorf("attribute %q is %d, but the 4-D inputs have %d", c.name, a.Int(), c.want)
		}
	}
	if dk > gqaMaxHead || dv > gqaMaxHead {
		return nil, s.errorf("the head sizes are %d (Q, K) and %d (V); at most %d is supported", dk, dv, gqaMaxHead)
	}
	if batch > gqaMaxGridYZ || heads > gqaMaxGridYZ {
		return nil, s.errorf("batch %d and %d query heads exceed the kernels' grid (at most %d each)", batch, heads, gqaMaxGridYZ)
	}
	scale := float32(1 / math.Sqrt(float64(dk)))
	if a, ok := s.Attrs["scale"]; ok {
		scale = a.Float()
		if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
			return nil, s.errorf(`attribute "scale" is %g; it must be finite`, scale)
		}
	}

	dt := s.Inputs[0].DType
	ak := &attentionKernel{kernelBase: newBase(l, s, TensorInfo{DType: dt, Shape: []int64{batch, heads, seq, dv}})}
	ak.batch, ak.heads, ak.kvHeads, ak.seq, ak.kvSeq = uint64(batch), uint64(heads), uint64(kvHeads), uint64(seq), uint64(kvSeq)
	ak.dk, ak.dv, ak.scale, ak.causal = uint64(dk), uint64(dv), scale, b2u(causal)

	if len(s.Inputs) == 4 {
		if err := s.checkInput(3, []DType{dt, Bool}, 0, 4); err != nil {
			return nil, err
		}
		m := s.Inputs[3].Shape
		full := []int64{batch, heads, seq, kvSeq}
		if out, ok := BroadcastShapes(m, full); !ok || !slices.Equal(out, full) {
			return nil, s.errorf("%s has shape %s, which does not broadcast to [batch, q heads, q sequence, kv sequence] = %s", s.input(3), shapeString(m), shapeString(full))
		}
		if s.Opset >= 24 && len(m) > 0 && m[len(m)-1] != kvSeq {
			return nil, s.errorf("%s has shape %s; its last dimension must be the kv sequence length %d (padding a shorter mask, which opset 24 allows, is not supported)", s.input(3), shapeString(m), kvSeq)
		}
		copy(ak.maskStrides[:], broadcastStrides(m, full))
		ak.maskKind = attnAddMask
		if s.Inputs[3].DType == Bool {
			ak.maskKind = attnBoolMask
		}
	}

	sfx := dt.suffix()
	if seq < attnDecodeMaxSeq {
		ak.decode = true
		rows := batch * heads * seq
		ak.splits = attnSplits(rows, kvSeq)
		ak.attnFn = l.function("cudaep_attn_decode_" + sfx)
		ak.attnGrid = cudadrv.Dim3{X: ak.splits, Y: uint32(heads * seq), Z: uint32(batch)}
		if ak.partials, err = l.scratchBuffer(uint64(rows) * uint64(ak.splits) * uint64(dv+2) * 4); err != nil {
			return nil, err
		}
		if ak.counters, err = l.counterBuffer(uint64(rows)); err != nil {
			return nil, err
		}
		return ak, nil
	}
	if tiles := (seq + gqaPrefillTile - 1) / gqaPrefillTile; tiles > math.MaxInt32 {
		return nil, s.errorf("%d query rows are more than the prefill grid takes", seq)
	}
	if fn := flashFunction(l, dt, dk, dv); fn != nil {
		ak.flash, ak.attnFn, ak.keyTile = true, fn, flashKeys
		ak.shared = uint32((flashRows + 2*flashKeys) * dk * 2)
		ak.attnGrid = cudadrv.Dim3{X: uint32((seq + flashRows - 1) / flashRows), Y: uint32(heads), Z: uint32(batch)}
		return ak, nil
	}
	ak.attnFn = l.function("cudaep_attn_prefill_" + sfx)
	ak.keyTile, ak.shared = attnPrefillTiles(dk, dv)
	ak.attnGrid = cudadrv.Dim3{X: uint32((seq + gqaPrefillTile - 1) / gqaPrefillTile), Y: uint32(heads), Z: uint32(batch)}
	return ak, nil
}

// The flash kernel's tiles (cuda/flash_attention.cu's FA_ROWS and FA_KEYS).
const (
	flashRows = 64
	flashKeys = 64
)

// flashFunction returns the flash kernel for a prefill of dt with head sizes dk and dv, or nil
// where it does not apply: float32 data, head sizes apart or not among flashHeads, a device
// below its PTX's target (Library.tooNew), or the "attention" variant forced to "prefill".
func flashFunction(l *Library, dt DType, dk, dv int64) *cudadrv.Function {
	if (dt != Float16 && dt != BFloat16) || dk != dv || !slices.Contains(flashHeads, dk) ||
		forcedVariant("attention") == "prefill" {
		return nil
	}
	return l.function(fmt.Sprintf("cudaep_attn_flash%d_%s", dk, dt.suffix()))
}

// variant is "decode", "flash" or "prefill": the pass Execute launches.
func (k *attentionKernel) variant() string {
	switch {
	case k.decode:
		return "decode"
	case k.flash:
		return "flash"
	}
	return "prefill"
}

// attnSplits is how many blocks share the keys of one decode row: enough for about
// attnTargetBlocks blocks over rows rows, at most attnMaxSplits, and none with fewer than
// attnMinChunk keys (one tile of a warp). The kernel rounds each split's share up to whole
// tiles at run time (with is_causal, rows see fewer keys than kvSeq).
func attnSplits(rows, kvSeq int64) uint32 {
	sp := (attnTargetBlocks + rows - 1) / rows
	sp = min(sp, attnMaxSplits, (kvSeq+attnMinChunk-1)/attnMinChunk)
	return uint32(max(sp, 1))
}

// attnKeyStride is cuda/attention.cu's attn_kstride: the row stride of the staged keys.
func attnKeyStride(dk int64) int64 {
	if dk%4 == 0 {
		return dk + 4
	}
	return dk + 1
}

// attnPrefillTiles returns the prefill kernel's key tile (32 keys, fewer for long heads) and
// its dynamic shared memory in bytes (queries, keys, values and weights), within 48 KiB.
func attnPrefillTiles(dk, dv int64) (keyTile, shared uint32) {
	for bk := int64(32); ; bk /= 2 {
		floats := gqaPrefillTile*dk + bk*attnKeyStride(dk) + bk*dv + gqaPrefillTile*32
		if floats*4 <= gqaSharedLimit || bk == 1 {
			return uint32(bk), uint32(floats * 4)
		}
	}
}

// Execute queues the attention: the decode pass (which also reduces), or the flash or prefill pass. Y
// must not overlap the inputs.
func (k *attentionKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	var mask cudadrv.DevicePtr
	if k.maskKind != attnNoMask {
		mask = inputs[3].Ptr
	}
	st := k.lib.rt.Stream
	block := cudadrv.Dim3{X: gqaThreads, Y: 1, Z: 1}
	a := &k.args
	a.Reset()
	if k.decode {
		a.Ptr(k.partials)
	} else {
		a.Ptr(outputs[0].Ptr)
	}
	a.Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).Ptr(inputs[2].Ptr).Ptr(mask)
	a.U64(k.heads).U64(k.kvHeads).U64(k.seq).U64(k.kvSeq).U64(k.dk).U64(k.dv)
	for _, st := range k.maskStrides {
		a.I64(st)
	}
	a.U32(k.maskKind).U32(k.causal).F32(k.scale)
	if !k.decode {
		if !k.flash {
			a.U32(k.keyTile)
		}
		return st.Launch(k.attnFn, k.attnGrid, block, k.shared, a)
	}
	a.U32(k.splits).Ptr(outputs[0].Ptr).Ptr(k.counters)
	return st.Launch(k.attnFn, k.attnGrid, block, 0, a)
}
