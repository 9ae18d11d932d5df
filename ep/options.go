package ep

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Options configures a [Provider]. It is a plain value: copy it freely, change fields directly
// from Go, or set them by name with [Options.Set] the way a C or Python host does (ORT-style
// key/value provider options). Start from [DefaultOptions]; the zero Options is not the
// default (its Backend is empty).
//
// # Keys
//
// Every field has one key, listed by [OptionKeys]:
//
//	key                      field                 values                           default
//	backend                  Backend               cuda | sim | auto                cuda
//	device_id                DeviceID              integer 0..2147483647            0
//	tf32                     TF32                  true | false | 1 | 0             false
//	staging_pool_cap_bytes   StagingPoolCapBytes   bytes > 0, e.g. 536870912, 512MiB 512 MiB
//	residency_budget_bytes   ResidencyBudgetBytes  bytes, 0 = no budget, e.g. 8GiB  0
//	prefill_double_buffer    PrefillDoubleBuffer   true | false | 1 | 0             false
//	wait_mode                WaitMode              spin | block | auto              auto
//	paging_path              PagingPath            auto | zero_copy | staging       auto
//	register_cap_bytes       RegisterCapBytes      bytes, 0 = a quarter of RAM      0
//	residency_slot_bytes     ResidencySlotBytes    bytes, 0 = first routed layer    0
//
// Byte counts are decimal integers with an optional binary suffix KiB, MiB, GiB or TiB
// (512MiB = 536870912). Keys and values are case-sensitive and take no surrounding spaces.
//
// # Notes
//
// Options carries no lock: a single Options must not be changed from two goroutines at once.
// A Provider copies its Options when created, so changing them afterwards has no effect on it.
type Options struct {
	// Backend chooses the device implementation: "cuda" (the real driver; creating a provider
	// fails with a clear error when no CUDA driver or device is usable), "sim" (the pure-Go
	// simulated device) or "auto" (cuda when a device is usable, sim otherwise; the provider
	// reports which one it chose and why). The default is "cuda": a library never lands on the
	// simulator silently.
	Backend string

	// DeviceID is the CUDA device ordinal the provider runs on. Creating a provider with an
	// ordinal at or beyond the device count fails with an error naming the count.
	DeviceID int

	// TF32 allows cuBLAS to use TF32 tensor-core math for fp32 GEMMs (about 8× the fp32 rate on
	// an H200, with a 10-bit mantissa in the products). Off by default: results are then
	// bit-for-bit fp32.
	TF32 bool

	// StagingPoolCapBytes caps the bytes the pinned host staging pool retains for prefill
	// weight paging. A layer that cannot have two staging buffers retained at once under this
	// cap is declined (routed to the ordinary path) before anything is reserved. Default
	// 512 MiB; it must be greater than zero.
	StagingPoolCapBytes uint64

	// ResidencyBudgetBytes caps the device bytes that paged weights may keep resident. Zero
	// (the default) means no budget: residency is limited only by device memory.
	ResidencyBudgetBytes uint64

	// PrefillDoubleBuffer turns on streaming of layer weights one layer ahead of compute
	// through the two-slot double buffer during prefill. Off by default.
	PrefillDoubleBuffer bool

	// WaitMode chooses how SynchronizeCompute (the wait after a replayed step) waits for the
	// compute stream: "spin" queues a write of a sequence number into a host-mapped pinned
	// word behind the stream's work and spins on the word, falling back to the driver's
	// stream synchronization after a bounded spin; "block" calls the driver's stream
	// synchronization (cuStreamSynchronize) alone; "auto", the default, is spin where the
	// device can write such a word from a stream, else block (Provider.WaitMode says which
	// it chose, and why). With "spin", creating a provider fails when the device cannot. The
	// empty string, a Go Options' zero value, means auto; Set refuses it.
	WaitMode string

	// PagingPath chooses how paged weights travel from their external-data files to the
	// device: "auto", the default, copies from the files' pages registered with the driver
	// (kept registered across prefills, see RegisterCapBytes) and stages through pinned
	// memory what it cannot register, reporting each such layer's reason; "zero_copy" copies
	// from registered pages only (a layer that cannot be registered fails its fill);
	// "staging" always copies through pinned staging memory and registers nothing. With
	// auto or zero_copy and the prefill double buffer on, OpenExternalData registers the
	// file when it opens it, so that no prefill pays for registering. The empty string, a Go
	// Options' zero value, means auto; Set refuses it.
	PagingPath string

	// RegisterCapBytes caps the bytes of external-data files kept registered with the driver
	// (page-locked) at once. A file larger than the cap pages through a sliding window of
	// registrations (the idle ones used longest ago are undone first); a layer that cannot be
	// registered under it is staged. Zero (the default) sizes it to the machine: a quarter of
	// physical memory.
	RegisterCapBytes uint64

	// ResidencySlotBytes sizes the residency's two double-buffer slots and has the provider
	// reserve them (device buffers, events and staging buffers) when it is created, with the
	// prefill double buffer on, so that the first prefill sets nothing up; a layer larger
	// than the slots is declined oversize. Zero (the default) builds the pipeline at the first
	// routed layer, sized by it. It must not exceed half of ResidencyBudgetBytes when a budget
	// is set, and two staging buffers of its size must fit StagingPoolCapBytes.
	ResidencySlotBytes uint64
}

