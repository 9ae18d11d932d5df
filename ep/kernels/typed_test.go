package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
)

var halfTypes = []kernels.DType{kernels.Float16, kernels.BFloat16}
var floatTypes = []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16}

func TestBinaryOpsHalfTypesAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		a, b []int64
	}{
		{"same odd length", []int64{1031}, []int64{1031}},
		{"same, 16-byte packs and a tail", []int64{3, 67}, []int64{3, 67}},
		{"scalar", []int64{4, 6}, nil},
		{"row of odd length", []int64{3, 1001}, []int64{1001}},
		{"4-D with ones", []int64{2, 1, 3, 1}, []int64{1, 4, 1, 5}},
	}
	for _, op := range []string{"Add", "Sub", "Mul", "Div", "Pow"} {
		for _, dt := range floatTypes {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%s/%s", op, dt, c.name), func(t *testing.T) {
					f := f.sub(t)
					spec := kernels.Spec{Op: op, Opset: 15, Inputs: []kernels.TensorInfo{info(dt, c.a...), info(dt, c.b...)}}
					a := f.randomTyped(dt, spec.Inputs[0].NumElements())
					b := f.randomTyped(dt, spec.Inputs[1].NumElements())
					if op == "Pow" {
						for i := range a {
							a[i] = math.Abs(a[i]) // a real power of a negative base is NaN
						}
					}
					k, got := f.runTyped(spec, a, b)
					ref, shape, ok := kernels.RefBinary(op, a, c.a, b, c.b)
					require.True(t, ok)
					assert.Equal(t, []kernels.TensorInfo{info(dt, shape...)}, k.Outputs())
					requireClose64(t, got, ref, boundFor(dt), k.Name())
				})
			}
		}
	}
}

func TestBinaryOpOnUnalignedTensors(t *testing.T) {
	// Tensors 2 bytes off a 16-byte boundary take the kernels' element-wise path, not packs.
	f := newFixture(t)
	for _, dt := range halfTypes {
		const n = 37
		spec := kernels.Spec{Op: "Mul", Opset: 14, Inputs: []kernels.TensorInfo{info(dt, n), info(dt, n)}}
		k := f.get(spec)
		a, b := f.randomTyped(dt, n), f.randomTyped(dt, n)
		big := info(dt, n+1)
		ta, tb, to := f.alloc(big), f.alloc(big), f.alloc(big)
		for _, x := range []*kernels.Tensor{&ta, &tb, &to} {
			x.Ptr += 2
			x.TensorInfo = info(dt, n)
		}
		require.NoError(t, f.env.Context.CopyHtoD(ta.Ptr, encode(dt, a)))
		require.NoError(t, f.env.Context.CopyHtoD(tb.Ptr, encode(dt, b)))
		f.poison(to)
		require.NoError(t, k.Execute([]kernels.Tensor{ta, tb}, []kernels.Tensor{to}))
		ref, _, _ := kernels.RefBinary("Mul", a, []int64{n}, b, []int64{n})
		requireClose64(t, f.downloadTyped(to), ref, boundFor(dt), "unaligned "+k.Name())
	}
}

