package ep

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cudaep/cudaep/cudadrv/sim"
)

// Environment variables that shape the simulated machine the sim backend opens, for tests of
// hosts that cannot pass sim.Options (a C host, ONNX Runtime through the plugin adapter).
// They are read when a sim backend opens (with its first provider, or ListDevices) and apply
// only where the sim options leave the field unset. They have no effect on the cuda backend.
const (
	// EnvSimDevices is the number of simulated GPUs, 1..64 (default 1).
	EnvSimDevices = "CUDAEP_SIM_DEVICES"
	// EnvSimPeers says which simulated GPUs reach each other directly: "all" (the default),
	// "none", or pairs such as "0-1,2-3" (each pair in both directions, every other pair
	// staged).
	EnvSimPeers = "CUDAEP_SIM_PEERS"
)

// maxSimDevices bounds EnvSimDevices.
const maxSimDevices = 64

// simEnv applies EnvSimDevices and EnvSimPeers to opts where opts leaves them unset.
func simEnv(opts sim.Options) (sim.Options, error) {
	if v, ok := os.LookupEnv(EnvSimDevices); ok && opts.Devices == 0 {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > maxSimDevices {
			return opts, fmt.Errorf("%w: %s=%q: want a device count 1..%d", ErrInvalidArgument, EnvSimDevices, v, maxSimDevices)
		}
		opts.Devices = n
	}
	if v, ok := os.LookupEnv(EnvSimPeers); ok && opts.PeerAccess == nil {
		peers, err := parseSimPeers(v)
		if err != nil {
			return opts, fmt.Errorf("%w: %s=%q: %v", ErrInvalidArgument, EnvSimPeers, v, err)
		}
		opts.PeerAccess = peers
	}
	return opts, nil
}

// parseSimPeers reads an EnvSimPeers value into a sim.Options.PeerAccess function (nil for
// "all").
func parseSimPeers(v string) (func(device, peer int) bool, error) {
	switch v = strings.TrimSpace(v); v {
	case "", "all":
		return nil, nil
	case "none":
		return func(int, int) bool { return false }, nil
	}
	pairs := map[[2]int]bool{}
	for _, item := range strings.Split(v, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(item), "-")
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if !ok || errA != nil || errB != nil || x < 0 || y < 0 || x >= maxSimDevices || y >= maxSimDevices || x == y {
			return nil, fmt.Errorf("%q is not a pair of two distinct device ordinals such as 0-1 (want all, none, or pairs like 0-1,2-3)", item)
		}
		pairs[[2]int{x, y}], pairs[[2]int{y, x}] = true, true
	}
	return func(device, peer int) bool { return pairs[[2]int{device, peer}] }, nil
}
