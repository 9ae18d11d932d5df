package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

// attnCase is one Attention problem: Q [batch, heads, seq, d], K [batch, kvHeads, kvSeq, d],
// V [batch, kvHeads, kvSeq, dv] (dv 0: d), and a mask of maskShape: "float" (random additive
// values, some -inf, never at key 0, which every row sees), "bool" (random, key 0 true),
// "lowest" (an exported causal mask: 0 where key j <= s + kvSeq - seq, else the dtype's lowest
// finite value) or "" (none).
type attnCase struct {
	name                                 string
	batch, heads, kvHeads, seq, kvSeq, d int
	dv                                   int
	mask                                 string
	maskShape                            []int64
	causal                               bool
	scale                                float32 // 0: the attribute is absent
	wantPath                             string
}

// attnRun is a case's tensors on the device and in float64.
type attnRun struct {
	c    attnCase
	dt   kernels.DType
	spec kernels.Spec
	ref  kernels.AttnRef
	ins  []kernels.Tensor
	out  kernels.Tensor
	k    kernels.Kernel
}

// lowest is the dtype's lowest finite value, which torch.onnx's exports use as a mask's "minus
// infinity".
func lowest(dt kernels.DType) float64 {
	switch dt {
	case kernels.Float16:
		return -65504
	case kernels.BFloat16:
		return float64(cudadrv.BFloat16Value(0xff7f)) // -3.3895e38 (-MaxFloat32 rounds to -inf)
	}
	return -math.MaxFloat32
}

// maskValues returns the values of c's mask (bool: 1 and 0), as stored in dt.
func (f *fixture) maskValues(c attnCase, dt kernels.DType) []float64 {
	shape := c.maskShape
	n := numel(shape)
	vals := make([]float64, n)
	rank := len(shape)
	dim := func(i int) int64 { // the extent of the broadcast output's axis i (0 batch … 3 key)
		if j := i - (4 - rank); j >= 0 {
			return shape[j]
		}
		return 1
	}
	idx := make([]int64, 4)
	for i := range vals {
		rem := int64(i)
		for a := 3; a >= 0; a-- {
			idx[a] = rem % dim(a)
			rem /= dim(a)
		}
		s, j := idx[2], idx[3]
		switch c.mask {
		case "float":
			vals[i] = roundTo(dt, 3*f.rng.Float64()-1.5)
			if j > 0 && f.rng.IntN(8) == 0 {
				vals[i] = math.Inf(-1)
			}
		case "bool":
			vals[i] = 1
			if j > 0 && f.rng.IntN(3) == 0 {
				vals[i] = 0
			}
		case "lowest":
			if j > s+int64(c.kvSeq-c.seq) {
				vals[i] = lowest(dt)
			}
		}
	}
	return vals
}

