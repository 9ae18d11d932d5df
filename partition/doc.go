// Package partition runs an ONNX subgraph (a partition a host hands to one provider) on an
// ep.Provider: it orders and groups the nodes a provider claims, and decides how a run's
// tensors and weights are placed. It reaches the device only through package ep, uses no cgo
// and names no host's types, so any host (the ONNX Runtime adapter, a Go program) can drive it.
package partition
