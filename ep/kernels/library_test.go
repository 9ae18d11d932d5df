package kernels_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep/kernels"
)

func TestDTypeNumbersAreONNX(t *testing.T) {
	for _, c := range []struct {
		d    kernels.DType
		num  int32
		size int
		name string
	}{
		{kernels.Float32, 1, 4, "float32"},
		{kernels.Uint8, 2, 1, "uint8"},
		{kernels.Int32, 6, 4, "int32"},
		{kernels.Int64, 7, 8, "int64"},
		{kernels.Bool, 9, 1, "bool"},
		{kernels.Float16, 10, 2, "float16"},
		{kernels.Float64, 11, 8, "float64"},
		{kernels.BFloat16, 16, 2, "bfloat16"},
	} {
		assert.Equal(t, c.num, int32(c.d))
		assert.Equal(t, c.size, c.d.Size())
		assert.Equal(t, c.name, c.d.String())
		assert.True(t, c.d.Valid())
	}
	assert.False(t, kernels.DType(8).Valid(), "STRING is not a tensor dtype here")
	assert.Equal(t, "dtype(99)", kernels.DType(99).String())
}

func TestTensorInfoAndAttributes(t *testing.T) {
	ti := kernels.TensorInfo{DType: kernels.Float16, Shape: []int64{2, 3, 5}}
	assert.Equal(t, int64(30), ti.NumElements())
	assert.Equal(t, int64(60), ti.Bytes())
	assert.Equal(t, "float16[2,3,5]", ti.String())
	assert.Equal(t, int64(1), kernels.TensorInfo{DType: kernels.Float32}.NumElements(), "a scalar has one element")
	assert.True(t, ti.Equal(kernels.TensorInfo{DType: kernels.Float16, Shape: []int64{2, 3, 5}}))
	assert.False(t, ti.Equal(kernels.TensorInfo{DType: kernels.Float32, Shape: []int64{2, 3, 5}}))
	assert.False(t, ti.Equal(kernels.TensorInfo{DType: kernels.Float16, Shape: []int64{2, 3}}))

	assert.Equal(t, kernels.AttrInt, kernels.IntAttr(3).Kind())
	assert.Equal(t, int64(3), kernels.IntAttr(3).Int())
	assert.Equal(t, float32(0.5), kernels.FloatAttr(0.5).Float())
	assert.Equal(t, "tanh", kernels.StringAttr("tanh").Str())
	src := []int64{1, 2}
	ints := kernels.IntsAttr(src...)
	src[0] = 9
	got := ints.Ints()
	got[1] = 9
	assert.Equal(t, []int64{1, 2}, ints.Ints(), "ints attributes are immutable copies")
	assert.Nil(t, kernels.IntAttr(1).Ints())
	assert.Equal(t, `string("tanh")`, kernels.StringAttr("tanh").String())
	assert.Equal(t, "ints(1,2)", ints.String())
	assert.Equal(t, "float(0.5)", kernels.FloatAttr(0.5).String())
}

