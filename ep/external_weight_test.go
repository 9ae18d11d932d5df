package ep_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

// TestLoadWeightCopiesTheConcatenatedRegionsFromTheFile loads a byte weight of two regions
// (in file order reversed) resident and checks the device bytes are the file's, in region order.
func TestLoadWeightCopiesTheConcatenatedRegionsFromTheFile(t *testing.T) {
	p := newProvider(t)
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	path := filepath.Join(t.TempDir(), "weights.bin")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	id, err := p.OpenExternalData(path)
	require.NoError(t, err)
	w, err := p.NewByteWeight([]ep.Region{{Mapping: id, Offset: 6000, Len: 4000}, {Mapping: id, Offset: 12, Len: 3000}})
	require.NoError(t, err)
	assert.Equal(t, uint64(7000), w.Bytes())
	b, err := p.LoadWeight(w)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Release()) }()
	got := make([]byte, 7000)
	require.NoError(t, p.CopyToHost(got, b, 0))
	assert.Equal(t, append(append([]byte{}, data[6000:]...), data[12:3012]...), got)
	require.NoError(t, p.CloseExternalData(id), "the loaded weight no longer needs its file")
	got2 := make([]byte, 7000)
	require.NoError(t, p.CopyToHost(got2, b, 0))
	assert.Equal(t, got, got2)
}

func TestByteWeightsRefuseBadRegions(t *testing.T) {
	p := newProvider(t)
	path := filepath.Join(t.TempDir(), "weights.bin")
	require.NoError(t, os.WriteFile(path, make([]byte, 100), 0o600))
	id, err := p.OpenExternalData(path)
	require.NoError(t, err)
	for name, regions := range map[string][]ep.Region{
		"none":         nil,
		"empty":        {{Mapping: id, Offset: 0, Len: 0}},
		"past the end": {{Mapping: id, Offset: 90, Len: 11}},
		"overflow":     {{Mapping: id, Offset: 0, Len: 1 << 63}, {Mapping: id, Offset: 0, Len: 1 << 63}},
		"unknown file": {{Mapping: id + 100, Offset: 0, Len: 4}},
	} {
		_, err := p.NewByteWeight(regions)
		assert.Error(t, err, name)
	}
	_, err = p.LoadWeight(nil)
	assert.ErrorIs(t, err, ep.ErrInvalidArgument)

	w, err := p.NewByteWeight([]ep.Region{{Mapping: id, Offset: 0, Len: 8}})
	require.NoError(t, err)
	require.NoError(t, p.CloseExternalData(id))
	before := p.Stats()
	_, err = p.LoadWeight(w)
	assert.ErrorContains(t, err, "load weight", "a closed file is an error, not a crash")
	assert.Equal(t, before.LiveBytes, p.Stats().LiveBytes, "nothing is left allocated")
}