// newAttn builds case c in dt: random Q, K, V and mask, the kernel, and a poisoned output.
func (f *fixture) newAttn(c attnCase, dt kernels.DType) *attnRun {
	f.t.Helper()
	if c.dv == 0 {
		c.dv = c.d
	}
	r := &attnRun{c: c, dt: dt}
	qShape := []int64{int64(c.batch), int64(c.heads), int64(c.seq), int64(c.d)}
	kShape := []int64{int64(c.batch), int64(c.kvHeads), int64(c.kvSeq), int64(c.d)}
	vShape := []int64{int64(c.batch), int64(c.kvHeads), int64(c.kvSeq), int64(c.dv)}
	r.ref = kernels.AttnRef{QShape: qShape, KShape: kShape, VShape: vShape, Causal: c.causal, Scale: float64(c.scale),
		Q: f.randomTyped(dt, numel(qShape)), K: f.randomTyped(dt, numel(kShape)), V: f.randomTyped(dt, numel(vShape))}
	attrs := map[string]kernels.Attribute{}
	if c.causal {
		attrs["is_causal"] = kernels.IntAttr(1)
	}
	if c.scale != 0 {
		attrs["scale"] = kernels.FloatAttr(c.scale)
	}
	r.spec = kernels.Spec{Op: "Attention", Opset: 23, Attrs: attrs, NumOutputs: 1,
		Inputs: []kernels.TensorInfo{info(dt, qShape...), info(dt, kShape...), info(dt, vShape...)}}
	vals := [][]float64{r.ref.Q, r.ref.K, r.ref.V}
	if c.mask != "" {
		mdt := dt
		if c.mask == "bool" {
			mdt, r.ref.BoolMask = kernels.Bool, true
		}
		r.ref.Mask, r.ref.MaskShape = f.maskValues(c, dt), c.maskShape
		r.spec.Inputs = append(r.spec.Inputs, info(mdt, c.maskShape...))
		vals = append(vals, r.ref.Mask)
	}
	r.k = f.get(r.spec)
	require.Equal(f.t, []kernels.TensorInfo{info(dt, int64(c.batch), int64(c.heads), int64(c.seq), int64(c.dv))}, r.k.Outputs())
	for i, v := range vals {
		r.ins = append(r.ins, f.uploadTyped(r.spec.Inputs[i].DType, r.spec.Inputs[i].Shape, v))
	}
	r.out = f.outputs(r.k)[0]
	return r
}

// check compares the device output with the reference.
func (r *attnRun) check(f *fixture, what string) {
	f.t.Helper()
	requireClose64(f.t, f.downloadTyped(r.out), kernels.RefAttention(r.ref), gqaBound(r.dt), what+": Y")
}