// The option keys, as [Options.Set] accepts them.
const (
	OptionBackend              = "backend"
	OptionDeviceID             = "device_id"
	OptionTF32                 = "tf32"
	OptionStagingPoolCapBytes  = "staging_pool_cap_bytes"
	OptionResidencyBudgetBytes = "residency_budget_bytes"
	OptionPrefillDoubleBuffer  = "prefill_double_buffer"
	OptionWaitMode             = "wait_mode"
	OptionPagingPath           = "paging_path"
	OptionRegisterCapBytes     = "register_cap_bytes"
	OptionResidencySlotBytes   = "residency_slot_bytes"
)

// The values the paging_path option accepts.
const (
	PagingAuto     = "auto"
	PagingZeroCopy = "zero_copy"
	PagingStaging  = "staging"
)

// The values the wait_mode option accepts.
const (
	WaitSpin  = "spin"
	WaitBlock = "block"
	WaitAuto  = "auto"
)

// The values the backend option accepts.
const (
	BackendCUDA = "cuda"
	BackendSim  = "sim"
	BackendAuto = "auto"
)

// DefaultStagingPoolCapBytes is the default of [Options.StagingPoolCapBytes]: 512 MiB.
const DefaultStagingPoolCapBytes uint64 = 512 << 20

// DefaultOptions returns the documented defaults: backend cuda on device 0, TF32 off, a
// 512 MiB staging pool cap, no residency budget, prefill double buffering off, wait mode auto,
// paging path auto, the register cap sized to the machine, residency slots sized by the first
// routed layer.
func DefaultOptions() Options {
	return Options{
		Backend:             BackendCUDA,
		DeviceID:            0,
		StagingPoolCapBytes: DefaultStagingPoolCapBytes,
		WaitMode:            WaitAuto,
		PagingPath:          PagingAuto,
	}
}

// OptionKeys returns every key [Options.Set] accepts, in the documented order. The slice is
// new on each call; the caller may keep or change it.
func OptionKeys() []string {
	keys := make([]string, len(optionSpecs))
	for i, s := range optionSpecs {
		keys[i] = s.key
	}
	return keys
}

// Set parses value for the option named key and stores it in o.
//
// # Errors
//
// An unknown key returns an *[OptionError] whose message lists the known keys; a value that
// does not parse or is out of range returns one that names the key, the value and the values
// allowed. On error o is unchanged.
func (o *Options) Set(key, value string) error {
	spec, ok := lookupOption(key)
	if !ok {
		return &OptionError{Key: key, Value: value, Unknown: true}
	}
	return spec.set(o, value)
}

