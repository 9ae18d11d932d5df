/*
 * ort_rt.h - the ORT side of the test host: loading libonnxruntime.so.1 with dlopen, the
 * environment, registering libcudaep.so as a plugin EP library, creating sessions with or
 * without CudaEp, running them on host tensors and comparing the results.
 *
 * One ort_rt per process, made by rt_open and released by rt_close. Sessions and OrtValues made
 * through it may be used from several threads (ORT's Run is thread-safe on one session); the
 * ort_rt itself is only changed by rt_open, rt_register_ep, rt_unregister_ep and rt_close, which
 * must not race with anything.
 *
 * Every ORT error the host meets is printed ("ORT error in <what>: [CODE] message") so a reader
 * of the test log sees the EP's own words.
 */
#ifndef CUDAEP_CTESTS_ORT_RT_H
#define CUDAEP_CTESTS_ORT_RT_H

#include <stddef.h>
#include <stdint.h>

#include "cudaep.h"
#include "onnx_pb.h"
#include "ort_host_api.h"

#define RT_EP_NAME "CudaEp"
#define RT_EP_VENDOR "cudaep"
#define RT_EP_VENDOR_ID 0x10DEu
#define RT_EP_REGISTRATION "cudaep"
/* The simulated device's hardware vendor (capi/ort SimulatedVendor), and the variable that asks
 * for it when the library is registered (capi/ort EnvBackend). */
#define RT_SIM_VENDOR "cudaep simulator"
#define RT_BACKEND_ENV "CUDAEP_BACKEND"
#define RT_MAX_DEVICES 16
#define RT_MAX_OPTIONS 16
#define RT_MAX_IO 64

/* The config key that makes session creation fail when a node would land on ORT's CPU EP. */
#define RT_DISABLE_CPU_FALLBACK "session.disable_cpu_ep_fallback"
/* Since API 24: record which EP got which nodes (rt_print_assignment). */
#define RT_RECORD_ASSIGNMENT "session.record_ep_graph_assignment_info"

typedef struct ort_rt {
  void* lib;                       /* dlopen handle of libonnxruntime.so.1 */
  const OrtApiBase* base;
  const OrtApi* api;
  uint32_t api_version;            /* 24, or 23 on an older host */
  const char* version;             /* ORT's version string */
  OrtEnv* env;
  OrtMemoryInfo* cpu_mem;
  OrtAllocator* alloc;             /* ORT's default CPU allocator (not owned) */
  int ep_mode;                     /* 1: sessions get CudaEp appended (rt_register_ep succeeded) */
  int registered;                  /* the library is registered right now */
  const char* ep_path;
  CudaEpStatus* (*ort_stats)(CudaEpOrtStats*); /* CudaEpGetOrtStats of the EP library (ep_mode) */
  const OrtEpDevice* devices[RT_MAX_DEVICES]; /* the CudaEp devices of GetEpDevices (env-owned) */
  size_t num_devices;
} ort_rt;

/* An ORT error taken out of an OrtStatus (which is released). */
typedef struct rt_error {
  int failed;                      /* 0: the call succeeded */
  int code;                        /* OrtErrorCode */
  char msg[2048];
} rt_error;

/* How to make a session. Zero-initialise, then fill. */
typedef struct rt_session_opts {
  int with_ep;                     /* append a CudaEp device (only in ep_mode) */
  size_t device_index;             /* with_ep: which one, an index into rt->devices (0: the first);
                                      CudaEp runs a session on one device */
  int disable_cpu_fallback;        /* RT_DISABLE_CPU_FALLBACK = "1" */
  int record_assignment;           /* RT_RECORD_ASSIGNMENT = "1" (ignored below API 24) */
  int log_info;                    /* the session logs at INFO (SetSessionLogSeverityLevel) */
  int opt_level;                   /* 0: ORT's default; otherwise a GraphOptimizationLevel + 1 */
  int intra_threads;               /* 0: ORT's default */
  size_t num_ep_options;           /* options for SessionOptionsAppendExecutionProvider_V2 */
  const char* ep_keys[RT_MAX_OPTIONS];
  const char* ep_values[RT_MAX_OPTIONS];
  size_t num_config;               /* raw session config entries (AddSessionConfigEntry) */
  const char* config_keys[RT_MAX_OPTIONS];
  const char* config_values[RT_MAX_OPTIONS];
} rt_session_opts;

/* A session with its input and output names (copied out of ORT). */
typedef struct rt_session {
  OrtSession* session;
  size_t num_inputs, num_outputs;
  char* input_names[RT_MAX_IO];
  char* output_names[RT_MAX_IO];
} rt_session;

/* rt_error_code_name names an OrtErrorCode ("EP_FAIL"). */
const char* rt_error_code_name(int code);

/* rt_take turns a status into *e (and releases it); it prints the error, prefixed with `what`,
 * unless quiet. Returns 0 for success, -1 for an error. */
