package kernels_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

// gqaBound is the bound on ‖out − ref‖/‖ref‖ for GroupQueryAttention's output against the
// float64 reference: float32 accumulation of scores and weighted values over up to a
// thousand keys, then the output's rounding to float16 (2^-11) or bfloat16 (2^-8), with
// headroom for values that cancel in the weighted sums.
func gqaBound(dt kernels.DType) float64 {
	switch dt {
	case kernels.Float16:
		return 2e-3
	case kernels.BFloat16:
		return 1e-2
	}
	return 1e-4
}

var halfAndFloat = []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16}

// ropeCaches returns cos and sin caches [maxPos, rot/2] with the usual frequencies
// (10000^(-2i/rot)), rounded to dt.
func ropeCaches(dt kernels.DType, maxPos, rot int) (cos, sin []float64) {
	half := rot / 2
	cos, sin = make([]float64, maxPos*half), make([]float64, maxPos*half)
	for p := range maxPos {
		for i := range half {
			theta := float64(p) * math.Pow(10000, -2*float64(i)/float64(rot))
			cos[p*half+i] = roundTo(dt, math.Cos(theta))
			sin[p*half+i] = roundTo(dt, math.Sin(theta))
		}
	}
	return cos, sin
}

func TestRotaryEmbeddingAgainstReference(t *testing.T) {
	f := newFixture(t)
	const maxPos = 48
	cases := []struct {
		name              string
		shape             []int64
		numHeads, rotAttr int64 // attributes, 0: absent
		headSize, rot     int   // what they mean for this input
		perToken          bool
		interleaved       bool
	}{
		{"3d/head-from-cache", []int64{2, 5, 24}, 0, 0, 8, 8, true, false},
		{"3d/num-heads/partial/interleaved", []int64{3, 4, 36}, 3, 6, 12, 6, false, true},
		{"4d/interleaved", []int64{2, 3, 5, 10}, 0, 0, 10, 10, true, true},
		{"4d/partial/start", []int64{1, 2, 7, 16}, 2, 8, 16, 8, false, false},
		{"3d/llama-like", []int64{1, 33, 256}, 4, 0, 64, 64, true, false},
	}
	for _, dt := range halfAndFloat {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				f := f.sub(t)
				transposed := len(c.shape) == 4
				batch, seq := c.shape[0], c.shape[1]
				if transposed {
					seq = c.shape[2]
				}
				x := f.randomTyped(dt, numel(c.shape))
				cos, sin := ropeCaches(dt, maxPos, c.rot)
				pos := []int64{int64(maxPos - seq - 2)}
				posShape := []int64{1}
				if c.perToken {
					posShape = []int64{batch, seq}
					pos = make([]int64, batch*seq)
					for i := range pos {
						pos[i] = int64(f.rng.IntN(maxPos))
					}
				}
				attrs := map[string]kernels.Attribute{"interleaved": kernels.IntAttr(b2i(c.interleaved)), "scale": kernels.FloatAttr(1)}
				if c.numHeads != 0 {
					attrs["num_heads"] = kernels.IntAttr(c.numHeads)
				}
				if c.rotAttr != 0 {
					attrs["rotary_embedding_dim"] = kernels.IntAttr(c.rotAttr)
				}
				cache := info(dt, maxPos, int64(c.rot/2))
				spec := kernels.Spec{Op: "com.microsoft.RotaryEmbedding", Opset: 1, Attrs: attrs,
					Inputs: []kernels.TensorInfo{info(dt, c.shape...), info(kernels.Int64, posShape...), cache, cache}}
				posF := make([]float64, len(pos))
				for i, p := range pos {
					posF[i] = float64(p)
				}
				k, outs := f.runAll(spec, x, posF, cos, sin)
				require.Equal(t, []kernels.TensorInfo{info(dt, c.shape...)}, k.Outputs())
				ref := kernels.RefRotary(kernels.RotaryRef{X: x, Shape: c.shape, Transposed: transposed, Pos: pos, Cos: cos, Sin: sin,
					HeadSize: c.headSize, RotaryDim: c.rot, Interleaved: c.interleaved})
				requireClose64(t, outs[0], ref, boundFor(dt), "output")
				if c.rot < c.headSize {
					for i, v := range outs[0] {
						if i%c.headSize >= c.rot {
							require.Equal(t, x[i], v, "element %d past the rotary dimension is copied", i)
						}
					}
				}
			})
		}
	}
}

