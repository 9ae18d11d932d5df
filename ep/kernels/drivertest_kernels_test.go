package kernels_test

import (
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep/kernels"
)

// The simulated device that drivertest opens for these tests runs the library's kernels, as
// the one a provider opens does. drivertest sits below ep/kernels and cannot import it, so the
// tests register the bodies themselves, before any test opens a device.
func init() { drivertest.UseSimKernels(kernels.SimKernels) }
