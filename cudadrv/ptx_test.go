package cudadrv_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
)

// TestParsePTXReadsParameterTypes reads the parameter declarations NVRTC and hand-written PTX
// use, including pointer attributes, skips comments, and marks the entries a KernelArgs list
// cannot launch, naming the parameter.
func TestParsePTXReadsParameterTypes(t *testing.T) {
	ptx, err := cudadrv.ParsePTX([]byte(`
.version 7.5
.target sm_75, texmode_independent
// .entry commented_out(.param .u32 x)
/* .entry also_commented_out() */
.visible .entry k(
	.param .u64 .ptr.global.align 16 p,
	.param .f32 a, .param .s32 b, .param .b64 c, .param .u8 d
)
{ ret; }
.entry by_value(.param .u64 p, .param .align 8 .b8 s[16]) { ret; }
.entry odd_type(.param .pred q) { ret; }
.entry none() { ret; }
.entry no_list { ret; }
` + "\x00\x00"))
	require.NoError(t, err)
	assert.Equal(t, "sm_75", ptx.Target)

	names := make([]string, len(ptx.Entries))
	for i, e := range ptx.Entries {
		names[i] = e.Name
	}
	require.Equal(t, []string{"k", "by_value", "odd_type", "none", "no_list"}, names, "in text order, comments skipped")

	k := ptx.Entries[0]
	assert.Empty(t, k.Unlaunchable)
	assert.Equal(t, []cudadrv.PTXParam{
		{Decl: ".param .u64 .ptr.global.align 16 p", Type: "u64", Size: 8},
		{Decl: ".param .f32 a", Type: "f32", Size: 4, Float: true},
		{Decl: ".param .s32 b", Type: "s32", Size: 4},
		{Decl: ".param .b64 c", Type: "b64", Size: 8},
		{Decl: ".param .u8 d", Type: "u8", Size: 1},
	}, k.Params)

	byValue := ptx.Entries[1]
	require.Len(t, byValue.Params, 2)
	assert.Equal(t, "u64", byValue.Params[0].Type)
	assert.Contains(t, byValue.Params[1].Problem, "by-value aggregate")
	assert.Empty(t, byValue.Params[1].Type)
	assert.Equal(t, "parameter 1 (.param .align 8 .b8 s[16]) is a by-value aggregate, which launch arguments cannot pass", byValue.Unlaunchable)

	assert.Equal(t, "parameter 0 (.param .pred q) has a type launch arguments cannot pass", ptx.Entries[2].Unlaunchable)
	for _, e := range ptx.Entries[3:] {
		assert.Empty(t, e.Params, e.Name)
		assert.Empty(t, e.Unlaunchable, e.Name)
	}
}

// TestParsePTXReportsWhatTheDriverRefuses: a missing .target and a name declared twice are
// read, not refused (the caller decides); too many parameters make an entry unlaunchable.
func TestParsePTXReportsWhatTheDriverRefuses(t *testing.T) {
	ptx, err := cudadrv.ParsePTX([]byte(".version 8.5\n.entry a() {}\n.entry a(.param .u32 x) {}"))
	require.NoError(t, err)
	assert.Empty(t, ptx.Target)
	require.Len(t, ptx.Entries, 2)
	assert.Equal(t, "a", ptx.Entries[0].Name)
	assert.Equal(t, "a", ptx.Entries[1].Name)

	params := make([]string, cudadrv.MaxKernelArgs+1)
	for i := range params {
		params[i] = fmt.Sprintf(".param .u64 p%d", i)
	}
	ptx, err = cudadrv.ParsePTX([]byte(".version 8.5\n.target sm_90\n.entry wide(" + strings.Join(params, ", ") + ") {}"))
	require.NoError(t, err)
	require.Len(t, ptx.Entries, 1)
	assert.Len(t, ptx.Entries[0].Params, cudadrv.MaxKernelArgs+1)
	assert.Equal(t, fmt.Sprintf("it declares %d parameters, more than the %d arguments a launch carries", cudadrv.MaxKernelArgs+1, cudadrv.MaxKernelArgs),
		ptx.Entries[0].Unlaunchable)
}