int rt_take(ort_rt* rt, OrtStatus* st, const char* what, rt_error* e, int quiet);

/* rt_check is rt_take without keeping the error: 0 or -1, the error printed. */
int rt_check(ort_rt* rt, OrtStatus* st, const char* what);

/* rt_open loads ORT from `ort_path`, negotiates API 24 (else 23), creates the environment with
 * the host's logger (level from CUDAEP_ORT_LOG: verbose, info, warning (default), error, fatal)
 * and a CPU memory info. */
int rt_open(ort_rt* rt, const char* ort_path);

/* The host's logger prints ORT's log lines to stdout, among the host's own, and counts the ERROR
 * (or worse) lines that name CudaEp: ORT logs some EP failures and carries on without the EP (a
 * GetCapability that returns an error, for one), which only the log shows. rt_log_mark returns the count so far;
 * rt_log_ep_errors_since returns how many came after `mark` and copies the last one into buf. */
unsigned long rt_log_mark(void);
/* rt_log_set_print_level: print only ORT log lines of this severity or worse (counting goes on). */
void rt_log_set_print_level(OrtLoggingLevel level);
unsigned long rt_log_ep_errors_since(unsigned long mark, char* buf, size_t cap);

/* rt_log_find: how many messages logged since rt_log_mark() contained needle (the latest of
 * them copied into buf when buf is not NULL). Watches one needle at a time: set it with
 * rt_log_watch before the messages are logged. */
void rt_log_watch(const char* needle);
unsigned long rt_log_found(char* buf, size_t cap);

/* rt_register_ep registers `ep_path` under RT_EP_REGISTRATION, then fills rt->devices with the
 * CudaEp devices GetEpDevices lists and sets ep_mode. It first checks that the file exports
 * CreateEpFactories, so a library without the ORT entry points fails with a plain message. */
int rt_register_ep(ort_rt* rt, const char* ep_path);

/* rt_ep_stats reads CudaEp's ORT adapter counters (CudaEpGetOrtStats, looked up in the library
 * rt_register_ep loaded): 0 on success, -1 (printed) when the library is not registered or the
 * call fails. */
int rt_ep_stats(ort_rt* rt, CudaEpOrtStats* out);

/* rt_unregister_ep unregisters the library; the error, if any, goes to *e. */
int rt_unregister_ep(ort_rt* rt, rt_error* e);

/* rt_refresh_devices re-reads GetEpDevices into rt->devices; returns how many CudaEp devices. */
int rt_refresh_devices(ort_rt* rt);

/* rt_print_devices prints every EP device of the environment with its metadata. */
void rt_print_devices(ort_rt* rt);

void rt_close(ort_rt* rt);

/* rt_session_create creates a session for the model file `path` (so external data resolves
 * relative to it). On failure *e holds ORT's error (printed unless quiet) and s is zeroed. */
int rt_session_create(ort_rt* rt, const char* path, const rt_session_opts* o, rt_session* s, rt_error* e, int quiet);

void rt_session_release(ort_rt* rt, rt_session* s);

/* rt_input_index returns the index of the session's input named name, or -1. */
int rt_input_index(const rt_session* s, const char* name);

/* rt_run feeds inputs[i] (host tensors, in session input order; names from the session) and
 * copies every output into outs[0..num_outputs) (host_tensor_free each). Thread-safe. */
int rt_run(ort_rt* rt, rt_session* s, host_tensor* inputs, size_t n_inputs, host_tensor* outs, rt_error* e, int quiet);

/* rt_print_assignment prints which EP got which nodes (needs record_assignment and API 24).
 * The counts of nodes and subgraphs on CudaEp and on other EPs go to the out-parameters (any may
 * be NULL); `cudaep_ops` (if not NULL) gets the space-separated op types on CudaEp, and
 * `other_ops` those elsewhere. Returns 0, 1 when the API is not available, -1 on error. */
int rt_print_assignment(ort_rt* rt, rt_session* s, int quiet, size_t* ep_nodes, size_t* ep_subgraphs,
                        size_t* other_nodes, char* cudaep_ops, size_t cudaep_ops_cap, char* other_ops,
                        size_t other_ops_cap);

/* compare_tensors checks got against want: same type and shape; floats within
 * |got - want| <= atol + rtol * |want| (NaN equals NaN), other types bit-exact. On a mismatch it
 * writes the first bad element and the worst error to `why` and returns -1. */
int compare_tensors(const host_tensor* got, const host_tensor* want, double rtol, double atol, char* why, size_t cap);

/* textf is snprintf for messages that may be cut short (always NUL-terminated). */
void textf(char* buf, size_t cap, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

/* fill_random fills a float tensor from a seeded generator with values in [-scale, scale). */
void fill_random(host_tensor* t, uint64_t seed, float scale);

#endif /* CUDAEP_CTESTS_ORT_RT_H */
