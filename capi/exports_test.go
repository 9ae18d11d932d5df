package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exportedFuncs parses the package's non-test Go files and returns every //export function.
func exportedFuncs(t *testing.T) map[string]*ast.FuncDecl {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	out := map[string]*ast.FuncDecl{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Doc == nil {
				continue
			}
			for _, c := range fn.Doc.List {
				if exported, ok := strings.CutPrefix(c.Text, "//export "); ok {
					require.Equal(t, fn.Name.Name, strings.TrimSpace(exported), "%s: //export names another function", name)
					out[fn.Name.Name] = fn
				}
			}
		}
	}
	return out
}

// TestEveryExportRecoversPanics checks the shape every export must have: one named
// *C.CudaEpStatus result, and `defer recoverInto(&result)` as the very first statement, so no
// panic can unwind into C.
func TestEveryExportRecoversPanics(t *testing.T) {
	exports := exportedFuncs(t)
	require.NotEmpty(t, exports)
	for name, fn := range exports {
		t.Run(name, func(t *testing.T) {
			res := fn.Type.Results
			require.NotNil(t, res, "an export returns a status")
			require.Len(t, res.List, 1)
			require.Len(t, res.List[0].Names, 1, "the status result must be named for recoverInto")
			result := res.List[0].Names[0].Name

			require.NotEmpty(t, fn.Body.List)
			def, ok := fn.Body.List[0].(*ast.DeferStmt)
			require.True(t, ok, "the first statement must be defer recoverInto(&%s)", result)
			callee, ok := def.Call.Fun.(*ast.Ident)
			require.True(t, ok)
			assert.Equal(t, "recoverInto", callee.Name)
			require.Len(t, def.Call.Args, 1)
			arg, ok := def.Call.Args[0].(*ast.UnaryExpr)
			require.True(t, ok)
			assert.Equal(t, token.AND, arg.Op)
			assert.Equal(t, result, arg.X.(*ast.Ident).Name)
		})
	}
}

// TestHeaderDeclaresExactlyTheExportsAndStatusFunctions ties the Go exports and status.c to
// the CUDAEP_API declarations of the public header.
func TestHeaderDeclaresExactlyTheExportsAndStatusFunctions(t *testing.T) {
	header, err := os.ReadFile("cudaep.h")
	require.NoError(t, err)
	decl := regexp.MustCompile(`(?m)^CUDAEP_API.*[ *](CudaEp\w+)\(`)
	var declared []string
	for _, m := range decl.FindAllSubmatch(header, -1) {
		declared = append(declared, string(m[1]))
	}

	statusC, err := os.ReadFile("status.c")
	require.NoError(t, err)
	def := regexp.MustCompile(`(?m)^[A-Za-z_][\w *]*[ *](CudaEp\w+)\(`)
	var defined []string
	for _, m := range def.FindAllSubmatch(statusC, -1) {
		defined = append(defined, string(m[1]))
	}
	for name := range exportedFuncs(t) {
		defined = append(defined, name)
	}
	slices.Sort(declared)
	slices.Sort(defined)
	assert.Equal(t, declared, defined)
}