func TestRotaryEmbeddingPositionOutsideTheCacheIsNaN(t *testing.T) {
	f := newFixture(t)
	const maxPos, d = 8, 6
	cos, sin := ropeCaches(kernels.Float32, maxPos, 4)
	x := f.randomTyped(kernels.Float32, 2*d)
	cache := info(kernels.Float32, maxPos, 2)
	spec := kernels.Spec{Op: "com.microsoft.RotaryEmbedding", Opset: 1, Attrs: map[string]kernels.Attribute{"num_heads": kernels.IntAttr(1), "rotary_embedding_dim": kernels.IntAttr(4)},
		Inputs: []kernels.TensorInfo{info(kernels.Float32, 1, 2, d), info(kernels.Int64, 1, 2), cache, cache}}
	k, outs := f.runAll(spec, x, []float64{3, maxPos}, cos, sin)
	fault := f.takeFault()
	require.NotNil(t, fault, "a position outside the caches is a data fault")
	assert.Equal(t, kernels.FaultID(k), fault.ID)
	assert.Equal(t, "position_ids", fault.InputName)
	assert.Equal(t, int64(maxPos), fault.Value)
	for i, v := range outs[0] {
		switch {
		case i%d >= 4:
			assert.Equal(t, x[i], v, "element %d is copied", i)
		case i < d:
			assert.False(t, math.IsNaN(v), "element %d at position 3 is rotated", i)
		default:
			assert.True(t, math.IsNaN(v), "element %d at position %d (outside the %d cache rows) is NaN", i, maxPos, maxPos)
		}
	}
}

// gqaCase is one GroupQueryAttention problem. layout is "shared" (the present outputs are the
// past buffers), "separate" (present of the past's capacity, other buffers) or "growing"
// (present of capacity past + seq). The shared and separate layouts give Get the total in
// Spec.Consts, which selects them; a growing case does when constTotal is set.
type gqaCase struct {
	name                          string
	batch, seq, heads, kvHeads, d int
	pastCap                       int
	layout                        string
	seqlens                       []int32
	total                         int32
	constTotal                    bool
	rot                           int // 0: no rotary
	interleaved                   bool
	scale                         float32
	wantPath                      string
}

// gqaRun is a case's inputs on the device and in float64.
type gqaRun struct {
	c      gqaCase
	dt     kernels.DType
	spec   kernels.Spec
	ref    kernels.GQARef
	ins    []kernels.Tensor
	outs   []kernels.Tensor
	k      kernels.Kernel
	maxPos int
}

