package protogen

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testJob = Job{In: "test.prototypes", Out: "ztest.go", Table: "testTable", Library: "libtest"}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"float by value", "CUresult f(float x);", "SyscallN passes only integer registers"},
		{"unknown type", "CUresult f(CUwhatever x);", `unknown C type "CUwhatever"`},
		{"unnamed parameter", "CUresult f(int);", "unnamed parameter"},
		{"not a prototype", "CUresult f(int x)", "not a prototype"},
		{"duplicate", "CUresult f(int x);\nCUresult f(int y);", "already declared on line 1"},
		{"empty", "# nothing\n\n", "no prototypes"},
		{"float result", "float f(int x);", "floating-point result"},
		{"void parameter", "CUresult f(void x);", "void parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Generate(testJob, "p", []byte(tt.src))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "test.prototypes")
		})
	}
}

func TestGenerateWrappers(t *testing.T) {
	src := `# comment
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuCtxSynchronize(void);
CUresult cuLaunch(CUfunction f, void **kernelParams, int len);
const char *name(nvrtcResult r);
unsigned char byteResult(int x);
`
	out, err := Generate(testJob, "p", []byte(src))
	require.NoError(t, err)
	code := string(out)

	first, _, _ := strings.Cut(code, "\n")
	assert.Equal(t, Header, first)
	assert.Contains(t, code, `var testSymbols = [5]string{`)
	assert.Contains(t, code, `"cuMemAlloc_v2",`)
	assert.Contains(t, code, `return fmt.Errorf("libtest lacks %s: %w", name, err)`)

	// A pointer parameter: escaped before, kept alive after, passed through the pooled array.
	assert.Contains(t, code, "func (t *testTable) cuMemAlloc_v2(dptr *cudadrv.DevicePtr, bytesize uintptr) cudadrv.Result {\n"+
		"\tescape(unsafe.Pointer(dptr))\n"+
		"\ta := getCallArgs()\n"+
		"\ta[0] = uintptr(unsafe.Pointer(dptr))\n"+
		"\ta[1] = uintptr(bytesize)\n"+
		"\tr, _, _ := purego.SyscallN(t.addr[0], a[:2]...)\n"+
		"\tputCallArgs(a)\n"+
		"\truntime.KeepAlive(dptr)\n"+
		"\treturn cudadrv.Result(r)\n}")
	// No arguments: no array at all.
	assert.Contains(t, code, "func (t *testTable) cuCtxSynchronize() cudadrv.Result {\n"+
		"\tr, _, _ := purego.SyscallN(t.addr[1])\n")
	// Double pointers are unsafe.Pointer; a parameter named like a builtin is renamed.
	assert.Contains(t, code, "cuLaunch(f cudadrv.RawFunction, kernelParams unsafe.Pointer, len_ int32)")
	assert.Contains(t, code, "\tescape(kernelParams)\n")
	// Pointer results are read back without a uintptr-to-pointer conversion.
	assert.Contains(t, code, "func (t *testTable) name(r_ nvrtcResult) *byte {")
	assert.Contains(t, code, "return *(**byte)(unsafe.Pointer(&r))")
	// Narrow results are truncated to their C width.
	assert.Contains(t, code, "return uint8(r)")
	// The prototype as written is the doc comment.
	assert.Contains(t, code, "// cuMemAlloc_v2 calls CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize).")
}
