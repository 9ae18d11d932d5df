package drivertest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// Float32Bytes returns f as little-endian bytes, the device's layout.
func Float32Bytes(f []float32) []byte {
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// BytesFloat32 reads little-endian bytes as floats (a trailing partial float is dropped).
func BytesFloat32(b []byte) []float32 {
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}

// RandomFloat32 returns n fresh random floats in [-2, 2], none of them zero: tests never run
// on zeros, which hide unwritten outputs.
func RandomFloat32(n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		v := rand.Float32()*4 - 2
		if v == 0 {
			v = 0.5
		}
		f[i] = v
	}
	return f
}

// RelErr is ‖got − ref‖ / ‖ref‖, the error measure of the device tool's METHOD.md; a NaN in
// got yields +Inf, so it never passes a bound.
func RelErr(got []float32, ref []float64) float64 {
	var num, den float64
	for i := range ref {
		g := float64(got[i])
		if math.IsNaN(g) {
			return math.Inf(1)
		}
		num += (g - ref[i]) * (g - ref[i])
		den += ref[i] * ref[i]
	}
	return math.Sqrt(num / den)
}

// FuzzBytes reads a fuzz target's input a byte at a time, as the program it writes tests from:
// past the end it reads zeros, so that every input is a whole program.
type FuzzBytes struct {
	b  []byte
	at int
}

// NewFuzzBytes returns a reader of b.
func NewFuzzBytes(b []byte) *FuzzBytes { return &FuzzBytes{b: b} }

// Next returns the next byte, or 0 past the end.
func (r *FuzzBytes) Next() int {
	v := 0
	if r.at < len(r.b) {
		v = int(r.b[r.at])
	}
	r.at++
	return v
}

// Done reports whether every byte has been read.
func (r *FuzzBytes) Done() bool { return r.at >= len(r.b) }
