package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// refRound is the float64 reference of a conversion to a binary format with p significant bits,
// smallest normal exponent emin and largest finite exponent emax: v rounded to nearest, ties to
// even (subnormals included), ±Inf past the largest finite value. It shares no code with
// cudadrv's bit tricks, which the simulator uses.
func refRound(v float64, p, emin, emax int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v == 0 {
		return v
	}
	a := math.Abs(v)
	_, e := math.Frexp(a) // a in [2^(e-1), 2^e)
	q := math.Ldexp(1, max(e-p, emin-p+1))
	r := math.RoundToEven(a/q) * q
	if r >= math.Ldexp(1, emax+1) {
		r = math.Inf(1)
	}
	return math.Copysign(r, v)
}

// refBF16 and refF16 are the bits of v converted to bfloat16 and float16; a NaN gets the bits
// cast.cu documents: the source's sign and top payload bits, with the quiet bit set.
func refBF16(v float64, nanBits uint16) uint16 {
	if math.IsNaN(v) {
		return nanBits
	}
	r := refRound(v, 8, -126, 127)
	b := math.Float32bits(float32(r)) // exact: r has at most 8 significant bits
	if b&0xffff != 0 {
		panic(fmt.Sprintf("refBF16(%g) = %g is not a bfloat16", v, r))
	}
	return uint16(b >> 16)
}

func refF16(v float64, nanBits uint16) uint16 {
	if math.IsNaN(v) {
		return nanBits
	}
	r := refRound(v, 11, -14, 15)
	sign := uint16(0)
	if math.Signbit(r) {
		sign = 0x8000
	}
	a := math.Abs(r)
	switch {
	case math.IsInf(a, 0):
		return sign | 0x7c00
	case a < math.Ldexp(1, -14): // subnormal: multiples of 2^-24
		return sign | uint16(a*(1<<24))
	}
	m, e := math.Frexp(a) // a = m·2^e, m in [0.5, 1)
	return sign | uint16(e-1+15)<<10 | uint16((m*2-1)*1024)
}

// bf16Specials are float32 bit patterns where a conversion to bfloat16 can go wrong: signed
// zeros, ties to even in both directions, just off a tie, the largest finite values (0x7f7f8000
// is a tie that rounds up into Inf), subnormals (ties among them, and one rounding up into the
// normals), infinities, quiet and signalling NaNs of both signs (a signalling NaN must not round
// into Inf), and ONNX's own test values.
var bf16Specials = []uint32{
	0x00000000, 0x80000000, 0x3f800000, 0xbf800000,
	0x3f808000, 0x3f818000, 0xbf808000, 0xbf818000, // ties: to 0x3f80 (even), to 0x3f82 (odd rounds up)
	0x3f808001, 0x3f807fff, 0x3f818001, 0x3f817fff, // just above and below the ties
	0x7f7fffff, 0x7f7f7fff, 0x7f7f8000, 0xff7f8000, 0x7f7effff,
	0x00000001, 0x00008000, 0x00018000, 0x80018000, 0x007fffff, 0x00800000, 0x00400000,
	0x7f800000, 0xff800000,
	0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa5a5a5, 0xffffffff,
	0x3ef535b8, 0x3ef5eeb0, 0x3effd6b2, 0x3f51b0e5, 0x3ef0cccc, 0x3f51040c, 0x3e57eed1, 0x3f391039,
}