// attnCases cover the decode path (fewer than 16 query rows: the keys split across blocks)
// and the prefill path, GQA group sizes 1, 2, 3 and 4, head sizes 7 to 256, V's head size
// apart from Q's, masks of rank 1 to 4 (float, bool, an exported causal mask with the
// dtype's lowest value, with and without is_causal), the default and a given scale, and
// lengths that are not multiples of the kernels' tiles.
var attnCases = []attnCase{
	{name: "decode/group4/float-mask", batch: 1, heads: 8, kvHeads: 2, seq: 1, kvSeq: 300, d: 64, mask: "float", maskShape: []int64{1, 1, 1, 300}, wantPath: "decode"},
	{name: "decode/mha/no-mask/scale", batch: 2, heads: 4, kvHeads: 4, seq: 1, kvSeq: 37, d: 40, scale: 0.3, wantPath: "decode"},
	{name: "decode/mqa/bool-mask", batch: 2, heads: 4, kvHeads: 1, seq: 1, kvSeq: 100, d: 64, mask: "bool", maskShape: []int64{2, 1, 1, 100}, wantPath: "decode"},
	{name: "decode/causal-sees-key-0", batch: 1, heads: 2, kvHeads: 1, seq: 1, kvSeq: 20, d: 16, causal: true, wantPath: "decode"},
	{name: "decode/rows5/causal-and-2d-mask", batch: 1, heads: 4, kvHeads: 2, seq: 5, kvSeq: 9, d: 16, causal: true, mask: "float", maskShape: []int64{5, 9}, wantPath: "decode"},
	{name: "decode/dv64/rank1-mask", batch: 1, heads: 2, kvHeads: 1, seq: 1, kvSeq: 50, d: 32, dv: 64, mask: "float", maskShape: []int64{50}, wantPath: "decode"},
	{name: "decode/llama", batch: 1, heads: 32, kvHeads: 8, seq: 1, kvSeq: 700, d: 64, mask: "lowest", maskShape: []int64{1, 1, 1, 700}, wantPath: "decode"},
	{name: "prefill/causal/group4", batch: 2, heads: 4, kvHeads: 1, seq: 19, kvSeq: 19, d: 20, causal: true, wantPath: "prefill"},
	{name: "prefill/llama-mask", batch: 1, heads: 4, kvHeads: 2, seq: 70, kvSeq: 70, d: 64, mask: "lowest", maskShape: []int64{1, 1, 70, 70}, wantPath: "flash"},
	{name: "prefill/later-prompt-mask", batch: 2, heads: 2, kvHeads: 1, seq: 20, kvSeq: 50, d: 32, mask: "lowest", maskShape: []int64{2, 1, 20, 50}, wantPath: "prefill"},
	{name: "prefill/cross/2d-mask/dv32", batch: 1, heads: 2, kvHeads: 1, seq: 17, kvSeq: 70, d: 48, dv: 32, mask: "float", maskShape: []int64{17, 70}, wantPath: "prefill"},
	{name: "prefill/group3/bool-rank3", batch: 2, heads: 3, kvHeads: 1, seq: 33, kvSeq: 50, d: 32, mask: "bool", maskShape: []int64{3, 33, 50}, scale: 0.2, wantPath: "prefill"},
	{name: "prefill/head256/causal", batch: 1, heads: 2, kvHeads: 2, seq: 17, kvSeq: 17, d: 256, causal: true, wantPath: "prefill"},
	{name: "prefill/odd-heads/causal-and-bool", batch: 1, heads: 2, kvHeads: 1, seq: 16, kvSeq: 16, d: 7, dv: 5, causal: true, mask: "bool", maskShape: []int64{1, 1, 16, 16}, wantPath: "prefill"},
	{name: "prefill/d64-dv32", batch: 1, heads: 2, kvHeads: 1, seq: 20, kvSeq: 20, d: 64, dv: 32, causal: true, wantPath: "prefill"},
	{name: "flash/llama-cache/skips-tiles", batch: 1, heads: 4, kvHeads: 1, seq: 130, kvSeq: 320, d: 64, mask: "lowest", maskShape: []int64{1, 1, 130, 320}, wantPath: "flash"},
	{name: "flash/causal/d128/group2", batch: 2, heads: 4, kvHeads: 2, seq: 100, kvSeq: 100, d: 128, causal: true, wantPath: "flash"},
	{name: "flash/bool-rank3/scale", batch: 2, heads: 3, kvHeads: 1, seq: 70, kvSeq: 90, d: 64, mask: "bool", maskShape: []int64{3, 70, 90}, scale: 0.2, wantPath: "flash"},
	{name: "flash/cross/float-2d/d128", batch: 1, heads: 2, kvHeads: 2, seq: 20, kvSeq: 200, d: 128, mask: "float", maskShape: []int64{20, 200}, wantPath: "flash"},
	{name: "flash/no-mask", batch: 1, heads: 2, kvHeads: 1, seq: 16, kvSeq: 33, d: 64, wantPath: "flash"},
	{name: "flash/causal-and-lowest", batch: 1, heads: 2, kvHeads: 1, seq: 80, kvSeq: 80, d: 64, causal: true, mask: "lowest", maskShape: []int64{80, 80}, wantPath: "flash"},
}

// attnPath is the path case c takes in dt: the flash kernel takes float16 and bfloat16 only.
func attnPath(c attnCase, dt kernels.DType) string {
	if c.wantPath == "flash" && dt == kernels.Float32 {
		return "prefill"
	}
	return c.wantPath
}

func TestAttentionAgainstReference(t *testing.T) {
	f := newFixture(t)
	for _, dt := range halfAndFloat {
		for _, c := range attnCases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				f := f.sub(t)
				r := f.newAttn(c, dt)
				path, n := kernels.AttentionPlan(r.k)
				require.Equal(t, attnPath(c, dt), path)
				switch {
				case c.name == "decode/group4/float-mask":
					assert.Greater(t, n, 1, "a long key sequence is split across blocks")
				case c.name == "prefill/head256/causal":
					assert.Less(t, n, 32, "a long head takes a shorter key tile")
				}
				require.NoError(t, r.k.Execute(r.ins, []kernels.Tensor{r.out}))
				r.check(f, c.name)
			})
		}
	}
}