func TestUnaryOpsAgainstReference(t *testing.T) {
	f := newFixture(t)
	ops := []struct {
		op, ref  string
		opset    int
		positive bool
		attrs    map[string]kernels.Attribute
	}{
		{"Relu", "Relu", 14, false, nil},
		{"Sigmoid", "Sigmoid", 13, false, nil},
		{"Tanh", "Tanh", 13, false, nil},
		{"Gelu", "Gelu", 20, false, nil},
		{"Gelu", "GeluTanh", 20, false, map[string]kernels.Attribute{"approximate": kernels.StringAttr("tanh")}},
		{"Neg", "Neg", 13, false, nil},
		{"Abs", "Abs", 13, false, nil},
		{"Sqrt", "Sqrt", 13, true, nil},
		{"Reciprocal", "Reciprocal", 13, false, nil},
		{"Exp", "Exp", 13, false, nil},
		{"Log", "Log", 13, true, nil},
		{"Erf", "Erf", 13, false, nil},
		{"Sin", "Sin", 7, false, nil},
		{"Cos", "Cos", 7, false, nil},
	}
	for _, o := range ops {
		for _, dt := range floatTypes {
			for _, shape := range [][]int64{{7, 13}, {4099}} {
				t.Run(fmt.Sprintf("%s/%s/%s/%v", o.op, o.ref, dt, shape), func(t *testing.T) {
					f := f.sub(t)
					opset := o.opset
					if dt == kernels.BFloat16 {
						opset = max(opset, 13)
					}
					spec := kernels.Spec{Op: o.op, Opset: opset, Inputs: []kernels.TensorInfo{info(dt, shape...)}, Attrs: o.attrs}
					x := f.randomTyped(dt, spec.Inputs[0].NumElements())
					x[0] = math.Abs(x[0])
					if o.positive {
						for i := range x {
							x[i] = math.Abs(x[i])
						}
					}
					k, got := f.runTyped(spec, x)
					assert.Equal(t, []kernels.TensorInfo{info(dt, shape...)}, k.Outputs())
					requireClose64(t, got, kernels.RefUnary(o.ref, x), boundFor(dt), k.Name())
				})
			}
		}
	}
}

func TestComparisonsAgainstReference(t *testing.T) {
	f := newFixture(t)
	types := []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16, kernels.Int32, kernels.Int64}
	shapes := [][2][]int64{{{3, 45}, {3, 45}}, {{3, 45}, {45}}, {{2, 1, 5}, {1, 3, 1}}}
	for _, op := range []string{"Equal", "Less", "Greater"} {
		for _, dt := range append(types, kernels.Bool) {
			if dt == kernels.Bool && op != "Equal" {
				continue
			}
			for _, sh := range shapes {
				t.Run(fmt.Sprintf("%s/%s/%v", op, dt, sh), func(t *testing.T) {
					f := f.sub(t)
					spec := kernels.Spec{Op: op, Opset: 13, Inputs: []kernels.TensorInfo{info(dt, sh[0]...), info(dt, sh[1]...)}}
					// Values from a small set, so that equal pairs are common.
					pick := func(n int64) []float64 {
						v := make([]float64, n)
						for i := range v {
							v[i] = roundTo(dt, float64(f.rng.IntN(5)-2)*1.5)
						}
						return v
					}
					a, b := pick(spec.Inputs[0].NumElements()), pick(spec.Inputs[1].NumElements())
					// Output 0 compares a[0] with b[0], output 1 a[1] with b[1] (or with b[0] for
					// [2,1,5] against [1,3,1]) and the last output a[-1] with b[-1]: fix a smaller,
					// a greater and an equal pair, so that both results occur whatever the draw
					// (bool inputs, 1 for four of the five values, would often give only ones).
					a[0], b[0] = roundTo(dt, 0), roundTo(dt, 1.5)
					a[1], b[1] = roundTo(dt, 3), roundTo(dt, -3)
					a[len(a)-1], b[len(b)-1] = roundTo(dt, 1.5), roundTo(dt, 1.5)
					k, got := f.runTyped(spec, a, b)
					out, _ := broadcast(sh[0], sh[1])
					assert.Equal(t, []kernels.TensorInfo{info(kernels.Bool, out...)}, k.Outputs())
					ref := compareRef(op, a, sh[0], b, sh[1])
					assert.Equal(t, ref, got, k.Name())
					assert.Contains(t, got, 1.0)
					assert.Contains(t, got, 0.0)
				})
			}
		}
	}
}

// compareRef is the comparison over the broadcast of a and b, as 0 or 1, built from
// RefBinary with a subtraction's sign.
func compareRef(op string, a []float64, as []int64, b []float64, bs []int64) []float64 {
	diff, _, _ := kernels.RefBinary("Sub", a, as, b, bs)
	out := make([]float64, len(diff))
	for i, d := range diff {
		var v bool
		switch op {
		case "Equal":
			v = d == 0
		case "Less":
			v = d < 0
		default:
			v = d > 0
		}
		if v {
			out[i] = 1
		}
	}
	return out
}

