package layers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/cudaep/cudaep"

// layer is where a package of the module sits in DESIGN.md's layout. Data flows up:
// cudadrv ← graphs, paging ← ep ← front ends; programs (cmd/), benchmarks (bench/) and
// internal/ tools sit on top.
type layer int

const (
	unplaced       layer = iota
	driverLayer          // cudadrv and its subpackages
	graphsLayer          // graphs/...
	pagingLayer          // paging/...
	epLayer              // ep and its subpackages (ep/kernels)
	partitionLayer       // partition/...: the planning engine over ep
	frontEnd             // capi and its subpackages (the ORT adapter), but not its helpers
	frontHelper          // capi/handles, capi/abi: the front ends' own helpers
	program              // cmd/...
	benchmark            // bench/...: the measurement house's programs
	tooling              // internal/...
	testSupport          // a package named ...test (drivertest, pagingtest): only for tests
)

var layerNames = map[layer]string{
	unplaced: "no layer", driverLayer: "cudadrv", graphsLayer: "graphs", pagingLayer: "paging", epLayer: "ep", partitionLayer: "partition",
	frontEnd: "front end", frontHelper: "front-end helper", program: "program", benchmark: "benchmark",
	tooling: "internal tool", testSupport: "test support",
}

func (l layer) String() string { return layerNames[l] }

// frontHelpers are the packages under capi/ that are the front ends' own helpers rather than
// front ends: front ends may import them.
var frontHelpers = map[string]bool{"capi/handles": true, "capi/abi": true}

// within reports whether pkg is dir or below it.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// layerOf places a module package (path relative to the module) in its layer. Test support is
// recognised by name, as the standard library's httptest and fstest are.
func layerOf(pkg string) layer {
	switch {
	case strings.HasSuffix(path.Base(pkg), "test"):
		return testSupport
	case within(pkg, "cudadrv"):
		return driverLayer
	case within(pkg, "graphs"):
		return graphsLayer
	case within(pkg, "paging"):
		return pagingLayer
	case within(pkg, "ep"):
		return epLayer
	case within(pkg, "partition"):
		return partitionLayer
	case frontHelpers[pkg]:
		return frontHelper
	case within(pkg, "capi"):
		return frontEnd
	case within(pkg, "cmd"):
		return program
	case within(pkg, "bench"):
		return benchmark
	case within(pkg, "internal"):
		return tooling
	}
	return unplaced
}

// library reports whether pkg ships in the library: not a program, a benchmark, a tool or test
// support.
func library(pkg string) bool {
	switch layerOf(pkg) {
	case program, benchmark, tooling, testSupport:
		return false
	}
	return true
}

// cgo is the pseudo-package of `import "C"`.
const cgo = "C"

// rule is one named constraint on what packages reach through their imports. The checker
// walks each package the rule applies to along import edges between the module's packages
// (and into "C"); an edge to a package forbidden for the walk's origin is a violation and is
// not followed further; other packages are followed when through allows it.
type rule struct {
	name string
	// applies selects the packages whose imports the rule constrains.
	applies func(pkg string) bool
	// forbidden reports whether pkg may not reach dep.
	forbidden func(pkg, dep string) bool
	// through reports whether the walk from pkg continues into dep's own imports; nil means
	// always (a fully transitive rule).
	through func(pkg, dep string) bool
	// why is the rule's reason, printed with each violation.
	why string
}

// rank orders the data layers: a package may import only lower ranks (graphs and paging share
// one; programs, benchmarks and tools are on top).
func rank(l layer) int {
	switch l {
	case driverLayer:
		return 0
	case graphsLayer, pagingLayer:
		return 1
	case epLayer:
		return 2
	case partitionLayer:
		return 3
	case frontEnd, frontHelper:
		return 4
	}
	return 5
}

// floor is the data layer a package's imports are ranked by: its own, or for test support the
// layer of the folder it sits in (cudadrv/drivertest is on the cudadrv floor, paging/pagingtest
// on paging's), so that test support never reaches above the code it helps test.
func floor(pkg string) layer {
	if layerOf(pkg) == testSupport {
		return layerOf(path.Dir(pkg))
	}
	return layerOf(pkg)
}

// doors are the packages through which front ends and programs reach the library: ep, and the
// partition package (DESIGN.md's Layout), the planning engine over ep.
var doors = []string{"ep", "partition"}

