package paging_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/paging"
)

func TestLazyWeightValidation(t *testing.T) {
	const mappingID = paging.MappingID(42) // specs only: nothing is read
	reg := func(lens ...uint64) []paging.Region {
		var rs []paging.Region
		off := uint64(prefix)
		for _, n := range lens {
			rs = append(rs, paging.Region{Mapping: mappingID, Offset: off, Len: n})
			off += n
		}
		return rs
	}
	cases := []struct {
		name string
		spec paging.WeightSpec
		err  string // "" = valid
	}{
		{"dense fp16 matmul", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Float16, Shape: []int64{64, 32}, Regions: reg(4096)}, ""},
		{"dense split over regions", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Float32, Shape: []int64{3, 5}, Regions: reg(20, 40)}, ""},
		{"scalar", paging.WeightSpec{Boundary: paging.BoundaryGather, DType: paging.Int64, Regions: reg(8)}, ""},
		{"int4 rounds up to whole bytes", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Int4, Shape: []int64{7}, Regions: reg(4)}, ""},
		{"packed declares its own bytes", paging.WeightSpec{Boundary: paging.BoundaryBlockQuantizedMoe, DType: paging.Uint4, Shape: []int64{8, 4096}, ByteCount: 18432, Regions: reg(16384, 2048)}, ""},
		{"packed sized by elements", paging.WeightSpec{Boundary: paging.BoundaryBlockQuantizedMoe, DType: paging.Uint8, Shape: []int64{1000}, Regions: reg(1000)}, ""},
		{"dense size mismatch", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Float16, Shape: []int64{64, 32}, Regions: reg(4095)}, "is 4096 bytes but its regions hold 4095"},
		{"dense cannot declare bytes", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Uint8, Shape: []int64{10}, ByteCount: 10, Regions: reg(10)}, "not a packed format"},
		{"packed declared mismatch", paging.WeightSpec{Boundary: paging.BoundaryBlockQuantizedMatMul, DType: paging.Uint8, Shape: []int64{10}, ByteCount: 11, Regions: reg(10)}, "declares 11 bytes"},
		{"packed element mismatch", paging.WeightSpec{Boundary: paging.BoundaryBlockQuantizedMoe, DType: paging.Uint8, Shape: []int64{10}, Regions: reg(12)}, "is 10 bytes"},
		{"no regions", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Uint8, Shape: []int64{0}}, "no regions"},
		{"empty region", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Uint8, Shape: []int64{4}, Regions: reg(4, 0)}, "empty"},
		{"region overflow", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Uint8, Shape: []int64{4}, Regions: []paging.Region{{Mapping: 1, Offset: math.MaxUint64, Len: 4}}}, "overflows"},
		{"negative dim", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Uint8, Shape: []int64{-1}, Regions: reg(1)}, "negative"},
		{"element overflow", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Uint8, Shape: []int64{math.MaxInt64, math.MaxInt64}, Regions: reg(1)}, "elements"},
		{"bit overflow", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: paging.Float64, Shape: []int64{math.MaxInt64}, Regions: reg(1)}, "overflows"},
		{"unknown dtype", paging.WeightSpec{Boundary: paging.BoundaryMatMul, DType: 8, Shape: []int64{1}, Regions: reg(1)}, "unsupported dtype"},
		{"unknown boundary", paging.WeightSpec{Boundary: 99, DType: paging.Uint8, Shape: []int64{1}, Regions: reg(1)}, "unknown boundary"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := paging.NewLazyWeight(c.spec)
			if c.err == "" {
				require.NoError(t, err)
				var total uint64
				for _, r := range c.spec.Regions {
					total += r.Len
				}
				assert.Equal(t, total, w.Bytes())
				assert.Equal(t, c.spec.Regions, w.Regions())
				assert.Equal(t, c.spec.Boundary, w.Boundary())
				assert.Equal(t, c.spec.DType, w.DType())
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, paging.ErrInvalidWeight)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}

func TestLazyWeightIsImmutableAndEligibleByBoundary(t *testing.T) {
	spec := paging.WeightSpec{Boundary: paging.BoundaryBlockQuantizedMoe, DType: paging.Uint8, Shape: []int64{16},
		Regions: []paging.Region{{Mapping: 1, Offset: 0, Len: 16}}}
	w, err := paging.NewLazyWeight(spec)
	require.NoError(t, err)
	spec.Shape[0], spec.Regions[0].Len = 99, 99
	assert.Equal(t, []int64{16}, w.Shape(), "the spec was copied")
	assert.Equal(t, uint64(16), w.Regions()[0].Len)
	w.Shape()[0] = 5
	assert.Equal(t, []int64{16}, w.Shape(), "accessors return copies")
	assert.Contains(t, w.String(), "BlockQuantizedMoe uint8[16]")

	for b, want := range map[paging.Boundary]bool{
		paging.BoundaryMatMul: true, paging.BoundaryGather: false,
		paging.BoundaryBlockQuantizedMoe: true, paging.BoundaryBlockQuantizedMatMul: true,
	} {
		assert.Equal(t, want, b.Pageable(), b.String())
	}
}

// The device image is the regions concatenated in order, whatever their order in the file.
func TestLazyWeightImageConcatenatesRegionsInOrder(t *testing.T) {
	l := writeLayered(t, 3000, 3, 1, 0x5)
	rs := l.weights[0].Regions()
	reversed, err := paging.NewLazyWeight(paging.WeightSpec{Boundary: paging.BoundaryBlockQuantizedMoe,
		DType: paging.Uint8, Shape: []int64{9000}, Regions: []paging.Region{rs[2], rs[0], rs[1]}})
	require.NoError(t, err)
	img := canonical(t, l.src, reversed)
	for i, r := range []paging.Region{rs[2], rs[0], rs[1]} {
		b, err := l.src.RegionBytes(r)
		require.NoError(t, err)
		assert.Equal(t, b, img[i*3000:(i+1)*3000])
	}
	assert.NotEqual(t, canonical(t, l.src, l.weights[0]), img)
	for _, b := range img {
		require.NotZero(t, b, "patterns are never zero")
	}
}
