package kernels_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing/fstest"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
)

// The simulated device finds a module's entry points, and their parameter counts, in its PTX
// text (it cannot compile PTX) and runs each as the Go body registered under its name. A
// pending module (kernels' pendingPTX: a CUDA source newer than its committed PTX) lacks some
// entries until nvcc regenerates it, so for the simulator the tests declare them from the
// CUDA source: simPendingPTX. The declarations run nothing on a GPU and never go there.

// simPendingPTX returns src (ptx/*.ptx) with each pending module's missing entries declared:
// the module's PTX, or a PTX text of its own when src has none, gains an entry with as many
// u64 parameters as the kernel has in cuda/<module>.cu under srcDir, and an empty body. It
// also returns the entries it declared.
func simPendingPTX(src fs.FS, srcDir string) (fstest.MapFS, []string, error) {
	out := fstest.MapFS{}
	files, err := fs.Glob(src, "ptx/*.ptx")
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		b, err := fs.ReadFile(src, f)
		if err != nil {
			return nil, nil, err
		}
		out[f] = &fstest.MapFile{Data: b}
	}
	var stubbed []string
	for file, entries := range kernels.PendingModules() {
		var text string
		var declared []string
		if f, ok := out[file]; ok {
			text = string(f.Data)
			ptx, err := cudadrv.ParsePTX(f.Data)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", file, err)
			}
			for _, e := range ptx.Entries {
				declared = append(declared, e.Name)
			}
		}
		source := filepath.Join(srcDir, strings.TrimSuffix(filepath.Base(file), ".ptx")+".cu")
		if text == "" {
			target, err := cudaTarget(source)
			if err != nil {
				return nil, nil, err
			}
			text = "// Entry declarations for the simulator (ep/kernels tests); not PTX to run.\n.version 7.0\n.target " + target + "\n.address_size 64\n"
		}
		var missing []string
		for _, e := range entries {
			if !slices.Contains(declared, e) {
				missing = append(missing, e)
			}
		}
		if len(missing) == 0 {
			continue
		}
		params, err := cudaKernelParams(source)
		if err != nil {
			return nil, nil, err
		}
		var b strings.Builder
		b.WriteString(text)
		for _, e := range missing {
			n, ok := paramsOf(params, e)
			if !ok {
				return nil, nil, fmt.Errorf("%s declares no kernel named like %s", source, e)
			}
			fmt.Fprintf(&b, "\n.visible .entry %s(", e)
			for i := range n {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, "\n\t.param .u64 %s_param_%d", e, i)
			}
			b.WriteString("\n)\n{\n\tret;\n}\n")
			stubbed = append(stubbed, e)
		}
		out[file] = &fstest.MapFile{Data: []byte(b.String())}
	}
	return out, stubbed, nil
}

// mkptxArch matches the first line by which a CUDA source names its virtual architecture for
// mkptx.sh.
var mkptxArch = regexp.MustCompile(`^// mkptx: compute_([0-9]+[a-z]?)\n`)

// cudaTarget returns the .target of the PTX mkptx.sh makes of a CUDA source: sm_NN for a
// source whose first line is "// mkptx: compute_NN", else sm_75.
func cudaTarget(source string) (string, error) {
	b, err := os.ReadFile(source)
	if err != nil {
		return "", err
	}
	if m := mkptxArch.FindSubmatch(b); m != nil {
		return "sm_" + string(m[1]), nil
	}
	return "sm_75", nil
}

// cudaKernel matches an extern "C" kernel's name (macro pastes allowed) and parameter list.
var cudaKernel = regexp.MustCompile(`extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?([A-Za-z_][A-Za-z0-9_#]*)\s*\(([^)]*)\)`)

// cudaKernelParams reads the extern "C" kernels of a CUDA source: each kernel's name up to its
// first macro paste (##), with its parameter count.
func cudaKernelParams(source string) (map[string]int, error) {
	b, err := os.ReadFile(source)
	if err != nil {
		return nil, err
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	out := map[string]int{}
	for _, m := range cudaKernel.FindAllStringSubmatch(text, -1) {
		stem, _, _ := strings.Cut(m[1], "##")
		n := 0
		if strings.TrimSpace(m[2]) != "" {
			n = strings.Count(m[2], ",") + 1
		}
		if prev, ok := out[stem]; ok && prev != n {
			return nil, fmt.Errorf("%s: kernels named %s… have %d and %d parameters", source, stem, prev, n)
		}
		out[stem] = n
	}
	if len(out) == 0 {
		return nil, errors.New(source + ": no extern \"C\" kernels")
	}
	return out, nil
}

// paramsOf returns the parameter count of the kernel whose name stem is the longest prefix of
// entry.
func paramsOf(params map[string]int, entry string) (int, bool) {
	best, n := "", 0
	for stem, c := range params {
		if strings.HasPrefix(entry, stem) && len(stem) > len(best) {
			best, n = stem, c
		}
	}
	return n, best != ""
}
