package kernels

import (
	"fmt"
	"slices"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	modules = append(modules, ptxModule{"ptx/attention.ptx", append(typedEntries([]string{
		"cudaep_rotary", "cudaep_gqa_append", "cudaep_gqa_decode", "cudaep_gqa_prefill"}, floatTypes),
		onnxAttentionEntries()...)})
	builders["com.microsoft.RotaryEmbedding"] = builder{inputNames: []string{"input", "position_ids", "cos_cache", "sin_cache"}, build: buildRotary}
}

// rotaryKernel is com.microsoft's RotaryEmbedding, one launch of cudaep_rotary_<t>(out, x,
// pos, cos, sin, batch, seq, heads, headSize, rot, maxPos, transposed, interleaved,
// perToken, fault, id).
type rotaryKernel struct {
	kernelBase
	fn                                       *cudadrv.Function
	batch, seq, heads, headSize, rot, maxPos uint64
	transposed, interleaved, perToken        bool
	grid                                     cudadrv.Dim3
	args                                     cudadrv.KernelArgs
}

// buildRotary builds com.microsoft.RotaryEmbedding (opset 1 of that domain), as ONNX Runtime
// defines it:
//
//   - input is [batch, seq, hidden] or [batch, num_heads, seq, head_size]; float32, float16
//     or bfloat16, like cos_cache and sin_cache, which are [max_pos, rotary_dim / 2].
//   - position_ids is int64: one value (a scalar or [1]), the position of token 0 (token s
//     is at that + s), or [batch, seq], each token's position. A position outside [0,
//     max_pos) is an error in ONNX Runtime; the kernel records it as a data fault
//     (Library.TakeFault: position_ids' value) and yields NaN in the rotated part of its
//     vectors.
//   - Attributes: num_heads (needed for a 3-D input when rotary_embedding_dim is set; without
//     it the head size is 2 · cos_cache's second dimension), rotary_embedding_dim (0, the
//     default: the whole head), interleaved (pairs 2k and 2k+1 instead of the two halves),
//     scale (accepted and unused: it only scales caches the op would compute itself, which it
//     never does here) and is_packed_batching (only 0).
//
// The first rotary_dim elements of every head vector are rotated, the rest copied.
func buildRotary(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(4, 4); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"interleaved": AttrInt, "num_heads": AttrInt,
		"rotary_embedding_dim": AttrInt, "scale": AttrFloat, "is_packed_batching": AttrInt}); err != nil {
		return nil, err
	}
	if v := s.intAttr("is_packed_batching", 0); v != 0 {
		return nil, s.errorf(`attribute "is_packed_batching" is %d; only 0 (a padded batch) is supported`, v)
	}
	interleaved, err := s.boolAttr("interleaved")
	if err != nil {
		return nil, err
	}
	if err := s.checkInput(0, floatTypes, 3, 4); err != nil {
		return nil, err
	}
	x := s.Inputs[0]
	if err := s.checkInput(1, []DType{Int64}, 0, 2); err != nil {
		return nil, err
	}
	for i := 2; i < 4; i++ {
		if err := s.checkInput(i, floatTypes, 2, 2); err != nil {
			return nil, err
		}
		if err := s.checkSameDType(0, i); err != nil {
			return nil, err
		}
	}
	cache := s.Inputs[2].Shape
	if !slices.Equal(cache, s.Inputs[3].Shape) {
		return nil, s.errorf("%s has shape %s and %s has shape %s; they must be the same", s.input(2), shapeString(cache), s.input(3), shapeString(s.Inputs[3].Shape))
	}
	numHeads, rotDim := s.intAttr("num_heads", 0), s.intAttr("rotary_embedding_dim", 0)
	if numHeads < 0 {
		return nil, s.errorf(`attribute "num_heads" is %d; it must be positive (or absent)`, numHeads)
	}
	if rotDim < 0 {
		return nil, s.errorf(`attribute "rotary_embedding_dim" is %d; it must be positive, or 0 for the whole head`, rotDim)
	}
	k := &rotaryKernel{kernelBase: newBase(l, s, cloneInfo(x)), fn: l.function("cudaep_rotary_" + x.DType.suffix())}
	var heads, headSize int64
	k.batch = uint64(x.Shape[0])
	if len(x.Shape) == 4 {
		k.transposed = true
		heads, headSize = x.Shape[1], x.Shape[3]
		k.seq = uint64(x.Shape[2])
		if numHeads != 0 && numHeads != heads {
			return nil, s.errorf(`attribute "num_heads" is %d, but %s of shape %s (batch, num_heads, seq, head_size) has %d heads`, numHeads, s.input(0), shapeString(x.Shape), heads)
		}
	} else {
		hidden := x.Shape[2]
		k.seq = uint64(x.Shape[1])
		switch {
		case numHeads > 0:
			if hidden%numHeads != 0 {
				return nil, s.errorf(`%s has hidden size %d, which attribute "num_heads" = %d does not divide`, s.input(0), hidden, numHeads)
			}
			heads, headSize = numHeads, hidden/numHeads
		case rotDim > 0:
			return nil, s.errorf(`attribute "rotary_embedding_dim" is %d but "num_heads" is absent; a 3-D input needs num_heads to find its heads then`, rotDim)
		default:
			headSize = 2 * cache[1]
			if hidden%headSize != 0 {
				return nil, s.errorf("%s has hidden size %d, not a multiple of the head size %d (2 · %s's dimension 1); set num_heads", s.input(0), hidden, headSize, s.input(2))
			}
			heads = hidden / headSize
		}
	}
	rot := rotDim
	if rot == 0 {
		rot = headSize
	}
	switch {
	case rot > headSize:
		return nil, s.errorf(`the rotary dimension %d exceeds the head size %d`, rot, headSize)
	case rot%2 != 0:
		return nil, s.errorf(`the rotary dimension %d is odd; rotation works on pairs`, rot)
	case cache[1] != rot/2:
		return nil, s.errorf("%s has shape %s; its dimension 1 must be half the rotary dimension %d, %d", s.input(2), shapeString(cache), rot, rot/2)
	}
	pos := s.Inputs[1].Shape
	switch {
	case product(pos) == 1 && len(pos) <= 1:
	case len(pos) == 2 && uint64(pos[0]) == k.batch && uint64(pos[1]) == k.seq:
		k.perToken = true
	default:
		return nil, s.errorf("%s has shape %s; it must hold one start position ([] or [1]) or one position per token ([%d,%d])", s.input(1), shapeString(pos), k.batch, k.seq)
	}
	k.heads, k.headSize, k.rot, k.maxPos = uint64(heads), uint64(headSize), uint64(rot), uint64(cache[0])
	k.interleaved = interleaved
	k.grid = linearGrid(uint64(x.NumElements()))
	maxPos, seq, perToken := cache[0], int64(k.seq), k.perToken
	if err := k.registerFaults(s.inputNames, func(_ int, v int64) string {
		if perToken || seq == 1 {
			return fmt.Sprintf("a position outside [0, %d) (the cos_cache's rows)", maxPos)
		}
		return fmt.Sprintf("the start of positions %d + [0, %d) that leave [0, %d) (the cos_cache's rows)", v, seq, maxPos)
	}); err != nil {
		return nil, err
	}
	return k, nil
}

// boolAttr reads an integer attribute that must be 0 or 1 (absent: 0).
func (s opSpec) boolAttr(name string) (bool, error) {
	switch v := s.intAttr(name, 0); v {
	case 0, 1:
		return v == 1, nil
	default:
		return false, s.errorf("attribute %q is %d; it must be 0 or 1", name, v)
	}
}

// Execute queues the rotation. The output must not overlap the input.
func (k *rotaryKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).Ptr(inputs[2].Ptr).Ptr(inputs[3].Ptr)
	a.U64(k.batch).U64(k.seq).U64(k.heads).U64(k.headSize).U64(k.rot).U64(k.maxPos)
	a.U32(b2u(k.transposed)).U32(b2u(k.interleaved)).U32(b2u(k.perToken))
	k.faultArgs(a)
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// b2u is 1 for true, 0 for false: a kernel's flag argument.
func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