func broadcast(a, b []int64) ([]int64, bool) {
	_, shape, ok := kernels.RefBinary("Add", make([]float64, numel(a)), a, make([]float64, numel(b)), b)
	return shape, ok
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

func TestWhereBroadcastsEveryDType(t *testing.T) {
	f := newFixture(t)
	shapes := [][3][]int64{
		{{4, 9}, {4, 9}, {4, 9}},
		{{1, 1, 5, 5}, {2, 3, 5, 5}, nil}, // a causal-mask-like condition and a scalar
		{{5}, {3, 1}, {1, 5}},
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16, kernels.Int32, kernels.Int64, kernels.Bool} {
		for _, sh := range shapes {
			t.Run(fmt.Sprintf("%s/%v", dt, sh), func(t *testing.T) {
				f := f.sub(t)
				spec := kernels.Spec{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{info(kernels.Bool, sh[0]...), info(dt, sh[1]...), info(dt, sh[2]...)}}
				c := make([]float64, numel(sh[0]))
				for i := range c {
					c[i] = float64(f.rng.IntN(2))
				}
				c[0] = 1
				c[len(c)-1] = 0
				x := make([]float64, numel(sh[1]))
				for i := range x {
					x[i] = roundTo(dt, float64(i%7)+1.5)
				}
				y := make([]float64, numel(sh[2]))
				for i := range y {
					y[i] = roundTo(dt, -float64(i%5)-0.25)
				}
				if dt == kernels.Bool {
					for i := range y {
						y[i] = 0
					}
				}
				k, got := f.runTyped(spec, c, x, y)
				// Reference: (c · x) + ((1 − c) · y) over the broadcast, elementwise.
				cx, shape, _ := kernels.RefBinary("Mul", c, sh[0], x, sh[1])
				notC := make([]float64, len(c))
				for i, v := range c {
					notC[i] = 1 - v
				}
				ny, _, _ := kernels.RefBinary("Mul", notC, sh[0], y, sh[2])
				ref, shape2, _ := kernels.RefBinary("Add", cx, shape, ny, shapeOf(ny, sh[0], sh[2]))
				assert.Equal(t, []kernels.TensorInfo{info(dt, shape2...)}, k.Outputs())
				assert.Equal(t, ref, got, k.Name())
			})
		}
	}
}

// TestWhereUpdatesInPlace: a Where whose output is the memory of Y (a key/value cache updated
// at one position) or of X launches the update kernel, which stores only the other operand's
// elements; the result is the out-of-place Where's, for every element size, in 16-byte packs
// and element by element (rows of 3 elements), with a condition that mixes within a pack.
func TestWhereUpdatesInPlace(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name    string
		c, x, y []int64
		into    int // the operand the output is: 1 (X) or 2 (Y)
	}{
		{"cache row into Y", []int64{1, 1, 24, 1}, []int64{1, 2, 1, 16}, []int64{1, 2, 24, 16}, 2},
		{"cache row into Y, rows of 3", []int64{1, 1, 24, 1}, []int64{1, 2, 1, 3}, []int64{1, 2, 24, 3}, 2},
		{"mixed packs into X", []int64{4, 40}, []int64{4, 40}, []int64{40}, 1},
		{"scalar other into Y", []int64{6, 8}, nil, []int64{6, 8}, 2},
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16, kernels.Int64, kernels.Bool} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				f := f.sub(t)
				spec := kernels.Spec{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{info(kernels.Bool, c.c...), info(dt, c.x...), info(dt, c.y...)}}
				cond := make([]float64, numel(c.c))
				for i := range cond {
					cond[i] = float64(f.rng.IntN(2))
				}
				cond[0], cond[len(cond)-1] = 1, 0
				vals := func(n int64, sign float64) []float64 {
					v := make([]float64, n)
					for i := range v {
						v[i] = roundTo(dt, sign*(float64(i%7)+1.5))
						if dt == kernels.Bool {
							v[i] = float64(i % 2)
						}
					}
					return v
				}
				x, y := vals(numel(c.x), 1), vals(numel(c.y), -1)
				k, want := f.runTyped(spec, cond, x, y)
				ops := []kernels.Tensor{f.uploadTyped(kernels.Bool, c.c, cond), f.uploadTyped(dt, c.x, x), f.uploadTyped(dt, c.y, y)}
				out := ops[c.into]
				assert.Equal(t, "update", kernels.LaunchVariant(k, ops, []kernels.Tensor{out}))
				require.NoError(t, k.Execute(ops, []kernels.Tensor{out}))
				assert.Equal(t, want, f.downloadTyped(out), k.Name())
			})
		}
	}
}

