//go:build amd64 || arm64

package cudadrv

// cpuPause executes the CPU's spin-wait hint once: PAUSE on amd64, YIELD on arm64 (pause_*.s).
// It touches no memory.
func cpuPause()
