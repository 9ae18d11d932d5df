// Package layers holds the test that enforces the repository's layering (DESIGN.md "Layout",
// CONVENTIONS.md "Layout and dependencies"): named rules checked over the module's transitive
// import graph, read with `go list -deps`, each failure naming the forbidden import path.
package layers
