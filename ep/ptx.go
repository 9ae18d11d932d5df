package ep

import (
	"errors"
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

// userEntries reads the entry points of a user module's PTX text and their parameter types
// with the driver layer's PTX reader (cudadrv.ParsePTX), so that a launch with the wrong
// argument count or kinds is refused before the driver sees it. An entry that typed arguments
// cannot launch (a by-value aggregate, an unknown type, more than cudadrv.MaxKernelArgs
// parameters) is in entries with nil parameters and in bad with the reason. A name declared
// twice keeps its last declaration (the driver refuses the module).
//
// # Errors
//
// Text that is not PTX (empty, binary, no .version directive) or declares no entry: an error
// wrapping ErrInvalidLaunch that says which.
func userEntries(text []byte) (entries map[string][]ParamType, bad map[string]string, err error) {
	ptx, err := cudadrv.ParsePTX(text)
	if err != nil {
		var pe *cudadrv.PTXError
		if errors.As(err, &pe) {
			return nil, nil, fmt.Errorf("%w: the module is %s; only PTX text can be checked against its entry declarations", ErrInvalidLaunch, pe.Reason)
		}
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidLaunch, err)
	}
	if len(ptx.Entries) == 0 {
		return nil, nil, fmt.Errorf("%w: the PTX declares no .entry", ErrInvalidLaunch)
	}
	entries = make(map[string][]ParamType, len(ptx.Entries))
	bad = map[string]string{}
	for _, e := range ptx.Entries {
		delete(bad, e.Name)
		if e.Unlaunchable != "" {
			entries[e.Name], bad[e.Name] = nil, e.Unlaunchable
			continue
		}
		var params []ParamType
		for _, p := range e.Params {
			params = append(params, ParamType{Name: p.Type, Size: p.Size, Float: p.Float})
		}
		entries[e.Name] = params
	}
	return entries, bad, nil
}
