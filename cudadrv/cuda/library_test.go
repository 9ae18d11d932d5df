package cuda_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/cuda"
)

func TestOpenWithoutDriverNamesLibcudaAndSuggestsSim(t *testing.T) {
	if h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_LOCAL); err == nil {
		_ = purego.Dlclose(h)
		t.Skip("a CUDA driver is installed here; TestOpenNamesEveryDriverTried covers the message")
	}
	b, err := cuda.Open()
	require.Error(t, err)
	assert.Nil(t, b)
	assert.Contains(t, err.Error(), "libcuda.so.1")
	assert.Contains(t, err.Error(), "backend=sim")

	var le *cudadrv.LibraryError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, []string{"libcuda.so.1"}, le.Tried)
	assert.Contains(t, le.Reason, "libcuda.so.1", "the loader's message says why")
}

func TestOpenNamesEveryDriverTried(t *testing.T) {
	names := []string{"libcudaep-missing-a.so.1", "libcudaep-missing-b.so.1"}
	defer cuda.SetDriverNames(names)()

	_, err := cuda.Open()
	require.Error(t, err)
	for _, n := range names {
		assert.Contains(t, err.Error(), n)
	}
	assert.Contains(t, err.Error(), "backend=sim")
	var le *cudadrv.LibraryError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, names, le.Tried)
	assert.Equal(t, "the CUDA driver", le.Library)
}

func TestOpenRefusesALibraryWithoutTheDriverSymbols(t *testing.T) {
	// libc loads but has no cuInit: Open must refuse it, name the symbol, and give the advice.
	defer cuda.SetDriverNames([]string{"libc.so.6"})()

	b, err := cuda.Open()
	require.Error(t, err)
	assert.Nil(t, b)
	assert.Contains(t, err.Error(), "lacks cuInit")
	assert.Contains(t, err.Error(), "backend=sim")
}

func TestDefaultSearchDirs(t *testing.T) {
	tests := []struct {
		name     string
		cudaHome string
		want     []string
	}{
		{"unset", "", []string{"", "/usr/local/cuda/lib64"}},
		{"set", "/opt/cuda-x", []string{"", "/opt/cuda-x/lib64", "/usr/local/cuda/lib64"}},
		{"same as default", "/usr/local/cuda", []string{"", "/usr/local/cuda/lib64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CUDA_HOME", tt.cudaHome)
			assert.Equal(t, tt.want, cuda.DefaultSearchDirs())
		})
	}
}

func TestLibrarySearchNamesEveryPlaceTried(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	defer cuda.SetSearchDirs([]string{d1, d2})()

	tests := []struct {
		load    func() (string, error)
		library string
		sonames []string
	}{
		{cuda.LoadCUBLAS, "cuBLAS", []string{"libcublas.so.13", "libcublas.so.12"}},
		{cuda.LoadNVRTC, "NVRTC", []string{"libnvrtc.so.13", "libnvrtc.so.12"}},
	}
	for _, tt := range tests {
		t.Run(tt.library, func(t *testing.T) {
			path, err := tt.load()
			require.Error(t, err)
			assert.Empty(t, path)

			var le *cudadrv.LibraryError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.library, le.Library)
			var want []string
			for _, d := range []string{d1, d2} {
				for _, so := range tt.sonames {
					want = append(want, filepath.Join(d, so))
				}
			}
			assert.Equal(t, want, le.Tried, "directory by directory, newest version first")
			for _, w := range want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), "cannot load "+tt.library)
		})
	}
}

func TestLibrarySearchStartsOnTheLoaderPath(t *testing.T) {
	d := t.TempDir()
	defer cuda.SetSearchDirs([]string{"", d})()

	_, err := cuda.LoadNamed("test library", "libcudaep-missing.so.13", "libcudaep-missing.so.12")
	var le *cudadrv.LibraryError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, []string{
		"libcudaep-missing.so.13", "libcudaep-missing.so.12",
		filepath.Join(d, "libcudaep-missing.so.13"), filepath.Join(d, "libcudaep-missing.so.12"),
	}, le.Tried)
}

func TestLibrarySearchReportsABrokenInstall(t *testing.T) {
	d := t.TempDir()
	broken := filepath.Join(d, "libnvrtc.so.13")
	require.NoError(t, os.WriteFile(broken, []byte("not an ELF file, but long enough to be read as one......"), 0o644))
	defer cuda.SetSearchDirs([]string{d})()

	_, err := cuda.LoadNVRTC()
	var le *cudadrv.LibraryError
	require.ErrorAs(t, err, &le)
	assert.Contains(t, le.Reason, broken, "the loader's message for the file that exists, not a later 'not found'")
}

func TestLibrarySearchLoadsFromADirectory(t *testing.T) {
	libc := mappedLibc(t)
	d := t.TempDir()
	require.NoError(t, os.Symlink(libc, filepath.Join(d, "libcudaep-found.so.12")))
	defer cuda.SetSearchDirs([]string{d})()

	path, err := cuda.LoadNamed("test library", "libcudaep-found.so.13", "libcudaep-found.so.12")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(d, "libcudaep-found.so.12"), path)
}

func TestLazyLibrariesFailWithLibraryErrorAndNoHandleCalls(t *testing.T) {
	defer cuda.SetSearchDirs([]string{t.TempDir()})()
	b := cuda.NewBackendWithoutDriver()

	_, err := b.BLASCreate()
	var le *cudadrv.LibraryError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "cuBLAS", le.Library)

	_, err = b.CompilePTX("__global__ void k() {}", "k.cu", nil)
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "NVRTC", le.Library)

	// Calls that take a handle never load the library: without one they report it.
	var be *cudadrv.BLASError
	require.ErrorAs(t, b.Sgemm(1, &cudadrv.GemmParams{}), &be)
	assert.Equal(t, cudadrv.BLASNotInitialized, be.Status)
	require.ErrorAs(t, b.BLASSetStream(1, 0), &be)
	assert.Equal(t, cudadrv.BLASNotInitialized, be.Status)
}

// mappedLibc returns the path of the libc this process has mapped (purego links it even
// without cgo).
func mappedLibc(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if p := fields[len(fields)-1]; strings.HasPrefix(p, "/") && strings.HasPrefix(filepath.Base(p), "libc.so.6") {
			return p
		}
	}
	t.Skip("libc.so.6 is not mapped by path in this process")
	return ""
}
