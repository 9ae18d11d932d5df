//go:build !amd64 && !arm64

package cudadrv

// cpuPause is the spin-wait hint on architectures without one in pause_*.s: nothing.
func cpuPause() {}
