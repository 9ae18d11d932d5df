package kernels_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// TestSimKernelsCoverEveryEntryPoint: SimKernels has a Go body for every entry point of the
// PTX modules and nothing else, so a simulated
// device given them runs every kernel the library launches.
func TestSimKernelsCoverEveryEntryPoint(t *testing.T) {
	var entries []string
	for _, es := range kernels.ModuleEntries() {
		entries = append(entries, es...)
	}
	require.NotEmpty(t, entries)
	bodies := kernels.SimKernels()
	assert.ElementsMatch(t, entries, slices.Collect(maps.Keys(bodies)))
	for name, body := range bodies {
		assert.NotNil(t, body, name)
	}
}

// TestSimKernelsReturnsAMapTheCallerOwns: changing one result leaves the next untouched.
func TestSimKernelsReturnsAMapTheCallerOwns(t *testing.T) {
	first := kernels.SimKernels()
	n := len(first)
	delete(first, "cudaep_add_f32")
	first["cudaep_other"] = nil
	second := kernels.SimKernels()
	assert.Len(t, second, n)
	assert.Contains(t, second, "cudaep_add_f32")
	assert.NotContains(t, second, "cudaep_other")
}