// newGQA builds case c in dt: random query, key, value and past (the past is random at every
// position, so that a kernel reading keys it must not see is caught), seqlens_k, the total,
// rotary caches; it gets the kernel and allocates its outputs (the past buffers themselves
// for the shared layout).
func (f *fixture) newGQA(c gqaCase, dt kernels.DType) *gqaRun {
	f.t.Helper()
	r := &gqaRun{c: c, dt: dt, maxPos: c.pastCap + c.seq + 3}
	presentCap := c.pastCap
	if c.layout == "growing" {
		presentCap = c.pastCap + c.seq
	}
	qShape := []int64{int64(c.batch), int64(c.seq), int64(c.heads * c.d)}
	kvShape := []int64{int64(c.batch), int64(c.seq), int64(c.kvHeads * c.d)}
	pastShape := []int64{int64(c.batch), int64(c.kvHeads), int64(c.pastCap), int64(c.d)}
	r.ref = kernels.GQARef{DType: dt, Batch: c.batch, Seq: c.seq, Heads: c.heads, KVHeads: c.kvHeads, HeadSize: c.d,
		PastCap: c.pastCap, PresentCap: presentCap, SeqlensK: c.seqlens, Total: c.total, Scale: float64(c.scale),
		Shared: c.layout == "shared", RotaryDim: c.rot, Interleaved: c.interleaved}
	r.ref.Query, r.ref.Key, r.ref.Value = f.randomTyped(dt, numel(qShape)), f.randomTyped(dt, numel(kvShape)), f.randomTyped(dt, numel(kvShape))
	r.ref.PastKey, r.ref.PastValue = f.randomTyped(dt, numel(pastShape)), f.randomTyped(dt, numel(pastShape))
	attrs := map[string]kernels.Attribute{"num_heads": kernels.IntAttr(int64(c.heads)), "kv_num_heads": kernels.IntAttr(int64(c.kvHeads)),
		// ONNX Runtime 1.30 hands a plugin EP these defaults of the schema too.
		"local_window_size": kernels.IntAttr(-1), "softcap": kernels.FloatAttr(0), "causal": kernels.IntAttr(1),
		"k_quant_type": kernels.StringAttr("NONE"), "v_quant_type": kernels.StringAttr("NONE"), "qk_norm_epsilon": kernels.FloatAttr(1e-6),
		"sliding_window_cache": kernels.IntAttr(0), "smooth_softmax": kernels.IntAttr(-1), "qk_output": kernels.IntAttr(0)}
	if c.scale != 0 {
		attrs["scale"] = kernels.FloatAttr(c.scale)
	}
	r.spec = kernels.Spec{Op: "com.microsoft.GroupQueryAttention", Opset: 1, Attrs: attrs, Inputs: []kernels.TensorInfo{
		info(dt, qShape...), info(dt, kvShape...), info(dt, kvShape...), info(dt, pastShape...), info(dt, pastShape...),
		info(kernels.Int32, int64(c.batch)), info(kernels.Int32)}}
	if c.constTotal || c.layout != "growing" {
		// The value selects the layout: P' = max(total, P). Without it Get assumes P + S.
		r.spec.Consts = map[int]kernels.Const{6: kernels.IntsConst(int64(c.total))}
	}
	seqlens := make([]float64, c.batch)
	for i, v := range c.seqlens {
		seqlens[i] = float64(v)
	}
	vals := [][]float64{r.ref.Query, r.ref.Key, r.ref.Value, r.ref.PastKey, r.ref.PastValue, seqlens, {float64(c.total)}}
	if c.rot > 0 {
		attrs["do_rotary"] = kernels.IntAttr(1)
		attrs["rotary_interleaved"] = kernels.IntAttr(b2i(c.interleaved))
		r.ref.Cos, r.ref.Sin = ropeCaches(dt, r.maxPos, c.rot)
		cache := info(dt, int64(r.maxPos), int64(c.rot/2))
		r.spec.Inputs = append(r.spec.Inputs, cache, cache)
		vals = append(vals, r.ref.Cos, r.ref.Sin)
	}
	r.k = f.get(r.spec)
	presentShape := []int64{int64(c.batch), int64(c.kvHeads), int64(presentCap), int64(c.d)}
	require.Equal(f.t, []kernels.TensorInfo{info(dt, qShape...), info(dt, presentShape...), info(dt, presentShape...)}, r.k.Outputs())
	for i, v := range vals {
		r.ins = append(r.ins, f.uploadTyped(r.spec.Inputs[i].DType, r.spec.Inputs[i].Shape, v))
	}
	outs := r.k.Outputs()
	r.outs = []kernels.Tensor{f.alloc(outs[0])}
	f.poison(r.outs[0])
	if c.layout == "shared" {
		r.outs = append(r.outs, r.ins[3], r.ins[4])
	} else {
		r.outs = append(r.outs, f.alloc(outs[1]), f.alloc(outs[2]))
		f.poison(r.outs[1])
		f.poison(r.outs[2])
	}
	return r
}

// check compares the device outputs with the reference.
func (r *gqaRun) check(f *fixture, what string) {
	f.t.Helper()
	out, pk, pv := kernels.RefGQA(r.ref)
	requireClose64(f.t, f.downloadTyped(r.outs[0]), out, gqaBound(r.dt), what+": output")
	requireClose64(f.t, f.downloadTyped(r.outs[1]), pk, boundFor(r.dt), what+": present_key")
	require.Equal(f.t, pv, f.downloadTyped(r.outs[2]), what+": present_value holds the values, copied")
}