// TestAttentionFlashBesidePrefill runs the flash cases in float16 and bfloat16 through both
// prefill kernels, the flash one and the float32 one forced, on the same tensors: both match
// the reference.
func TestAttentionFlashBesidePrefill(t *testing.T) {
	f := newFixture(t)
	for _, dt := range halfTypes {
		for _, c := range attnCases {
			if c.wantPath != "flash" {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				f := f.sub(t)
				r := f.newAttn(c, dt)
				path, _ := kernels.AttentionPlan(r.k)
				require.Equal(t, "flash", path)
				prev := kernels.ForceVariant("attention", "prefill")
				base := f.get(r.spec)
				kernels.ForceVariant("attention", prev)
				path, _ = kernels.AttentionPlan(base)
				require.Equal(t, "prefill", path, "the forced baseline")
				baseOut := f.outputs(base)[0]
				require.NoError(t, r.k.Execute(r.ins, []kernels.Tensor{r.out}))
				require.NoError(t, base.Execute(r.ins, []kernels.Tensor{baseOut}))
				r.check(f, "flash")
				requireClose64(t, f.downloadTyped(baseOut), kernels.RefAttention(r.ref), gqaBound(dt), "prefill: Y")
			})
		}
	}
}

// TestAttentionFullyMaskedRowsAreNaN checks the rows whose keys are all masked (a bool mask
// false throughout, or -inf throughout) on both paths: NaN, as ONNX's reference
// implementation gives (softmax 0/0); the other rows are unaffected.
func TestAttentionFullyMaskedRowsAreNaN(t *testing.T) {
	f := newFixture(t)
	for _, c := range []attnCase{
		{name: "decode/bool", batch: 1, heads: 2, kvHeads: 1, seq: 3, kvSeq: 40, d: 16, mask: "bool", maskShape: []int64{1, 2, 3, 40}},
		{name: "prefill/float", batch: 1, heads: 2, kvHeads: 2, seq: 20, kvSeq: 45, d: 16, mask: "float", maskShape: []int64{20, 45}},
		{name: "flash/float", batch: 1, heads: 2, kvHeads: 1, seq: 20, kvSeq: 150, d: 64, mask: "float", maskShape: []int64{20, 150}},
		{name: "flash/bool", batch: 1, heads: 2, kvHeads: 2, seq: 70, kvSeq: 70, d: 128, mask: "bool", maskShape: []int64{1, 2, 70, 70}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			dt := kernels.BFloat16
			r := f.newAttn(c, dt)
			// Mask every key of query row 2 (of every head): false or -inf. Both masks end in
			// [seq, kvSeq].
			for i := range r.ref.Mask {
				if s := (i / c.kvSeq) % c.seq; s == 2 {
					r.ref.Mask[i] = math.Inf(-1)
					if r.ref.BoolMask {
						r.ref.Mask[i] = 0
					}
				}
			}
			require.NoError(t, f.env.Context.CopyHtoD(r.ins[3].Ptr, encode(r.ins[3].DType, r.ref.Mask)))
			require.NoError(t, r.k.Execute(r.ins, []kernels.Tensor{r.out}))
			got, ref := f.downloadTyped(r.out), kernels.RefAttention(r.ref)
			var gotRest, refRest []float64
			for i, v := range ref {
				if s := (i / c.d) % c.seq; s == 2 {
					require.True(t, math.IsNaN(v), "the reference's element %d of a fully masked row", i)
					require.True(t, math.IsNaN(got[i]), "element %d of a fully masked row is NaN, got %v", i, got[i])
					continue
				}
				gotRest, refRest = append(gotRest, got[i]), append(refRest, v)
			}
			requireClose64(t, gotRest, refRest, gqaBound(dt), "the other rows")
		})
	}
}

