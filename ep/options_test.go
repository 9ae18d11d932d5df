package ep_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

func TestDefaultOptions(t *testing.T) {
	o := ep.DefaultOptions()
	assert.Equal(t, "cuda", o.Backend)
	assert.Equal(t, 0, o.DeviceID)
	assert.False(t, o.TF32)
	assert.Equal(t, uint64(512<<20), o.StagingPoolCapBytes)
	assert.Equal(t, uint64(0), o.ResidencyBudgetBytes)
	assert.False(t, o.PrefillDoubleBuffer)
	assert.Equal(t, "auto", o.WaitMode)
	assert.Equal(t, "auto", o.PagingPath)
	assert.Equal(t, uint64(0), o.RegisterCapBytes)
	assert.Equal(t, uint64(0), o.ResidencySlotBytes)
	assert.NoError(t, o.Validate())
}

func TestOptionKeys(t *testing.T) {
	keys := ep.OptionKeys()
	assert.Equal(t, []string{
		"backend", "device_id", "tf32",
		"staging_pool_cap_bytes", "residency_budget_bytes", "prefill_double_buffer", "wait_mode",
		"paging_path", "register_cap_bytes", "residency_slot_bytes",
	}, keys)
	keys[0] = "changed"
	assert.Equal(t, "backend", ep.OptionKeys()[0], "OptionKeys must return a fresh slice")
}

func TestOptionsSetAccepts(t *testing.T) {
	tests := []struct {
		key, value string
		check      func(t *testing.T, o ep.Options)
	}{
		{"backend", "sim", func(t *testing.T, o ep.Options) { assert.Equal(t, "sim", o.Backend) }},
		{"backend", "auto", func(t *testing.T, o ep.Options) { assert.Equal(t, "auto", o.Backend) }},
		{"backend", "cuda", func(t *testing.T, o ep.Options) { assert.Equal(t, "cuda", o.Backend) }},
		{"device_id", "3", func(t *testing.T, o ep.Options) { assert.Equal(t, 3, o.DeviceID) }},
		{"device_id", "2147483647", func(t *testing.T, o ep.Options) { assert.Equal(t, 2147483647, o.DeviceID) }},
		{"tf32", "true", func(t *testing.T, o ep.Options) { assert.True(t, o.TF32) }},
		{"tf32", "1", func(t *testing.T, o ep.Options) { assert.True(t, o.TF32) }},
		{"prefill_double_buffer", "1", func(t *testing.T, o ep.Options) { assert.True(t, o.PrefillDoubleBuffer) }},
		{"staging_pool_cap_bytes", "123456789", func(t *testing.T, o ep.Options) {
			assert.Equal(t, uint64(123456789), o.StagingPoolCapBytes)
		}},
		{"staging_pool_cap_bytes", "3KiB", func(t *testing.T, o ep.Options) { assert.Equal(t, uint64(3<<10), o.StagingPoolCapBytes) }},
		{"staging_pool_cap_bytes", "256MiB", func(t *testing.T, o ep.Options) { assert.Equal(t, uint64(256<<20), o.StagingPoolCapBytes) }},
		{"residency_budget_bytes", "7GiB", func(t *testing.T, o ep.Options) { assert.Equal(t, uint64(7<<30), o.ResidencyBudgetBytes) }},
		{"residency_budget_bytes", "2TiB", func(t *testing.T, o ep.Options) { assert.Equal(t, uint64(2<<40), o.ResidencyBudgetBytes) }},
		{"residency_budget_bytes", "18446744073709551615", func(t *testing.T, o ep.Options) {
			assert.Equal(t, uint64(18446744073709551615), o.ResidencyBudgetBytes)
		}},
		{"wait_mode", "spin", func(t *testing.T, o ep.Options) { assert.Equal(t, "spin", o.WaitMode) }},
		{"wait_mode", "block", func(t *testing.T, o ep.Options) { assert.Equal(t, "block", o.WaitMode) }},
		{"wait_mode", "auto", func(t *testing.T, o ep.Options) { assert.Equal(t, "auto", o.WaitMode) }},
		{"paging_path", "zero_copy", func(t *testing.T, o ep.Options) { assert.Equal(t, "zero_copy", o.PagingPath) }},
		{"paging_path", "staging", func(t *testing.T, o ep.Options) { assert.Equal(t, "staging", o.PagingPath) }},
		{"paging_path", "auto", func(t *testing.T, o ep.Options) { assert.Equal(t, "auto", o.PagingPath) }},
		{"register_cap_bytes", "24GiB", func(t *testing.T, o ep.Options) { assert.Equal(t, uint64(24<<30), o.RegisterCapBytes) }},
		{"register_cap_bytes", "0", func(t *testing.T, o ep.Options) { assert.Equal(t, uint64(0), o.RegisterCapBytes) }},
		{"residency_slot_bytes", "64MiB", func(t *testing.T, o ep.Options) { assert.Equal(t, uint64(64<<20), o.ResidencySlotBytes) }},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			o := ep.DefaultOptions()
			require.NoError(t, o.Set(tt.key, tt.value))
			tt.check(t, o)
			assert.NoError(t, o.Validate())
		})
	}
}