func TestGetRefusesUnsupportedWithClearErrors(t *testing.T) {
	f := newFixture(t)
	in := func(dt kernels.DType, shape ...int64) kernels.TensorInfo {
		return kernels.TensorInfo{DType: dt, Shape: shape}
	}
	f32 := kernels.Float32
	attrs := func(kv ...any) map[string]kernels.Attribute {
		m := map[string]kernels.Attribute{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(kernels.Attribute)
		}
		return m
	}
	cases := []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"unknown op", kernels.Spec{Op: "Conv", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 1)}},
			[]string{`op "Conv" is not implemented`, "Add", "MatMul", "NonZero"}},
		{"dtype", kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{in(kernels.Bool, 2), in(kernels.Bool, 2)}},
			[]string{"Add (opset 14)", "input 0 (A)", "bool", "supports float32, float16, bfloat16, int32, int64"}},
		{"mixed dtypes", kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{in(f32, 2), in(kernels.Float16, 2)}},
			[]string{"Add (opset 14)", "input 0 (A) is float32", "input 1 (B) is float16", "same dtype"}},
		{"bfloat16 before opset 13", kernels.Spec{Op: "Relu", Opset: 6, Inputs: []kernels.TensorInfo{in(kernels.BFloat16, 2)}},
			[]string{"Relu (opset 6)", "bfloat16 needs opset >= 13"}},
		{"equal floats before opset 11", kernels.Spec{Op: "Equal", Opset: 7, Inputs: []kernels.TensorInfo{in(f32, 2), in(f32, 2)}},
			[]string{"Equal (opset 7)", "float32 inputs need opset >= 11"}},
		{"where dims", kernels.Spec{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{in(kernels.Bool, 2, 1, 2, 1, 2), in(f32, 1, 2, 1, 2, 1), in(f32, 2, 1, 2, 1, 2)}},
			[]string{"Where", "5 dimensions", "at most 4"}},
		{"where condition", kernels.Spec{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{in(f32, 2), in(f32, 2), in(f32, 2)}},
			[]string{"Where", "input 0 (condition)", "supports bool"}},
		{"cast target", kernels.Spec{Op: "Cast", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 2)}, Attrs: attrs("to", kernels.IntAttr(11))},
			[]string{"Cast", `"to" is 11 (float64)`, "supported targets"}},
		{"cast without to", kernels.Spec{Op: "Cast", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 2)}},
			[]string{"Cast", `"to" is required`}},
		{"matmul mixed", kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{in(kernels.Float16, 2, 3), in(f32, 3, 5)}},
			[]string{"MatMul", "same dtype"}},
		{"unknown dtype number", kernels.Spec{Op: "Identity", Opset: 14, Inputs: []kernels.TensorInfo{in(kernels.DType(3), 2)}},
			[]string{"Identity", "input 0 (input)", "unknown dtype number 3"}},
		{"no opset", kernels.Spec{Op: "Softmax", Inputs: []kernels.TensorInfo{in(f32, 2)}},
			[]string{"Softmax (opset 0)", "not an ONNX opset"}},
		{"old opset", kernels.Spec{Op: "Add", Opset: 6, Inputs: []kernels.TensorInfo{in(f32, 2), in(f32, 2)}},
			[]string{"Add (opset 6)", "opset >= 7"}},
		{"no broadcast", kernels.Spec{Op: "Mul", Opset: 14, Inputs: []kernels.TensorInfo{in(f32, 3), in(f32, 4)}},
			[]string{"Mul", "[3]", "[4]", "do not broadcast"}},
		{"too many merged dims", kernels.Spec{Op: "Sub", Opset: 14, Inputs: []kernels.TensorInfo{in(f32, 2, 1, 2, 1, 2, 1, 2), in(f32, 1, 2, 1, 2, 1, 2, 1)}},
			[]string{"Sub", "7 dimensions", "at most 6"}},
		{"input count", kernels.Spec{Op: "Div", Opset: 14, Inputs: []kernels.TensorInfo{in(f32, 2)}},
			[]string{"Div", "got 1 inputs, want 2 (A, B)"}},
		{"unknown attribute", kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{in(f32, 2), in(f32, 2)}, Attrs: attrs("axis", kernels.IntAttr(1))},
			[]string{"Add", `attribute "axis" is not supported`, "supported attributes: none"}},
		{"zero dimension", kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{in(f32, 3, 0)}},
			[]string{"Relu", "input 0 (X)", "[3,0]", "must be positive"}},
		{"dynamic dimension", kernels.Spec{Op: "Tanh", Opset: 14, Inputs: []kernels.TensorInfo{in(f32, -1, 4)}},
			[]string{"Tanh", "[-1,4]", "dynamic"}},
		{"gelu approximate", kernels.Spec{Op: "Gelu", Opset: 20, Inputs: []kernels.TensorInfo{in(f32, 2)}, Attrs: attrs("approximate", kernels.StringAttr("fast"))},
			[]string{"Gelu", `"approximate" is "fast"`, `"none", "tanh"`}},
		{"gelu attribute kind", kernels.Spec{Op: "Gelu", Opset: 20, Inputs: []kernels.TensorInfo{in(f32, 2)}, Attrs: attrs("approximate", kernels.IntAttr(1))},
			[]string{"Gelu", `attribute "approximate" is int(1), want a string`}},
		{"gelu opset", kernels.Spec{Op: "Gelu", Opset: 19, Inputs: []kernels.TensorInfo{in(f32, 2)}},
			[]string{"Gelu (opset 19)", "opset >= 20"}},
		{"softmax axis", kernels.Spec{Op: "Softmax", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 2, 3)}, Attrs: attrs("axis", kernels.IntAttr(2))},
			[]string{"Softmax", `"axis" is 2`, "[-2, 1]"}},
		{"softmax scalar", kernels.Spec{Op: "Softmax", Opset: 13, Inputs: []kernels.TensorInfo{in(f32)}},
			[]string{"Softmax", "rank 0", "ranks 1 to"}},
		{"matmul inner", kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 2, 3), in(f32, 4, 5)}},
			[]string{"MatMul", "[2,3]", "[4,5]", "inner dimensions 3 and 4 differ"}},
		{"matmul batch", kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 2, 3, 4), in(f32, 3, 4, 5)}},
			[]string{"MatMul", "batch dimensions [2]", "[3]", "do not broadcast"}},
		{"matmul dtype", kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{in(kernels.Int32, 2, 3), in(kernels.Int32, 3, 5)}},
			[]string{"MatMul", "input 0 (A)", "int32"}},
		{"gemm trans", kernels.Spec{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 2, 3), in(f32, 3, 5)}, Attrs: attrs("transA", kernels.IntAttr(2))},
			[]string{"Gemm", `"transA" is 2`, "0, 1"}},
		{"gemm rank", kernels.Spec{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 1, 2, 3), in(f32, 3, 5)}},
			[]string{"Gemm", "input 0 (A)", "rank 3", "ranks 2 to 2"}},
		{"gemm C", kernels.Spec{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 3, 4), in(f32, 4, 5), in(f32, 3, 2)}},
			[]string{"Gemm", "input 2 (C)", "[3,2]", "[3,5]", "unidirectional"}},
		{"gemm inner", kernels.Spec{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 3, 4), in(f32, 5, 4)}},
			[]string{"Gemm", "inner dimensions 4 and 5 differ"}},
		{"gemm opset", kernels.Spec{Op: "Gemm", Opset: 6, Inputs: []kernels.TensorInfo{in(f32, 3, 4), in(f32, 4, 4)}},
			[]string{"Gemm (opset 6)", "opset >= 7"}},
		{"gemm attribute", kernels.Spec{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 3, 4), in(f32, 4, 4)}, Attrs: attrs("broadcast", kernels.IntAttr(1))},
			[]string{"Gemm", `"broadcast" is not supported`, "alpha, beta, transA, transB"}},
		{"gemm alpha kind", kernels.Spec{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 3, 4), in(f32, 4, 4)}, Attrs: attrs("alpha", kernels.IntAttr(2))},
			[]string{"Gemm", `"alpha" is int(2), want a float`}},
		{"too many elements", kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{in(f32, 1<<30, 1<<30)}},
			[]string{"Relu", "input 0 (X)", "more than 2^40 elements"}},
		{"too large a broadcast", kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{in(f32, 1<<30, 1), in(f32, 1, 1<<30)}},
			[]string{"Add", "the output", "more than 2^40 elements"}},
		{"matmul gemm calls", kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 5000, 1, 2, 2), in(f32, 2, 2, 2)}},
			[]string{"MatMul", "[5000,1]", "[2]", "more than 4096 separate GEMM calls"}},
		{"matmul 32-bit sizes", kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 1, 1<<31), in(f32, 1<<31, 1)}},
			[]string{"MatMul", "K=2147483648", "32-bit"}},
		{"nonzero dtype", kernels.Spec{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{in(kernels.Float16, 4)}},
			[]string{"NonZero", "float16", "float32, int32, int64, bool"}},
		{"nonzero rank", kernels.Spec{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{in(f32, 1, 1, 1, 1, 1, 1, 1, 1, 2)}},
			[]string{"NonZero", "rank 9", "ranks 1 to 8"}},
		{"nonzero scalar", kernels.Spec{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{in(f32)}},
			[]string{"NonZero", "rank 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, err := f.lib.Get(c.spec)
			require.Error(t, err)
			assert.Nil(t, k)
			assert.ErrorIs(t, err, kernels.ErrUnsupported)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestGetRefusesGemmWithoutBLAS(t *testing.T) {
	f := newFixtureWith(t, fixtureOpts{noBLAS: true})
	for _, op := range []string{"MatMul", "Gemm"} {
		_, err := f.lib.Get(kernels.Spec{Op: op, Opset: 13, Inputs: []kernels.TensorInfo{f32Info(2, 2), f32Info(2, 2)}})
		assert.ErrorIs(t, err, kernels.ErrUnsupported)
		assert.ErrorContains(t, err, "no cuBLAS handle")
	}
	_, err := f.lib.Get(kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(2)}})
	assert.NoError(t, err, "elementwise ops need no cuBLAS handle")
}

