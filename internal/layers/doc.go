// Package layers holds the test that enforces the repository's layering: which package may
// import which (DESIGN.md "Layout"), and that only capi uses cgo.
package layers