// gqaCases cover decode (one token, split cache) and prefill (several), the three layouts,
// GQA group sizes 1, 2, 3 and 4, head sizes from 7 to 256, batches of different lengths, the
// first prompt (with padding) and a later prompt, with and without rotary.
var gqaCases = []gqaCase{
	{name: "decode/shared/group4/long", batch: 1, seq: 1, heads: 8, kvHeads: 2, d: 64, pastCap: 1000, layout: "shared",
		seqlens: []int32{700}, total: 701, rot: 64, wantPath: "decode"},
	{name: "decode/shared/group1/ragged-batch", batch: 3, seq: 1, heads: 4, kvHeads: 4, d: 40, pastCap: 300, layout: "shared",
		seqlens: []int32{0, 150, 299}, total: 300, rot: 16, interleaved: true, wantPath: "decode"},
	{name: "decode/growing/group2/no-rotary", batch: 2, seq: 1, heads: 6, kvHeads: 3, d: 24, pastCap: 37, layout: "growing",
		seqlens: []int32{37, 37}, total: 38, wantPath: "decode"},
	{name: "decode/separate/group2", batch: 2, seq: 1, heads: 4, kvHeads: 2, d: 32, pastCap: 64, layout: "separate",
		seqlens: []int32{20, 63}, total: 64, rot: 32, wantPath: "decode"},
	{name: "decode/shared/head256", batch: 1, seq: 1, heads: 2, kvHeads: 2, d: 256, pastCap: 50, layout: "shared",
		seqlens: []int32{40}, total: 41, rot: 128, scale: 0.05, wantPath: "decode"},
	{name: "prefill/growing/first-prompt/group4", batch: 2, seq: 19, heads: 4, kvHeads: 1, d: 20, pastCap: 0, layout: "growing",
		seqlens: []int32{18, 18}, total: 19, rot: 20, interleaved: true, wantPath: "prefill"},
	{name: "prefill/shared/first-prompt/padded", batch: 2, seq: 19, heads: 4, kvHeads: 2, d: 16, pastCap: 64, layout: "shared",
		seqlens: []int32{18, 11}, total: 19, rot: 16, wantPath: "prefill"},
	{name: "prefill/shared/later-prompt", batch: 1, seq: 7, heads: 4, kvHeads: 2, d: 48, pastCap: 128, layout: "shared",
		seqlens: []int32{36}, total: 37, rot: 32, interleaved: true, wantPath: "prefill"},
	{name: "prefill/separate/tiles/head128", batch: 1, seq: 70, heads: 4, kvHeads: 2, d: 128, pastCap: 96, layout: "separate",
		seqlens: []int32{69}, total: 70, rot: 128, wantPath: "prefill"},
	{name: "prefill/growing/head256", batch: 1, seq: 17, heads: 2, kvHeads: 1, d: 256, pastCap: 0, layout: "growing",
		seqlens: []int32{16}, total: 17, wantPath: "prefill"},
	{name: "prefill/growing/odd-head/group3", batch: 2, seq: 5, heads: 3, kvHeads: 1, d: 7, pastCap: 0, layout: "growing",
		seqlens: []int32{4, 4}, total: 5, scale: 0.37, wantPath: "prefill"},
	{name: "prefill/growing/later-prompt/const-total", batch: 1, seq: 3, heads: 2, kvHeads: 1, d: 12, pastCap: 9, layout: "growing",
		seqlens: []int32{11}, total: 12, constTotal: true, rot: 8, wantPath: "prefill"},
}

func TestGroupQueryAttentionAgainstReference(t *testing.T) {
	f := newFixture(t)
	for _, dt := range halfAndFloat {
		for _, c := range gqaCases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				f := f.sub(t)
				r := f.newGQA(c, dt)
				path, n := kernels.GQAPlan(r.k)
				require.Equal(t, c.wantPath, path)
				if c.name == "decode/shared/group4/long" {
					assert.Greater(t, n, 1, "a long cache is split across blocks")
				}
				require.NoError(t, r.k.Execute(r.ins, r.outs))
				r.check(f, c.name)
			})
		}
	}
}