// TestOptionsSetFalseClears sets a bool on and then off, so that "false"/"0" are seen to store.
func TestOptionsSetFalseClears(t *testing.T) {
	for _, key := range []string{"tf32", "prefill_double_buffer"} {
		for _, off := range []string{"false", "0"} {
			o := ep.DefaultOptions()
			require.NoError(t, o.Set(key, "true"))
			require.NoError(t, o.Set(key, off))
			assert.False(t, o.TF32 || o.PrefillDoubleBuffer, "%s=%s", key, off)
		}
	}
	o := ep.DefaultOptions()
	require.NoError(t, o.Set("residency_budget_bytes", "1MiB"))
	require.NoError(t, o.Set("residency_budget_bytes", "0"))
	assert.Equal(t, uint64(0), o.ResidencyBudgetBytes)
}

func TestOptionsSetRejects(t *testing.T) {
	tests := []struct {
		key, value string
		allowed    string // a fragment the message must carry
	}{
		{"backend", "", "cuda, sim or auto"},
		{"backend", "CUDA", "cuda, sim or auto"},
		{"backend", "gpu", "cuda, sim or auto"},
		{"backend", " sim", "cuda, sim or auto"},
		{"device_id", "-1", "0..2147483647"},
		{"device_id", "2147483648", "0..2147483647"},
		{"device_id", "one", "0..2147483647"},
		{"device_id", "", "0..2147483647"},
		{"device_id", "+1", "0..2147483647"},
		{"tf32", "yes", "true, false, 1 or 0"},
		{"tf32", "TRUE", "true, false, 1 or 0"},
		{"tf32", "", "true, false, 1 or 0"},
		{"prefill_double_buffer", "on", "true, false, 1 or 0"},
		{"staging_pool_cap_bytes", "0", "greater than 0"},
		{"staging_pool_cap_bytes", "0MiB", "greater than 0"},
		{"staging_pool_cap_bytes", "-5", "KiB, MiB, GiB or TiB"},
		{"staging_pool_cap_bytes", "+5", "KiB, MiB, GiB or TiB"},
		{"staging_pool_cap_bytes", "12MB", "KiB, MiB, GiB or TiB"},
		{"staging_pool_cap_bytes", "MiB", "KiB, MiB, GiB or TiB"},
		{"residency_budget_bytes", "18446744073709551616", "0 = no budget"},
		{"residency_budget_bytes", "17179869184GiB", "0 = no budget"},
		{"residency_budget_bytes", "1.5GiB", "0 = no budget"},
		{"residency_budget_bytes", " 1", "0 = no budget"},
		{"wait_mode", "", "spin, block or auto"},
		{"wait_mode", "poll", "spin, block or auto"},
		{"wait_mode", "Spin", "spin, block or auto"},
		{"wait_mode", "spin ", "spin, block or auto"},
		{"paging_path", "", "auto, zero_copy or staging"},
		{"paging_path", "zero-copy", "auto, zero_copy or staging"},
		{"paging_path", "Auto", "auto, zero_copy or staging"},
		{"register_cap_bytes", "-1", "0 = a quarter of physical memory"},
		{"register_cap_bytes", "4GB", "0 = a quarter of physical memory"},
		{"residency_slot_bytes", "64 MiB", "0 = sized by the first routed layer"},
		{"residency_slot_bytes", "18446744073709551616", "0 = sized by the first routed layer"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			o := ep.DefaultOptions()
			require.NoError(t, o.Set(ep.OptionTF32, "1"), "a distinct non-default field to see o is unchanged")
			before := o
			err := o.Set(tt.key, tt.value)
			require.Error(t, err)
			var oe *ep.OptionError
			require.True(t, errors.As(err, &oe))
			assert.False(t, oe.Unknown)
			assert.Equal(t, tt.key, oe.Key)
			assert.Equal(t, tt.value, oe.Value)
			assert.Contains(t, err.Error(), `"`+tt.key+`"`)
			assert.Contains(t, err.Error(), tt.allowed)
			assert.Equal(t, before, o, "a rejected Set must leave the options unchanged")
		})
	}
}