// TestWherePairAgainstWhere: cudaep.WherePair gives each Where's result: in one update launch
// when both outputs are in place on their Y (or both on their X), as two Wheres otherwise (one
// in place, or neither), for every element size.
func TestWherePairAgainstWhere(t *testing.T) {
	f := newFixture(t)
	cs, xs, ys := []int64{1, 1, 12, 1}, []int64{1, 2, 1, 16}, []int64{1, 2, 12, 16}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.BFloat16, kernels.Int64, kernels.Bool} {
		for _, c := range []struct {
			name    string
			into    [2]int // the operand each output is: 1 X, 2 Y, 0 a buffer of its own
			variant string
		}{
			{"both into Y", [2]int{2, 2}, "update2"},
			{"one into Y", [2]int{2, 0}, ""},
			{"neither", [2]int{0, 0}, ""},
		} {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				f := f.sub(t)
				where := kernels.Spec{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{info(kernels.Bool, cs...), info(dt, xs...), info(dt, ys...)}}
				pair := kernels.Spec{Op: "cudaep.WherePair", Opset: 1, NumOutputs: 2,
					Inputs: []kernels.TensorInfo{where.Inputs[0], where.Inputs[1], where.Inputs[2], where.Inputs[1], where.Inputs[2]}}
				cond := make([]float64, numel(cs))
				cond[3] = 1
				vals := func(n int64, base float64) []float64 {
					v := make([]float64, n)
					for i := range v {
						v[i] = roundTo(dt, base+float64(i%9))
						if dt == kernels.Bool {
							v[i] = float64((i + int(base)) % 2)
						}
					}
					return v
				}
				x := [2][]float64{vals(numel(xs), 1), vals(numel(xs), 20)}
				y := [2][]float64{vals(numel(ys), -40), vals(numel(ys), -80)}
				k := f.get(pair)
				ins := []kernels.Tensor{f.uploadTyped(kernels.Bool, cs, cond)}
				for p := range 2 {
					ins = append(ins, f.uploadTyped(dt, xs, x[p]), f.uploadTyped(dt, ys, y[p]))
				}
				outs := f.outputs(k)
				for p, into := range c.into {
					if into != 0 {
						outs[p] = ins[into+2*p]
					}
				}
				assert.Equal(t, c.variant, kernels.LaunchVariant(k, ins, outs))
				require.NoError(t, k.Execute(ins, outs))
				for p := range 2 {
					_, want := f.runTyped(where, cond, x[p], y[p])
					assert.Equal(t, want, f.downloadTyped(outs[p]), "output %d", p)
				}
			})
		}
	}
}