func TestGroupQueryAttentionPresentCapacity(t *testing.T) {
	f := newFixture(t)
	dt := kernels.Float16
	spec := func(seq, past int64, total ...int64) kernels.Spec {
		s := kernels.Spec{Op: "com.microsoft.GroupQueryAttention", Opset: 1,
			Attrs: map[string]kernels.Attribute{"num_heads": kernels.IntAttr(4), "kv_num_heads": kernels.IntAttr(2)},
			Inputs: []kernels.TensorInfo{info(dt, 2, seq, 64), info(dt, 2, seq, 32), info(dt, 2, seq, 32), info(dt, 2, 2, past, 16),
				info(dt, 2, 2, past, 16), info(kernels.Int32, 2), info(kernels.Int32, 1)}}
		if len(total) > 0 {
			s.Consts = map[int]kernels.Const{6: kernels.IntsConst(total[0])}
		}
		return s
	}
	for _, c := range []struct {
		name      string
		spec      kernels.Spec
		presentAt int64
	}{
		{"empty past: the first prompt of a growing cache", spec(5, 0), 5},
		{"a past without the total: a growing cache", spec(1, 128), 129},
		{"total within the past: the shared buffer", spec(3, 128, 40), 128},
		{"total at the past's capacity: the shared buffer", spec(1, 128, 128), 128},
		{"total past + seq: a growing cache", spec(3, 40, 43), 43},
	} {
		k := f.get(c.spec)
		assert.Equal(t, []int64{2, 2, c.presentAt, 16}, k.Outputs()[1].Shape, c.name)
	}
}

