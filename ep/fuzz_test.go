package ep_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cudaep/cudaep/ep"
)

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
