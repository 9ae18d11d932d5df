package sim_test

import (
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

var ptxIdentifier = regexp.MustCompile(`^[A-Za-z_$%][A-Za-z0-9_$%]*$`)

// FuzzModuleLoadData loads arbitrary bytes as a PTX module, as CudaEpLoadModule does on the
// sim backend with whatever a host hands it: the image is refused with
// CUDA_ERROR_INVALID_IMAGE or CUDA_ERROR_INVALID_PTX and a reason, or loaded with entries that
// are PTX identifiers declared with .entry in the text, each of which binds to a body or is
// refused with CUDA_ERROR_NOT_FOUND naming it; nothing panics and the module unloads. (The PTX
// reader it uses has its own target, cudadrv's FuzzParsePTX.)
func FuzzModuleLoadData(f *testing.F) {
	for _, seed := range []string{
		testPTX,
		"",
		"\x00",
		"\x7fELF\x02\x01\x01",
		".version 8.5\n.target sm_90\n",
		".version 8.5\n.target sm_90\n.visible .entry k(.param .u64 p, .param .f32 s)\n{ ret; }\n\x00",
		".version 8.5\n.target sm_90\n.entry a() { ret; }\n.entry a() { ret; }",
		".version 8.5\n// .target sm_90\n.entry a() { ret; }",
		".version 8.5 .target sm_90 /* .entry hidden(.param .u64 x) */ .entry $k%1(.param .b32 x",
		".version 7.8\n.target sm_75\n.entry sim_test_fill(.param .u64 a, .param .u32 b, .param .u64 c) { ret; }",
	} {
		f.Add([]byte(seed))
	}
	d := sim.New(sim.Options{})
	f.Cleanup(func() { assert.NoError(f, d.Close()) })
	require.NoError(f, d.Init())
	ctx, err := d.PrimaryCtxRetain(0)
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, image []byte) {
		entries, r, why := sim.ReadModule(image)
		again, r2, why2 := sim.ReadModule(image)
		require.Equal(t, entries, again, "parsing is deterministic")
		require.Equal(t, r, r2)
		require.Equal(t, why, why2)
		if r != cudadrv.Success {
			require.Contains(t, []cudadrv.Result{cudadrv.ErrorInvalidImage, cudadrv.ErrorInvalidPTX}, r, "%s", why)
			require.NotEmpty(t, why)
			require.Nil(t, entries)
		} else {
			for name, params := range entries {
				require.Regexp(t, ptxIdentifier, name)
				require.GreaterOrEqual(t, params, 0)
				require.Contains(t, string(image), name)
				require.Contains(t, string(image), ".entry")
			}
		}

		// The same bytes through the driver entry point.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(t, d.CtxSetCurrent(ctx))
		defer func() { require.NoError(t, d.CtxSetCurrent(0)) }()
		m, err := d.ModuleLoadData(image)
		if r != cudadrv.Success {
			requireResult(t, err, r)
			return
		}
		require.NoError(t, err)
		for name := range entries {
			if _, err := d.ModuleGetFunction(m, name); err != nil {
				requireResult(t, err, cudadrv.ErrorNotFound)
				require.True(t, strings.Contains(err.Error(), name), "%v", err)
			}
		}
		require.NoError(t, d.ModuleUnload(m))
	})
}