// TestWherePairRefusesUnlikeOperands: the second Where's X and Y must have the first's dtypes
// and shapes, and each Where must be one Where takes.
func TestWherePairRefusesUnlikeOperands(t *testing.T) {
	f := newFixture(t)
	c, x, y := info(kernels.Bool, 1, 1, 4, 1), f32Info(1, 2, 1, 8), f32Info(1, 2, 4, 8)
	for _, tc := range []struct {
		ins  []kernels.TensorInfo
		want string
	}{
		{[]kernels.TensorInfo{c, x, y, f32Info(1, 2, 1, 4), y}, "one dtype and shape"},
		{[]kernels.TensorInfo{c, x, y, x, info(kernels.Float16, 1, 2, 4, 8)}, "one dtype and shape"},
		{[]kernels.TensorInfo{c, x, f32Info(1, 2, 3, 8), x, f32Info(1, 2, 3, 8)}, "do not broadcast"},
		{[]kernels.TensorInfo{c, x, y, x}, "input"},
	} {
		_, err := f.lib.Get(kernels.Spec{Op: "cudaep.WherePair", Opset: 1, NumOutputs: 2, Inputs: tc.ins})
		require.ErrorIs(t, err, kernels.ErrUnsupported)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// TestWhereUpdateStoresOnlyTheOtherOperand: the update kernel, launched raw into an output
// that is not Y, leaves every element it does not take from X as it was (the out-of-place
// kernel would store Y's there): the in-place cache update stores one row, not the cache.
func TestWhereUpdateStoresOnlyTheOtherOperand(t *testing.T) {
	f := newFixture(t)
	const heads, pos, dim = 2, 8, 8
	cond := make([]float64, pos)
	cond[5] = 1
	c := f.uploadTyped(kernels.Bool, []int64{1, 1, pos, 1}, cond)
	x := f.randomTyped(kernels.Float32, heads*dim)
	src := f.uploadTyped(kernels.Float32, []int64{1, heads, 1, dim}, x)
	before := f.randomTyped(kernels.Float32, heads*pos*dim)
	out := f.uploadTyped(kernels.Float32, []int64{1, heads, pos, dim}, before)
	for _, when := range []uint32{1, 0} {
		args := new(cudadrv.KernelArgs)
		args.Ptr(out.Ptr).Ptr(c.Ptr).Ptr(src.Ptr).U64(heads * pos * dim)
		for _, v := range []int64{1, heads, pos, dim, 0, 0, 1, 0, 0, dim, 0, 1} { // dims, c's strides, X's
			args.I64(v)
		}
		args.U32(when)
		fn := kernels.LibraryFunction(f.lib, "cudaep_where_update_b32")
		require.NoError(t, f.stream.Launch(fn, cudadrv.Dim3{X: 1, Y: 1, Z: 1}, cudadrv.Dim3{X: 256, Y: 1, Z: 1}, 0, args))
		got := f.downloadTyped(out)
		for h := range heads {
			for p := range pos {
				for d := range dim {
					i := (h*pos+p)*dim + d
					if (p == 5) == (when == 1) {
						assert.Equal(t, x[h*dim+d], got[i], "when %d: head %d position %d element %d stored", when, h, p, d)
					} else if when == 1 {
						assert.Equal(t, before[i], got[i], "when 1: head %d position %d element %d left as it was", h, p, d)
					}
				}
			}
		}
	}
}

// shapeOf is the broadcast shape of a and b (the shape of their elementwise result v).
func shapeOf(_ []float64, a, b []int64) []int64 {
	s, _ := broadcast(a, b)
	return s
}

func TestCastAmongTypes(t *testing.T) {
	f := newFixture(t)
	types := []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16, kernels.Int32, kernels.Int64, kernels.Bool}
	// Values that every type holds after rounding to the source type, with fractions that
	// truncate, signs, and float16 and bfloat16 ties (1 + 2^-11, 1 + 2^-8 + 2^-9).
	base := []float64{0, 1, -1, 2.75, -2.75, 0.4, -0.6, 100.5, -1000.25, 1 + 1.0/2048, 1 + 1.0/256 + 1.0/512, 65504, 3, -7}
	for _, from := range types {
		for _, to := range types {
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				f := f.sub(t)
				in := make([]float64, len(base))
				for i, v := range base {
					in[i] = roundTo(from, v)
				}
				ref := make([]float64, len(in))
				for i, v := range in {
					ref[i] = roundTo(to, v)
				}
				spec := kernels.Spec{Op: "Cast", Opset: 19, Inputs: []kernels.TensorInfo{info(from, int64(len(in)))},
					Attrs: map[string]kernels.Attribute{"to": kernels.IntAttr(int64(to))}}
				k, got := f.runTyped(spec, in)
				assert.Equal(t, []kernels.TensorInfo{info(to, int64(len(in)))}, k.Outputs())
				assert.Equal(t, ref, got, k.Name())
			})
		}
	}
}