func TestGroupQueryAttentionRefusesWithClearErrors(t *testing.T) {
	f := newFixture(t)
	dt := kernels.Float16
	base := func() kernels.Spec {
		return kernels.Spec{Op: "com.microsoft.GroupQueryAttention", Opset: 1,
			Attrs: map[string]kernels.Attribute{"num_heads": kernels.IntAttr(4), "kv_num_heads": kernels.IntAttr(2)},
			Inputs: []kernels.TensorInfo{info(dt, 1, 1, 64), info(dt, 1, 1, 32), info(dt, 1, 1, 32), info(dt, 1, 2, 8, 16),
				info(dt, 1, 2, 8, 16), info(kernels.Int32, 1), info(kernels.Int32)}}
	}
	with := func(edit func(*kernels.Spec)) kernels.Spec {
		s := base()
		edit(&s)
		return s
	}
	cache := info(dt, 32, 8)
	for _, c := range []struct {
		spec kernels.Spec
		want []string
	}{
		{with(func(s *kernels.Spec) { s.Attrs["kv_num_heads"] = kernels.IntAttr(3) }), []string{`"num_heads" = 4 is not a multiple of "kv_num_heads" = 3`}},
		{with(func(s *kernels.Spec) { delete(s.Attrs, "kv_num_heads") }), []string{`"kv_num_heads" is required`}},
		{with(func(s *kernels.Spec) { s.Attrs["num_heads"] = kernels.IntAttr(0) }), []string{`"num_heads" is 0`}},
		{with(func(s *kernels.Spec) { s.Inputs[0] = info(dt, 1, 1, 66) }), []string{"hidden size 66", `"num_heads" = 4 does not divide`}},
		{with(func(s *kernels.Spec) {
			s.Inputs[0] = info(dt, 1, 1, 2048)
			s.Inputs[1], s.Inputs[2] = info(dt, 1, 1, 1024), info(dt, 1, 1, 1024)
		}),
			[]string{"head size is 512", "at most 256"}},
		{with(func(s *kernels.Spec) { s.Inputs[1] = info(dt, 1, 1, 48) }), []string{"input 1 (key) has shape [1,1,48]", "[1,1,32]"}},
		{with(func(s *kernels.Spec) { s.Inputs[2] = info(kernels.Float32, 1, 1, 32) }), []string{"input 2 (value) is float32"}},
		{with(func(s *kernels.Spec) { s.Inputs[3] = info(dt, 1, 2, 8, 8); s.Inputs[4] = info(dt, 1, 2, 8, 8) }), []string{"input 3 (past_key) has shape [1,2,8,8]", "head size 16"}},
		{with(func(s *kernels.Spec) { s.Inputs[4] = info(dt, 1, 2, 9, 16) }), []string{"input 3 (past_key) has shape [1,2,8,16] and input 4 (past_value) has shape [1,2,9,16]"}},
		{with(func(s *kernels.Spec) { s.Inputs[5] = info(kernels.Int64, 1) }), []string{"input 5 (seqlens_k) has dtype int64"}},
		{with(func(s *kernels.Spec) { s.Inputs[5] = info(kernels.Int32, 2) }), []string{"input 5 (seqlens_k) has shape [2]", "[1]"}},
		{with(func(s *kernels.Spec) { s.Inputs[6] = info(kernels.Int32, 2) }), []string{"input 6 (total_sequence_length) has shape [2]"}},
		{with(func(s *kernels.Spec) { s.Consts = map[int]kernels.Const{6: kernels.IntsConst(15)} }), []string{"input 6 (total_sequence_length) is 15", "growing cache (exactly 9)"}},
		{with(func(s *kernels.Spec) { s.Attrs["do_rotary"] = kernels.IntAttr(1) }), []string{`"do_rotary" is 1 but input 7 (cos_cache) and input 8 (sin_cache) are missing`}},
		{with(func(s *kernels.Spec) { s.Inputs = append(s.Inputs, cache) }), []string{"input 7 (cos_cache) is given without input 8 (sin_cache)"}},
		{with(func(s *kernels.Spec) { s.Inputs = append(s.Inputs, info(dt, 32, 12), info(dt, 32, 12)) }), []string{"input 7 (cos_cache) has shape [32,12]", "half the head size 16"}},
		{with(func(s *kernels.Spec) {
			s.Inputs = append(s.Inputs, cache, cache, info(kernels.Int64, 1, 1))
		}), []string{"input 9 (position_ids) is not supported"}},
		{with(func(s *kernels.Spec) { s.Attrs["local_window_size"] = kernels.IntAttr(128) }), []string{`"local_window_size" is 128`, "only -1"}},
		{with(func(s *kernels.Spec) { s.Attrs["softcap"] = kernels.FloatAttr(30) }), []string{`"softcap" is 30`}},
		{with(func(s *kernels.Spec) { s.Attrs["smooth_softmax"] = kernels.IntAttr(1) }), []string{`"smooth_softmax" is 1`}},
		{with(func(s *kernels.Spec) { s.Attrs["causal"] = kernels.IntAttr(0) }), []string{`"causal" is 0; only 1`}},
		{with(func(s *kernels.Spec) { s.Attrs["k_quant_type"] = kernels.StringAttr("PER_TENSOR") }), []string{`"k_quant_type" is "PER_TENSOR"`}},
		{with(func(s *kernels.Spec) { s.Attrs["sliding_window_cache"] = kernels.IntAttr(1) }), []string{`"sliding_window_cache" is 1`}},
		{with(func(s *kernels.Spec) { s.Attrs["do_rotary"] = kernels.IntAttr(2) }), []string{`"do_rotary" is 2; it must be 0 or 1`}},
		{with(func(s *kernels.Spec) { s.Attrs["mask_filter_value"] = kernels.FloatAttr(-1) }), []string{`"mask_filter_value" is not supported`}},
		{with(func(s *kernels.Spec) { s.Inputs = s.Inputs[:6] }), []string{"got 6 inputs"}},
	} {
		_, err := f.lib.Get(c.spec)
		require.Error(t, err, "%v", c.want)
		assert.ErrorIs(t, err, kernels.ErrUnsupported)
		for _, w := range c.want {
			assert.Contains(t, err.Error(), w)
		}
		assert.True(t, strings.HasPrefix(err.Error(), "kernels: unsupported: com.microsoft.GroupQueryAttention (opset 1): "), err.Error())
	}
}

