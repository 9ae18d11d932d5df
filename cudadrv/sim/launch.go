package sim

import "github.com/cudaep/cudaep/cudadrv"

// Launch is what a kernel body sees of its launch: the configuration, the argument words and
// bounds-checked views of device memory (see cudadrv.KernelLaunch, which it is). The worker
// that runs a kernel reuses its Launch: it is valid only during the kernel call.
type Launch = cudadrv.KernelLaunch

// kernelMemory is the device's memory as kernel bodies see it (cudadrv.KernelMemory): a
// pointer-shaped conversion of the Device, so handing it to a launch allocates nothing.
type kernelMemory Device

// View returns the bytes [p, p+n) of one live allocation, or an *AccessError. It takes d.mu.
func (m *kernelMemory) View(p cudadrv.DevicePtr, n uint64) ([]byte, error) {
	return (*Device)(m).view(p, n)
}

// kernelMemory returns d's memory for kernel bodies and the simulated cuBLAS.
func (d *Device) kernelMemory() *kernelMemory { return (*kernelMemory)(d) }
