package graphs

import (
	"errors"
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

// segment is one installed executable: the graph end-capture returned, the executable made
// from it, and the resources it embeds. After publication it is immutable until its
// lifecycle destroys it, which happens only once no admitted replay can still launch it.
type segment struct {
	exec      *cudadrv.GraphExec
	graph     *cudadrv.Graph
	resources []Resource
	destroyed bool // guarded by the lifecycle's mu
}

// destroyHandles destroys the executable and then the graph, each exactly once.
func (s *segment) destroyHandles() error {
	if s.destroyed {
		return nil
	}
	s.destroyed = true
	var errs []error
	if s.exec != nil {
		if err := s.exec.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("graphs: destroy graph executable: %w", err))
		}
	}
	if s.graph != nil {
		if err := s.graph.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("graphs: destroy graph: %w", err))
		}
	}
	return errors.Join(errs...)
}

// replaySet is what replays read: the installed token and its segments in capture order.
// It is immutable once published.
type replaySet struct {
	token    Token
	segments []*segment
}