func TestOptionsSetUnknownKeyListsKnownKeys(t *testing.T) {
	for _, key := range []string{"devcie_id", "", "Backend", "backend "} {
		o := ep.DefaultOptions()
		err := o.Set(key, "1")
		require.Error(t, err, "key %q", key)
		var oe *ep.OptionError
		require.True(t, errors.As(err, &oe))
		assert.True(t, oe.Unknown)
		assert.Contains(t, err.Error(), "unknown option")
		assert.Contains(t, err.Error(), strings.Join(ep.OptionKeys(), ", "))
		assert.Equal(t, ep.DefaultOptions(), o)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(o *ep.Options)
		key    string // "" when valid
	}{
		{"defaults", func(o *ep.Options) {}, ""},
		{"zero value backend", func(o *ep.Options) { o.Backend = "" }, "backend"},
		{"unknown backend", func(o *ep.Options) { o.Backend = "rocm" }, "backend"},
		{"negative device", func(o *ep.Options) { o.DeviceID = -2 }, "device_id"},
		{"zero staging cap", func(o *ep.Options) { o.StagingPoolCapBytes = 0 }, "staging_pool_cap_bytes"},
		{"unknown wait mode", func(o *ep.Options) { o.WaitMode = "busy" }, "wait_mode"},
		{"zero value wait mode is auto", func(o *ep.Options) { o.WaitMode = "" }, ""},
		{"unknown paging path", func(o *ep.Options) { o.PagingPath = "dma" }, "paging_path"},
		{"zero value paging path is auto", func(o *ep.Options) { o.PagingPath = "" }, ""},
		{"everything set", func(o *ep.Options) {
			*o = ep.Options{Backend: "auto", DeviceID: 7, TF32: true, StagingPoolCapBytes: 1,
				ResidencyBudgetBytes: 99, PrefillDoubleBuffer: true}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ep.DefaultOptions()
			tt.mutate(&o)
			err := o.Validate()
			if tt.key == "" {
				assert.NoError(t, err)
				return
			}
			var oe *ep.OptionError
			require.True(t, errors.As(err, &oe), "got %v", err)
			assert.Equal(t, tt.key, oe.Key)
		})
	}
}

func TestOptionsStringRoundTrips(t *testing.T) {
	want := ep.Options{Backend: "sim", DeviceID: 5, TF32: true, StagingPoolCapBytes: 3 << 20,
		ResidencyBudgetBytes: 1234567, PrefillDoubleBuffer: true, WaitMode: "block",
		PagingPath: "staging", RegisterCapBytes: 5 << 20, ResidencySlotBytes: 4096}
	s := want.String()
	assert.Equal(t, "backend=sim device_id=5 tf32=true staging_pool_cap_bytes=3145728 "+
		"residency_budget_bytes=1234567 prefill_double_buffer=true wait_mode=block "+
		"paging_path=staging register_cap_bytes=5242880 residency_slot_bytes=4096", s)

	got := ep.DefaultOptions()
	for _, kv := range strings.Fields(s) {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok)
		require.NoError(t, got.Set(k, v))
	}
	assert.Equal(t, want, got)

	// The zero WaitMode of an Options built in Go reads, prints and validates as auto.
	zero := ep.Options{Backend: "sim", StagingPoolCapBytes: 1}
	require.NoError(t, zero.Validate())
	assert.Contains(t, zero.String(), "wait_mode=auto")
	v, err := zero.Get("wait_mode")
	require.NoError(t, err)
	assert.Equal(t, "auto", v)
	v, err = zero.Get("paging_path")
	require.NoError(t, err)
	assert.Equal(t, "auto", v, "the zero PagingPath reads as auto")
}

func TestOptionsGet(t *testing.T) {
	o := ep.DefaultOptions()
	require.NoError(t, o.Set("staging_pool_cap_bytes", "2MiB"))
	require.NoError(t, o.Set("tf32", "1"))
	tests := map[string]string{
		"backend": "cuda", "device_id": "0", "tf32": "true",
		"staging_pool_cap_bytes": "2097152", "residency_budget_bytes": "0",
		"prefill_double_buffer": "false", "wait_mode": "auto",
	}
	for key, want := range tests {
		got, err := o.Get(key)
		require.NoError(t, err, key)
		assert.Equal(t, want, got, key)
	}
	_, err := o.Get("nope")
	var oe *ep.OptionError
	require.True(t, errors.As(err, &oe))
	assert.True(t, oe.Unknown)
	assert.Contains(t, err.Error(), "known options: backend, device_id")
}
