package cuda

// The symbol tables zdriver.go, zcublas.go and znvrtc.go (and the tests' zlibc_test.go) are
// generated from the *.prototypes files in this directory.
//go:generate go run ./internal/mkcuda