func TestSoftmaxHalfTypes(t *testing.T) {
	f := newFixture(t)
	for _, dt := range halfTypes {
		for _, c := range []struct {
			shape []int64
			axis  int64
			opset int
		}{{[]int64{3, 1001}, -1, 13}, {[]int64{2, 7, 5}, 1, 13}, {[]int64{2, 7, 5}, 1, 11}} {
			t.Run(fmt.Sprintf("%s/%v/axis %d/opset %d", dt, c.shape, c.axis, c.opset), func(t *testing.T) {
				f := f.sub(t)
				opset := max(c.opset, 13)
				if dt == kernels.Float16 {
					opset = c.opset
				}
				spec := kernels.Spec{Op: "Softmax", Opset: opset, Inputs: []kernels.TensorInfo{info(dt, c.shape...)},
					Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(c.axis)}}
				x := f.randomTyped(dt, numel(c.shape))
				k, got := f.runTyped(spec, x)
				requireClose64(t, got, kernels.RefSoftmax(x, c.shape, int(c.axis), opset), boundFor(dt), k.Name())
			})
		}
	}
}

// Bounds of 16-bit GEMMs: outputs rounded to the type, float32 accumulation.
func gemmBoundFor(dt kernels.DType) float64 {
	if dt == kernels.BFloat16 {
		return 1e-2
	}
	return 2e-3
}

func TestMatMulAndGemmHalfTypes(t *testing.T) {
	f := newFixture(t)
	for _, dt := range halfTypes {
		for _, c := range []struct{ a, b []int64 }{
			{[]int64{37, 29}, []int64{29, 41}},
			{[]int64{3, 5, 17}, []int64{17, 9}},     // batch folded into M
			{[]int64{2, 1, 5, 8}, []int64{3, 8, 7}}, // broadcast batch
			{[]int64{1, 33}, []int64{2, 4, 33, 3}},  // A repeated
			{[]int64{16}, []int64{16, 8}},           // 1-D A
		} {
			t.Run(fmt.Sprintf("MatMul/%s/%v x %v", dt, c.a, c.b), func(t *testing.T) {
				f := f.sub(t)
				spec := kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, c.a...), info(dt, c.b...)}}
				a, b := f.randomTyped(dt, numel(c.a)), f.randomTyped(dt, numel(c.b))
				k, got := f.runTyped(spec, a, b)
				ref, shape, ok := kernels.RefMatMul(a, c.a, b, c.b)
				require.True(t, ok)
				assert.Equal(t, []kernels.TensorInfo{info(dt, shape...)}, k.Outputs())
				requireClose64(t, got, ref, gemmBoundFor(dt), k.Name())
			})
		}
		for _, c := range []struct {
			name           string
			a, b, c        []int64
			transA, transB bool
			beta           float32
		}{
			{"plain", []int64{13, 21}, []int64{21, 11}, nil, false, false, 1},
			{"transposes, matrix C", []int64{21, 13}, []int64{11, 21}, []int64{13, 11}, true, true, 0.5},
			{"row C broadcast", []int64{13, 21}, []int64{21, 11}, []int64{11}, false, false, 2},
			{"column C broadcast", []int64{13, 21}, []int64{11, 21}, []int64{13, 1}, false, true, 1},
		} {
			t.Run(fmt.Sprintf("Gemm/%s/%s", dt, c.name), func(t *testing.T) {
				f := f.sub(t)
				ins := []kernels.TensorInfo{info(dt, c.a...), info(dt, c.b...)}
				vals := [][]float64{f.randomTyped(dt, numel(c.a)), f.randomTyped(dt, numel(c.b))}
				if c.c != nil {
					ins = append(ins, info(dt, c.c...))
					vals = append(vals, f.randomTyped(dt, numel(c.c)))
				}
				attrs := map[string]kernels.Attribute{"alpha": kernels.FloatAttr(1.25), "beta": kernels.FloatAttr(c.beta),
					"transA": kernels.IntAttr(b2i(c.transA)), "transB": kernels.IntAttr(b2i(c.transB))}
				k, got := f.runTyped(kernels.Spec{Op: "Gemm", Opset: 13, Inputs: ins, Attrs: attrs}, vals...)
				var cv []float64
				if c.c != nil {
					cv = vals[2]
				}
				ref, shape := kernels.RefGemm(vals[0], c.a, vals[1], c.b, cv, c.c, 1.25, float64(c.beta), c.transA, c.transB)
				assert.Equal(t, []kernels.TensorInfo{info(dt, shape...)}, k.Outputs())
				requireClose64(t, got, ref, gemmBoundFor(dt), k.Name())
			})
		}
	}
}

