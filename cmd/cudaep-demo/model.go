package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// mlp is the demo's model: layers dense layers of width×width, each y = act(x·W + b) with ReLU
// on every layer but the last. Its weights live in one ONNX-style external-data file: a
// header, then per layer W (row-major [width, width], the MatMul B operand) followed by b.
type mlp struct {
	layers, width int
	path          string
	w             [][]float32 // per layer, width*(width+1): W then b, as in the file
}

// fileMagic starts the weight file; the header also records the dimensions and seed, so a
// file written by another configuration is never reused.
const (
	fileMagic  = "CUDAEP-DEMO-MLP1"
	headerSize = 64 // deliberately not page-aligned layer offsets follow
	seed       = 20261129
)

// layerFloats is the number of floats of one layer's image (W then b).
func (m *mlp) layerFloats() int { return m.width * (m.width + 1) }

// layerOffset is the byte offset of layer l's image in the file.
func (m *mlp) layerOffset(l int) uint64 {
	return headerSize + uint64(l)*uint64(4*m.layerFloats())
}

func (m *mlp) fileSize() int64 { return int64(m.layerOffset(m.layers)) }

func (m *mlp) header() []byte {
	h := make([]byte, headerSize)
	copy(h, fileMagic)
	binary.LittleEndian.PutUint64(h[16:], uint64(m.layers))
	binary.LittleEndian.PutUint64(h[24:], uint64(m.width))
	binary.LittleEndian.PutUint64(h[32:], seed)
	return h
}

// newMLP generates the model's weights (deterministic from the seed and dimensions) and
// makes sure dir holds its external-data file, writing it only when it is missing or was
// written for another configuration. progress is told how far the writing got.
func newMLP(dir string, layers, width int, progress progressFunc) (*mlp, bool, error) {
	m := &mlp{layers: layers, width: width,
		path: filepath.Join(dir, fmt.Sprintf("mlp-%dx%d.onnx.data", layers, width))}
	rng := rand.New(rand.NewPCG(seed, uint64(layers)<<32|uint64(width)))
	scale := float32(math.Sqrt(6 / float64(width))) // keeps activations O(1) through ReLU layers
	m.w = make([][]float32, layers)
	for l := range m.w {
		img := make([]float32, m.layerFloats())
		for i := range img[:width*width] {
			img[i] = (rng.Float32()*2 - 1) * scale
		}
		for i := width * width; i < len(img); i++ {
			img[i] = (rng.Float32()*2 - 1) * 0.1
		}
		m.w[l] = img
	}
	if m.fileIsCurrent() {
		return m, false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, err
	}
	tmp := m.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, false, err
	}
	if _, err := f.Write(m.header()); err != nil {
		f.Close()
		return nil, false, err
	}
	buf := make([]byte, 4*m.layerFloats())
	for l, img := range m.w {
		for i, v := range img {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return nil, false, err
		}
		progress("writing weights: layer", l+1, layers)
	}
	if err := f.Close(); err != nil {
		return nil, false, err
	}
	return m, true, os.Rename(tmp, m.path)
}

// fileIsCurrent reports whether the file exists with this model's header and size.
func (m *mlp) fileIsCurrent() bool {
	f, err := os.Open(m.path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() != m.fileSize() {
		return false
	}
	h := make([]byte, headerSize)
	if _, err := f.ReadAt(h, 0); err != nil {
		return false
	}
	return bytes.Equal(h, m.header())
}

// forward computes the model on the host in float64 for rows of x ([rows, width]) and returns
// the output and the pre-activation of layer mid (for the NonZero seam's reference).
func (m *mlp) forward(x []float32, rows, mid int) (out, midPre []float64) {
	h := make([]float64, len(x))
	for i, v := range x {
		h[i] = float64(v)
	}
	w := m.width
	for l, img := range m.w {
		next := make([]float64, rows*w)
		for r := 0; r < rows; r++ {
			for j := 0; j < w; j++ {
				acc := float64(img[w*w+j])
				for k := 0; k < w; k++ {
					acc += h[r*w+k] * float64(img[k*w+j])
				}
				next[r*w+j] = acc
			}
		}
		if l == mid {
			midPre = append([]float64(nil), next...)
		}
		if l < m.layers-1 {
			for i, v := range next {
				next[i] = math.Max(v, 0)
			}
		}
		h = next
	}
	return h, midPre
}

// relErr is ‖got − ref‖ / ‖ref‖ (infinite when got holds a NaN).
func relErr(got []float32, ref []float64) float64 {
	var num, den float64
	for i, r := range ref {
		g := float64(got[i])
		if math.IsNaN(g) {
			return math.Inf(1)
		}
		num += (g - r) * (g - r)
		den += r * r
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

func floatBytes(f []float32) []byte {
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func bytesFloats(b []byte) []float32 {
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}