func TestExecuteRefusesTensorsThatDifferFromGet(t *testing.T) {
	f := newFixture(t)
	k := f.get(kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(2, 3), f32Info(3)}})
	a := f.uploadF32([]int64{2, 3}, f.random(6))
	b := f.uploadF32([]int64{3}, f.random(3))
	out := f.outputs(k)[0]
	wrongShape := a
	wrongShape.Shape = []int64{3, 2}
	wrongType := b
	wrongType.DType = kernels.Int32
	nilPtr := out
	nilPtr.Ptr = 0
	for name, call := range map[string][2][]kernels.Tensor{
		"too few inputs":   {{a}, {out}},
		"too many outputs": {{a, b}, {out, out}},
		"input shape":      {{wrongShape, b}, {out}},
		"input dtype":      {{a, wrongType}, {out}},
		"output address":   {{a, b}, {nilPtr}},
		"output shape":     {{a, b}, {b}},
	} {
		err := k.Execute(call[0], call[1])
		assert.ErrorIs(t, err, kernels.ErrTensorMismatch, name)
		assert.ErrorContains(t, err, k.Name(), name)
	}
	for _, v := range f.downloadF32(out) {
		require.True(t, v != v, "a refused Execute queued work: the poisoned output was written")
	}
	require.NoError(t, k.Execute([]kernels.Tensor{a, b}, []kernels.Tensor{out}))
}

