package kernels_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep/kernels"
)

// EnvPTXDir names a folder holding ptx/*.ptx made by mkptx.sh: when set, the tests load those
// modules instead of the embedded ones (for testing freshly generated PTX on a GPU machine
// before it is committed). TestEmbeddedPTXIsGeneratedFromEverySource still checks the
// embedded files.
const EnvPTXDir = "CUDAEP_KERNELS_PTX_DIR"

// TestMain picks the PTX the tests' Libraries load: EnvPTXDir's when set; else, on the
// simulated device, the embedded modules plus declarations of the entries a pending module's
// committed PTX lacks (simPendingPTX: the simulator runs kernels from their entries'
// declarations and the Go bodies, so the new kernels run there before nvcc has made their
// PTX); else (the GPU) the embedded modules, on which the ops of missing entries are refused.
func TestMain(m *testing.M) {
	switch dir := os.Getenv(EnvPTXDir); {
	case dir != "":
		fmt.Fprintf(os.Stderr, "ep/kernels tests: PTX modules from %s/ptx (%s)\n", dir, EnvPTXDir)
		kernels.UsePTXDir(dir)
	case drivertest.BackendName() == "sim":
		fsys, stubbed, err := simPendingPTX(kernels.EmbeddedPTXFS(), "cuda")
		if err != nil {
			fmt.Fprintf(os.Stderr, "ep/kernels tests: %v\n", err)
			os.Exit(2)
		}
		if len(stubbed) > 0 {
			fmt.Fprintf(os.Stderr, "ep/kernels tests: the simulator runs %d entries declared from their CUDA source (the committed PTX lacks them; regenerate it with mkptx.sh)\n", len(stubbed))
		}
		kernels.UsePTXSource(fsys)
	}
	os.Exit(m.Run())
}
