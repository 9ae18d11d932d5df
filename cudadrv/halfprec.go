package cudadrv

import "math"

// The 16-bit floating-point formats of GemmEx's matrices and of kernels' tensors, converted
// on the host as the device converts them: to float32 exactly, from float32 rounding to the
// nearest value, ties to even, with overflow to infinity and NaN kept a (quiet) NaN.

// Float16Bits returns the IEEE 754 binary16 bits nearest to f (ties to even).
func Float16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff && mant != 0: // NaN: keep it quiet and non-zero
		return sign | 0x7e00 | uint16(mant>>13)
	case exp == 0xff:
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// A subnormal half (or zero): shift the mantissa with its implicit bit into place.
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, up to infinity: both are right
	}
	return sign | uint16(half)
}

// Float16Value returns the float32 value of binary16 bits h (exact).
func Float16Value(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: mant · 2^-24
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// BFloat16Bits returns the bfloat16 bits nearest to f (ties to even).
func BFloat16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it quiet
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BFloat16Value returns the float32 value of bfloat16 bits h (exact).
func BFloat16Value(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