// Get returns the value of the option named key in the canonical form [Options.Set] accepts
// (byte counts as plain digits, booleans as true or false).
//
// # Errors
//
// An unknown key returns an *[OptionError] listing the known keys.
func (o Options) Get(key string) (string, error) {
	spec, ok := lookupOption(key)
	if !ok {
		return "", &OptionError{Key: key, Unknown: true}
	}
	return spec.get(o), nil
}

// Validate checks every field of o against the values [Options.Set] would accept, so that
// Options built field by field in Go get the same errors as options set by key. It returns
// the first problem as an *[OptionError], or nil.
func (o Options) Validate() error {
	for _, s := range optionSpecs {
		if err := s.check(o); err != nil {
			return err
		}
	}
	return nil
}

// String formats o as its key=value pairs in the documented order, separated by spaces, in a
// form that [Options.Set] reads back.
func (o Options) String() string {
	var b strings.Builder
	for i, s := range optionSpecs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.key)
		b.WriteByte('=')
		b.WriteString(s.get(o))
	}
	return b.String()
}

// OptionError is a rejected option: an unknown key, or a value outside what the key allows.
// Its message names the key and the allowed values (or, for an unknown key, lists the known
// keys).
type OptionError struct {
	Key     string // the key as given
	Value   string // the value as given (or as held by the field, from Validate)
	Unknown bool   // the key is not one of OptionKeys
	Allowed string // what the key accepts, in words; empty when Unknown
}

// Error formats e, for example
//
//	ep: option "device_id": invalid value "-1": allowed: an integer 0..2147483647
//	ep: unknown option "devcie_id": known options: backend, device_id, tf32, ...
func (e *OptionError) Error() string {
	if e.Unknown {
		return fmt.Sprintf("ep: unknown option %q: known options: %s",
			e.Key, strings.Join(OptionKeys(), ", "))
	}
	return fmt.Sprintf("ep: option %q: invalid value %q: allowed: %s", e.Key, e.Value, e.Allowed)
}

// optionSpec is one key: how to parse it into Options, check a field set directly, and print
// it back.
type optionSpec struct {
	key     string
	allowed string
	parse   func(o *Options, value string) bool // reports whether value was accepted
	get     func(o Options) string
}

func (s optionSpec) set(o *Options, value string) error {
	next := *o
	if !s.parse(&next, value) {
		return s.reject(value)
	}
	*o = next
	return nil
}

// check re-parses the field's printed form, which is how Validate reuses parse's rules.
func (s optionSpec) check(o Options) error {
	v := s.get(o)
	if !s.parse(&o, v) {
		return s.reject(v)
	}
	return nil
}

func (s optionSpec) reject(value string) error {
	return &OptionError{Key: s.key, Value: value, Allowed: s.allowed}
}

