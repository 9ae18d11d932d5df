// Package partition runs an ONNX subgraph (a partition a host hands to one provider) on an
// ep.Provider. It reaches the device only through package ep, uses no cgo and names no host's
// types, so any host can drive it: the ONNX Runtime adapter (capi/ort) translates ORT's graphs
// and values into this package's, and a Go program can do the same without ORT.
//
// The rooms, in the order a graph passes through them:
//
//   - graph.go: the node type (Node, Value) every room reads; grouping.go: the order of the
//     nodes and the groups a host may fuse (TopoOrder, FusionGroups).
//   - fuse*.go: the chains that one kernel computes, replaced by that kernel (Fuse), one file
//     per rule family.
//   - session.go, partition.go: a Session is the partitions on one provider (their options,
//     the capture lock, graph slots); Session.Compile orders, fuses and loads a Graph's weights
//     into a Partition.
//   - weights.go, paging.go: where the weights live (placeWeights): resident, or streamed layer
//     by layer through a double buffer during each run (pageLayers, pagedWeights.execute).
//   - plan.go: a plan per set of input shapes: the kernels and their buffers, and which outputs
//     may be written into an input's memory.
//   - decide.go, memory.go: a run's decision, from the addresses of the host's tensors, of what
//     it reads and writes in place and which captured graph it replays, remembered while the
//     allocations it found in the host's Memory (the device-address index) hold.
//   - run.go: Partition.Run, which a host calls with a Call that reads its inputs and allocates
//     its outputs: the copies, the kernels or the graph's capture and replay, the fences.
//   - stats.go, phases*.go: what the partitions did (Totals), and a measurement build's timing
//     of a run's phases.
package partition
