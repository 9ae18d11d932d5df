package ort

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/partition"
)

// optionPrefix starts every session config key of the EP.
const optionPrefix = "ep.cudaep."

// sessionOptions are the EP's options for one session, from the session config entries
// "ep.cudaep.<key>" (the EP device's defaults, overridden by the user's): the provider's, and
// how its partitions run (enable_cuda_graph, paging, weight_budget_bytes, fusion; see
// partition.Options).
type sessionOptions struct {
	provider  ep.Options
	partition partition.Options
}

// optionKeys documents the keys, for error messages.
var optionKeys = []string{"backend", "device_id", "enable_cuda_graph", "paging", "weight_budget_bytes", "tf32", "fusion"}

// parseOptions reads the EP's keys from a session's config entries. Unknown keys and bad
// values are errors naming them.
func parseOptions(entries map[string]string) (sessionOptions, error) {
	o := sessionOptions{provider: ep.DefaultOptions(),
		partition: partition.Options{Paging: partition.PagingAuto, Fusion: true, KeyPrefix: optionPrefix}}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		if strings.HasPrefix(k, optionPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, full := range keys {
		key, value := strings.TrimPrefix(full, optionPrefix), entries[full]
		bad := func(allowed string) error {
			return fmt.Errorf("%w: session option %s=%q: expected %s", errInvalid, full, value, allowed)
		}
		switch key {
		case "backend", "device_id", "tf32":
			if key == "tf32" && (value == "0" || value == "1") {
				value = strconv.FormatBool(value == "1")
			}
			if err := o.provider.Set(key, value); err != nil {
				return o, fmt.Errorf("%w: session option %s: %w", errInvalid, full, err)
			}
		case "enable_cuda_graph":
			switch value {
			case "0", "false":
				o.partition.CUDAGraph = false
			case "1", "true":
				o.partition.CUDAGraph = true
			default:
				return o, bad("0 or 1")
			}
		case "paging":
			switch value {
			case "auto", "on", "off":
				o.partition.Paging = partition.PagingMode(value)
			default:
				return o, bad("auto, on or off")
			}
		case "fusion":
			switch value {
			case "on":
				o.partition.Fusion = true
			case "off":
				o.partition.Fusion = false
			default:
				return o, bad("on or off")
			}
		case "weight_budget_bytes":
			n, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				return o, bad("a byte count")
			}
			o.partition.WeightBudget = n
		default:
			return o, fmt.Errorf("%w: unknown session option %s (the keys are %s, prefixed %s)", errInvalid, full,
				strings.Join(optionKeys, ", "), optionPrefix)
		}
	}
	return o, o.provider.Validate()
}

// session is one OrtEp: the provider a session runs its partitions on, and the partition
// session they share (its stream, its capture lock).
type session struct {
	opts   sessionOptions
	p      *ep.Provider
	ps     *partition.Session
	logger *C.OrtLogger // the session's logger from CreateEp: ORT keeps it valid while the OrtEp lives
}

func (s *session) close() error {
	live.mu.Lock()
	delete(live.sessions, s)
	live.mu.Unlock()
	return s.p.Close()
}

// logEnabled reports whether the session's logger prints messages of level (an
// OrtLoggingLevel), so that callers build messages only when they will be seen.
func (s *session) logEnabled(level C.OrtLoggingLevel) bool {
	return s.logger != nil && C.cudaep_ort_log_enabled(s.logger, level) != 0
}

// log writes msg to the session's logger at level (ORT drops it below the session's
// severity); a session without a logger logs nothing.
func (s *session) log(level C.OrtLoggingLevel, msg string) {
	if s.logger == nil {
		return
	}
	c := C.CString(msg)
	defer C.free(unsafe.Pointer(c))
	C.cudaep_ort_log(s.logger, level, c)
}

