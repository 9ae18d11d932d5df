// Command mkcuda regenerates the purego symbol tables of package cudadrv/cuda from its
// prototype files (driver.prototypes, cublas.prototypes, nvrtc.prototypes and the libc list the
// tests use). Run it as go generate ./cudadrv/cuda, or from the repository root as
//
//	go run ./cudadrv/cuda/internal/mkcuda -dir cudadrv/cuda
//
// It rewrites a file only when its content changes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cudaep/cudaep/cudadrv/cuda/internal/protogen"
)

func main() {
	dir := flag.String("dir", ".", "the cudadrv/cuda package directory")
	pkg := flag.String("pkg", "cuda", "package name of the generated files")
	flag.Parse()
	if err := run(*dir, *pkg); err != nil {
		fmt.Fprintln(os.Stderr, "mkcuda:", err)
		os.Exit(1)
	}
}

func run(dir, pkg string) error {
	for _, job := range protogen.Jobs {
		src, err := os.ReadFile(filepath.Join(dir, job.In))
		if err != nil {
			return err
		}
		out, err := protogen.Generate(job, pkg, src)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, job.Out)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, out) {
			continue
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return err
		}
	}
	return nil
}
