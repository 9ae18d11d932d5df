package cudadrv_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cudaep/cudaep/cudadrv"
)

func TestFloat16Conversions(t *testing.T) {
	cases := []struct {
		f    float32
		bits uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff},
		{65520, 0x7c00},                  // rounds up to infinity
		{float32(math.Inf(-1)), 0xfc00},  // infinity
		{5.960464477539063e-08, 0x0001},  // the smallest subnormal
		{2.9802322387695312e-08, 0x0000}, // half of it: ties to even, zero
		{4.470348358154297e-08, 0x0001},  // 0.75 of it rounds up
		{6.097555160522461e-05, 0x03ff},  // the largest subnormal
		{1.0009765625, 0x3c01},           // 1 + 2^-10
		{1.00048828125, 0x3c00},          // 1 + 2^-11: a tie, to even (down)
		{1.00146484375, 0x3c02},          // 1 + 3·2^-11: a tie, to even (up)
		{float32(math.Copysign(0, -1)), 0x8000},
	}
	for _, c := range cases {
		assert.Equal(t, c.bits, cudadrv.Float16Bits(c.f), "Float16Bits(%g)", c.f)
	}
	for bits, f := range map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: 5.960464477539063e-08,
		0x03ff: 6.097555160522461e-05, 0x3c01: 1.0009765625, 0xfc00: float32(math.Inf(-1))} {
		assert.Equal(t, f, cudadrv.Float16Value(bits), "Float16Value(%#04x)", bits)
	}
	assert.True(t, math.IsNaN(float64(cudadrv.Float16Value(cudadrv.Float16Bits(float32(math.NaN()))))))
	// Every finite half survives the round trip.
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		assert.Equal(t, uint16(h), cudadrv.Float16Bits(cudadrv.Float16Value(uint16(h))), "half %#04x", h)
	}
}

func TestBFloat16Conversions(t *testing.T) {
	cases := []struct {
		f    float32
		bits uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {3.140625, 0x4049},
		{1.00390625, 0x3f80},  // 1 + 2^-8: a tie, to even (down)
		{1.01171875, 0x3f82},  // 1 + 3·2^-8: a tie, to even (up)
		{1.005859375, 0x3f81}, // above the tie: up
		{float32(math.MaxFloat32), 0x7f80},
	}
	for _, c := range cases {
		assert.Equal(t, c.bits, cudadrv.BFloat16Bits(c.f), "BFloat16Bits(%g)", c.f)
	}
	assert.Equal(t, float32(3.140625), cudadrv.BFloat16Value(0x4049))
	assert.True(t, math.IsNaN(float64(cudadrv.BFloat16Value(cudadrv.BFloat16Bits(float32(math.NaN()))))))
	for h := 0; h < 1<<16; h++ {
		if h&0x7f80 == 0x7f80 {
			continue
		}
		assert.Equal(t, uint16(h), cudadrv.BFloat16Bits(cudadrv.BFloat16Value(uint16(h))), "bfloat16 %#04x", h)
	}
}