func TestOutputsAndNameDescribeTheKernel(t *testing.T) {
	f := newFixture(t)
	k := f.get(kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(2, 3), f32Info(3)}})
	assert.Equal(t, "Add(float32[2,3], float32[3])", k.Name())
	outs := k.Outputs()
	outs[0].Shape[0] = 99
	assert.Equal(t, []int64{2, 3}, k.Outputs()[0].Shape, "Outputs returns a copy")
	assert.True(t, k.CaptureSupport().IsSupported())
	assert.Equal(t, []string{"Abs", "Add", "Attention", "Cast", "Concat", "ConstantOfShape", "Cos", "Div", "Equal", "Erf", "Exp", "Expand", "Gather", "Gelu",
		"Gemm", "Greater", "Identity", "LayerNormalization", "Less", "Log", "MatMul", "Mul", "Neg", "NonZero", "Pow", "Range", "Reciprocal",
		"ReduceMax", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Shape", "Sigmoid", "SimplifiedLayerNormalization", "Sin", "Slice", "Softmax",
		"Split", "Sqrt", "Squeeze", "Sub", "Tanh", "Transpose", "Trilu", "Unsqueeze", "Where",
		"com.microsoft.FastGelu", "com.microsoft.GroupQueryAttention", "com.microsoft.MatMulNBits", "com.microsoft.RotaryEmbedding", "com.microsoft.SkipLayerNormalization",
		"com.microsoft.SkipSimplifiedLayerNormalization", "cudaep.MatMulGroup", "cudaep.MatMulNBitsGroup", "cudaep.NormMatMulGroup", "cudaep.RotateHalf",
		"cudaep.RotateHalfPair", "cudaep.SiluMul", "cudaep.SiluMulMatMulGroup", "cudaep.SkipNormMatMulGroup", "cudaep.WherePair"}, kernels.SupportedOps())
}

