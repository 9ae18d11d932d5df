package paging_test

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/paging"
)

func TestMmapSourceReadsRegionsOfARealFile(t *testing.T) {
	l := writeLayered(t, 10000, 3, 2, 0x11)
	size, err := l.src.Size(mappingID)
	require.NoError(t, err)
	assert.Equal(t, uint64(prefix+6*10000), size)
	path, err := l.src.Path(mappingID)
	require.NoError(t, err)
	assert.Equal(t, l.path, path)

	raw, err := os.ReadFile(l.path)
	require.NoError(t, err)
	for _, w := range l.weights {
		for _, r := range w.Regions() {
			b, err := l.src.RegionBytes(r)
			require.NoError(t, err)
			assert.Equal(t, raw[r.Offset:r.Offset+r.Len], b)
		}
	}
	m, err := l.src.Mapping(mappingID)
	require.NoError(t, err)
	assert.Zero(t, len(m)%os.Getpagesize(), "the mapping is whole pages")
	assert.Equal(t, raw, m[:len(raw)])
	assert.Equal(t, byte(0xAB), m[0], "the padding prefix")
	assert.NoError(t, l.src.Prepare(l.weights[1].Regions()))
	assert.NoError(t, l.src.Advise(l.weights[0].Regions(), paging.AdviceWillNeed))
	assert.NoError(t, l.src.Advise(l.weights[0].Regions(), paging.AdviceSequential))
	assert.NoError(t, l.src.Advise(l.weights[0].Regions(), paging.AdviceNormal))
}

func TestMmapSourceBoundsChecksRegions(t *testing.T) {
	l := writeLayered(t, 1000, 1, 1, 0)
	size := uint64(prefix + 1000)
	cases := []struct {
		name   string
		region paging.Region
		reason string
	}{
		{"past the end", paging.Region{Mapping: mappingID, Offset: size - 10, Len: 11}, "past the end"},
		{"offset past the end", paging.Region{Mapping: mappingID, Offset: size + 1, Len: 1}, "past the end"},
		{"overflow", paging.Region{Mapping: mappingID, Offset: math.MaxUint64 - 5, Len: 10}, "overflows"},
		{"unknown mapping", paging.Region{Mapping: 9, Offset: 0, Len: 1}, "unknown mapping"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.src.RegionBytes(c.region)
			var re *paging.RegionError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, c.region.Mapping, re.Mapping)
			assert.Equal(t, c.region.Offset, re.Offset)
			assert.Equal(t, c.region.Len, re.Len)
			assert.Contains(t, err.Error(), c.reason)
			if c.region.Mapping == mappingID {
				assert.Equal(t, size, re.FileSize)
				assert.Equal(t, l.path, re.Path)
				assert.Contains(t, err.Error(), l.path)
			}
			assert.Error(t, l.src.Prepare([]paging.Region{c.region}))
			assert.Error(t, l.src.Advise([]paging.Region{c.region}, paging.AdviceWillNeed))
		})
	}
	b, err := l.src.RegionBytes(paging.Region{Mapping: mappingID, Offset: size - 10, Len: 10})
	require.NoError(t, err, "the last bytes of the file")
	assert.Len(t, b, 10)
}

func TestMmapSourceMissingFileIsAClearError(t *testing.T) {
	src := paging.NewMmapSource()
	defer src.Close()
	missing := filepath.Join(t.TempDir(), "no-such-weights.bin")
	err := src.Open(3, missing)
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), missing)
	assert.Contains(t, err.Error(), "mapping 3")
	assert.Error(t, src.Open(4, t.TempDir()), "a directory is not external data")
}

func TestMmapSourceRejectsDuplicateIDsAndUseAfterClose(t *testing.T) {
	l := writeLayered(t, 100, 1, 1, 0)
	assert.ErrorContains(t, l.src.Open(mappingID, l.path), "already open")
	src := paging.NewMmapSource()
	require.NoError(t, src.Open(1, l.path))
	require.NoError(t, src.Close())
	_, err := src.RegionBytes(paging.Region{Mapping: 1, Len: 1})
	assert.ErrorIs(t, err, paging.ErrClosed)
	assert.ErrorIs(t, src.Open(2, l.path), paging.ErrClosed)
	assert.ErrorIs(t, src.Close(), paging.ErrClosed)
}

func TestMmapSourceEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.bin")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	src := paging.NewMmapSource()
	defer src.Close()
	require.NoError(t, src.Open(1, path))
	_, err := src.RegionBytes(paging.Region{Mapping: 1, Offset: 0, Len: 1})
	var re *paging.RegionError
	require.ErrorAs(t, err, &re)
	assert.Zero(t, re.FileSize)
}

// A file truncated after it was mapped is refused by Prepare, before any copy could fault.
func TestMmapSourceDetectsTruncation(t *testing.T) {
	l := writeLayered(t, 64<<10, 1, 2, 0)
	require.NoError(t, l.src.Prepare(l.weights[1].Regions()))
	require.NoError(t, os.Truncate(l.path, prefix+(64<<10)+100))
	err := l.src.Prepare(l.weights[1].Regions())
	var te *paging.TruncatedError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, l.path, te.Path)
	assert.Equal(t, uint64(prefix+2*(64<<10)), te.MappedSize)
	assert.Equal(t, uint64(prefix+(64<<10)+100), te.Size)
	assert.Contains(t, err.Error(), "truncated")
}
