package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	builders["com.microsoft.GroupQueryAttention"] = builder{inputNames: gqaInputs, build: buildGQA}
}

// gqaInputs are GroupQueryAttention's inputs in ONNX Runtime's order; the last three (newer
// than the ones supported) are refused.
var gqaInputs = []string{"query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length",
	"cos_cache", "sin_cache", "position_ids", "attention_bias", "head_sink"}

// Limits of the attention kernels (cuda/attention.cu).
const (
	gqaMaxHead      = 256 // head sizes: a lane holds gqaMaxHead / 32 accumulators
	gqaThreads      = 128 // the decode and prefill blocks (ATTN_WARPS warps)
	gqaPrefillTile  = 16  // query rows per prefill block (PF_TILE)
	gqaMaxGridYZ    = 65535
	gqaTargetBlocks = 512 // decode: split the cache until about this many blocks run
	gqaMaxSplits    = 128
	gqaMinChunk     = 16 // decode: no split gets fewer than this many positions of the capacity
	gqaSharedLimit  = 48 << 10
)

// gqaKernel is com.microsoft's GroupQueryAttention: cudaep_gqa_append_<t> (rotary on the new
// keys; new keys and values into the present caches), then for one query token
// cudaep_gqa_decode_<t> (the cache split over splits blocks per head, partial softmax results
// in scratch, and the last block of a row, counted in the Library's counters, adds the row's
// partials into the output), or for several cudaep_gqa_prefill_<t> (tiles of query
// rows against shared-memory tiles of keys).
type gqaKernel struct {
	kernelBase
	appendFn, attnFn                     *cudadrv.Function
	batch, seq, heads, kvHeads, headSize uint64
	pastCap, presentCap, rot, maxPos     uint64
	interleaved                          bool
	scale                                float32
	decode                               bool
	splits                               uint32            // decode
	partials, counters                   cudadrv.DevicePtr // decode: scratch, one counter per row
	keyTile, shared                      uint32            // prefill
	attnGrid                             cudadrv.Dim3
	args                                 cudadrv.KernelArgs
}

