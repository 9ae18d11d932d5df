package paging_test

import (
	"go/build"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// paging sits beside graphs above cudadrv: it imports only the standard library, cudadrv and
// x/sys — never graphs, ep, the backends or cgo.
func TestPackageImportsOnlyCudadrvAndXSys(t *testing.T) {
	// ImportDir reads the sources in the package directory; unlike Import it needs no go
	// toolchain, so the test also runs where only the test binary and the tree travel.
	ctx := build.Default
	ctx.CgoEnabled = false
	pkg, err := ctx.ImportDir(".", 0)
	require.NoError(t, err)
	require.Equal(t, "paging", pkg.Name)
	for _, imp := range pkg.Imports {
		switch {
		case imp == "github.com/cudaep/cudaep/cudadrv", strings.HasPrefix(imp, "golang.org/x/sys/"):
		case !strings.Contains(strings.Split(imp, "/")[0], "."):
			assert.NotEqual(t, "C", imp, "paging must build without cgo")
		default:
			t.Errorf("paging imports %s", imp)
		}
	}
	assert.Empty(t, pkg.CgoFiles)
}