func TestRotaryEmbeddingRefusesWithClearErrors(t *testing.T) {
	f := newFixture(t)
	dt := kernels.Float32
	cache := info(dt, 16, 4)
	base := func() kernels.Spec {
		return kernels.Spec{Op: "com.microsoft.RotaryEmbedding", Opset: 1, Attrs: map[string]kernels.Attribute{},
			Inputs: []kernels.TensorInfo{info(dt, 2, 3, 16), info(kernels.Int64, 2, 3), cache, cache}}
	}
	with := func(edit func(*kernels.Spec)) kernels.Spec {
		s := base()
		edit(&s)
		return s
	}
	for _, c := range []struct {
		spec kernels.Spec
		want string
	}{
		{with(func(s *kernels.Spec) { s.Attrs["is_packed_batching"] = kernels.IntAttr(1) }), `"is_packed_batching" is 1`},
		{with(func(s *kernels.Spec) { s.Attrs["rotary_embedding_dim"] = kernels.IntAttr(8) }), `"num_heads" is absent`},
		{with(func(s *kernels.Spec) { s.Attrs["num_heads"] = kernels.IntAttr(3) }), `hidden size 16, which attribute "num_heads" = 3 does not divide`},
		{with(func(s *kernels.Spec) {
			s.Attrs["num_heads"], s.Attrs["rotary_embedding_dim"] = kernels.IntAttr(2), kernels.IntAttr(7)
		}), "rotary dimension 7 is odd"},
		{with(func(s *kernels.Spec) {
			s.Attrs["num_heads"], s.Attrs["rotary_embedding_dim"] = kernels.IntAttr(2), kernels.IntAttr(6)
		}), "input 2 (cos_cache) has shape [16,4]; its dimension 1 must be half the rotary dimension 6, 3"},
		{with(func(s *kernels.Spec) { s.Attrs["num_heads"] = kernels.IntAttr(4) }), "rotary dimension 4"},
		{with(func(s *kernels.Spec) { s.Inputs[1] = info(kernels.Int64, 3, 2) }), "input 1 (position_ids) has shape [3,2]"},
		{with(func(s *kernels.Spec) { s.Inputs[1] = info(kernels.Int32, 2, 3) }), "input 1 (position_ids) has dtype int32"},
		{with(func(s *kernels.Spec) { s.Inputs[3] = info(dt, 15, 4) }), "input 2 (cos_cache) has shape [16,4] and input 3 (sin_cache) has shape [15,4]"},
		{with(func(s *kernels.Spec) { s.Inputs[0] = info(dt, 2, 4, 3, 8); s.Attrs["num_heads"] = kernels.IntAttr(2) }), `"num_heads" is 2`},
		{with(func(s *kernels.Spec) { s.Inputs[0] = info(dt, 2, 3, 20) }), "hidden size 20, not a multiple of the head size 8"},
		{with(func(s *kernels.Spec) { s.Inputs = s.Inputs[:3] }), "got 3 inputs"},
	} {
		_, err := f.lib.Get(c.spec)
		require.Error(t, err, c.want)
		assert.ErrorIs(t, err, kernels.ErrUnsupported)
		assert.Contains(t, err.Error(), c.want)
	}
}

func TestGroupQueryAttentionExecuteRefusesHalfAliasedPresent(t *testing.T) {
	f := newFixture(t)
	r := f.newGQA(gqaCases[0], kernels.Float32)
	outs := []kernels.Tensor{r.outs[0], r.ins[3], f.alloc(r.ins[4].TensorInfo)}
	err := r.k.Execute(r.ins, outs)
	require.ErrorIs(t, err, kernels.ErrTensorMismatch)
	assert.Contains(t, err.Error(), "both be the past buffers, or neither")
	// An output overlapping an input it is not: present_value over the key input's bytes.
	outs = []kernels.Tensor{r.outs[0], f.alloc(r.k.Outputs()[1]), {TensorInfo: r.k.Outputs()[2], Ptr: r.ins[0].Ptr}}
	err = r.k.Execute(r.ins, outs)
	require.ErrorIs(t, err, kernels.ErrTensorMismatch)
	assert.Contains(t, err.Error(), "output 2 overlaps input 0")
}