func TestCastBFloat16AgainstReference(t *testing.T) {
	f := newFixture(t)
	cast := func(f *fixture, from, to kernels.DType, raw []byte) []byte {
		f.t.Helper()
		n := int64(len(raw) / from.Size())
		spec := kernels.Spec{Op: "Cast", Opset: 19, Inputs: []kernels.TensorInfo{info(from, n)},
			Attrs: map[string]kernels.Attribute{"to": kernels.IntAttr(int64(to))}}
		k := f.get(spec)
		require.Equal(f.t, []kernels.TensorInfo{info(to, n)}, k.Outputs())
		outs := f.outputs(k)
		require.NoError(f.t, k.Execute([]kernels.Tensor{f.upload(info(from, n), raw)}, outs))
		return f.download(outs[0])
	}
	u16s := func(b []byte) []uint16 {
		out := make([]uint16, len(b)/2)
		for i := range out {
			out[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		return out
	}
	every16 := make([]byte, 2<<16) // every 16-bit pattern
	for i := range 1 << 16 {
		binary.LittleEndian.PutUint16(every16[2*i:], uint16(i))
	}

	t.Run("float32 to bfloat16", func(t *testing.T) {
		f := f.sub(t)
		bits := append([]uint32{}, bf16Specials...)
		for range 1 << 14 { // random finite and non-finite patterns
			bits = append(bits, f.rng.Uint32())
		}
		raw := make([]byte, 4*len(bits))
		want := make([]uint16, len(bits))
		for i, b := range bits {
			binary.LittleEndian.PutUint32(raw[4*i:], b)
			want[i] = refBF16(float64(math.Float32frombits(b)), uint16(b>>16)|0x40)
		}
		got := u16s(cast(f, kernels.Float32, kernels.BFloat16, raw))
		for i := range want {
			if got[i] != want[i] {
				assert.Failf(t, "wrong bfloat16", "float32 %#08x (%g): got %#04x, want %#04x", bits[i],
					math.Float32frombits(bits[i]), got[i], want[i])
			}
		}
		// The ties themselves, spelled out: the reference is no tautology.
		assert.Equal(t, []uint16{0x3f80, 0x3f82, 0xbf80, 0xbf82}, got[4:8], "ties to even")
		assert.Equal(t, uint16(0x7f80), got[14], "0x7f7f8000 rounds into +Inf")
		assert.Equal(t, []uint16{0x7fc0, 0xffc0, 0x7fc0, 0xffc0, 0x7fe5, 0xffff}, got[26:32], "NaNs stay quiet NaNs")
	})

	t.Run("float16 to bfloat16", func(t *testing.T) {
		f := f.sub(t)
		got := u16s(cast(f, kernels.Float16, kernels.BFloat16, every16))
		for h := range 1 << 16 {
			v := f16Value(uint16(h))
			// A float16 NaN widens to float32 with its payload shifted up 13 bits.
			nan := uint16(h&0x8000) | 0x7f80 | 0x40 | uint16(h&0x3ff)>>3
			if want := refBF16(v, nan); !sameBF16(got[h], want) {
				assert.Failf(t, "wrong bfloat16", "float16 %#04x (%g): got %#04x, want %#04x", h, v, got[h], want)
			}
		}
	})

	t.Run("bfloat16 to float32 is exact (NaNs stay NaNs)", func(t *testing.T) {
		f := f.sub(t)
		got := cast(f, kernels.BFloat16, kernels.Float32, every16)
		for h := range 1 << 16 {
			g := binary.LittleEndian.Uint32(got[4*h:])
			want := uint32(h) << 16
			if math.IsNaN(float64(math.Float32frombits(want))) {
				// A NaN stays a NaN of its sign; the simulator (through float64) quiets a
				// signalling one, the device keeps its bits.
				if !math.IsNaN(float64(math.Float32frombits(g))) || g>>31 != want>>31 {
					assert.Failf(t, "NaN lost", "bfloat16 %#04x: got %#08x", h, g)
				}
				continue
			}
			if g != want {
				assert.Failf(t, "wrong float32", "bfloat16 %#04x: got %#08x, want %#08x", h, g, want)
			}
		}
	})

	t.Run("bfloat16 to float16", func(t *testing.T) {
		f := f.sub(t)
		got := u16s(cast(f, kernels.BFloat16, kernels.Float16, every16))
		for h := range 1 << 16 {
			v := float64(math.Float32frombits(uint32(h) << 16))
			nan := uint16(h&0x8000) | 0x7c00 | 0x200 | uint16(h&0x7f)<<3
			if want := refF16(v, nan); !sameF16(got[h], want) {
				assert.Failf(t, "wrong float16", "bfloat16 %#04x (%g): got %#04x, want %#04x", h, v, got[h], want)
			}
		}
	})
}

// f16Value is the float64 value of float16 bits h, computed from the format's definition.
func f16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -24)
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1024+m, e-25)
}

// sameF16 compares float16 bits, any NaN matching a NaN: a NaN's sign and payload after a
// conversion between the 16-bit formats are the device's choice (the H200's conversions return
// the canonical 0x7fff whatever came in); that a NaN stays a NaN is not.
func sameF16(got, want uint16) bool {
	isNaN := func(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }
	if isNaN(want) {
		return isNaN(got)
	}
	return got == want
}

// sameBF16 is sameF16 for bfloat16 bits.
func sameBF16(got, want uint16) bool {
	isNaN := func(h uint16) bool { return h&0x7f80 == 0x7f80 && h&0x7f != 0 }
	if isNaN(want) {
		return isNaN(got)
	}
	return got == want
}
