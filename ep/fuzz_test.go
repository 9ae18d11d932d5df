package ep_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cudaep/cudaep/ep"
)

// FuzzParseEntries feeds the PTX entry parser arbitrary module text (PTX comes from hosts and
// NVRTC): it must return entries or an error wrapping ErrInvalidLaunch, never panic, and every
// entry it returns must have a name.
func FuzzParseEntries(f *testing.F) {
	f.Add(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p, .param .f32 a)\n{ ret; }\n")
	f.Add(".version 7.8 .entry a() {} .entry b(.param .align 8 .b8 s[16]) {}")
	f.Add("// .version 1.0\n/* .entry x( */")
	f.Add("\x00\xff")
	f.Fuzz(func(t *testing.T, text string) {
		entries, bad, err := ep.ParseEntries(text)
		if err != nil {
			if !errors.Is(err, ep.ErrInvalidLaunch) {
				t.Fatalf("error %v does not wrap ErrInvalidLaunch", err)
			}
			return
		}
		if len(entries) == 0 {
			t.Fatal("success with no entries")
		}
		for name, params := range entries {
			if name == "" {
				t.Fatal("an entry with no name")
			}
			if why, ok := bad[name]; ok && (why == "" || params != nil) {
				t.Fatalf("entry %q: bad %q with params %v", name, why, params)
			}
		}
	})
}

// FuzzOptionValue sets arbitrary values on every option key (options come from hosts as
// strings): Set either accepts the value, and then Get returns a value Set accepts again, or
// refuses it with an *OptionError naming the key; it never panics.
func FuzzOptionValue(f *testing.F) {
	for _, v := range []string{"", "0", "1", "true", "auto", "sim", "-1", "18446744073709551616", "64MiB", "1e9", " 3 ", "spin", "block"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		for _, key := range ep.OptionKeys() {
			o := ep.DefaultOptions()
			err := o.Set(key, value)
			if err != nil {
				var oe *ep.OptionError
				if !errors.As(err, &oe) || oe.Key != key {
					t.Fatalf("Set(%q, %q): %v is not an *OptionError naming the key", key, value, err)
				}
				continue
			}
			got, err := o.Get(key)
			if err != nil {
				t.Fatalf("Get(%q) after Set: %v", key, err)
			}
			again := ep.DefaultOptions()
			if err := again.Set(key, got); err != nil {
				t.Fatalf("Set(%q, %q) accepted, but its Get value %q is refused: %v", key, value, got, err)
			}
			if strings.ContainsRune(got, 0) {
				t.Fatalf("Get(%q) returned a NUL byte", key)
			}
		}
	})
}
