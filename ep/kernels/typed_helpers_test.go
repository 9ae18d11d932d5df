package kernels_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
)

// Error bounds, ‖out − ref‖/‖ref‖ against float64 references computed from the inputs as
// stored: float16 outputs carry 2^-11 relative rounding, bfloat16 2^-8.
func boundFor(dt kernels.DType) float64 {
	switch dt {
	case kernels.Float16:
		return 1e-3
	case kernels.BFloat16:
		return 8e-3
	}
	return boundElementwise
}

// roundTo returns v as the device would store it in dt: float16 and bfloat16 through float32
// (to nearest, ties to even), integers truncated toward zero, bool 0 or 1.
func roundTo(dt kernels.DType, v float64) float64 {
	switch dt {
	case kernels.Float32:
		return float64(float32(v))
	case kernels.Float16:
		return float64(cudadrv.Float16Value(cudadrv.Float16Bits(float32(v))))
	case kernels.BFloat16:
		return float64(cudadrv.BFloat16Value(cudadrv.BFloat16Bits(float32(v))))
	case kernels.Int32, kernels.Int64:
		return math.Trunc(v)
	case kernels.Bool:
		if v != 0 {
			return 1
		}
		return 0
	}
	return v
}

// encode returns vals stored as dt (rounded as roundTo does).
func encode(dt kernels.DType, vals []float64) []byte {
	size := dt.Size()
	b := make([]byte, size*len(vals))
	for i, v := range vals {
		p := b[i*size:]
		switch dt {
		case kernels.Float32:
			binary.LittleEndian.PutUint32(p, math.Float32bits(float32(v)))
		case kernels.Float64:
			binary.LittleEndian.PutUint64(p, math.Float64bits(v))
		case kernels.Float16:
			binary.LittleEndian.PutUint16(p, cudadrv.Float16Bits(float32(v)))
		case kernels.BFloat16:
			binary.LittleEndian.PutUint16(p, cudadrv.BFloat16Bits(float32(v)))
		case kernels.Int32:
			binary.LittleEndian.PutUint32(p, uint32(int32(v)))
		case kernels.Int64:
			binary.LittleEndian.PutUint64(p, uint64(int64(v)))
		case kernels.Bool:
			p[0] = byte(roundTo(kernels.Bool, v))
		case kernels.Uint8:
			p[0] = byte(v)
		}
	}
	return b
}

// decode returns the values of dt elements in b.
func decode(dt kernels.DType, b []byte) []float64 {
	size := dt.Size()
	out := make([]float64, len(b)/size)
	for i := range out {
		p := b[i*size:]
		switch dt {
		case kernels.Float32:
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
		case kernels.Float64:
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(p))
		case kernels.Float16:
			out[i] = float64(cudadrv.Float16Value(binary.LittleEndian.Uint16(p)))
		case kernels.BFloat16:
			out[i] = float64(cudadrv.BFloat16Value(binary.LittleEndian.Uint16(p)))
		case kernels.Int32:
			out[i] = float64(int32(binary.LittleEndian.Uint32(p)))
		case kernels.Int64:
			out[i] = float64(int64(binary.LittleEndian.Uint64(p)))
		case kernels.Bool, kernels.Uint8:
			out[i] = float64(p[0])
		}
	}
	return out
}

// randomTyped returns n random values (±[0.1, 2), never zero) rounded to dt.
func (f *fixture) randomTyped(dt kernels.DType, n int64) []float64 {
	out := make([]float64, n)
	for i, v := range f.random(n) {
		out[i] = roundTo(dt, float64(v))
	}
	return out
}

func (f *fixture) uploadTyped(dt kernels.DType, shape []int64, vals []float64) kernels.Tensor {
	return f.upload(kernels.TensorInfo{DType: dt, Shape: shape}, encode(dt, vals))
}

func (f *fixture) downloadTyped(t kernels.Tensor) []float64 {
	return decode(t.DType, f.download(t))
}

// runTyped gets the kernel for spec, uploads inputs (in each input's dtype), poisons fresh
// outputs, executes and returns the kernel and the first output's values.
func (f *fixture) runTyped(spec kernels.Spec, inputs ...[]float64) (kernels.Kernel, []float64) {
	f.t.Helper()
	k := f.get(spec)
	ins := make([]kernels.Tensor, len(inputs))
	for i, in := range inputs {
		ins[i] = f.uploadTyped(spec.Inputs[i].DType, spec.Inputs[i].Shape, in)
	}
	outs := f.outputs(k)
	require.NoError(f.t, k.Execute(ins, outs))
	return k, f.downloadTyped(outs[0])
}

// requireClose64 is requireClose over float64 results.
func requireClose64(t testing.TB, got, ref []float64, bound float64, what string) {
	t.Helper()
	g := make([]float32, len(got))
	for i, v := range got {
		g[i] = float32(v)
	}
	requireClose(t, g, ref, bound, what)
}

// requireCloseScaled checks that every element was written and that ‖got − ref‖ / ‖norm‖ <=
// bound: norm is what the error scales with (the reduction of |x| for a sum).
func requireCloseScaled(t testing.TB, got, ref, norm []float64, bound float64, what string) {
	t.Helper()
	require.Len(t, got, len(ref), "%s: element count", what)
	var num, den float64
	for i, g := range got {
		if math.IsNaN(g) || math.IsInf(g, 0) {
			require.Failf(t, "element not written", "%s: element %d is %v (poison 0xff bytes are NaN)", what, i, g)
		}
		num += (g - ref[i]) * (g - ref[i])
		den += norm[i] * norm[i]
	}
	require.NotZero(t, den, "%s: the reference is all zeros; the check would prove nothing", what)
	rel := math.Sqrt(num / den)
	require.LessOrEqual(t, rel, bound, "%s: ‖out−ref‖/‖Σ|x|‖ = %.3g", what, rel)
}

func info(dt kernels.DType, shape ...int64) kernels.TensorInfo {
	return kernels.TensorInfo{DType: dt, Shape: shape}
}