// abiVersion is capi/abi, the C ABI's version number and nothing else: programs may import it
// to report the version without loading the shared library.
const abiVersion = "capi/abi"

// baselineFloors are the floors below ep that a benchmark may import for its raw baselines
// (driver-built graphs, raw cuBLAS, a paging double buffer driven directly, registration
// rates), with the test support that sits on them (cudadrv/drivertest, paging/pagingtest): what
// lies under ep is measured there, side by side with the same work through a door.
var baselineFloors = []layer{driverLayer, graphsLayer, pagingLayer}

// newRules returns DESIGN.md's "Layout" table and CONVENTIONS.md's dependency rules, each
// checked transitively, for a layout whose front ends and programs enter the library through
// doors.
func newRules(doors []string) []rule {
	door := func(dep string) bool { return slices.Contains(doors, dep) }
	return []rule{
		{
			name:    "nothing imports upward",
			applies: func(pkg string) bool { return rank(floor(pkg)) < 5 },
			forbidden: func(pkg, dep string) bool {
				if dep == cgo {
					return false
				}
				if layerOf(dep) == testSupport && layerOf(pkg) != testSupport {
					return false // the library reaching test support is "only tests use test support"'s business
				}
				return floor(dep) == unplaced || rank(floor(dep)) > rank(floor(pkg))
			},
			why: "data flows cudadrv ← graphs, paging ← ep ← front ends; a package imports only layers below its own, " +
				"and test support only the floor it sits in and those below",
		},
		{
			name:    "graphs and paging never import each other",
			applies: func(pkg string) bool { return layerOf(pkg) == graphsLayer || layerOf(pkg) == pagingLayer },
			forbidden: func(pkg, dep string) bool {
				return (layerOf(pkg) == graphsLayer && layerOf(dep) == pagingLayer) ||
					(layerOf(pkg) == pagingLayer && layerOf(dep) == graphsLayer)
			},
			why: "graphs and paging are siblings over cudadrv; ep wires them together",
		},
		{
			name:    "front ends import only ep and their helpers",
			applies: func(pkg string) bool { return layerOf(pkg) == frontEnd },
			forbidden: func(pkg, dep string) bool {
				return dep != cgo && !door(dep) && !frontHelpers[dep] && layerOf(dep) != frontEnd
			},
			through: func(pkg, dep string) bool { return !door(dep) },
			why:     "ep is the only door: front ends reach graphs, paging, cudadrv and ep/kernels through ep, never directly",
		},
		{
			name:      "programs import only ep",
			applies:   func(pkg string) bool { return layerOf(pkg) == program },
			forbidden: func(pkg, dep string) bool { return !door(dep) && dep != abiVersion },
			through:   func(pkg, dep string) bool { return !door(dep) },
			why: "a program under cmd/ is a host like any other: it uses the library through ep " +
				"(and may print the C ABI version from capi/abi); programs that measure below ep live under bench/",
		},
		{
			name:    "benchmarks import the doors and the floors below ep",
			applies: func(pkg string) bool { return within(pkg, "bench") },
			forbidden: func(pkg, dep string) bool {
				return dep != cgo && !door(dep) && dep != abiVersion && !within(dep, "bench") &&
					!slices.Contains(baselineFloors, floor(dep))
			},
			through: func(pkg, dep string) bool { return !door(dep) },
			why: "a benchmark measures ours through ep (or the partition package) beside raw baselines built on " +
				"cudadrv, graphs and paging (and their test support); ep/kernels is measured through ep or from its PTX, " +
				"and the front ends from outside, through their C ABI, never linked into a Go benchmark (they are cgo)",
		},
		{
			name:      "nothing imports the benchmarks",
			applies:   func(pkg string) bool { return !within(pkg, "bench") },
			forbidden: func(pkg, dep string) bool { return within(dep, "bench") },
			// Every package outside bench/ is checked for its own imports: one report per edge.
			through: func(pkg, dep string) bool { return false },
			why:     "bench/ measures the module from outside: no library package, program, tool or test support depends on it",
		},
		{
			name:      "the partition package reaches the device only through ep",
			applies:   func(pkg string) bool { return layerOf(pkg) == partitionLayer },
			forbidden: func(pkg, dep string) bool { return dep != "ep" && layerOf(dep) != partitionLayer },
			through:   func(pkg, dep string) bool { return dep != "ep" },
			why: "the planning engine drives the device through ep's public API (and its aliases), " +
				"never cudadrv, graphs, paging or ep/kernels directly",
		},
		{
			name:      "ep/kernels never imports the simulator",
			applies:   func(pkg string) bool { return within(pkg, "ep/kernels") },
			forbidden: func(pkg, dep string) bool { return within(dep, "cudadrv/sim") },
			why:       "the kernels hand their Go bodies out (kernels.SimKernels); which backend runs them is the caller's choice",
		},
		{
			name:      "only tests use test support",
			applies:   library,
			forbidden: func(pkg, dep string) bool { return layerOf(dep) == testSupport },
			why:       "cudadrv/drivertest and other ...test packages are for tests (and the benchmarks' raw baselines under bench/)",
		},
		{
			name:      "only front ends use cgo",
			applies:   func(pkg string) bool { return (library(pkg) && layerOf(pkg) != frontEnd) || within(pkg, "bench") },
			forbidden: func(pkg, dep string) bool { return dep == cgo },
			why: "everything below the front ends, and the benchmarks, build with CGO_ENABLED=0 " +
				"(drivers, and the benchmarks' in-process C baselines, are loaded with purego)",
		},
	}
}