// suffix is the kernel-name suffix of dt.
func suffix(dt kernels.DType) string {
	return map[kernels.DType]string{kernels.Float32: "f32", kernels.Float16: "f16", kernels.BFloat16: "bf16",
		kernels.Int32: "i32", kernels.Int64: "i64", kernels.Bool: "b8"}[dt]
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestBroadcastKernelsRunOverPacks: a decode step's cache update (Where of a position mask, the
// new row and the cache) and a broadcasting Add whose innermost dimension is whole 16-byte packs
// launch one thread per pack of the output, and still give every element when an operand is not
// 16-byte aligned (the kernels' element loop then strides over that smaller grid).
func TestBroadcastKernelsRunOverPacks(t *testing.T) {
	f := newFixture(t)
	bf := kernels.BFloat16
	cShape, xShape, yShape := []int64{1, 1, 40, 1}, []int64{1, 4, 1, 64}, []int64{1, 4, 40, 64}
	n := numel(yShape)
	where := f.get(kernels.Spec{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{info(kernels.Bool, cShape...), info(bf, xShape...), info(bf, yShape...)}})
	add := f.get(kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{info(bf, xShape...), info(bf, yShape...)}})
	odd := f.get(kernels.Spec{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{info(kernels.Bool, 1, 1, 40, 1), info(bf, 1, 4, 1, 63), info(bf, 1, 4, 40, 63)}})
	packs := (n/8 + 255) / 256
	assert.Equal(t, uint32(packs), kernels.LaunchGrid(where).X, "Where: a thread per pack")
	assert.Equal(t, uint32(packs), kernels.LaunchGrid(add).X, "Add: a thread per pack")
	assert.Equal(t, uint32((numel([]int64{1, 4, 40, 63})+255)/256), kernels.LaunchGrid(odd).X, "rows of 63: a thread per element")

	c := make([]float64, 40)
	c[17] = 1 // the position this step writes
	x, y := f.randomTyped(bf, numel(xShape)), f.randomTyped(bf, n)
	want := make([]float64, n)
	sum := make([]float64, n)
	for i := range want {
		pos, col, head := (i/64)%40, i%64, i/(64*40)
		want[i] = y[i]
		if c[pos] == 1 {
			want[i] = x[head*64+col]
		}
		sum[i] = roundTo(bf, x[head*64+col]+y[i])
	}
	for _, off := range []cudadrv.DevicePtr{0, 2} {
		yt := kernels.Tensor{TensorInfo: info(bf, yShape...), Ptr: f.alloc(info(bf, n+8)).Ptr + off}
		require.NoError(t, f.env.Context.CopyHtoD(yt.Ptr, encode(bf, y)))
		ct, xt := f.uploadTyped(kernels.Bool, cShape, c), f.uploadTyped(bf, xShape, x)
		for _, tc := range []struct {
			k    kernels.Kernel
			ins  []kernels.Tensor
			want []float64
		}{{where, []kernels.Tensor{ct, xt, yt}, want}, {add, []kernels.Tensor{xt, yt}, sum}} {
			outs := f.outputs(tc.k)
			f.poison(outs[0])
			require.NoError(t, tc.k.Execute(tc.ins, outs))
			assert.Equal(t, tc.want, f.downloadTyped(outs[0]), "%s with Y at byte offset %d", tc.k.Name(), off)
		}
	}
}
