package pagingtest_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/paging/pagingtest"
)

// Every byte of a layer file is its prefix or its region's pattern, also for regions larger
// than the chunk the writer repeats, and each weight's image is its regions in order.
func TestLayerFileBytesArePatternsAndWeightsMatch(t *testing.T) {
	for _, f := range []pagingtest.LayerFile{
		{Prefix: 4096, RegionBytes: 100, RegionsPerLayer: 3, Layers: 2, Salt: 0x11},
		{Prefix: 0, RegionBytes: 2<<20 + 777, RegionsPerLayer: 1, Layers: 2},
	} {
		var buf bytes.Buffer
		n, err := f.WriteTo(&buf)
		require.NoError(t, err)
		require.Equal(t, int64(f.Size()), n)
		got := buf.Bytes()
		for i := range f.Prefix {
			require.Equal(t, byte(pagingtest.PrefixByte), got[i], "prefix byte %d", i)
		}
		for idx := 1; idx <= f.Layers*f.RegionsPerLayer; idx++ {
			region := got[f.Prefix+(idx-1)*f.RegionBytes:][:f.RegionBytes]
			for i, b := range region {
				if b != pagingtest.PatternByte(idx, i, f.Salt) || b == 0 {
					t.Fatalf("%+v: region %d byte %d is %#x, want %#x", f, idx, i, b, pagingtest.PatternByte(idx, i, f.Salt))
				}
			}
		}

		path := filepath.Join(t.TempDir(), "layers.bin")
		require.NoError(t, f.Create(path))
		l, err := f.Open(path)
		require.NoError(t, err)
		require.Len(t, l.Weights, f.Layers)
		for layer, w := range l.Weights {
			img, err := w.AppendImage(nil, l.Source)
			require.NoError(t, err)
			start := f.Prefix + layer*int(f.LayerBytes())
			assert.Equal(t, got[start:start+int(f.LayerBytes())], img, "layer %d's image", layer)
		}
		require.NoError(t, l.Close())
	}
	_, err := pagingtest.LayerFile{RegionBytes: 0, RegionsPerLayer: 1, Layers: 1}.WriteTo(&bytes.Buffer{})
	assert.ErrorContains(t, err, "RegionBytes:0", "the error names the bad value")
}
