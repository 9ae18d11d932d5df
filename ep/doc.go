// Package ep is the CUDA execution provider: a Provider owns one device's context, streams,
// memory, kernels, graph slots and weight residency, and is the Go API a Go host uses.
package ep