// sessionEntries merges a session's config entries with its device's metadata: the device's
// ordinal is the default device_id (the session's entries, which include the EP device's
// options and the user's, override it), and its backend is the session's backend: a session
// entry naming another backend is refused, since the session would run elsewhere than on the
// device ORT assigned (a GPU session on the simulator, or the reverse).
func sessionEntries(meta, config map[string]string) (map[string]string, error) {
	entries := map[string]string{}
	if o := meta["cuda_ordinal"]; o != "" {
		entries[optionPrefix+"device_id"] = o
	}
	for k, v := range config {
		entries[k] = v
	}
	if b := meta["backend"]; b != "" {
		key := optionPrefix + "backend"
		if v, set := config[key]; set && v != b {
			return nil, fmt.Errorf("%w: session option %s=%q contradicts the session's device, which is a %s device "+
				"(%s chooses the devices CudaEp lists when the library is registered); drop the option",
				errInvalid, key, v, b, EnvBackend)
		}
		entries[key] = b
	}
	return entries, nil
}

// cudaepOrtCreateEp creates the provider of a session from its config entries.
//
//export cudaepOrtCreateEp
func cudaepOrtCreateEp(f *C.CudaEpOrtFactory, metadata **C.OrtKeyValuePairs, numDevices C.size_t,
	so *C.OrtSessionOptions, logger *C.OrtLogger, out **C.OrtEp) (st *C.OrtStatus) {
	defer recoverInto(&st)
	if numDevices != 1 {
		return statusOf(fmt.Errorf("%w: a CudaEp session runs on one device, %d were given", errInvalid, int(numDevices)))
	}
	var meta map[string]string
	if metadata != nil && *metadata != nil {
		meta = kvMap(*metadata)
	}
	var kv *C.OrtKeyValuePairs
	if err := errorOf(C.cudaep_ort_session_config(so, &kv), "read the session options"); err != nil {
		return statusOf(err)
	}
	entries, err := sessionEntries(meta, kvMap(kv))
	C.cudaep_ort_kv_release(kv)
	if err != nil {
		return statusOf(err)
	}
	opts, err := parseOptions(entries)
	if err != nil {
		return statusOf(err)
	}
	p, err := ep.New(opts.provider)
	if err != nil {
		return statusOf(err)
	}
	s := &session{opts: opts, p: p, logger: logger}
	info := func(msg string) { s.log(C.ORT_LOGGING_LEVEL_INFO, EPName+" "+msg) }
	if s.ps, err = partition.NewSession(p, opts.partition, &ortMemory.index, info); err != nil {
		_ = p.Close()
		return statusOf(err)
	}
	live.mu.Lock()
	live.sessions[s] = struct{}{}
	live.mu.Unlock()
	h, err := epTable.Insert(s)
	if err != nil {
		_ = s.close()
		return statusOf(err)
	}
	e := C.cudaep_ort_new_ep(C.uint64_t(h))
	if e == nil {
		_ = epTable.Remove(h)
		return statusOf(fmt.Errorf("cudaep: out of host memory"))
	}
	*out = &e.ep
	return nil
}

// cudaepOrtRunEnd is the session's OnRunEnd: it fails the run with the bad device data a
// kernel of the session met, when the run's waits (its stream's OnSessionRunEnd, a copy of an
// output to the host) have not reported it already. It waits for nothing: with sync_stream
// false ORT does not want a wait, and with it true ORT has had the session's stream
// synchronized by then; a fault of work still running is reported by the next wait.
//
//export cudaepOrtRunEnd
func cudaepOrtRunEnd(e *C.CudaEpOrtEp) (st *C.OrtStatus) {
	defer recoverInto(&st)
	s, err := epTable.Get(handles.Handle(e.handle))
	if err != nil {
		return statusOf(err)
	}
	return statusOf(s.p.TakeDataFault())
}

// cudaepOrtReleaseEp closes the session's provider once its partitions are gone.
//
//export cudaepOrtReleaseEp
func cudaepOrtReleaseEp(e *C.CudaEpOrtEp) {
	defer recoverQuietly()
	if e == nil {
		return
	}
	_ = epTable.Remove(handles.Handle(e.handle))
	C.cudaep_ort_free(unsafe.Pointer(e))
}
