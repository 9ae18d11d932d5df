package graphs_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportsOnlyTheDriverLayer: graphs sits directly on cudadrv; it must never import paging,
// ep or anything else of the project, nor a third-party module but x/sys.
func TestImportsOnlyTheDriverLayer(t *testing.T) {
	if _, err := os.Stat("lifecycle.go"); err != nil {
		t.Skip("the package sources are not in the working directory (a test binary run elsewhere)")
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	allowed := map[string]bool{
		"github.com/cudaep/cudaep/cudadrv": true,
		"golang.org/x/sys/unix":            true,
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		ast, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range ast.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			first := strings.SplitN(path, "/", 2)[0]
			if !strings.Contains(first, ".") {
				continue // the standard library
			}
			assert.True(t, allowed[path], "%s imports %s", f, path)
		}
		checked++
	}
	assert.Positive(t, checked)
}