// buildGQA builds com.microsoft.GroupQueryAttention (opset 1 of that domain) as ONNX Runtime
// defines it, for float32, float16 and bfloat16 data:
//
//   - Inputs: query [B, S, H·D], key and value [B, S, KVH·D] (packed QKV, a missing key, is
//     refused), past_key and past_value [B, KVH, P, D] (P may be 0), seqlens_k int32 [B]
//     (each batch's total length − 1), total_sequence_length int32 (one value), and, with
//     do_rotary 1, cos_cache and sin_cache [max_pos, R/2] (R <= D the rotary dimension).
//     position_ids, attention_bias and head_sink are refused.
//   - Attributes: num_heads H and kv_num_heads KVH (required; KVH divides H), scale (0, the
//     default: 1/√D), do_rotary, rotary_interleaved; at the values that change nothing (ONNX
//     Runtime 1.30 fills them in with these defaults): local_window_size -1, softcap 0,
//     smooth_softmax 0 or -1, qk_output 0, causal 1, sliding_window_cache 0, k_quant_type and
//     v_quant_type "NONE", qk_norm_epsilon any (it applies to the QK-norm inputs, refused).
//   - Outputs: output [B, S, H·D], present_key and present_value [B, KVH, P', D].
//
// The present capacity P' is P (past and present are one buffer of fixed capacity, ONNX
// Runtime GenAI's past_present_share_buffer layout) or P + S (a growing cache: the past holds
// exactly the previous tokens). ONNX Runtime picks it from total_sequence_length's value,
// max(total_sequence_length, P), and so does Get: from the value in Spec.Consts when it is
// there (values other than <= P or exactly P + S are refused), else assuming P + S, the
// value of a growing cache. So the shared buffer needs the value in Spec.Consts, and since it
// only selects the layout, any value <= P does: the kernels read total_sequence_length from
// its tensor at every execution, and its value may change between executions (a decode loop
// replaying one CUDA graph) as long as it stays <= P. This relaxes Spec.Consts' rule that a
// constant input holds the value given.
//
// Execute may be given the past buffers as the present outputs (both, with P' = P): then only
// the new tokens are written. Otherwise the present holds the past's first past_b positions,
// the new tokens and zeros, as ONNX Runtime writes separate buffers. For the lengths
// (past_b, total_b from seqlens_k and total_sequence_length), the causal mask and the rotary
// positions see cuda/attention.cu; positions outside the cos/sin caches yield NaN, and new
// tokens outside the present capacity are dropped (seqlens_k is device data: Execute cannot
// check it), but the append pass records the lengths ONNX Runtime's CPU execution provider
// refuses as a data fault (Library.TakeFault): total_sequence_length outside [1, P'],
// seqlens_k[b] outside [0, P') or, after the first prompt, below S − 1, and with do_rotary a
// new token's position at or past cos_cache's rows (input cos_cache, the position).
func buildGQA(l *Library, s opSpec) (Kernel, error) {
	if n := len(s.Inputs); n > 9 {
		return nil, s.errorf("%s is not supported (GroupQueryAttention takes at most the 9 inputs query … sin_cache here)", s.input(9))
	}
	if err := s.checkInputCount(7, 9); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"num_heads": AttrInt, "kv_num_heads": AttrInt, "scale": AttrFloat,
		"do_rotary": AttrInt, "rotary_interleaved": AttrInt, "local_window_size": AttrInt, "softcap": AttrFloat,
		"smooth_softmax": AttrInt, "qk_output": AttrInt, "causal": AttrInt, "sliding_window_cache": AttrInt,
		"k_quant_type": AttrString, "v_quant_type": AttrString, "qk_norm_epsilon": AttrFloat}); err != nil {
		return nil, err
	}
	if _, ok := s.Attrs["num_heads"]; !ok {
		return nil, s.errorf(`attribute "num_heads" is required`)
	}
	if _, ok := s.Attrs["kv_num_heads"]; !ok {
		return nil, s.errorf(`attribute "kv_num_heads" is required`)
	}
	heads, kvHeads := s.intAttr("num_heads", 0), s.intAttr("kv_num_heads", 0)
	switch {
	case heads <= 0:
		return nil, s.errorf(`attribute "num_heads" is %d; it must be positive`, heads)
	case kvHeads <= 0:
		return nil, s.errorf(`attribute "kv_num_heads" is %d; it must be positive`, kvHeads)
	case heads%kvHeads != 0:
		return nil, s.errorf(`attribute "num_heads" = %d is not a multiple of "kv_num_heads" = %d`, heads, kvHeads)
	}
	if v := s.intAttr("local_window_size", -1); v != -1 {
		return nil, s.errorf(`attribute "local_window_size" is %d; only -1 (no sliding window) is supported`, v)
	}
	if v := s.floatAttr("softcap", 0); v != 0 {
		return nil, s.errorf(`attribute "softcap" is %g; only 0 (no soft capping) is supported`, v)
	}
	if v := s.intAttr("smooth_softmax", 0); v != 0 && v != -1 {
		return nil, s.errorf(`attribute "smooth_softmax" is %d; only 0 (or -1, unset) is supported`, v)
	}
	if v := s.intAttr("qk_output", 0); v != 0 {
		return nil, s.errorf(`attribute "qk_output" is %d; only 0 (no QK output) is supported`, v)
	}
	if v := s.intAttr("causal", 1); v != 1 {
		return nil, s.errorf(`attribute "causal" is %d; only 1 (causal attention) is supported`, v)
	}
	if v := s.intAttr("sliding_window_cache", 0); v != 0 {
		return nil, s.errorf(`attribute "sliding_window_cache" is %d; only 0 is supported`, v)
	}
	for _, name := range []string{"k_quant_type", "v_quant_type"} {
		if v := s.stringAttr(name, "NONE"); v != "NONE" {
			return nil, s.errorf(`attribute %q is %q; only "NONE" (an unquantized cache) is supported`, name, v)
		}
	}
	doRotary, err := s.boolAttr("do_rotary")
	if err != nil {
		return nil, err
	}
	interleaved, err := s.boolAttr("rotary_interleaved")
	if err != nil {
		return nil, err
	}

	// query, key, value
	if err := s.checkInput(0, floatTypes, 3, 3); err != nil {
		return nil, err
	}
	q := s.Inputs[0]
	dt := q.DType
	batch, seq, hidden := q.Shape[0], q.Shape[1], q.Shape[2]
	if hidden%heads != 0 {
		return nil, s.errorf(`%s has hidden size %d, which attribute "num_heads" = %d does not divide`, s.input(0), hidden, heads)
	}
	d := hidden / heads
	if d > gqaMaxHead {
		return nil, s.errorf("the head size is %d (%s's %d / num_heads %d); at most %d is supported", d, s.input(0), hidden, heads, gqaMaxHead)
	}
	kvShape := []int64{batch, seq, kvHeads * d}
	for i := 1; i <= 2; i++ {
		if err := s.checkInput(i, floatTypes, 3, 3); err != nil {
			return nil, err
		}
		if err := s.checkSameDType(0, i); err != nil {
			return nil, err
		}
		if !slices.Equal(s.Inputs[i].Shape, kvShape) {
			return nil, s.errorf("%s has shape %s; for query %s, kv_num_heads %d and head size %d it must be %s",
				s.input(i), shapeString(s.Inputs[i].Shape), shapeString(q.Shape), kvHeads, d, shapeString(kvShape))
		}
	}

	// past_key, past_value: [B, KVH, P, D], P >= 0
	past := s.Inputs[3].Shape
	for i := 3; i <= 4; i++ {
		in := s.Inputs[i]
		if in.DType != dt {
			return nil, s.errorf("%s is %s and %s is %s; they must have the same dtype", s.input(0), dt, s.input(i), in.DType)
		}
		sh := in.Shape
		if len(sh) != 4 || sh[0] != batch || sh[1] != kvHeads || sh[3] != d || sh[2] < 0 {
			return nil, s.errorf("%s has shape %s; it must be [batch %d, kv_num_heads %d, past capacity >= 0, head size %d]",
				s.input(i), shapeString(sh), batch, kvHeads, d)
		}
		if !slices.Equal(sh, past) {
			return nil, s.errorf("%s has shape %s and %s has shape %s; they must be the same", s.input(3), shapeString(past), s.input(4), shapeString(sh))
		}
	}
	pastCap := past[2]
	if pastCap > 0 {
		if err := s.checkElements(s.input(3), past); err != nil {
			return nil, err
		}
	}

	// seqlens_k, total_sequence_length
	if err := s.checkInput(5, []DType{Int32}, 1, 1); err != nil {
		return nil, err
	}
	if s.Inputs[5].Shape[0] != batch {
		return nil, s.errorf("%s has shape %s; it must hold one length per batch, [%d]", s.input(5), shapeString(s.Inputs[5].Shape), batch)
	}
	if err := s.checkInput(6, []DType{Int32}, 0, 1); err != nil {
		return nil, err
	}
	if n := s.Inputs[6].NumElements(); n != 1 {
		return nil, s.errorf("%s has shape %s; it must hold one value", s.input(6), shapeString(s.Inputs[6].Shape))
	}

	// present capacity
	presentCap := pastCap
	if c, ok := s.Consts[6]; ok {
		total := c.Ints[0]
		switch {
		case total < 1:
			return nil, s.errorf("%s is %d; it must be at least 1", s.input(6), total)
		case total > pastCap && total != pastCap+seq:
			return nil, s.errorf("%s is %d with a past capacity of %d and %d new tokens; supported are a shared buffer (at most %d) and a growing cache (exactly %d)",
				s.input(6), total, pastCap, seq, pastCap, pastCap+seq)
		}
		presentCap = max(total, pastCap)
	} else {
		presentCap = pastCap + seq
	}

	// cos_cache, sin_cache
	var rot, maxPos int64
	if len(s.Inputs) == 8 {
		return nil, s.errorf("%s is given without %s; give both or neither", s.input(7), s.input(8))
	}
	if len(s.Inputs) == 9 {
		for i := 7; i <= 8; i++ {
			if err := s.checkInput(i, floatTypes, 2, 2); err != nil {
				return nil, err
			}
			if err := s.checkSameDType(0, i); err != nil {
				return nil, err
			}
		}
		cache := s.Inputs[7].Shape
		if !slices.Equal(cache, s.Inputs[8].Shape) {
			return nil, s.errorf("%s has shape %s and %s has shape %s; they must be the same", s.input(7), shapeString(cache), s.input(8), shapeString(s.Inputs[8].Shape))
		}
		if 2*cache[1] > d {
			return nil, s.errorf("%s has shape %s; its dimension 1 (half the rotary dimension) must be at most half the head size %d", s.input(7), shapeString(cache), d)
		}
		if doRotary {
			rot, maxPos = 2*cache[1], cache[0]
		}
	} else if doRotary {
		return nil, s.errorf(`attribute "do_rotary" is 1 but %s and %s are missing`, s.input(7), s.input(8))
	}

	scale := s.floatAttr("scale", 0)
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return nil, s.errorf(`attribute "scale" is %g; it must be finite`, scale)
	}
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(d)))
	}
	if batch > gqaMaxGridYZ || heads > gqaMaxGridYZ {
		return nil, s.errorf("batch %d and num_heads %d exceed the kernels' grid (at most %d each)", batch, heads, gqaMaxGridYZ)
	}
	presentShape := []int64{batch, kvHeads, presentCap, d}
	if err := s.checkOutput(presentShape); err != nil {
		return nil, err
	}

	sfx := dt.suffix()
	k := &gqaKernel{kernelBase: newBase(l, s, cloneInfo(q), TensorInfo{DType: dt, Shape: presentShape}, TensorInfo{DType: dt, Shape: slices.Clone(presentShape)})}
	if err := k.registerFaults(s.inputNames, gqaFaultDetail(presentCap, seq, maxPos)); err != nil {
		return nil, err
	}
	k.batch, k.seq, k.heads, k.kvHeads, k.headSize = uint64(batch), uint64(seq), uint64(heads), uint64(kvHeads), uint64(d)
	k.pastCap, k.presentCap, k.rot, k.maxPos = uint64(pastCap), uint64(presentCap), uint64(rot), uint64(maxPos)
	k.interleaved, k.scale = interleaved, scale
	k.appendFn = l.function("cudaep_gqa_append_" + sfx)
	k.decode = seq == 1
	if k.decode {
		k.splits = gqaSplits(batch*heads, presentCap)
		k.attnFn = l.function("cudaep_gqa_decode_" + sfx)
		k.attnGrid = cudadrv.Dim3{X: k.splits, Y: uint32(seq * heads), Z: uint32(batch)}
		rows := uint64(batch * seq * heads)
		size := rows * uint64(k.splits) * uint64(d+2) * 4
		if k.partials, err = l.scratchBuffer(size); err != nil {
			return nil, err
		}
		if k.counters, err = l.counterBuffer(rows); err != nil {
			return nil, err
		}
		return k, nil
	}
	k.attnFn = l.function("cudaep_gqa_prefill_" + sfx)
	k.keyTile, k.shared = gqaPrefillTiles(d)
	k.attnGrid = cudadrv.Dim3{X: uint32((seq + gqaPrefillTile - 1) / gqaPrefillTile), Y: uint32(heads), Z: uint32(batch)}
	if seq > math.MaxInt32 {
		return nil, s.errorf("%d query tokens are more than the prefill grid takes", seq)
	}
	return k, nil
}

