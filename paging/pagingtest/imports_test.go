package pagingtest_test

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

// importers are the only packages whose shipped (non-test) files may import pagingtest: it is
// test support, which programs that measure the library may use and the library may not.
var importers = map[string]bool{"cmd/cudaep-bench": true}

// TestOnlyTestsAndTheBenchmarkImportPagingtest walks the module's sources (no go toolchain
// needed) and fails for any shipped file elsewhere that imports this package.
func TestOnlyTestsAndTheBenchmarkImportPagingtest(t *testing.T) {
	const self = "github.com/cudaep/cudaep/paging/pagingtest"
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skip("the module's sources are not beside this test binary")
	}
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "build") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		seen++
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if p == self {
				assert.True(t, importers[dir], "%s imports %s: only tests and cmd/cudaep-bench may", path, self)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, seen, 50, "the walk must reach the module's sources")
}