// TestGroupQueryAttentionDecodeStepsReplayFromAGraph captures one decode step on the shared
// cache and replays it for successive tokens, changing only device data (the new token's
// query, key and value, and seqlens_k) between replays, as a decode loop with CUDA graphs
// does: each replay matches the reference, the cache grows in place, and neither Get's
// scratch nor anything else is allocated after Get.
func TestGroupQueryAttentionDecodeStepsReplayFromAGraph(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Float16, kernels.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			f := f.sub(t)
			c := gqaCase{batch: 2, seq: 1, heads: 8, kvHeads: 2, d: 64, pastCap: 256, layout: "shared",
				seqlens: []int32{100, 30}, total: 101, rot: 64}
			r := f.newGQA(c, dt)
			require.NoError(t, graphs.Audit([]graphs.Node{r.k}))
			before := f.env.Context.Counters().DeviceAllocs
			exec := f.capture(func() { require.NoError(t, r.k.Execute(r.ins, r.outs)) })
			for step := range 3 {
				// The reference's past is the cache as the previous step left it.
				if step > 0 {
					r.ref.PastKey, r.ref.PastValue = f.downloadTyped(r.outs[1]), f.downloadTyped(r.outs[2])
					r.ref.Query, r.ref.Key, r.ref.Value = f.randomTyped(dt, int64(len(r.ref.Query))), f.randomTyped(dt, int64(len(r.ref.Key))), f.randomTyped(dt, int64(len(r.ref.Value)))
					for b := range r.ref.SeqlensK {
						r.ref.SeqlensK[b] += int32(1 + b) // batches advance by different amounts
					}
					r.ref.Total = max(r.ref.SeqlensK[0], r.ref.SeqlensK[1]) + 1
					for i, v := range [][]float64{r.ref.Query, r.ref.Key, r.ref.Value} {
						require.NoError(t, f.env.Context.CopyHtoD(r.ins[i].Ptr, encode(dt, v)))
					}
					seqlens := []float64{float64(r.ref.SeqlensK[0]), float64(r.ref.SeqlensK[1])}
					require.NoError(t, f.env.Context.CopyHtoD(r.ins[5].Ptr, encode(kernels.Int32, seqlens)))
					require.NoError(t, f.env.Context.CopyHtoD(r.ins[6].Ptr, encode(kernels.Int32, []float64{float64(r.ref.Total)})))
				}
				f.poison(r.outs[0])
				require.NoError(t, exec.Launch(f.stream))
				r.check(f, fmt.Sprintf("replay %d", step))
			}
			assert.Equal(t, before, f.env.Context.Counters().DeviceAllocs, "no device allocation after Get")
		})
	}
}

func TestAttentionExecuteAllocatesNothing(t *testing.T) {
	f := newFixture(t)
	if f.env.Sim != nil {
		t.Skip("asserted on the GPU (CUDAEP_TEST_BACKEND=cuda): the sim's kernels allocate on its stream worker during the measurement")
	}
	for _, c := range []gqaCase{gqaCases[0], gqaCases[6]} {
		r := f.newGQA(c, kernels.Float16)
		require.NoError(t, r.k.Execute(r.ins, r.outs))
		allocs := testing.AllocsPerRun(20, func() {
			if err := r.k.Execute(r.ins, r.outs); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%s: allocations per Execute", r.k.Name())
		require.NoError(t, f.stream.Synchronize())
	}
	for _, c := range []attnCase{attnCases[0], attnCases[8]} { // ONNX Attention: decode and prefill
		r := f.newAttn(c, kernels.BFloat16)
		outs := []kernels.Tensor{r.out}
		require.NoError(t, r.k.Execute(r.ins, outs))
		allocs := testing.AllocsPerRun(20, func() {
			if err := r.k.Execute(r.ins, outs); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%s: allocations per Execute", r.k.Name())
		require.NoError(t, f.stream.Synchronize())
	}
}