// TestAttentionRowOfLowestValuesSeesEveryKey gives one query row of an exported causal mask
// (the dtype's lowest value above each row's end) the lowest value at every key. In bfloat16
// (-3.3895e38, below the flash kernel's -1e30 that lets it skip a tile) the row's scores all
// round to that value, so the reference averages every key's value, and the flash kernel,
// whose other rows stop at the last tile the mask leaves open, must walk the rest of the keys
// for that row. float16's lowest (-65504) skips no tile; that row must match all the same.
func TestAttentionRowOfLowestValuesSeesEveryKey(t *testing.T) {
	f := newFixture(t)
	c := attnCase{name: "flash", batch: 1, heads: 2, kvHeads: 1, seq: 70, kvSeq: 200, d: 64, mask: "lowest", maskShape: []int64{1, 1, 70, 200}}
	for _, dt := range halfTypes {
		t.Run(dt.String(), func(t *testing.T) {
			f := f.sub(t)
			r := f.newAttn(c, dt)
			path, _ := kernels.AttentionPlan(r.k)
			require.Equal(t, "flash", path)
			for j := range c.kvSeq {
				r.ref.Mask[3*c.kvSeq+j] = lowest(dt)
			}
			require.NoError(t, f.env.Context.CopyHtoD(r.ins[3].Ptr, encode(r.ins[3].DType, r.ref.Mask)))
			require.NoError(t, r.k.Execute(r.ins, []kernels.Tensor{r.out}))
			ref := kernels.RefAttention(r.ref)
			for d := range c.d * int(b2i(dt == kernels.BFloat16)) { // row 3 of head 0: the mean of every key's value
				mean := 0.0
				for j := range c.kvSeq {
					mean += r.ref.V[j*c.d+d] / float64(c.kvSeq)
				}
				require.InDelta(t, mean, ref[3*c.d+d], 1e-9, "the reference's row 3, element %d", d)
			}
			r.check(f, "every row")
		})
	}
}

// TestAttentionFlashNeedsComputeCapability80 builds a bfloat16 prefill on simulated devices of
// compute capability 7.5 and 8.0: the flash module's PTX targets sm_80, so the older device
// does not load it and keeps the float32 prefill kernel, whose result matches the reference.
func TestAttentionFlashNeedsComputeCapability80(t *testing.T) {
	if drivertest.BackendName() != "sim" {
		t.Skip("a GPU's compute capability is what it is; the simulator plays older ones")
	}
	c := attnCase{batch: 1, heads: 2, kvHeads: 1, seq: 40, kvSeq: 40, d: 64, causal: true}
	for _, cc := range []struct {
		major, minor int
		want         string
	}{{7, 5, "prefill"}, {8, 0, "flash"}} {
		t.Run(fmt.Sprintf("%d.%d", cc.major, cc.minor), func(t *testing.T) {
			env := drivertest.OpenWith(t, sim.Options{ComputeMajor: cc.major, ComputeMinor: cc.minor})
			f := newFixtureOn(t, env, rand.New(rand.NewPCG(1, 2)), fixtureOpts{})
			r := f.newAttn(c, kernels.BFloat16)
			path, _ := kernels.AttentionPlan(r.k)
			require.Equal(t, cc.want, path)
			require.NoError(t, r.k.Execute(r.ins, []kernels.Tensor{r.out}))
			r.check(f, cc.want)
		})
	}
}

