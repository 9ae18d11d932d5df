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
	ctx := build.Default
	ctx.CgoEnabled = false
	pkg, err := ctx.Import("github.com/cudaep/cudaep/paging", ".", 0)
	require.NoError(t, err)
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