// gqaFaultDetail describes the data faults of the append pass (cuda/attention.cu's
// gqa_check) for a present capacity, seq new tokens and a rotary cache of maxPos rows.
func gqaFaultDetail(capacity, seq, maxPos int64) func(input int, v int64) string {
	return func(input int, v int64) string {
		switch input {
		case 5:
			if v >= 0 && v < capacity {
				return fmt.Sprintf("%d tokens in all, fewer than the %d new ones", v+1, seq)
			}
			return fmt.Sprintf("outside [0, %d) (the present cache's capacity)", capacity)
		case 6:
			return fmt.Sprintf("outside [1, %d] (the present cache's capacity)", capacity)
		}
		return fmt.Sprintf("as a new token's rotary position, at or past the cos_cache's %d rows", maxPos)
	}
}

// gqaSplits is how many blocks share the cache of one decode row: enough for about
// gqaTargetBlocks blocks over rows rows, at most gqaMaxSplits, and none with fewer than
// gqaMinChunk positions of the capacity. The keys are split evenly among them at run time,
// by each batch's length.
func gqaSplits(rows, capacity int64) uint32 {
	sp := (gqaTargetBlocks + rows - 1) / rows
	sp = min(sp, gqaMaxSplits, (capacity+gqaMinChunk-1)/gqaMinChunk)
	return uint32(max(sp, 1))
}