func TestAttentionRefusesWithClearErrors(t *testing.T) {
	f := newFixture(t)
	dt := kernels.Float16
	base := func() kernels.Spec {
		return kernels.Spec{Op: "Attention", Opset: 23, NumOutputs: 1, Attrs: map[string]kernels.Attribute{},
			Inputs: []kernels.TensorInfo{info(dt, 1, 4, 3, 16), info(dt, 1, 2, 8, 16), info(dt, 1, 2, 8, 16)}}
	}
	with := func(edit func(*kernels.Spec)) kernels.Spec {
		s := base()
		edit(&s)
		return s
	}
	past := info(dt, 1, 2, 5, 16)
	for _, c := range []struct {
		spec kernels.Spec
		want []string
	}{
		{with(func(s *kernels.Spec) { s.Opset = 22 }), []string{"Attention (opset 22)", "opset >= 23"}},
		{with(func(s *kernels.Spec) { s.Inputs[0] = info(dt, 1, 3, 64) }), []string{"input 0 (Q) has shape [1,3,64]", "only 4-D Q, K and V"}},
		{with(func(s *kernels.Spec) { s.Inputs = append(s.Inputs, info(dt, 3, 8), past, past) }), []string{"input 4 (past_key) is not supported"}},
		{with(func(s *kernels.Spec) { s.NumOutputs = 3 }), []string{"3 outputs", "only output 0 (Y)"}},
		{with(func(s *kernels.Spec) { s.Inputs[0] = info(dt, 1, 3, 3, 16) }), []string{"input 0 (Q) has 3 heads, not a multiple of input 1 (K)'s 2"}},
		{with(func(s *kernels.Spec) { s.Inputs[1] = info(dt, 1, 2, 8, 32) }), []string{"input 1 (K) has shape [1,2,8,32]", "[1, kv heads, kv sequence, 16]"}},
		{with(func(s *kernels.Spec) { s.Inputs[2] = info(dt, 1, 2, 9, 16) }), []string{"input 2 (V) has shape [1,2,9,16]", "[1, 2, 8, v head size]"}},
		{with(func(s *kernels.Spec) { s.Inputs[1] = info(kernels.Float32, 1, 2, 8, 16) }), []string{"input 0 (Q) is float16 and input 1 (K) is float32"}},
		{with(func(s *kernels.Spec) { s.Inputs = append(s.Inputs, info(kernels.Float32, 3, 8)) }), []string{"input 3 (attn_mask) has dtype float32", "float16, bool"}},
		{with(func(s *kernels.Spec) { s.Inputs = append(s.Inputs, info(dt, 2, 1, 3, 8)) }), []string{"input 3 (attn_mask) has shape [2,1,3,8], which does not broadcast to", "[1,4,3,8]"}},
		{with(func(s *kernels.Spec) { s.Inputs = append(s.Inputs, info(kernels.Bool, 1, 1, 1, 3, 8)) }), []string{"input 3 (attn_mask) has rank 5"}},
		{with(func(s *kernels.Spec) { s.Opset = 24; s.Inputs = append(s.Inputs, info(dt, 3, 1)) }), []string{"input 3 (attn_mask) has shape [3,1]", "the kv sequence length 8"}},
		{with(func(s *kernels.Spec) { s.Attrs["softcap"] = kernels.FloatAttr(30) }), []string{`attribute "softcap" is 30`}},
		{with(func(s *kernels.Spec) { s.Attrs["qk_matmul_output_mode"] = kernels.IntAttr(1) }), []string{`attribute "qk_matmul_output_mode" is 1`}},
		{with(func(s *kernels.Spec) { s.Attrs["is_causal"] = kernels.IntAttr(2) }), []string{`attribute "is_causal" is 2; it must be 0 or 1`}},
		{with(func(s *kernels.Spec) { s.Attrs["q_num_heads"] = kernels.IntAttr(8) }), []string{`attribute "q_num_heads" is 8, but the 4-D inputs have 4`}},
		{with(func(s *kernels.Spec) { s.Attrs["kv_num_heads"] = kernels.IntAttr(4) }), []string{`attribute "kv_num_heads" is 4, but the 4-D inputs have 2`}},
		{with(func(s *kernels.Spec) { s.Attrs["softmax_precision"] = kernels.IntAttr(11) }), []string{`attribute "softmax_precision" is 11`}},
		{with(func(s *kernels.Spec) { s.Attrs["scale"] = kernels.FloatAttr(float32(math.Inf(1))) }), []string{`attribute "scale" is +Inf; it must be finite`}},
		{with(func(s *kernels.Spec) { s.Attrs["mask_filter_value"] = kernels.FloatAttr(-1e4) }), []string{`attribute "mask_filter_value" is not supported`}},
		{with(func(s *kernels.Spec) {
			s.Inputs[0], s.Inputs[1], s.Inputs[2] = info(dt, 1, 4, 3, 512), info(dt, 1, 2, 8, 512), info(dt, 1, 2, 8, 512)
		}), []string{"head sizes are 512 (Q, K) and 512 (V); at most 256"}},
		{with(func(s *kernels.Spec) { s.Inputs = s.Inputs[:2] }), []string{"got 2 inputs, want 3 or 4 (Q, K, V, attn_mask)"}},
		{with(func(s *kernels.Spec) { s.Inputs[2] = info(kernels.Int32, 1, 2, 8, 16) }), []string{"input 2 (V) has dtype int32"}},
	} {
		_, err := f.lib.Get(c.spec)
		require.Error(t, err, "%v", c.want)
		assert.ErrorIs(t, err, kernels.ErrUnsupported)
		for _, w := range c.want {
			assert.Contains(t, err.Error(), w)
		}
		assert.True(t, strings.HasPrefix(err.Error(), fmt.Sprintf("kernels: unsupported: Attention (opset %d): ", c.spec.Opset)), err.Error())
	}
	// What the refusals leave: softmax_precision float32, q_num_heads and kv_num_heads that
	// match, a mask of the opset-24 kv length, and an unknown output count.
	ok := with(func(s *kernels.Spec) {
		s.Opset, s.NumOutputs = 24, 0
		s.Attrs["softmax_precision"], s.Attrs["q_num_heads"], s.Attrs["kv_num_heads"] = kernels.IntAttr(1), kernels.IntAttr(4), kernels.IntAttr(2)
		s.Inputs = append(s.Inputs, info(kernels.Bool, 3, 8))
	})
	_, err := f.lib.Get(ok)
	require.NoError(t, err)
}

