package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// allocSites runs f with every heap allocation profiled (runtime.MemProfileRate = 1) and
// returns where the allocations made during f came from, most frequent first, as
// "count× function (file:line) ← caller", at most limit of them. It is how a non-zero
// allocation count is explained rather than guessed: the profile names the allocating code.
//
// The profile is published only by a collection, so the window opens right after some: a
// collection empties every sync.Pool, and refilling them in f (a few allocations named
// sync.(*Pool).pinSlow and the pools' New functions) is counted and named too. The
// profile is process-wide, so allocations of other goroutines during f are included (and
// named). MemProfileRate is restored afterwards.
func allocSites(f func() error, limit int) ([]string, error) {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	// The heap profile is published at the end of a collection and may lag by two cycles.
	settle := func() {
		for range 3 {
			runtime.GC()
		}
	}
	settle()
	before := memProfile()
	if err := f(); err != nil {
		return nil, err
	}
	settle()
	after := memProfile()

	type site struct {
		where string
		n     int64
	}
	bySite := map[string]int64{}
	for key, rec := range after {
		n := rec.AllocObjects - before[key].AllocObjects
		if n > 0 && !inStack(rec.Stack(), "main.memProfile") { // the snapshot's own
			bySite[describeStack(rec.Stack())] += n
		}
	}
	var sites []site
	for w, n := range bySite {
		sites = append(sites, site{w, n})
	}
	slices.SortFunc(sites, func(a, b site) int {
		if a.n != b.n {
			return int(b.n - a.n)
		}
		return strings.Compare(a.where, b.where)
	})
	var out []string
	for i, s := range sites {
		if i == limit {
			break
		}
		out = append(out, fmt.Sprintf("%d× %s", s.n, s.where))
	}
	return out, nil
}

// memProfile returns the heap profile's records keyed by their stack.
func memProfile() map[string]runtime.MemProfileRecord {
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs := make([]runtime.MemProfileRecord, n+64)
		m, ok := runtime.MemProfile(recs, true)
		if ok {
			out := make(map[string]runtime.MemProfileRecord, m)
			for _, r := range recs[:m] {
				out[fmt.Sprint(r.Stack())] = r
			}
			return out
		}
		n = m
	}
}

// describeStack names the first two functions of an allocation's stack outside the runtime
// (the allocating code and its caller), or the runtime's own when nothing else is on it.
func describeStack(pcs []uintptr) string {
	frames := runtime.CallersFrames(pcs)
	var parts []string
	first := ""
	for {
		fr, more := frames.Next()
		where := fmt.Sprintf("%s (%s:%d)", shortFunc(fr.Function), shortFile(fr.File), fr.Line)
		if first == "" {
			first = where
		}
		if fr.Function != "" && !strings.HasPrefix(fr.Function, "runtime.") {
			parts = append(parts, where)
		}
		if len(parts) == 2 || !more {
			break
		}
	}
	if len(parts) == 0 {
		return first
	}
	return strings.Join(parts, " ← ")
}

// inStack reports whether the function named fn is on the stack.
func inStack(pcs []uintptr, fn string) bool {
	frames := runtime.CallersFrames(pcs)
	for {
		fr, more := frames.Next()
		if fr.Function == fn {
			return true
		}
		if !more {
			return false
		}
	}
}

func shortFunc(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		return name[i+1:]
	}
	return name
}

func shortFile(path string) string {
	parts := strings.Split(path, "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, "/")
}
