package ep

import "github.com/cudaep/cudaep/ep/kernels"

// IsNonZero reports whether k is a NonZero kernel, the only kind NonZeroCount accepts, so a
// host (the C ABI) can refuse the call with an argument error before it reaches the device.
func (k *Kernel) IsNonZero() bool {
	_, ok := k.k.(*kernels.NonZeroKernel)
	return ok
}
