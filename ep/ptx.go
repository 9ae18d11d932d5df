package ep

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/cudaep/cudaep/cudadrv"
)

// The PTX entry parser: user modules are checked against their own .entry declarations, so a
// launch with the wrong argument count or kinds is refused before the driver sees it. PTX comes
// from the host (or NVRTC), so the parser must refuse, never crash on, anything.

var (
	ptxCommentRE = regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`)
	ptxVersionRE = regexp.MustCompile(`(^|\s)\.version\s+\d+\.\d+`)
	ptxEntryRE   = regexp.MustCompile(`\.entry\s+([A-Za-z_$%][A-Za-z0-9_$%]*)\s*(\(([^)]*)\))?`)
	ptxTypes     = map[string]ParamType{
		"u8": {"u8", 1, false}, "s8": {"s8", 1, false}, "b8": {"b8", 1, false},
		"u16": {"u16", 2, false}, "s16": {"s16", 2, false}, "b16": {"b16", 2, false},
		"u32": {"u32", 4, false}, "s32": {"s32", 4, false}, "b32": {"b32", 4, false},
		"u64": {"u64", 8, false}, "s64": {"s64", 8, false}, "b64": {"b64", 8, false},
		"f32": {"f32", 4, true}, "f64": {"f64", 8, true},
	}
)

// parseEntries reads the entry points of PTX text and their parameter types. An entry with a
// parameter that typed arguments cannot pass (a by-value aggregate, an unknown type, more
// than cudadrv.MaxKernelArgs parameters) is recorded in bad with the reason.
func parseEntries(text string) (map[string][]ParamType, map[string]string, error) {
	if !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0 {
		return nil, nil, fmt.Errorf("%w: the module is not PTX text (cubin and fatbin images cannot be checked and are refused)", ErrInvalidLaunch)
	}
	src := ptxCommentRE.ReplaceAllString(text, " ")
	if !ptxVersionRE.MatchString(src) {
		return nil, nil, fmt.Errorf("%w: the module is not PTX: no .version directive", ErrInvalidLaunch)
	}
	entries := map[string][]ParamType{}
	bad := map[string]string{}
	for _, m := range ptxEntryRE.FindAllStringSubmatch(src, -1) {
		name := m[1]
		var params []ParamType
		var why string
		if strings.TrimSpace(m[3]) != "" {
			for i, decl := range strings.Split(m[3], ",") {
				t, err := paramType(decl)
				if err != "" {
					why = fmt.Sprintf("parameter %d (%s) %s", i, strings.Join(strings.Fields(decl), " "), err)
					break
				}
				params = append(params, t)
			}
		}
		if why == "" && len(params) > cudadrv.MaxKernelArgs {
			why = fmt.Sprintf("it declares %d parameters, more than the %d typed arguments a launch carries", len(params), cudadrv.MaxKernelArgs)
		}
		if why != "" {
			bad[name] = why
			params = nil
		}
		entries[name] = params
	}
	if len(entries) == 0 {
		return nil, nil, fmt.Errorf("%w: the PTX declares no .entry", ErrInvalidLaunch)
	}
	return entries, bad, nil
}

// paramType reads one `.param .TYPE [qualifiers] name` declaration.
func paramType(decl string) (ParamType, string) {
	fields := strings.Fields(decl)
	if len(fields) < 2 || fields[0] != ".param" {
		return ParamType{}, "is not a .param declaration"
	}
	// An array parameter (`.param .align 8 .b8 s[16]`) is a by-value struct; `.align` alone
	// also qualifies pointers (`.param .u64 .ptr .global .align 4 p`).
	if strings.Contains(decl, "[") {
		return ParamType{}, "is a by-value aggregate, which typed arguments cannot pass"
	}
	for _, f := range fields[1:] {
		if t, ok := ptxTypes[strings.TrimPrefix(f, ".")]; ok && strings.HasPrefix(f, ".") {
			return t, ""
		}
	}
	return ParamType{}, "has a type typed arguments cannot pass"
}