// rules are the module's rules, for its doors.
var rules = newRules(doors)

// graph is the module's import graph: package → its direct imports, paths relative to the
// module ("C" for cgo), edges to other modules and the standard library dropped.
type graph map[string][]string

// violation is one forbidden reach: the import path from the rule's package to the package it
// must not reach. Its last edge is the forbidden one.
type violation struct {
	rule string
	path []string
	why  string
}

func (v violation) String() string {
	return fmt.Sprintf("%s: %s (%s)", v.rule, strings.Join(v.path, " → "), v.why)
}

// check returns every violation of rules in g, in a stable order.
func check(g graph, rules []rule) []violation {
	var out []violation
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, r := range rules {
		for _, p := range pkgs {
			if r.applies(p) {
				out = append(out, walk(g, r, p)...)
			}
		}
	}
	return out
}

// walk is a breadth-first walk of g from pkg under r, reporting each forbidden edge once with
// the shortest import path that leads to it. It does not walk into test support packages, nor
// from outside bench/ into a benchmark.
func walk(g graph, r rule, pkg string) []violation {
	var out []violation
	parent := map[string]string{pkg: ""}
	reported := map[string]bool{}
	queue := []string{pkg}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, dep := range g[from] {
			if r.forbidden(pkg, dep) {
				edge := from + " " + dep
				if !reported[edge] {
					reported[edge] = true
					p := []string{dep}
					for at := from; at != ""; at = parent[at] {
						p = append([]string{at}, p...)
					}
					out = append(out, violation{rule: r.name, path: p, why: r.why})
				}
				continue
			}
			if _, seen := parent[dep]; seen || dep == cgo || layerOf(dep) == testSupport || (within(dep, "bench") && !within(pkg, "bench")) {
				// What test support or a benchmark imports is not the importer's: the rule
				// against reaching them reports the edge.
				continue
			}
			if r.through != nil && !r.through(pkg, dep) {
				continue
			}
			parent[dep] = from
			queue = append(queue, dep)
		}
	}
	return out
}

// listModule runs `go list -deps -json` over the module and returns its import graph.
func listModule(t *testing.T) graph {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: the dependency rules need `go list -deps` to read the import graph")
	}
	cmd := exec.Command(goTool, "list", "-e", "-deps", "-json=ImportPath,Imports,Module,Error", module+"/...")
	// cgo files count: capi's imports are in them.
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "go list: %s", stderr.String())
	g := graph{}
	dec := json.NewDecoder(&stdout)
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Module     *struct{ Path string }
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		if p.Module == nil || p.Module.Path != module {
			continue // the standard library and other modules
		}
		if p.Error != nil {
			// A package that does not build still lists its imports; its own tests report why.
			t.Logf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		rel := relative(p.ImportPath)
		g[rel] = nil
		for _, imp := range p.Imports {
			if imp == cgo || within(imp, module) {
				g[rel] = append(g[rel], relative(imp))
			}
		}
	}
	require.NotEmpty(t, g, "go list found no package of %s", module)
	return g
}