// gqaPrefillTiles returns the prefill kernel's key tile (32 keys, fewer for long heads) and
// its dynamic shared memory in bytes (qs, ks padded to d+1, vs, ps), within 48 KiB.
func gqaPrefillTiles(d int64) (keyTile, shared uint32) {
	for bk := int64(32); ; bk /= 2 {
		floats := gqaPrefillTile*d + bk*(d+1) + bk*d + gqaPrefillTile*32
		if floats*4 <= gqaSharedLimit || bk == 1 {
			return uint32(bk), uint32(floats * 4)
		}
	}
}

// Execute queues the append pass and the attention. The present outputs may be the past
// inputs themselves (both of them, same shape); no other output may overlap an input.
//
// # Errors
//
// Besides Kernel.Execute's, a present output that is one past input but not the other, or
// that overlaps an input without being it, wraps ErrTensorMismatch.
func (k *gqaKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	aliasK := outputs[1].Ptr == inputs[3].Ptr && inputs[3].NumElements() > 0
	aliasV := outputs[2].Ptr == inputs[4].Ptr && inputs[4].NumElements() > 0
	if aliasK != aliasV {
		return fmt.Errorf("%w: %s: present_key and present_value must both be the past buffers, or neither", ErrTensorMismatch, k.name)
	}
	for o := range outputs {
		for i := range inputs {
			if aliasK && i == o+2 && o > 0 {
				continue
			}
			if overlaps(outputs[o], inputs[i]) {
				return fmt.Errorf("%w: %s: output %d overlaps input %d", ErrTensorMismatch, k.name, o, i)
			}
		}
	}
	var cosP, sinP cudadrv.DevicePtr
	if k.rot > 0 {
		cosP, sinP = inputs[7].Ptr, inputs[8].Ptr
	}
	st := k.lib.rt.Stream
	a := &k.args
	n := k.batch * k.kvHeads * k.presentCap * k.headSize
	if aliasK {
		n = k.batch * k.kvHeads * k.seq * k.headSize
	}
	a.Reset()
	a.Ptr(outputs[1].Ptr).Ptr(outputs[2].Ptr).Ptr(inputs[3].Ptr).Ptr(inputs[4].Ptr).Ptr(inputs[1].Ptr).Ptr(inputs[2].Ptr)
	a.Ptr(inputs[5].Ptr).Ptr(inputs[6].Ptr).Ptr(cosP).Ptr(sinP)
	a.U64(k.batch).U64(k.kvHeads).U64(k.seq).U64(k.headSize).U64(k.pastCap).U64(k.presentCap).U64(k.rot).U64(k.maxPos)
	a.U32(b2u(k.interleaved)).U32(b2u(aliasK))
	k.faultArgs(a)
	if err := st.Launch(k.appendFn, linearGrid(n), linearBlock, 0, a); err != nil {
		return err
	}
	block := cudadrv.Dim3{X: gqaThreads, Y: 1, Z: 1}
	a.Reset()
	if k.decode {
		a.Ptr(k.partials)
	} else {
		a.Ptr(outputs[0].Ptr)
	}
	a.Ptr(inputs[0].Ptr).Ptr(outputs[1].Ptr).Ptr(outputs[2].Ptr).Ptr(inputs[5].Ptr).Ptr(inputs[6].Ptr).Ptr(cosP).Ptr(sinP)
	a.U64(k.heads).U64(k.kvHeads).U64(k.seq).U64(k.headSize).U64(k.presentCap).U64(k.rot).U64(k.maxPos)
	a.U32(b2u(k.interleaved)).F32(k.scale)
	if !k.decode {
		a.U32(k.keyTile)
		return st.Launch(k.attnFn, k.attnGrid, block, k.shared, a)
	}
	a.U32(k.splits).Ptr(outputs[0].Ptr).Ptr(k.counters)
	return st.Launch(k.attnFn, k.attnGrid, block, 0, a)
}

// overlaps reports whether the bytes of two non-empty tensors intersect.
func overlaps(a, b Tensor) bool {
	an, bn := a.Bytes(), b.Bytes()
	if an == 0 || bn == 0 {
		return false
	}
	return a.Ptr < b.Ptr+cudadrv.DevicePtr(bn) && b.Ptr < a.Ptr+cudadrv.DevicePtr(an)
}
