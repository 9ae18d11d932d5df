package kernels

// The bridge from the tests of the cudaep domain's ops to their references.

// References of the cudaep ops (reference_fused.go).
var (
	RefRotateHalf = refRotateHalf
	RefSiluMul    = refSiluMul
)
