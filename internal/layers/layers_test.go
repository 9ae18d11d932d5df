package layers_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/cudaep/cudaep/"

// allowed lists, per package directory, every non-standard import its shipped (non-test)
// files may have: the data flows cudadrv ← graphs, paging ← ep ← capi, and nothing imports
// upward or sideways. A package missing from the table fails the test, so a new package is
// placed in the layering on purpose.
var allowed = map[string][]string{
	"cudadrv":                        {},
	"cudadrv/cuda":                   {"cudadrv", "github.com/ebitengine/purego", "golang.org/x/sys/unix"},
	"cudadrv/cuda/internal/mkcuda":   {"cudadrv/cuda/internal/protogen"},
	"cudadrv/cuda/internal/protogen": {},
	"cudadrv/sim":                    {"cudadrv", "golang.org/x/sys/unix"},
	"cudadrv/drivertest":             {"cudadrv", "cudadrv/cuda", "cudadrv/sim"},
	"graphs":                         {"cudadrv", "golang.org/x/sys/unix"},
	"paging":                         {"cudadrv", "golang.org/x/sys/unix"},
	"ep/kernels":                     {"cudadrv", "cudadrv/sim", "graphs"},
	"ep":                             {"cudadrv", "cudadrv/cuda", "cudadrv/sim", "ep/kernels", "graphs", "paging"},
	"capi":                           {"capi/abi", "capi/handles", "cudadrv", "ep", "ep/kernels", "graphs", "paging", "C"},
	"capi/abi":                       {},
	"capi/handles":                   {},
	"cmd/cudaep-demo":                {"capi/abi", "cudadrv", "ep", "ep/kernels", "graphs", "paging"},
	"cmd/cudaep-bench":               {"capi/abi", "cudadrv", "cudadrv/sim", "ep", "ep/kernels", "graphs", "paging"},
	"internal/layers":                {},
}

// packageImports returns the imports of dir's shipped Go files, or nil when it has none.
func packageImports(t *testing.T, dir string) (imports []string, hasGo bool) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		hasGo = true
		parsed, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			first, _, _ := strings.Cut(path, "/")
			if path != "C" && !strings.Contains(first, ".") {
				continue // the standard library
			}
			path = strings.TrimPrefix(path, module)
			if !seen[path] {
				seen[path] = true
				imports = append(imports, path)
			}
		}
	}
	sort.Strings(imports)
	return imports, hasGo
}

// TestPackagesImportOnlyTheirLayer walks every package of the module and checks its imports
// against the table. It reads the sources (no go toolchain needed), so it also runs where
// only test binaries travel.
func TestPackagesImportOnlyTheirLayer(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skip("the module's sources are not beside this test binary")
	}
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		name := d.Name()
		if rel != "." && (strings.HasPrefix(name, ".") || name == "build" || name == "testdata" || name == "python") {
			return filepath.SkipDir
		}
		imports, hasGo := packageImports(t, path)
		if !hasGo {
			return nil
		}
		rel = filepath.ToSlash(rel)
		want, ok := allowed[rel]
		if !assert.True(t, ok, "package %s is not in the layering table: place it on purpose", rel) {
			return nil
		}
		permitted := map[string]bool{}
		for _, w := range want {
			permitted[w] = true
		}
		for _, imp := range imports {
			assert.True(t, permitted[imp], "%s imports %s, which its layer does not allow", rel, imp)
			if imp == "C" {
				assert.Equal(t, "capi", rel, "only capi may use cgo")
			}
		}
		checked++
		return nil
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, checked, 12, "the walk must reach every package")
}
