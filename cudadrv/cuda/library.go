package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"

	"github.com/cudaep/cudaep/cudadrv"
)

// cudaDefaultLib64 is the conventional toolkit library directory, searched last.
const cudaDefaultLib64 = "/usr/local/cuda/lib64"

// libSpec names a library searched on the loader path and in the toolkit directories.
type libSpec struct {
	what    string   // for messages, e.g. "cuBLAS"
	sonames []string // in order of preference, e.g. libcublas.so.13, libcublas.so.12
	// companions lists, for a soname found in a directory, libraries of the same directory to
	// load first, for installs whose RUNPATH does not lead the loader to them.
	companions func(dir, soname string) []string
}

var cublasSpec = libSpec{
	what:    "cuBLAS",
	sonames: []string{"libcublas.so.13", "libcublas.so.12"},
	companions: func(dir, soname string) []string {
		// libcublas.so.N needs libcublasLt.so.N.
		return []string{filepath.Join(dir, strings.Replace(soname, "libcublas", "libcublasLt", 1))}
	},
}

var nvrtcSpec = libSpec{
	what:    "NVRTC",
	sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12"},
	companions: func(dir, soname string) []string {
		// libnvrtc.so.N loads libnvrtc-builtins.so.N.M at compile time.
		m, _ := filepath.Glob(filepath.Join(dir, strings.Replace(soname, "libnvrtc", "libnvrtc-builtins", 1)+".*"))
		return m
	},
}

// searchDirs returns the directories searched for cuBLAS and NVRTC, in order; "" stands for
// the loader's own search (LD_LIBRARY_PATH, the ld.so cache, RUNPATH). Tests replace it.
var searchDirs = defaultSearchDirs

// defaultSearchDirs is the loader path, then $CUDA_HOME/lib64 when CUDA_HOME is set, then
// /usr/local/cuda/lib64, without duplicates.
func defaultSearchDirs() []string {
	dirs := []string{""}
	if home := os.Getenv("CUDA_HOME"); home != "" {
		dirs = append(dirs, filepath.Join(home, "lib64"))
	}
	if filepath.Clean(dirs[len(dirs)-1]) != cudaDefaultLib64 {
		dirs = append(dirs, cudaDefaultLib64)
	}
	return dirs
}

// candidates lists what loading spec tries, in order: every soname in the first directory,
// then every soname in the next, so that the loader path (what the user configured) wins over
// the toolkit directories, and a newer version wins within one place.
func candidates(spec libSpec, dirs []string) []string {
	var out []string
	for _, d := range dirs {
		for _, so := range spec.sonames {
			if d == "" {
				out = append(out, so)
			} else {
				out = append(out, filepath.Join(d, so))
			}
		}
	}
	return out
}

// openLibrary loads the first loadable candidate of spec and returns its handle and the name
// or path that loaded. When none loads, the error is a *cudadrv.LibraryError listing every
// candidate; its Reason is the loader's message for a file that exists but failed to load
// (a broken or wrong-architecture install says more than "not found"), else the last message.
func openLibrary(spec libSpec) (uintptr, string, error) {
	// dlopen reports its error through dlerror, which is per thread: keep both on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	tried := candidates(spec, searchDirs())
	var reason, foundReason string
	for _, c := range tried {
		abs := filepath.IsAbs(c)
		if abs {
			if _, err := os.Stat(c); err != nil {
				reason = err.Error()
				continue
			}
			// Best effort: once a companion is loaded, the library's own request for it is
			// matched by soname, whatever the library's RUNPATH says. A companion that fails
			// to load makes the library itself fail below, with the loader naming what is
			// missing.
			if spec.companions != nil {
				for _, dep := range spec.companions(filepath.Dir(c), filepath.Base(c)) {
					if _, err := os.Stat(dep); err == nil {
						_, _ = purego.Dlopen(dep, purego.RTLD_NOW|purego.RTLD_GLOBAL)
					}
				}
			}
		}
		h, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			return h, c, nil
		}
		reason = err.Error()
		if abs && foundReason == "" {
			foundReason = reason
		}
	}
	if foundReason != "" {
		reason = foundReason
	}
	return 0, "", &cudadrv.LibraryError{Library: spec.what, Tried: tried, Reason: reason}
}

// driverNames are the names Open tries for the driver library. Tests replace them.
var driverNames = []string{"libcuda.so.1"}

// errSuggestSim is the advice every Open failure carries.
const errSuggestSim = "use the provider option backend=sim for the simulated device"

// openDriver loads the driver library and resolves its symbols into t.
func openDriver(t *driverTable) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	var reason string
	for _, name := range driverNames {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			reason = err.Error()
			continue
		}
		if err := t.resolve(h); err != nil {
			// The library loaded but is not a driver this package can use; close it so that
			// a failed Open leaves nothing behind.
			_ = purego.Dlclose(h)
			return fmt.Errorf("cuda: %s is too old or not a CUDA driver (CUDA 12.0 or newer is needed); %s: %w",
				name, errSuggestSim, err)
		}
		return nil
	}
	return fmt.Errorf("cuda: no loadable CUDA driver; %s: %w", errSuggestSim, &cudadrv.LibraryError{
		Library: "the CUDA driver",
		Tried:   append([]string(nil), driverNames...),
		Reason:  reason,
	})
}