func TestLibraryLoadsOnceAndCloses(t *testing.T) {
	env := drivertest.Open(t)
	st, err := env.Context.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, st.Destroy()) }()

	_, err = kernels.NewLibrary(kernels.Runtime{Context: env.Context})
	assert.ErrorContains(t, err, "needs a Runtime with a Context and a Stream")

	before := env.Context.Counters()
	lib, err := kernels.NewLibrary(kernels.Runtime{Context: env.Context, Stream: st})
	require.NoError(t, err)
	loaded := env.Context.Counters().ModulesLoaded - before.ModulesLoaded
	assert.Equal(t, uint64(kernels.AvailableModules()), loaded, "one module per PTX file (a pending module's missing file is not loaded)")

	k, err := lib.Get(kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(4)}})
	require.NoError(t, err)
	assert.Equal(t, uint64(0), env.Context.Counters().ModulesLoaded-before.ModulesLoaded-loaded, "Get loads nothing")

	require.NoError(t, lib.Close())
	assert.Equal(t, before.ModulesUnloaded+loaded, env.Context.Counters().ModulesUnloaded)
	assert.ErrorIs(t, lib.Close(), kernels.ErrClosed)
	_, err = lib.Get(kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(4)}})
	assert.ErrorIs(t, err, kernels.ErrClosed)
	assert.ErrorIs(t, k.Execute([]kernels.Tensor{{TensorInfo: f32Info(4), Ptr: 256}}, []kernels.Tensor{{TensorInfo: f32Info(4), Ptr: 512}}), kernels.ErrClosed)
}

func TestEmbeddedPTXIsGeneratedFromEverySource(t *testing.T) {
	sources, err := filepath.Glob("cuda/*.cu")
	require.NoError(t, err)
	require.NotEmpty(t, sources)
	entries := kernels.ModuleEntries()
	require.Len(t, entries, len(sources), "one PTX module per CUDA source")
	entry := regexp.MustCompile(`\.visible\s+\.entry\s+(\w+)\(`)
	pending := kernels.PendingModules()
	for _, src := range sources {
		name := strings.TrimSuffix(filepath.Base(src), ".cu")
		file := "ptx/" + name + ".ptx"
		ptx, err := kernels.EmbeddedPTX(file)
		if errors.Is(err, fs.ErrNotExist) && pending[file] != nil {
			t.Logf("%s is pending: %s is newer than the committed PTX, which mkptx.sh regenerates where nvcc is", file, src)
			_, err := os.Stat(file)
			assert.ErrorIs(t, err, fs.ErrNotExist, "%s is on disk but not embedded", file)
			continue
		}
		require.NoError(t, err, "embedded %s", file)
		onDisk, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(ptx, onDisk))
		firstLine, _, _ := strings.Cut(string(ptx), "\n")
		assert.Equal(t, "// Code generated by ep/kernels/mkptx.sh from "+name+".cu; DO NOT EDIT.", firstLine)
		target, err := cudaTarget(src)
		require.NoError(t, err)
		assert.Contains(t, string(ptx), ".target "+target+"\n", "the PTX of the architecture %s names (mkptx.sh)", src)
		var declared []string
		for _, m := range entry.FindAllStringSubmatch(string(ptx), -1) {
			declared = append(declared, m[1])
		}
		want := slices.Sorted(slices.Values(entries[file]))
		slices.Sort(declared)
		if pending[file] != nil {
			// A pending module's PTX may lack entries its source has (the library refuses their
			// ops), but declares none the library does not know.
			assert.Subset(t, want, declared, "%s declares only entry points the library resolves", file)
			continue
		}
		assert.Equal(t, want, declared, "%s declares exactly the entry points the library resolves", file)
	}
}
