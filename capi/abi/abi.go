// Package abi holds the version number of cudaep's C ABI, for the cgo exports and for Go
// programs (the demo) that report it without loading the shared library.
package abi

// Version is the C ABI version the library implements. It equals CUDAEP_ABI_VERSION in
// include/cudaep.h (a capi test checks it) and grows by one whenever the header gains
// functions, enum values or struct fields; existing ones never change.
const Version = 5
