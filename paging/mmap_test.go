package paging_test

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
)

func TestMmapSourceReadsRegionsOfARealFile(t *testing.T) {
	l := writeLayered(t, 10000, 3, 2, 0x11)
	size, err := l.src.Size(l.id)
	require.NoError(t, err)
	assert.Equal(t, uint64(prefix+6*10000), size)
	path, err := l.src.Path(l.id)
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
	m, err := l.src.Mapping(l.id)
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
	mappingID := l.id
	size := uint64(prefix + 1000)
	cases := []struct {
		name   string
		region paging.Region
		reason string
	}{
		{"past the end", paging.Region{Mapping: mappingID, Offset: size - 10, Len: 11}, "past the end"},
		{"offset past the end", paging.Region{Mapping: mappingID, Offset: size + 1, Len: 1}, "past the end"},
		{"overflow", paging.Region{Mapping: mappingID, Offset: math.MaxUint64 - 5, Len: 10}, "overflows"},
		{"unknown mapping", paging.Region{Mapping: l.id + 9, Offset: 0, Len: 1}, "unknown mapping"},
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
	defer src.CloseAll()
	missing := filepath.Join(t.TempDir(), "no-such-weights.bin")
	id, err := src.Open(missing)
	require.Error(t, err)
	assert.Zero(t, id)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), missing)
	dir := t.TempDir()
	_, err = src.Open(dir)
	assert.ErrorContains(t, err, dir+": not a regular file", "a directory is not external data")
}

func TestMmapSourceUseAfterCloseAll(t *testing.T) {
	l := writeLayered(t, 100, 1, 1, 0)
	src := paging.NewMmapSource()
	id, err := src.Open(l.path)
	require.NoError(t, err)
	require.NoError(t, src.CloseAll())
	_, err = src.RegionBytes(paging.Region{Mapping: id, Len: 1})
	assert.ErrorIs(t, err, paging.ErrClosed)
	_, err = src.Open(l.path)
	assert.ErrorIs(t, err, paging.ErrClosed)
	assert.ErrorIs(t, src.Close(id), paging.ErrClosed)
	assert.ErrorIs(t, src.CloseAll(), paging.ErrClosed)
}

func TestMmapSourceEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.bin")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	src := paging.NewMmapSource()
	defer src.CloseAll()
	id, err := src.Open(path)
	require.NoError(t, err)
	_, err = src.RegionBytes(paging.Region{Mapping: id, Offset: 0, Len: 1})
	var re *paging.RegionError
	require.ErrorAs(t, err, &re)
	assert.Zero(t, re.FileSize)
}

// One file is mapped once, whatever path reaches it: every Open returns its id and takes a
// reference, Close drops one and the last unmaps; the closed id then fails clearly, and
// reopening the file maps it again under a new id.
func TestMmapSourceMapsAFileOnceAndClosesItAtTheLastReference(t *testing.T) {
	l := writeLayered(t, 1000, 1, 2, 0x21)
	dir := filepath.Dir(l.path)
	link := filepath.Join(t.TempDir(), "link.bin")
	require.NoError(t, os.Symlink(l.path, link))
	hard := filepath.Join(dir, "hard.bin")
	require.NoError(t, os.Link(l.path, hard))
	first, err := l.src.Mapping(l.id)
	require.NoError(t, err)

	spellings := []string{l.path, filepath.Join(dir, ".", "..", filepath.Base(dir), "weights.bin"), link, hard}
	for _, path := range spellings {
		id, err := l.src.Open(path)
		require.NoError(t, err, "open %s", path)
		assert.Equal(t, l.id, id, "%s is the file mapped as %d", path, l.id)
		m, err := l.src.Mapping(id)
		require.NoError(t, err)
		assert.Same(t, &first[0], &m[0], "%s shares the one mapping", path)
	}
	region := l.weights[1].Regions()[0]
	want, err := os.ReadFile(l.path)
	require.NoError(t, err)
	want = want[region.Offset : region.Offset+region.Len]

	// writeLayered's Open and the four above: four Closes leave the mapping in place.
	for i := range spellings {
		require.NoError(t, l.src.Close(l.id), "close %d of %d", i+1, len(spellings)+1)
		b, err := l.src.RegionBytes(region)
		require.NoError(t, err, "a reference is left after close %d", i+1)
		assert.Equal(t, want, b)
	}
	require.NoError(t, l.src.Close(l.id), "the last reference unmaps")
	_, err = l.src.RegionBytes(region)
	var re *paging.RegionError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, l.id, re.Mapping)
	assert.Equal(t, l.path, re.Path)
	assert.ErrorContains(t, err, "closed")
	assert.ErrorContains(t, err, l.path)
	_, err = l.src.Mapping(l.id)
	assert.ErrorContains(t, err, "closed")
	assert.ErrorContains(t, l.src.Close(l.id), "closed", "a closed id has no reference left")

	again, err := l.src.Open(link)
	require.NoError(t, err, "a closed file reopens")
	assert.NotEqual(t, l.id, again, "ids are never reused")
	region.Mapping = again
	b, err := l.src.RegionBytes(region)
	require.NoError(t, err)
	assert.Equal(t, want, b)
	_, err = l.src.RegionBytes(paging.Region{Mapping: l.id, Offset: region.Offset, Len: region.Len})
	assert.ErrorContains(t, err, "closed", "the old id stays closed")
	require.NoError(t, l.src.Close(again))
}

// A file cannot be unmapped while a layer read from it is being copied (its pages registered,
// on the zero-copy path): Close refuses with ErrFileBusy and changes nothing. Once the copy has
// completed, Close succeeds without any pipeline call in between (it asks the pipeline), and a
// later layer of the closed file is refused before any device work.
func TestMmapSourceRefusesToCloseAFileInFlight(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, mib, 1, 2, 0x44)
		db := r.pipeline(t, mib, mode)
		gate := r.gate(t, r.copy)
		tk, err := db.Prefetch(0, l.weights[0], l.src)
		require.NoError(t, err)
		if mode == paging.ModeZeroCopy {
			require.NotZero(t, r.ctx.Counters().RegisteredLiveBytes, "the file's pages are registered")
		}

		err = l.src.Close(l.id)
		require.ErrorIs(t, err, paging.ErrFileBusy)
		assert.ErrorContains(t, err, l.path)
		assert.ErrorContains(t, err, "layers [0]")
		want := canonical(t, l.src, l.weights[0])

		require.NoError(t, gate.Open())
		require.NoError(t, r.copy.Synchronize()) // the copy completed; the pipeline was not told
		require.NoError(t, l.src.Close(l.id), "the refused Close kept the reference; now it is the last")
		assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes, "registrations undone before the unmap")
		_, err = l.src.RegionBytes(l.weights[0].Regions()[0])
		assert.ErrorContains(t, err, "closed")

		v, err := db.Wait(tk)
		require.NoError(t, err)
		assert.Equal(t, want, r.readback(t, v.Ptr, v.Len), "the layer copied before the close is intact")
		require.NoError(t, db.Release(tk))

		before := r.ctx.Counters()
		_, err = db.Prefetch(1, l.weights[1], l.src)
		var re *paging.RegionError
		require.ErrorAs(t, err, &re, "a layer of the closed file")
		assert.Equal(t, l.id, re.Mapping)
		assert.Equal(t, before, r.ctx.Counters(), "no device work")
	})
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
