package kernels

// The bridge from the attention tests to the references and plans they check.

type (
	// RotaryRef is the problem RefRotary solves.
	RotaryRef = rotaryRef
	// GQARef is the problem RefGQA solves.
	GQARef = gqaRef
)

// References of the attention ops (reference_attention.go).
var (
	RefRotary = refRotary
	RefGQA    = refGQA
)

// GQAPlan returns, for a GroupQueryAttention kernel, "decode" and its split count or
// "prefill" and its key tile; "" for other kernels.
func GQAPlan(k Kernel) (string, int) {
	g, ok := k.(*gqaKernel)
	switch {
	case !ok:
		return "", 0
	case g.decode:
		return "decode", int(g.splits)
	}
	return "prefill", int(g.keyTile)
}
