package kernels

// The bridge from the attention tests to the references and plans they check.

type (
	// RotaryRef is the problem RefRotary solves.
	RotaryRef = rotaryRef
	// GQARef is the problem RefGQA solves.
	GQARef = gqaRef
	// AttnRef is the problem RefAttention solves.
	AttnRef = attnRef
)

// References of the attention ops (reference_attention.go).
var (
	RefRotary    = refRotary
	RefGQA       = refGQA
	RefAttention = refAttention
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

// AttentionPlan returns, for an Attention kernel, "decode" and its split count, or "flash" or
// "prefill" and its key tile; "" for other kernels.
func AttentionPlan(k Kernel) (string, int) {
	a, ok := k.(*attentionKernel)
	switch {
	case !ok:
		return "", 0
	case a.decode:
		return Variant(k), int(a.splits)
	}
	return Variant(k), int(a.keyTile)
}