// TestAttentionReplaysFromAGraph captures the decode and the prefill kernel and replays them
// on new queries, keys, values and masks written between replays, as a decode loop with CUDA
// graphs does: each replay matches the reference, and nothing is allocated after Get.
func TestAttentionReplaysFromAGraph(t *testing.T) {
	f := newFixture(t)
	for _, c := range []attnCase{attnCases[0], attnCases[8]} {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			dt := kernels.BFloat16
			r := f.newAttn(c, dt)
			assert.True(t, r.k.CaptureSupport().IsSupported())
			require.NoError(t, graphs.Audit([]graphs.Node{r.k}))
			before := f.env.Context.Counters().DeviceAllocs
			exec := f.capture(func() { require.NoError(t, r.k.Execute(r.ins, []kernels.Tensor{r.out})) })
			for step := range 3 {
				if step > 0 {
					r.ref.Q, r.ref.K, r.ref.V = f.randomTyped(dt, int64(len(r.ref.Q))), f.randomTyped(dt, int64(len(r.ref.K))), f.randomTyped(dt, int64(len(r.ref.V)))
					r.ref.Mask = f.maskValues(c, dt)
					for i, v := range [][]float64{r.ref.Q, r.ref.K, r.ref.V, r.ref.Mask} {
						require.NoError(t, f.env.Context.CopyHtoD(r.ins[i].Ptr, encode(r.ins[i].DType, v)))
					}
				}
				f.poison(r.out)
				require.NoError(t, exec.Launch(f.stream))
				r.check(f, fmt.Sprintf("replay %d", step))
			}
			assert.Equal(t, before, f.env.Context.Counters().DeviceAllocs, "no device allocation after Get")
		})
	}
}
