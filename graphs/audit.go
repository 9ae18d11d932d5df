package graphs

import "fmt"

// CaptureSupport says whether a node's device work may be recorded into a CUDA graph. The
// zero value is [Supported]; build the other kind with [Unsupported].
type CaptureSupport struct {
	unsupported bool
	reason      string
}

// Supported is the capture support of a node whose work is pure stream work: launches,
// asynchronous copies and memsets on the capturing stream, with no host synchronization,
// allocation or host read of device results.
var Supported = CaptureSupport{}

// Unsupported returns the capture support of a node that cannot be captured, with the reason
// reported when the audit rejects a sequence containing it (for example "reads the token id
// on the host").
func Unsupported(reason string) CaptureSupport {
	return CaptureSupport{unsupported: true, reason: reason}
}

// IsSupported reports whether the node may be captured.
func (c CaptureSupport) IsSupported() bool { return !c.unsupported }

// Reason returns why the node cannot be captured, or "" when it can.
func (c CaptureSupport) Reason() string { return c.reason }

// String returns "supported" or "unsupported: REASON".
func (c CaptureSupport) String() string {
	if !c.unsupported {
		return "supported"
	}
	return "unsupported: " + c.reasonText()
}

func (c CaptureSupport) reasonText() string {
	if c.reason == "" {
		return "no reason given"
	}
	return c.reason
}

// Node is one unit of work that a capture would record, as the capturability audit sees it.
// The ep package's kernels implement it.
type Node interface {
	// Name names the node in audit errors (an operator or kernel name).
	Name() string
	// CaptureSupport reports whether the node's work may be captured. It must not enqueue
	// work or call the driver: the audit runs before the stream enters capture.
	CaptureSupport() CaptureSupport
}

// Audit checks that every node of a sequence may be captured, before anything is begun.
//
// # Errors
//
// The first node that is Unsupported yields an error wrapping [ErrRejected] (whose text
// contains "rejected before begin_capture") naming its position, its name and its reason; a
// nil node wraps [ErrInvalidArgument]. An empty sequence passes.
func Audit(nodes []Node) error {
	for i, n := range nodes {
		if n == nil {
			return fmt.Errorf("%w: node %d of the capture sequence is nil", ErrInvalidArgument, i)
		}
		if cs := n.CaptureSupport(); !cs.IsSupported() {
			return fmt.Errorf("%w: node %d %q cannot be captured: %s", ErrRejected, i, n.Name(), cs.reasonText())
		}
	}
	return nil
}
