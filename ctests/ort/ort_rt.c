/*
 * ort_rt.c - ORT loading, EP registration, sessions, runs and comparisons (see ort_rt.h).
 */
#define _GNU_SOURCE
#include "ort_rt.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define A(Name) ORT_API_FN(rt->api, Name)

void textf(char* buf, size_t cap, const char* fmt, ...) {
  if (!buf || !cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
}

/* --- errors ---------------------------------------------------------------------------------- */

const char* rt_error_code_name(int code) {
  static const char* const names[] = {"OK",           "FAIL",           "INVALID_ARGUMENT",
                                      "NO_SUCHFILE",  "NO_MODEL",       "ENGINE_ERROR",
                                      "RUNTIME_EXCEPTION", "INVALID_PROTOBUF", "MODEL_LOADED",
                                      "NOT_IMPLEMENTED", "INVALID_GRAPH", "EP_FAIL",
                                      "MODEL_LOAD_CANCELED", "MODEL_REQUIRES_COMPILATION", "NOT_FOUND"};
  if (code >= 0 && (size_t)code < sizeof names / sizeof names[0]) return names[code];
  return "UNKNOWN";
}

int rt_take(ort_rt* rt, OrtStatus* st, const char* what, rt_error* e, int quiet) {
  if (e) {
    e->failed = 0;
    e->code = 0;
    e->msg[0] = 0;
  }
  if (!st) return 0;
  int code = (int)A(GetErrorCode)(st);
  const char* msg = A(GetErrorMessage)(st);
  if (!msg) msg = "(no message)";
  if (!quiet) printf("    ORT error in %s: [%s] %s\n", what, rt_error_code_name(code), msg);
  if (e) {
    e->failed = 1;
    e->code = code;
    textf(e->msg, sizeof e->msg, "%s", msg);
  }
  A(ReleaseStatus)(st);
  return -1;
}

int rt_check(ort_rt* rt, OrtStatus* st, const char* what) { return rt_take(rt, st, what, NULL, 0); }

/* --- environment ----------------------------------------------------------------------------- */

static OrtLoggingLevel log_level_from_env(void) {
  const char* s = getenv("CUDAEP_ORT_LOG");
  if (!s || !*s) return ORT_LOGGING_LEVEL_WARNING;
  if (!strcmp(s, "verbose")) return ORT_LOGGING_LEVEL_VERBOSE;
  if (!strcmp(s, "info")) return ORT_LOGGING_LEVEL_INFO;
  if (!strcmp(s, "error")) return ORT_LOGGING_LEVEL_ERROR;
  if (!strcmp(s, "fatal")) return ORT_LOGGING_LEVEL_FATAL;
  return ORT_LOGGING_LEVEL_WARNING;
}

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long log_ep_errors;
static char log_last_ep_error[2048];
static int log_print_level = ORT_LOGGING_LEVEL_VERBOSE;
static char log_needle[256];
static unsigned long log_needle_hits;
static char log_needle_last[2048];

void rt_log_watch(const char* needle) {
  pthread_mutex_lock(&log_mu);
  textf(log_needle, sizeof log_needle, "%s", needle ? needle : "");
  log_needle_hits = 0;
  log_needle_last[0] = 0;
  pthread_mutex_unlock(&log_mu);
}

unsigned long rt_log_found(char* buf, size_t cap) {
  pthread_mutex_lock(&log_mu);
  unsigned long n = log_needle_hits;
  if (buf && cap) textf(buf, cap, "%s", log_needle_last);
  pthread_mutex_unlock(&log_mu);
  return n;
}

void rt_log_set_print_level(OrtLoggingLevel level) { __atomic_store_n(&log_print_level, (int)level, __ATOMIC_RELAXED); }

static void host_logger(void* param, OrtLoggingLevel severity, const char* category, const char* logid,
                        const char* code_location, const char* message) {
  (void)param;
  (void)category;
  (void)logid;
  static const char letters[] = "VIWEF";
  char sev = (severity >= 0 && severity <= 4) ? letters[severity] : '?';
  if (!message) message = "";
  /* The host reports a refused fallback itself, with the test's name. */
  if (strstr(message, "fallback to CPU EP has been explicitly disabled")) return;
  if ((int)severity >= __atomic_load_n(&log_print_level, __ATOMIC_RELAXED))
    printf("    [ORT %c %s] %s\n", sev, code_location ? code_location : "", message);
  pthread_mutex_lock(&log_mu);
  if (log_needle[0] && strstr(message, log_needle)) {
    log_needle_hits++;
    textf(log_needle_last, sizeof log_needle_last, "%s", message);
  }
  pthread_mutex_unlock(&log_mu);
  if (severity >= ORT_LOGGING_LEVEL_ERROR && strstr(message, RT_EP_NAME)) {
    pthread_mutex_lock(&log_mu);
    log_ep_errors++;
    textf(log_last_ep_error, sizeof log_last_ep_error, "%s", message);
    pthread_mutex_unlock(&log_mu);
  }
}

unsigned long rt_log_mark(void) {
  pthread_mutex_lock(&log_mu);
  unsigned long n = log_ep_errors;
  pthread_mutex_unlock(&log_mu);
  return n;
}

unsigned long rt_log_ep_errors_since(unsigned long mark, char* buf, size_t cap) {
  pthread_mutex_lock(&log_mu);
  unsigned long n = log_ep_errors - mark;
  if (n && buf) textf(buf, cap, "%s", log_last_ep_error);
  pthread_mutex_unlock(&log_mu);
  return n;
}

int rt_open(ort_rt* rt, const char* ort_path) {
  memset(rt, 0, sizeof *rt);
  rt->lib = dlopen(ort_path, RTLD_NOW | RTLD_LOCAL);
  if (!rt->lib) {
    printf("cannot load ORT from %s: %s\n", ort_path, dlerror());
    return -1;
  }
  const OrtApiBase* (*get_base)(void) = (const OrtApiBase* (*)(void))dlsym(rt->lib, "OrtGetApiBase");
  if (!get_base) {
    printf("%s does not export OrtGetApiBase: not an ONNX Runtime library\n", ort_path);
    return -1;
  }
  rt->base = get_base();
  for (uint32_t v = ORT_ABI_API_VERSION; v >= ORT_ABI_API_VERSION_MIN && !rt->api; v--) {
    rt->api = rt->base->GetApi(v);
    if (rt->api) rt->api_version = v;
  }
  rt->version = rt->base->GetVersionString();
  if (!rt->api) {
    printf("ORT %s offers neither API %d nor %d\n", rt->version, ORT_ABI_API_VERSION, ORT_ABI_API_VERSION_MIN);
    return -1;
  }
  printf("ORT %s (%s), API %u\n", rt->version, ort_path, rt->api_version);
  if (rt_check(rt, A(CreateEnvWithCustomLogger)(host_logger, NULL, log_level_from_env(), "cudaep-ort-host", &rt->env),
               "CreateEnvWithCustomLogger") < 0)
    return -1;
  if (rt_check(rt, A(CreateCpuMemoryInfo)(OrtDeviceAllocator, OrtMemTypeDefault, &rt->cpu_mem),
               "CreateCpuMemoryInfo") < 0)
    return -1;
  if (rt_check(rt, A(GetAllocatorWithDefaultOptions)(&rt->alloc), "GetAllocatorWithDefaultOptions") < 0) return -1;
  return 0;
}

int rt_refresh_devices(ort_rt* rt) {
  rt->num_devices = 0;
  const OrtEpDevice* const* devs = NULL;
  size_t n = 0;
  if (rt_check(rt, A(GetEpDevices)(rt->env, &devs, &n), "GetEpDevices") < 0) return -1;
  for (size_t i = 0; i < n && rt->num_devices < RT_MAX_DEVICES; i++) {
    const char* name = A(EpDevice_EpName)(devs[i]);
    if (name && !strcmp(name, RT_EP_NAME)) rt->devices[rt->num_devices++] = devs[i];
  }
  return (int)rt->num_devices;
}

int rt_register_ep(ort_rt* rt, const char* ep_path) {
  /* A plain check first: the library must export the two plugin-EP entry points. (Loading it
   * here loads the same object ORT loads next; a Go library cannot be unloaded anyway.) */
  void* h = dlopen(ep_path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("cannot load the EP library %s: %s\n", ep_path, dlerror());
    return -1;
  }
  if (!dlsym(h, "CreateEpFactories") || !dlsym(h, "ReleaseEpFactory")) {
    printf("%s does not export CreateEpFactories/ReleaseEpFactory: the ORT plugin EP is not built into it "
           "(yet). Rebuild it with `make lib` once capi/ort exists, or run with --cpu-only.\n",
           ep_path);
    return -1;
  }
  rt->ep_path = ep_path;
  /* The same object ORT loads: its counters tell where the weights came from and what is left. */
  rt->ort_stats = (CudaEpStatus * (*)(CudaEpOrtStats*)) dlsym(h, "CudaEpGetOrtStats");
  if (rt_check(rt, A(RegisterExecutionProviderLibrary)(rt->env, RT_EP_REGISTRATION, ep_path),
               "RegisterExecutionProviderLibrary") < 0)
    return -1;
  rt->registered = 1;
  if (rt_refresh_devices(rt) < 0) return -1;
  if (rt->num_devices == 0) {
    printf("the EP library registered, but GetEpDevices lists no %s device\n", RT_EP_NAME);
    rt_print_devices(rt);
    return -1;
  }
  rt->ep_mode = 1;
  return 0;
}

int rt_unregister_ep(ort_rt* rt, rt_error* e) {
  int rc = rt_take(rt, A(UnregisterExecutionProviderLibrary)(rt->env, RT_EP_REGISTRATION),
                   "UnregisterExecutionProviderLibrary", e, 1);
  if (rc == 0) {
    rt->registered = 0;
    rt->num_devices = 0;
  }
  return rc;
}

static void print_kv(ort_rt* rt, const char* label, const OrtKeyValuePairs* kv) {
  printf("      %s:", label);
  if (!kv) {
    printf(" (none)\n");
    return;
  }
  const char* const* keys = NULL;
  const char* const* values = NULL;
  size_t n = 0;
  A(GetKeyValuePairs)(kv, &keys, &values, &n);
  if (n == 0) printf(" (empty)");
  for (size_t i = 0; i < n; i++) printf(" %s=%s", keys[i], values[i] ? values[i] : "(null)");
  printf("\n");
}

int rt_ep_stats(ort_rt* rt, CudaEpOrtStats* out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  if (!rt->ort_stats) {
    printf("  CudaEpGetOrtStats is not available (the EP library is not registered)\n");
    return -1;
  }
  CudaEpStatus* st = rt->ort_stats(out);
  if (st) {
    printf("  CudaEpGetOrtStats failed\n");
    return -1;
  }
  return 0;
}

void rt_print_devices(ort_rt* rt) {
  const OrtEpDevice* const* devs = NULL;
  size_t n = 0;
  if (rt_check(rt, A(GetEpDevices)(rt->env, &devs, &n), "GetEpDevices") < 0) return;
  printf("  %zu EP device(s):\n", n);
  for (size_t i = 0; i < n; i++) {
    const OrtHardwareDevice* hw = A(EpDevice_Device)(devs[i]);
    static const char* const types[] = {"CPU", "GPU", "NPU"};
    int t = hw ? (int)A(HardwareDevice_Type)(hw) : -1;
    printf("    [%zu] ep=%s vendor=%s hw.type=%s hw.vendor=%s hw.vendor_id=0x%04x hw.device_id=0x%04x\n", i,
           A(EpDevice_EpName)(devs[i]), A(EpDevice_EpVendor)(devs[i]), (t >= 0 && t <= 2) ? types[t] : "?",
           hw ? A(HardwareDevice_Vendor)(hw) : "?", hw ? A(HardwareDevice_VendorId)(hw) : 0,
           hw ? A(HardwareDevice_DeviceId)(hw) : 0);
    print_kv(rt, "ep metadata", A(EpDevice_EpMetadata)(devs[i]));
    print_kv(rt, "ep options", A(EpDevice_EpOptions)(devs[i]));
    if (hw) print_kv(rt, "hw metadata", A(HardwareDevice_Metadata)(hw));
  }
}

void rt_close(ort_rt* rt) {
  if (rt->api) {
    if (rt->registered) {
      rt_error e;
      if (rt_unregister_ep(rt, &e) < 0) printf("    unregistering at exit: %s\n", e.msg);
    }
    if (rt->cpu_mem) A(ReleaseMemoryInfo)(rt->cpu_mem);
    if (rt->env) A(ReleaseEnv)(rt->env);
  }
  /* libonnxruntime stays loaded: its static destructors at exit are enough. */
  memset(rt, 0, sizeof *rt);
}

/* --- sessions -------------------------------------------------------------------------------- */

static int session_names(ort_rt* rt, rt_session* s, rt_error* e) {
  if (rt_take(rt, A(SessionGetInputCount)(s->session, &s->num_inputs), "SessionGetInputCount", e, 0) < 0) return -1;
  if (rt_take(rt, A(SessionGetOutputCount)(s->session, &s->num_outputs), "SessionGetOutputCount", e, 0) < 0)
    return -1;
  if (s->num_inputs > RT_MAX_IO || s->num_outputs > RT_MAX_IO) {
    textf(e->msg, sizeof e->msg, "%zu inputs / %zu outputs: over the host's limit of %d", s->num_inputs,
          s->num_outputs, RT_MAX_IO);
    e->failed = 1;
    s->num_inputs = s->num_outputs = 0;
    return -1;
  }
  for (int out = 0; out < 2; out++) {
    size_t n = out ? s->num_outputs : s->num_inputs;
    char** names = out ? s->output_names : s->input_names;
    for (size_t i = 0; i < n; i++) {
      char* name = NULL;
      OrtStatus* st = out ? A(SessionGetOutputName)(s->session, i, rt->alloc, &name)
                          : A(SessionGetInputName)(s->session, i, rt->alloc, &name);
      if (rt_take(rt, st, out ? "SessionGetOutputName" : "SessionGetInputName", e, 0) < 0) return -1;
      names[i] = strdup(name ? name : "");
      rt_check(rt, A(AllocatorFree)(rt->alloc, name), "AllocatorFree");
      if (!names[i]) return -1;
    }
  }
  return 0;
}

int rt_session_create(ort_rt* rt, const char* path, const rt_session_opts* o, rt_session* s, rt_error* e,
                      int quiet) {
  memset(s, 0, sizeof *s);
  rt_error local;
  if (!e) e = &local;
  OrtSessionOptions* so = NULL;
  if (rt_take(rt, A(CreateSessionOptions)(&so), "CreateSessionOptions", e, quiet) < 0) return -1;
  int rc = -1;
  if (o->intra_threads > 0 &&
      rt_take(rt, A(SetIntraOpNumThreads)(so, o->intra_threads), "SetIntraOpNumThreads", e, quiet) < 0)
    goto out;
  if (o->opt_level > 0 &&
      rt_take(rt, A(SetSessionGraphOptimizationLevel)(so, (GraphOptimizationLevel)(o->opt_level - 1)),
              "SetSessionGraphOptimizationLevel", e, quiet) < 0)
    goto out;
  if (o->log_info && rt_take(rt, A(SetSessionLogSeverityLevel)(so, ORT_LOGGING_LEVEL_INFO),
                             "SetSessionLogSeverityLevel", e, quiet) < 0)
    goto out;
  if (o->disable_cpu_fallback &&
      rt_take(rt, A(AddSessionConfigEntry)(so, RT_DISABLE_CPU_FALLBACK, "1"), "AddSessionConfigEntry", e, quiet) < 0)
    goto out;
  if (o->record_assignment && rt->api_version >= ORT_API_SINCE_Session_GetEpGraphAssignmentInfo &&
      rt_take(rt, A(AddSessionConfigEntry)(so, RT_RECORD_ASSIGNMENT, "1"), "AddSessionConfigEntry", e, quiet) < 0)
    goto out;
  for (size_t i = 0; i < o->num_config && i < RT_MAX_OPTIONS; i++)
    if (rt_take(rt, A(AddSessionConfigEntry)(so, o->config_keys[i], o->config_values[i]), "AddSessionConfigEntry", e,
                quiet) < 0)
      goto out;
  if (o->with_ep && rt->ep_mode) {
    size_t n = o->num_ep_options < RT_MAX_OPTIONS ? o->num_ep_options : RT_MAX_OPTIONS;
    if (o->device_index >= rt->num_devices) {
      textf(e->msg, sizeof e->msg, "no CudaEp device %zu: ORT lists %zu", o->device_index, rt->num_devices);
      e->failed = 1;
      e->code = ORT_INVALID_ARGUMENT;
      if (!quiet) printf("  host error: %s\n", e->msg);
      goto out;
    }
    if (rt_take(rt,
                A(SessionOptionsAppendExecutionProvider_V2)(so, rt->env, &rt->devices[o->device_index], 1, o->ep_keys,
                                                            o->ep_values, n),
                "SessionOptionsAppendExecutionProvider_V2", e, quiet) < 0)
      goto out;
  }
  if (rt_take(rt, A(CreateSession)(rt->env, path, so, &s->session), "CreateSession", e, quiet) < 0) {
    s->session = NULL;
    goto out;
  }
  if (session_names(rt, s, e) < 0) {
    rt_session_release(rt, s);
    goto out;
  }
  rc = 0;
out:
  A(ReleaseSessionOptions)(so);
  return rc;
}

int rt_input_index(const rt_session* s, const char* name) {
  for (size_t i = 0; i < s->num_inputs; i++)
    if (!strcmp(s->input_names[i], name)) return (int)i;
  return -1;
}

void rt_session_release(ort_rt* rt, rt_session* s) {
  for (size_t i = 0; i < RT_MAX_IO; i++) {
    free(s->input_names[i]);
    free(s->output_names[i]);
  }
  if (s->session) A(ReleaseSession)(s->session);
  memset(s, 0, sizeof *s);
}

/* value_to_host copies a CPU tensor OrtValue into a new host tensor. */
static int value_to_host(ort_rt* rt, OrtValue* v, host_tensor* out, rt_error* e) {
  int is_tensor = 0;
  if (rt_take(rt, A(IsTensor)(v, &is_tensor), "IsTensor", e, 0) < 0) return -1;
  if (!is_tensor) {
    e->failed = 1;
    textf(e->msg, sizeof e->msg, "an output is not a tensor");
    return -1;
  }
  OrtTensorTypeAndShapeInfo* info = NULL;
  if (rt_take(rt, A(GetTensorTypeAndShape)(v, &info), "GetTensorTypeAndShape", e, 0) < 0) return -1;
  enum ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t ndims = 0;
  int64_t dims[ONNX_PB_MAX_DIMS];
  int rc = -1;
  if (rt_take(rt, A(GetTensorElementType)(info, &type), "GetTensorElementType", e, 0) < 0) goto out;
  if (rt_take(rt, A(GetDimensionsCount)(info, &ndims), "GetDimensionsCount", e, 0) < 0) goto out;
  if (ndims > ONNX_PB_MAX_DIMS) {
    e->failed = 1;
    textf(e->msg, sizeof e->msg, "output has %zu dimensions", ndims);
    goto out;
  }
  if (rt_take(rt, A(GetDimensions)(info, dims, ndims), "GetDimensions", e, 0) < 0) goto out;
  if (host_tensor_alloc(out, (int32_t)type, dims, ndims, e->msg, sizeof e->msg) < 0) {
    e->failed = 1;
    goto out;
  }
  void* data = NULL;
  if (rt_take(rt, A(GetTensorMutableData)(v, &data), "GetTensorMutableData", e, 0) < 0) {
    host_tensor_free(out);
    goto out;
  }
  if (out->count) memcpy(out->data, data, out->count * out->elem_size);
  rc = 0;
out:
  A(ReleaseTensorTypeAndShapeInfo)(info);
  return rc;
}

int rt_run(ort_rt* rt, rt_session* s, host_tensor* inputs, size_t n_inputs, host_tensor* outs, rt_error* e,
           int quiet) {
  rt_error local;
  if (!e) e = &local;
  e->failed = 0;
  e->msg[0] = 0;
  if (n_inputs != s->num_inputs) {
    e->failed = 1;
    textf(e->msg, sizeof e->msg, "the session has %zu inputs, the test %zu", s->num_inputs, n_inputs);
    if (!quiet) printf("    %s\n", e->msg);
    return -1;
  }
  OrtValue* in_values[RT_MAX_IO] = {0};
  OrtValue* out_values[RT_MAX_IO] = {0};
  int rc = -1;
  size_t made = 0;
  for (; made < n_inputs; made++) {
    host_tensor* t = &inputs[made];
    if (rt_take(rt,
                A(CreateTensorWithDataAsOrtValue)(rt->cpu_mem, t->data, t->count * t->elem_size, t->dims, t->ndims,
                                                  (enum ONNXTensorElementDataType)t->data_type, &in_values[made]),
                "CreateTensorWithDataAsOrtValue", e, quiet) < 0)
      goto out;
  }
  if (rt_take(rt,
              A(Run)(s->session, NULL, (const char* const*)s->input_names, (const OrtValue* const*)in_values, n_inputs,
                     (const char* const*)s->output_names, s->num_outputs, out_values),
              "Run", e, quiet) < 0)
    goto out;
  size_t copied = 0;
  for (; copied < s->num_outputs; copied++)
    if (value_to_host(rt, out_values[copied], &outs[copied], e) < 0) break;
  if (copied < s->num_outputs) {
    for (size_t i = 0; i < copied; i++) host_tensor_free(&outs[i]);
    if (!quiet) printf("    reading output %zu: %s\n", copied, e->msg);
    goto out;
  }
  rc = 0;
out:
  for (size_t i = 0; i < made; i++) A(ReleaseValue)(in_values[i]);
  for (size_t i = 0; i < s->num_outputs; i++)
    if (out_values[i]) A(ReleaseValue)(out_values[i]);
  return rc;
}

static void append_word(char* buf, size_t cap, const char* w) {
  if (!buf || !cap) return;
  size_t len = strlen(buf);
  if (len + strlen(w) + 2 > cap) return;
  if (len) buf[len++] = ' ';
  strcpy(buf + len, w);
}

int rt_print_assignment(ort_rt* rt, rt_session* s, int quiet, size_t* ep_nodes, size_t* ep_subgraphs,
                        size_t* other_nodes, char* cudaep_ops, size_t cudaep_ops_cap, char* other_ops,
                        size_t other_ops_cap) {
  size_t en = 0, es = 0, on = 0;
  if (cudaep_ops && cudaep_ops_cap) cudaep_ops[0] = 0;
  if (other_ops && other_ops_cap) other_ops[0] = 0;
  if (ep_nodes) *ep_nodes = 0;
  if (ep_subgraphs) *ep_subgraphs = 0;
  if (other_nodes) *other_nodes = 0;
  if (rt->api_version < ORT_API_SINCE_Session_GetEpGraphAssignmentInfo) {
    if (!quiet) printf("    (node assignment: not available before API 24)\n");
    return 1;
  }
  const OrtEpAssignedSubgraph* const* subs = NULL;
  size_t n = 0;
  if (rt_check(rt, A(Session_GetEpGraphAssignmentInfo)(s->session, &subs, &n), "Session_GetEpGraphAssignmentInfo") < 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    const char* ep = NULL;
    const OrtEpAssignedNode* const* nodes = NULL;
    size_t nn = 0;
    if (rt_check(rt, A(EpAssignedSubgraph_GetEpName)(subs[i], &ep), "EpAssignedSubgraph_GetEpName") < 0) return -1;
    if (rt_check(rt, A(EpAssignedSubgraph_GetNodes)(subs[i], &nodes, &nn), "EpAssignedSubgraph_GetNodes") < 0)
      return -1;
    int mine = ep && !strcmp(ep, RT_EP_NAME);
    if (mine) {
      es++;
      en += nn;
    } else {
      on += nn;
    }
    if (!quiet) printf("    subgraph %zu on %s:", i, ep ? ep : "?");
    for (size_t j = 0; j < nn; j++) {
      const char* op = NULL;
      const char* name = NULL;
      if (rt_check(rt, A(EpAssignedNode_GetOperatorType)(nodes[j], &op), "EpAssignedNode_GetOperatorType") < 0)
        return -1;
      if (rt_check(rt, A(EpAssignedNode_GetName)(nodes[j], &name), "EpAssignedNode_GetName") < 0) return -1;
      if (!quiet) printf(" %s(%s)", op ? op : "?", name ? name : "");
      if (mine) append_word(cudaep_ops, cudaep_ops_cap, op ? op : "?");
      else append_word(other_ops, other_ops_cap, op ? op : "?");
    }
    if (!quiet) printf("\n");
  }
  if (ep_nodes) *ep_nodes = en;
  if (ep_subgraphs) *ep_subgraphs = es;
  if (other_nodes) *other_nodes = on;
  return 0;
}

/* --- comparisons ----------------------------------------------------------------------------- */

static void dims_text(const host_tensor* t, char* buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  len += (size_t)snprintf(buf + len, cap - len, "[");
  for (size_t i = 0; i < t->ndims && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if (len < cap) snprintf(buf + len, cap - len, "]");
}

int compare_tensors(const host_tensor* got, const host_tensor* want, double rtol, double atol, char* why, size_t cap) {
  char gd[128], wd[128];
  dims_text(got, gd, sizeof gd);
  dims_text(want, wd, sizeof wd);
  if (got->data_type != want->data_type) {
    textf(why, cap, "type %s, want %s", onnx_pb_type_name(got->data_type), onnx_pb_type_name(want->data_type));
    return -1;
  }
  if (got->ndims != want->ndims || (got->ndims && memcmp(got->dims, want->dims, got->ndims * sizeof got->dims[0]))) {
    textf(why, cap, "shape %s, want %s", gd, wd);
    return -1;
  }
  size_t bad = 0, first = 0;
  double worst = 0, first_got = 0, first_want = 0;
  int is_float = want->data_type == ONNX_PB_FLOAT || want->data_type == ONNX_PB_DOUBLE;
  for (size_t i = 0; i < want->count; i++) {
    int ok;
    double g = 0, w = 0;
    if (is_float) {
      if (want->data_type == ONNX_PB_FLOAT) {
        g = ((const float*)got->data)[i];
        w = ((const float*)want->data)[i];
      } else {
        g = ((const double*)got->data)[i];
        w = ((const double*)want->data)[i];
      }
      if (isnan(w) || isnan(g)) ok = isnan(w) && isnan(g);
      else if (isinf(w) || isinf(g)) ok = g == w;
      else {
        double d = fabs(g - w);
        ok = d <= atol + rtol * fabs(w);
        if (d > worst) worst = d;
      }
    } else {
      ok = !memcmp((const char*)got->data + i * want->elem_size, (const char*)want->data + i * want->elem_size,
                   want->elem_size);
    }
    if (!ok) {
      if (!bad) {
        first = i;
        first_got = g;
        first_want = w;
      }
      bad++;
    }
  }
  if (!bad) return 0;
  if (is_float)
    textf(why, cap, "%zu of %zu elements differ (shape %s); first at %zu: got %.9g, want %.9g; largest |diff| %.3g",
          bad, want->count, wd, first, first_got, first_want, worst);
  else
    textf(why, cap, "%zu of %zu %s elements differ (shape %s); first at %zu", bad, want->count,
          onnx_pb_type_name(want->data_type), wd, first);
  return -1;
}

void fill_random(host_tensor* t, uint64_t seed, float scale) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  float* d = (float*)t->data;
  for (size_t i = 0; i < t->count; i++) {
    /* splitmix64 */
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = (double)(z >> 11) / 9007199254740992.0; /* [0, 1) */
    d[i] = (float)((2.0 * u - 1.0) * scale);
  }
}
