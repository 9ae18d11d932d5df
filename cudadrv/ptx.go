package cudadrv

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The PTX reader: what a module's text declares, read before the driver sees it. ep checks a
// user kernel's launches against its entry's parameters, and the simulated device finds the
// entry points of the modules it loads (it cannot compile PTX). PTX comes from hosts and from
// NVRTC, so the reader must refuse, never crash on, anything.

// PTXError is ParsePTX's refusal of an image that is not PTX text. Reason completes "the image
// is …": "empty", "not PTX text (…)", "not PTX: it has no .version directive".
type PTXError struct {
	Reason string
}

func (e *PTXError) Error() string { return "cudadrv: the image is " + e.Reason }

// PTX is what ParsePTX read from a module's text.
type PTX struct {
	// Target is the first target of the .target directive ("sm_90"), or "" when the text has
	// no .target (the driver refuses such PTX).
	Target string
	// Entries are the .entry declarations in the order of the text. A name may be declared
	// twice (the driver refuses that); the caller decides what to make of it.
	Entries []PTXEntry
}

// PTXEntry is one .entry declaration: a kernel's name and parameters.
type PTXEntry struct {
	// Name is the entry point's name, a PTX identifier.
	Name string
	// Params are the declared parameters, in order.
	Params []PTXParam
	// Unlaunchable says why a KernelArgs list cannot launch the entry, naming the parameter: one
	// that is not a scalar (its Problem), or more than MaxKernelArgs parameters. It is "" when
	// every parameter is a scalar a KernelArgs word passes.
	Unlaunchable string
}

// PTXParam is one parameter declaration of an entry.
type PTXParam struct {
	// Decl is the declaration with its white space collapsed, e.g. ".param .u64 .ptr .global p".
	Decl string
	// Type is the scalar type without its dot: "u64", "s32", "f32", "b8", …; "" when Problem
	// is set.
	Type string
	// Size is the scalar's size in bytes (1, 2, 4 or 8); 0 when Problem is set.
	Size int
	// Float reports a floating-point scalar (f32, f64).
	Float bool
	// Problem says why a KernelArgs word cannot pass the parameter: it is not a .param
	// declaration, it is a by-value aggregate (an array of bytes: a struct), or its type is no
	// scalar of at most 8 bytes. It is "" for a scalar.
	Problem string
}

var (
	ptxComment = regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`)
	ptxVersion = regexp.MustCompile(`(^|\s)\.version\s+\d+\.\d+`)
	ptxTarget  = regexp.MustCompile(`(?:^|\s)\.target\s+(\w+)`)
	ptxEntry   = regexp.MustCompile(`\.entry\s+([A-Za-z_$%][A-Za-z0-9_$%]*)\s*(\(([^)]*)\))?`)
)

// ptxScalar is a parameter type a KernelArgs word passes.
type ptxScalar struct {
	size  int
	float bool
}

var ptxScalars = map[string]ptxScalar{
	"u8": {1, false}, "s8": {1, false}, "b8": {1, false},
	"u16": {2, false}, "s16": {2, false}, "b16": {2, false},
	"u32": {4, false}, "s32": {4, false}, "b32": {4, false},
	"u64": {8, false}, "s64": {8, false}, "b64": {8, false},
	"f32": {4, true}, "f64": {8, true},
}

// ParsePTX reads the target and the entry points of a PTX image: text, optionally
// NUL-terminated (trailing NULs are ignored). Comments are skipped. It reads declarations only:
// that the text is PTX the driver compiles is the driver's to say.
//
// # Errors
//
// An empty image, one that is not UTF-8 text or holds a NUL before its end (a cubin or fatbin
// image), and text without a .version directive are refused with a *PTXError. Everything else
// is reported in the result: a missing .target, a name declared twice, an entry a KernelArgs
// list cannot launch.
func ParsePTX(image []byte) (*PTX, error) {
	text := bytes.TrimRight(image, "\x00")
	switch {
	case len(text) == 0:
		return nil, &PTXError{Reason: "empty"}
	case bytes.IndexByte(text, 0) >= 0 || !utf8.Valid(text):
		return nil, &PTXError{Reason: "not PTX text (it is binary, such as a cubin or fatbin image)"}
	}
	src := ptxComment.ReplaceAllString(string(text), " ")
	if !ptxVersion.MatchString(src) {
		return nil, &PTXError{Reason: "not PTX: it has no .version directive"}
	}
	out := &PTX{}
	if m := ptxTarget.FindStringSubmatch(src); m != nil {
		out.Target = m[1]
	}
	for _, m := range ptxEntry.FindAllStringSubmatch(src, -1) {
		e := PTXEntry{Name: m[1]}
		if strings.TrimSpace(m[3]) != "" {
			for i, decl := range strings.Split(m[3], ",") {
				p := ptxParam(decl)
				if p.Problem != "" && e.Unlaunchable == "" {
					e.Unlaunchable = fmt.Sprintf("parameter %d (%s) %s", i, p.Decl, p.Problem)
				}
				e.Params = append(e.Params, p)
			}
		}
		if e.Unlaunchable == "" && len(e.Params) > MaxKernelArgs {
			e.Unlaunchable = fmt.Sprintf("it declares %d parameters, more than the %d arguments a launch carries", len(e.Params), MaxKernelArgs)
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

// ptxParam reads one `.param .TYPE [qualifiers] name` declaration.
func ptxParam(decl string) PTXParam {
	fields := strings.Fields(decl)
	p := PTXParam{Decl: strings.Join(fields, " ")}
	if len(fields) < 2 || fields[0] != ".param" {
		p.Problem = "is not a .param declaration"
		return p
	}
	// An array parameter (`.param .align 8 .b8 s[16]`) is a by-value struct; `.align` alone
	// also qualifies pointers (`.param .u64 .ptr .global .align 4 p`).
	if strings.Contains(decl, "[") {
		p.Problem = "is a by-value aggregate, which launch arguments cannot pass"
		return p
	}
	for _, f := range fields[1:] {
		name, dotted := strings.CutPrefix(f, ".")
		if s, ok := ptxScalars[name]; ok && dotted {
			p.Type, p.Size, p.Float = name, s.size, s.float
			return p
		}
	}
	p.Problem = "has a type launch arguments cannot pass"
	return p
}
