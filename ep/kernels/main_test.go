package kernels_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/cudaep/cudaep/ep/kernels"
)

// EnvPTXDir names a folder holding ptx/*.ptx made by mkptx.sh: when set, the tests load those
// modules instead of the embedded ones (for testing freshly generated PTX on a GPU machine
// before it is committed). TestEmbeddedPTXIsGeneratedFromEverySource still checks the
// embedded files.
const EnvPTXDir = "CUDAEP_KERNELS_PTX_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(EnvPTXDir); dir != "" {
		fmt.Fprintf(os.Stderr, "ep/kernels tests: PTX modules from %s/ptx (%s)\n", dir, EnvPTXDir)
		kernels.UsePTXDir(dir)
	}
	os.Exit(m.Run())
}
