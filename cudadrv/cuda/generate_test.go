package cuda

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/cuda/internal/protogen"
)

func TestGeneratedFilesAreUpToDate(t *testing.T) {
	dir := t.TempDir()
	for _, job := range protogen.Jobs {
		t.Run(job.Out, func(t *testing.T) {
			src, err := os.ReadFile(job.In)
			require.NoError(t, err)
			out, err := protogen.Generate(job, "cuda", src)
			require.NoError(t, err)
			fresh := filepath.Join(dir, job.Out)
			require.NoError(t, os.WriteFile(fresh, out, 0o644))

			committed, err := os.ReadFile(job.Out)
			require.NoError(t, err)
			regenerated, err := os.ReadFile(fresh)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(committed, regenerated),
				"%s differs from what %s generates: run go generate ./cudadrv/cuda", job.Out, job.In)
			first, _, _ := strings.Cut(string(committed), "\n")
			assert.Equal(t, protogen.Header, first)
		})
	}
}

func TestGraphExecUpdateResultInfoLayout(t *testing.T) {
	// CUgraphExecUpdateResultInfo: a 4-byte enum, padding, then two CUgraphNode pointers.
	var info graphExecUpdateResultInfo
	assert.Equal(t, uintptr(0), unsafe.Offsetof(info.result))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(info.errorNode))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(info.errorFromNode))
	assert.Equal(t, uintptr(24), unsafe.Sizeof(info))
}

func TestGraphExecUpdateResultNames(t *testing.T) {
	assert.Equal(t, "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED", graphExecUpdateResultName(2))
	assert.Equal(t, "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED", graphExecUpdateResultName(8))
	assert.Equal(t, "CUgraphExecUpdateResult(42)", graphExecUpdateResultName(42))
}

func TestCStrings(t *testing.T) {
	assert.Equal(t, "NVIDIA H200", cString([]byte("NVIDIA H200\x00\x00garbage")))
	assert.Equal(t, "no terminator", cString([]byte("no terminator")))
	assert.Equal(t, []byte("abc\x00"), cBytes("abc"))
	msg := []byte("NVRTC_ERROR_COMPILATION\x00tail")
	assert.Equal(t, "NVRTC_ERROR_COMPILATION", goString(&msg[0]))
	assert.Equal(t, "", goString(nil))
}