// TestParsePTXRefusesWhatIsNotPTX names the reason of each refusal.
func TestParsePTXRefusesWhatIsNotPTX(t *testing.T) {
	for _, tt := range []struct {
		name  string
		image string
		want  string
	}{
		{"empty", "", "the image is empty"},
		{"only NULs", "\x00\x00", "the image is empty"},
		{"cubin", "\x7fELF\x02\x01\x01\x00\x00\x00\x02\x00\xbe\x00", "the image is not PTX text"},
		{"a NUL inside", ".version 8.5\x00.target sm_90\n", "the image is not PTX text"},
		{"invalid utf-8", ".version 8.5\n\xff\xfe", "the image is not PTX text"},
		{"no .version", ".target sm_75\n.visible .entry k() { ret; }", "the image is not PTX: it has no .version directive"},
		{"a commented-out .version", "// .version 8.5\n.target sm_75\n", "no .version directive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ptx, err := cudadrv.ParsePTX([]byte(tt.image))
			assert.Nil(t, ptx)
			var pe *cudadrv.PTXError
			require.ErrorAs(t, err, &pe)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

var ptxIdentifier = regexp.MustCompile(`^[A-Za-z_$%][A-Za-z0-9_$%]*$`)

// FuzzParsePTX feeds the PTX reader arbitrary images (PTX comes from hosts and NVRTC): it
// returns a *PTXError with a reason, or entries whose names are PTX identifiers declared with
// .entry in the text, whose parameters are each a scalar or have a problem, and whose
// Unlaunchable reason is set exactly when a parameter has a problem or there are too many; it
// never panics and reads the same image the same way twice.
func FuzzParsePTX(f *testing.F) {
	for _, seed := range []string{
		".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p, .param .f32 a)\n{ ret; }\n",
		".version 7.8 .entry a() {} .entry b(.param .align 8 .b8 s[16]) {}",
		".version 8.5\n.target sm_90\n.entry a() { ret; }\n.entry a() { ret; }",
		".version 8.5 .target sm_90 /* .entry hidden(.param .u64 x) */ .entry $k%1(.param .b32 x",
		".version 8.5\n.target sm_90\n.entry k(.param .u64 a .param .u64 b, , junk) {}\x00",
		"// .version 1.0\n/* .entry x( */",
		"",
		"\x00\xff",
		"\x7fELF\x02\x01\x01",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, image []byte) {
		ptx, err := cudadrv.ParsePTX(image)
		again, err2 := cudadrv.ParsePTX(image)
		require.Equal(t, ptx, again, "parsing is deterministic")
		require.Equal(t, err, err2)
		if err != nil {
			var pe *cudadrv.PTXError
			require.True(t, errors.As(err, &pe), "%v is not a *PTXError", err)
			require.NotEmpty(t, pe.Reason)
			require.Nil(t, ptx)
			return
		}
		require.NotNil(t, ptx)
		if ptx.Target != "" {
			require.Contains(t, string(image), ptx.Target)
		}
		for _, e := range ptx.Entries {
			require.Regexp(t, ptxIdentifier, e.Name)
			require.Contains(t, string(image), e.Name)
			require.Contains(t, string(image), ".entry")
			problem := len(e.Params) > cudadrv.MaxKernelArgs
			for _, p := range e.Params {
				if p.Problem != "" {
					problem = true
					require.Empty(t, p.Type, "%+v", p)
					require.Zero(t, p.Size, "%+v", p)
					continue
				}
				require.Contains(t, []int{1, 2, 4, 8}, p.Size, "%+v", p)
				require.NotEmpty(t, p.Type, "%+v", p)
				require.Equal(t, p.Type[0] == 'f', p.Float, "%+v", p)
			}
			require.Equal(t, problem, e.Unlaunchable != "", "entry %q: %+v", e.Name, e)
		}
	})
}