func relative(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

// TestEveryPackageHasALayer: a new package is placed in the layering on purpose (here and in
// DESIGN.md's Layout table), never by accident.
func TestEveryPackageHasALayer(t *testing.T) {
	g := listModule(t)
	assert.GreaterOrEqual(t, len(g), 12, "go list must reach every package")
	for pkg := range g {
		assert.NotEqual(t, unplaced, layerOf(pkg), "package %s is in no layer: place it in layerOf and DESIGN.md", pkg)
	}
}

// TestImportRules checks every rule over the module's transitive import graph. A failure
// lists exactly the forbidden edges, each with the import path that reaches it.
func TestImportRules(t *testing.T) {
	g := listModule(t)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			applied := 0
			for pkg := range g {
				if r.applies(pkg) {
					applied++
				}
			}
			require.NotZero(t, applied, "the rule applies to no package of the module")
			var lines []string
			for _, v := range check(g, []rule{r}) {
				lines = append(lines, v.String())
			}
			if len(lines) > 0 {
				t.Errorf("forbidden imports:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// cleanModule is a synthetic import graph that keeps every rule, shaped like the real module.
func cleanModule() graph {
	return graph{
		"cudadrv": nil, "cudadrv/sim": {"cudadrv"}, "cudadrv/cuda": {"cudadrv"},
		"cudadrv/drivertest": {"cudadrv", "cudadrv/cuda", "cudadrv/sim"},
		"graphs":             {"cudadrv"}, "paging": {"cudadrv"}, "paging/pagingtest": {"cudadrv/sim", "paging"},
		"ep/kernels": {"cudadrv", "graphs"}, "ep": {"cudadrv", "cudadrv/sim", "ep/kernels", "graphs", "paging"},
		"capi/handles": nil, "capi/abi": nil, "capi": {"C", "capi/abi", "capi/handles", "ep"},
		"partition": {"ep"},
		"capi/ort":  {"C", "capi/handles", "ep", "partition"}, "cmd/cudaep-demo": {"capi/abi", "ep"},
		"bench/cudaep-bench": {"capi/abi", "cudadrv", "cudadrv/sim", "ep", "paging", "paging/pagingtest"},
		"internal/layers":    nil,
	}
}

// TestRuleCheckerReportsForbiddenEdges feeds the checker synthetic modules, each the clean one
// plus forbidden edges, and checks it reports exactly those edges, with the import path that
// reaches each.
func TestRuleCheckerReportsForbiddenEdges(t *testing.T) {
	require.Empty(t, check(cleanModule(), rules), "a module that keeps the rules")
	tests := []struct {
		name  string
		edges map[string][]string // added imports
		want  []string            // rule: import path
	}{
		{"a front end imports graphs", map[string][]string{"capi": {"graphs"}},
			[]string{"front ends import only ep and their helpers: capi → graphs"}},
		{"a front end imports ep/kernels", map[string][]string{"capi/ort": {"ep/kernels"}},
			[]string{"front ends import only ep and their helpers: capi/ort → ep/kernels"}},
		{"a front-end helper leaks paging", map[string][]string{"capi/handles": {"paging"}},
			[]string{
				"front ends import only ep and their helpers: capi → capi/handles → paging",
				"front ends import only ep and their helpers: capi/ort → capi/handles → paging",
			}},
		{"ep/kernels reaches the simulator through graphs", map[string][]string{"graphs": {"cudadrv/sim"}},
			[]string{"ep/kernels never imports the simulator: ep/kernels → graphs → cudadrv/sim"}},
		{"ep/kernels imports the simulator", map[string][]string{"ep/kernels": {"cudadrv/sim"}},
			[]string{"ep/kernels never imports the simulator: ep/kernels → cudadrv/sim"}},
		{"the library imports drivertest", map[string][]string{"paging": {"cudadrv/drivertest"}},
			[]string{
				"only tests use test support: paging → cudadrv/drivertest",
				"only tests use test support: ep → paging → cudadrv/drivertest",
				"only tests use test support: capi → ep → paging → cudadrv/drivertest",
				"only tests use test support: capi/ort → ep → paging → cudadrv/drivertest",
				"only tests use test support: partition → ep → paging → cudadrv/drivertest",
			}},
		{"cudadrv imports upward", map[string][]string{"cudadrv/sim": {"graphs"}},
			[]string{
				"nothing imports upward: cudadrv/sim → graphs",
				"nothing imports upward: cudadrv/drivertest → cudadrv/sim → graphs",
			}},
		{"drivertest imports ep/kernels", map[string][]string{"cudadrv/drivertest": {"ep/kernels"}},
			[]string{"nothing imports upward: cudadrv/drivertest → ep/kernels"}},
		{"drivertest imports test support of a higher floor", map[string][]string{"cudadrv/drivertest": {"paging/pagingtest"}},
			[]string{"nothing imports upward: cudadrv/drivertest → paging/pagingtest"}},
		{"pagingtest imports ep", map[string][]string{"paging/pagingtest": {"ep"}},
			[]string{"nothing imports upward: paging/pagingtest → ep"}},
		{"a program imports graphs", map[string][]string{"cmd/cudaep-demo": {"graphs"}},
			[]string{"programs import only ep: cmd/cudaep-demo → graphs"}},
		{"a program imports ep/kernels", map[string][]string{"cmd/cudaep-demo": {"ep/kernels"}},
			[]string{"programs import only ep: cmd/cudaep-demo → ep/kernels"}},
		{"a program imports cudadrv and test support", map[string][]string{"cmd/cudaep-demo": {"cudadrv", "cudadrv/drivertest"}},
			[]string{
				"programs import only ep: cmd/cudaep-demo → cudadrv",
				"programs import only ep: cmd/cudaep-demo → cudadrv/drivertest",
			}},
		{"a program imports a front end", map[string][]string{"cmd/cudaep-demo": {"capi/handles"}},
			[]string{"programs import only ep: cmd/cudaep-demo → capi/handles"}},
		{"a program reaches paging through the C ABI version", map[string][]string{"capi/abi": {"paging"}},
			[]string{
				"front ends import only ep and their helpers: capi → capi/abi → paging",
				"programs import only ep: cmd/cudaep-demo → capi/abi → paging",
			}},
		{"a new program imports paging", map[string][]string{"cmd/cudaep-probe": {"ep", "paging"}},
			[]string{"programs import only ep: cmd/cudaep-probe → paging"}},
		{"a benchmark under cmd/ has no exemption", map[string][]string{"cmd/cudaep-bench": {"capi/abi", "cudadrv", "ep", "paging/pagingtest"}},
			[]string{
				"programs import only ep: cmd/cudaep-bench → cudadrv",
				"programs import only ep: cmd/cudaep-bench → paging/pagingtest",
			}},
		{"a benchmark imports ep/kernels", map[string][]string{"bench/cudaep-bench": {"ep/kernels"}},
			[]string{"benchmarks import the doors and the floors below ep: bench/cudaep-bench → ep/kernels"}},
		{"a benchmark imports the ORT adapter", map[string][]string{"bench/cudaep-bench": {"capi/ort"}},
			[]string{
				"benchmarks import the doors and the floors below ep: bench/cudaep-bench → capi/ort",
				"only front ends use cgo: bench/cudaep-bench → capi/ort → C",
			}},
		{"a benchmark imports the C ABI's handles and cgo", map[string][]string{"bench/ort-probe": {"C", "capi/handles", "ep"}},
			[]string{
				"only front ends use cgo: bench/ort-probe → C",
				"benchmarks import the doors and the floors below ep: bench/ort-probe → capi/handles",
			}},
		{"a benchmark reaches ep/kernels through the C ABI version", map[string][]string{"capi/abi": {"ep/kernels"}},
			[]string{
				"front ends import only ep and their helpers: capi → capi/abi → ep/kernels",
				"programs import only ep: cmd/cudaep-demo → capi/abi → ep/kernels",
				"benchmarks import the doors and the floors below ep: bench/cudaep-bench → capi/abi → ep/kernels",
			}},
		{"a library package imports a benchmark", map[string][]string{"paging/sources": {"cudadrv", "bench/cudaep-bench"}},
			[]string{
				"nothing imports upward: paging/sources → bench/cudaep-bench",
				"nothing imports the benchmarks: paging/sources → bench/cudaep-bench",
			}},
		{"a program imports a benchmark", map[string][]string{"cmd/cudaep-demo": {"bench/cudaep-bench"}},
			[]string{
				"programs import only ep: cmd/cudaep-demo → bench/cudaep-bench",
				"nothing imports the benchmarks: cmd/cudaep-demo → bench/cudaep-bench",
			}},
		{"a tool imports a benchmark's helpers", map[string][]string{"internal/layers": {"bench/benchtest"}, "bench/benchtest": {"ep"}},
			[]string{"nothing imports the benchmarks: internal/layers → bench/benchtest"}},
		{"a front end imports test support", map[string][]string{"capi/ort": {"cudadrv/drivertest"}},
			[]string{
				"front ends import only ep and their helpers: capi/ort → cudadrv/drivertest",
				"only tests use test support: capi/ort → cudadrv/drivertest",
			}},
		{"the partition package imports graphs", map[string][]string{"partition": {"graphs"}},
			[]string{"the partition package reaches the device only through ep: partition → graphs"}},
		{"the partition package imports ep/kernels and cudadrv", map[string][]string{"partition": {"ep/kernels", "cudadrv"}},
			[]string{
				"the partition package reaches the device only through ep: partition → ep/kernels",
				"the partition package reaches the device only through ep: partition → cudadrv",
			}},
		{"ep imports the partition package", map[string][]string{"ep": {"partition"}},
			[]string{"nothing imports upward: ep → partition"}},
		{"the partition package imports a front end", map[string][]string{"partition": {"capi/handles"}},
			[]string{
				"nothing imports upward: partition → capi/handles",
				"the partition package reaches the device only through ep: partition → capi/handles",
			}},
		{"graphs imports paging", map[string][]string{"graphs": {"paging"}},
			[]string{"graphs and paging never import each other: graphs → paging"}},
		{"cgo below the front ends", map[string][]string{"paging": {"C"}},
			[]string{
				"only front ends use cgo: paging → C",
				"only front ends use cgo: ep → paging → C",
				"only front ends use cgo: partition → ep → paging → C",
				"only front ends use cgo: bench/cudaep-bench → paging → C",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := cleanModule()
			for pkg, deps := range tt.edges {
				g[pkg] = append(g[pkg], deps...)
			}
			var got []string
			for _, v := range check(g, rules) {
				got = append(got, v.rule+": "+strings.Join(v.path, " → "))
				assert.Contains(t, v.String(), strings.Join(v.path, " → "), "the message names the path and its edge")
			}
			assert.ElementsMatch(t, tt.want, got)
		})
	}
}

// TestBenchmarksReachTheFloorsBelowEp: a benchmark may import, beside the doors, every floor
// below ep and the test support on those floors, and other benchmark packages; the same
// imports from a program under cmd/ are violations.
func TestBenchmarksReachTheFloorsBelowEp(t *testing.T) {
	baselines := []string{"cudadrv/cuda", "cudadrv/drivertest", "graphs", "paging", "paging/pagingtest", "partition", "bench/benchtest"}
	g := cleanModule()
	g["bench/benchtest"] = []string{"cudadrv/sim"}
	g["bench/cudaep-bench"] = append(g["bench/cudaep-bench"], baselines...)
	assert.Empty(t, check(g, rules), "a benchmark's raw baselines")
	g["cmd/cudaep-demo"] = append(g["cmd/cudaep-demo"], baselines...)
	var got []string
	for _, v := range check(g, rules) {
		got = append(got, v.rule+": "+strings.Join(v.path, " → "))
	}
	assert.ElementsMatch(t, []string{
		"programs import only ep: cmd/cudaep-demo → cudadrv/cuda",
		"programs import only ep: cmd/cudaep-demo → cudadrv/drivertest",
		"programs import only ep: cmd/cudaep-demo → graphs",
		"programs import only ep: cmd/cudaep-demo → paging",
		"programs import only ep: cmd/cudaep-demo → paging/pagingtest",
		"programs import only ep: cmd/cudaep-demo → bench/benchtest",
		"nothing imports the benchmarks: cmd/cudaep-demo → bench/benchtest",
	}, got, "the same imports from a program under cmd/")
}

// TestDoorsAdmitThePartitionPackage: the partition package is a door, so front ends and
// programs may import it (what lies behind a door is not followed); with ep the only door,
// importing it is a violation of both rules.
func TestDoorsAdmitThePartitionPackage(t *testing.T) {
	g := cleanModule()
	g["cmd/cudaep-demo"] = append(g["cmd/cudaep-demo"], "partition")
	assert.Empty(t, check(g, rules), "with the partition package a door")
	var got []string
	for _, v := range check(g, newRules([]string{"ep"})) {
		got = append(got, v.rule+": "+strings.Join(v.path, " → "))
	}
	assert.ElementsMatch(t, []string{
		"front ends import only ep and their helpers: capi/ort → partition",
		"programs import only ep: cmd/cudaep-demo → partition",
	}, got, "with ep the only door")
}