var optionSpecs = [...]optionSpec{
	{
		key:     OptionBackend,
		allowed: "cuda, sim or auto",
		parse: func(o *Options, v string) bool {
			switch v {
			case BackendCUDA, BackendSim, BackendAuto:
				o.Backend = v
				return true
			}
			return false
		},
		get: func(o Options) string { return o.Backend },
	},
	{
		key:     OptionDeviceID,
		allowed: "an integer 0.." + strconv.Itoa(math.MaxInt32),
		parse: func(o *Options, v string) bool {
			if !isDigits(v) {
				return false
			}
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return false
			}
			o.DeviceID = int(n)
			return true
		},
		get: func(o Options) string { return strconv.Itoa(o.DeviceID) },
	},
	{
		key:     OptionTF32,
		allowed: "true, false, 1 or 0",
		parse:   func(o *Options, v string) bool { return parseBool(v, &o.TF32) },
		get:     func(o Options) string { return strconv.FormatBool(o.TF32) },
	},
	{
		key:     OptionStagingPoolCapBytes,
		allowed: "a byte count greater than 0, as digits with an optional KiB, MiB, GiB or TiB suffix",
		parse: func(o *Options, v string) bool {
			n, ok := parseBytes(v)
			if !ok || n == 0 {
				return false
			}
			o.StagingPoolCapBytes = n
			return true
		},
		get: func(o Options) string { return strconv.FormatUint(o.StagingPoolCapBytes, 10) },
	},
	{
		key:     OptionResidencyBudgetBytes,
		allowed: "a byte count (0 = no budget), as digits with an optional KiB, MiB, GiB or TiB suffix",
		parse: func(o *Options, v string) bool {
			n, ok := parseBytes(v)
			if !ok {
				return false
			}
			o.ResidencyBudgetBytes = n
			return true
		},
		get: func(o Options) string { return strconv.FormatUint(o.ResidencyBudgetBytes, 10) },
	},
	{
		key:     OptionPrefillDoubleBuffer,
		allowed: "true, false, 1 or 0",
		parse:   func(o *Options, v string) bool { return parseBool(v, &o.PrefillDoubleBuffer) },
		get:     func(o Options) string { return strconv.FormatBool(o.PrefillDoubleBuffer) },
	},
	{
		key:     OptionWaitMode,
		allowed: "spin, block or auto",
		parse: func(o *Options, v string) bool {
			switch v {
			case WaitSpin, WaitBlock, WaitAuto:
				o.WaitMode = v
				return true
			}
			return false
		},
		get: func(o Options) string { return o.waitMode() },
	},
	{
		key:     OptionPagingPath,
		allowed: "auto, zero_copy or staging",
		parse: func(o *Options, v string) bool {
			switch v {
			case PagingAuto, PagingZeroCopy, PagingStaging:
				o.PagingPath = v
				return true
			}
			return false
		},
		get: func(o Options) string { return o.pagingPath() },
	},
	{
		key:     OptionRegisterCapBytes,
		allowed: "a byte count (0 = a quarter of physical memory), as digits with an optional KiB, MiB, GiB or TiB suffix",
		parse: func(o *Options, v string) bool {
			n, ok := parseBytes(v)
			if !ok {
				return false
			}
			o.RegisterCapBytes = n
			return true
		},
		get: func(o Options) string { return strconv.FormatUint(o.RegisterCapBytes, 10) },
	},
	{
		key:     OptionResidencySlotBytes,
		allowed: "a byte count (0 = sized by the first routed layer), as digits with an optional KiB, MiB, GiB or TiB suffix",
		parse: func(o *Options, v string) bool {
			n, ok := parseBytes(v)
			if !ok {
				return false
			}
			o.ResidencySlotBytes = n
			return true
		},
		get: func(o Options) string { return strconv.FormatUint(o.ResidencySlotBytes, 10) },
	},
}

// pagingPath is PagingPath with the zero value read as auto.
func (o Options) pagingPath() string {
	if o.PagingPath == "" {
		return PagingAuto
	}
	return o.PagingPath
}

// waitMode is WaitMode with the zero value read as auto.
func (o Options) waitMode() string {
	if o.WaitMode == "" {
		return WaitAuto
	}
	return o.WaitMode
}

func lookupOption(key string) (optionSpec, bool) {
	for _, s := range optionSpecs {
		if s.key == key {
			return s, true
		}
	}
	return optionSpec{}, false
}

// parseBool accepts exactly true, false, 1 and 0 (not strconv.ParseBool's T, FALSE, …), so
// that the documented set is the whole set.
func parseBool(v string, dst *bool) bool {
	switch v {
	case "true", "1":
		*dst = true
	case "false", "0":
		*dst = false
	default:
		return false
	}
	return true
}

var byteSuffixes = [...]struct {
	suffix string
	shift  uint
}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}}

// isDigits reports whether v is one or more ASCII digits: strconv alone would accept a sign.
func isDigits(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// parseBytes reads decimal digits with an optional binary suffix, refusing signs, spaces and
// anything that overflows uint64.
func parseBytes(v string) (uint64, bool) {
	var shift uint
	for _, s := range byteSuffixes {
		if strings.HasSuffix(v, s.suffix) {
			v, shift = strings.TrimSuffix(v, s.suffix), s.shift
			break
		}
	}
	if !isDigits(v) {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > math.MaxUint64>>shift {
		return 0, false
	}
	return n << shift, true
}
