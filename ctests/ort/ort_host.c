/*
 * ort_host - the ONNX Runtime test host of cudaep's plugin execution provider.
 *
 *   ort_host [--cpu-only] CASE [ARGS]
 *   ort_host --help | --version
 *
 *   devices                 CudaEp's EP devices (vendor 0x10DE, metadata), unregister, register
 *   node_tests [FLAGS] [DIR]  ONNX node tests whose ops CudaEp supports (default DIR
 *                           /usr/share/libonnx-testdata/data/node), CPU fallback disabled;
 *                           FLAGS --all-ops, --allow-fallback, --strict (case_node_tests.c)
 *   mlp MODELDIR            the external-data MLP of gen_models.py against a plain CPU session
 *   split MODELDIR          two CudaEp partitions around a CPU node, against the CPU EP
 *   graph MODELDIR          the MLP with enable_cuda_graph=1, 100 runs with changing inputs
 *   misuse MODELDIR         bad options, bad external data, 8 concurrent Runs, unregistering
 *                           under a live session
 *   iobinding MODELDIR      the MLP's input and output in CudaEp's device memory, bound through
 *                           IoBinding (also with enable_cuda_graph=1), against a CPU session
 *   paging MODELDIR         the deep model with paging=on and under weight_budget_bytes, and
 *                           what paging refuses, against a CPU session (counters checked)
 *   decoder MODELDIR        greedy generation with a tiny Llama-style decoder and its key/value
 *                           cache, against a CPU session (logits and tokens)
 *   nbits MODELDIR          int4 weight-only models (com.microsoft.MatMulNBits): single nodes and
 *                           int4 decoders against a CPU session and the exact result, which EP ran
 *                           each node, what CudaEp must claim or refuse (CUDAEP_ORT_NBITS_CLAIMS)
 *   two_devices MODELDIR    a session on each of two CudaEp devices running at once, and
 *                           CopyTensors between the devices' memories (needs two devices:
 *                           CUDAEP_SIM_DEVICES=2 on the simulator)
 *   exported EXPORTDIR      a decoder transformers wrote and torch.onnx exported, float32 on
 *                           CudaEp alone against a CPU session, bfloat16 against float32
 *   weight_reads MODELDIR   who reads MODELDIR/weight_reads's external-data file, ORT or CudaEp
 *                           (page cache, mappings, CudaEp's counters; scripts/ort-weight-reads.sh)
 *
 * Environment: CUDAEP_ORT_LIBRARY (libonnxruntime.so.1, required), CUDAEP_LIBRARY (libcudaep.so,
 * required unless --cpu-only), CUDAEP_BACKEND (sim|cuda|auto: the devices CudaEp lists when the
 * library is registered; scripts/run-ort-tests.sh sets sim), CUDAEP_TEST_BACKEND (sim|cuda:
 * passed as ep.cudaep.backend, which must be the device's, and checked by `devices`), CUDAEP_ORT_LOG (ORT's log level: verbose, info, warning, error, fatal),
 * CUDAEP_ORT_NODE_FILTER (node_tests: only tests whose name contains it), CUDAEP_ORT_PROGRESS_EVERY
 * (node_tests: a progress line on stderr every N tests, default 100; 0: none), CUDAEP_ORT_NBITS_CLAIMS
 * (nbits: all (default), none, or a comma-separated list of the models CudaEp must claim).
 *
 * --help (or -h) prints the usage on stdout; --version prints the cudaep.h ABI the host was built
 * against, the ORT API it asks for and, when CUDAEP_ORT_LIBRARY and CUDAEP_LIBRARY are set, the
 * versions of those libraries. Both exit 0.
 *
 * --cpu-only (or CUDAEP_ORT_CPU_ONLY=1) runs every case without appending CudaEp, comparing ORT's
 * CPU EP with itself: it proves the harness while the EP does not exist. Exit status: 0 when
 * every check passed, 1 when one failed, 2 for a usage or setup error.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"

/* --- helpers shared by the cases ------------------------------------------------------------- */

const char* const supported_ops[] = {"MatMul", "Gemm", "Add",  "Sub",  "Mul",     "Div",
                                     "Relu",   "Sigmoid", "Tanh", "Gelu", "Softmax", "Identity", NULL};

int op_supported(const char* op) {
  for (size_t i = 0; supported_ops[i]; i++)
    if (!strcmp(op, supported_ops[i])) return 1;
  return 0;
}

void add_ep_option(rt_session_opts* o, const char* key, const char* value) {
  if (o->num_ep_options >= RT_MAX_OPTIONS) return;
  o->ep_keys[o->num_ep_options] = key;
  o->ep_values[o->num_ep_options] = value;
  o->num_ep_options++;
}

void ep_options(const ort_rt* rt, rt_session_opts* o) {
  memset(o, 0, sizeof *o);
  o->with_ep = 1;
  if (!rt->ep_mode) o->opt_level = ORT_DISABLE_ALL + 1;
  const char* backend = getenv("CUDAEP_TEST_BACKEND");
  if (backend && *backend) add_ep_option(o, "backend", backend);
}

int ok(int cond, const char* what) {
  printf("  %s %s\n", cond ? "ok  " : "FAIL", what);
  return cond ? 0 : 1;
}

int join_path(char* buf, size_t cap, const char* dir, const char* name) {
  int n = snprintf(buf, cap, "%s/%s", dir, name);
  return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

int ep_own_error(const char* msg) {
  static const char prefix[] = RT_EP_NAME ": ";
  if (!strncmp(msg, prefix, sizeof prefix - 1)) return 1;
  for (const char* p = strstr(msg, prefix); p; p = strstr(p + 1, prefix))
    if (p - msg >= 2 && p[-2] == ':' && p[-1] == ' ') return 1;
  return 0;
}

/* --- main ------------------------------------------------------------------------------------ */

typedef struct host_case {
  const char* name;
  int (*run)(ort_rt* rt, int argc, char** argv);
  int needs_dir; /* the case needs a folder argument */
} host_case;

static const host_case cases[] = {
    {"devices", case_devices, 0},  {"node_tests", case_node_tests, 0}, {"mlp", case_mlp, 1},
    {"split", case_split, 1},      {"graph", case_graph, 1},           {"misuse", case_misuse, 1},
    {"iobinding", case_iobinding, 1}, {"paging", case_paging, 1},     {"decoder", case_decoder, 1},
    {"nbits", case_nbits, 1},
    {"two_devices", case_two_devices, 1}, {"exported", case_exported, 1}, {"weight_reads", case_weight_reads, 1},
};

/* usage prints the usage on `to` and returns `code` (0 for --help, 2 for a usage error). */
static int usage(FILE* to, int code) {
  fprintf(to,
          "usage: ort_host [--cpu-only] CASE [ARGS]\n"
          "       ort_host --help | --version\n"
          "  cases: devices | node_tests [--all-ops] [--allow-fallback] [--strict] [DIR] | mlp MODELDIR | split MODELDIR | graph MODELDIR | misuse MODELDIR | iobinding MODELDIR | paging MODELDIR | decoder MODELDIR | nbits MODELDIR | two_devices MODELDIR | exported EXPORTDIR | weight_reads MODELDIR\n"
          "  environment: CUDAEP_ORT_LIBRARY=libonnxruntime.so.1, CUDAEP_LIBRARY=libcudaep.so\n");
  return code;
}

/* version prints what --version reports: the header ABI and ORT API the host was built for, and
 * the versions the libraries named by the environment report (each loaded only to ask). */
static int version(void) {
  printf("ort_host, the ONNX Runtime test host of cudaep: built against cudaep.h ABI %d, asks ORT for API %d "
         "(else %d)\n",
         CUDAEP_ABI_VERSION, ORT_ABI_API_VERSION, ORT_ABI_API_VERSION_MIN);
  const char* ort_path = getenv("CUDAEP_ORT_LIBRARY");
  if (!ort_path || !*ort_path) {
    printf("ONNX Runtime: CUDAEP_ORT_LIBRARY is not set\n");
  } else {
    void* lib = dlopen(ort_path, RTLD_NOW | RTLD_LOCAL);
    const OrtApiBase* (*get_base)(void) = lib ? (const OrtApiBase* (*)(void))dlsym(lib, "OrtGetApiBase") : NULL;
    if (get_base) printf("ONNX Runtime: %s (%s)\n", get_base()->GetVersionString(), ort_path);
    else printf("ONNX Runtime: cannot load %s: %s\n", ort_path, lib ? "no OrtGetApiBase" : dlerror());
  }
  const char* ep_path = getenv("CUDAEP_LIBRARY");
  if (!ep_path || !*ep_path) {
    printf("cudaep: CUDAEP_LIBRARY is not set\n");
    return 0;
  }
  void* lib = dlopen(ep_path, RTLD_NOW | RTLD_LOCAL);
  CudaEpStatus* (*get_version)(uint32_t*, const char**) =
      lib ? (CudaEpStatus * (*)(uint32_t*, const char**)) dlsym(lib, "CudaEpGetVersion") : NULL;
  uint32_t abi = 0;
  const char* v = NULL;
  if (get_version && get_version(&abi, &v) == NULL) printf("cudaep: %s, ABI %u (%s)\n", v, abi, ep_path);
  else printf("cudaep: cannot load %s or ask its version: %s\n", ep_path, lib ? "CudaEpGetVersion failed" : dlerror());
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int cpu_only = 0;
  const char* env_cpu = getenv("CUDAEP_ORT_CPU_ONLY");
  if (env_cpu && !strcmp(env_cpu, "1")) cpu_only = 1;
  int a = 1;
  if (a < argc && !strcmp(argv[a], "--cpu-only")) {
    cpu_only = 1;
    a++;
  }
  if (a >= argc) return usage(stderr, 2);
  if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) return usage(stdout, 0);
  if (!strcmp(argv[a], "--version")) return version();
  const host_case* c = NULL;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!strcmp(argv[a], cases[i].name)) c = &cases[i];
  if (!c) {
    fprintf(stderr, "unknown case %s\n", argv[a]);
    return usage(stderr, 2);
  }
  if (c->needs_dir && a + 1 >= argc) {
    fprintf(stderr, "case %s needs the folder gen_models.py wrote\n", c->name);
    return usage(stderr, 2);
  }
  const char* ort_path = getenv("CUDAEP_ORT_LIBRARY");
  const char* ep_path = getenv("CUDAEP_LIBRARY");
  if (!ort_path || !*ort_path) {
    fprintf(stderr, "set CUDAEP_ORT_LIBRARY to the path of libonnxruntime.so.1 (scripts/fetch-ort.sh gets one)\n");
    return 2;
  }
  if (!cpu_only && (!ep_path || !*ep_path)) {
    fprintf(stderr, "set CUDAEP_LIBRARY to the path of libcudaep.so (or pass --cpu-only)\n");
    return 2;
  }

  printf("=== ort_host %s (%s) ===\n", c->name, cpu_only ? "cpu-only: ORT's CPU EP against itself" : "CudaEp");
  ort_rt rt;
  if (rt_open(&rt, ort_path) < 0) {
    printf("RESULT %s: SETUP FAILED (cannot open ORT)\n", c->name);
    return 2;
  }
  if (!cpu_only) {
    if (rt_register_ep(&rt, ep_path) < 0) {
      printf("RESULT %s: FAIL (cannot register %s as an ORT plugin EP library)\n", c->name, ep_path);
      rt_close(&rt);
      return 1;
    }
    printf("registered %s: %zu %s device(s)\n", ep_path, rt.num_devices, RT_EP_NAME);
  }
  int failures = c->run(&rt, argc - a, argv + a);
  rt_close(&rt);
  if (failures) printf("RESULT %s: FAIL (%d failed check%s)\n", c->name, failures, failures == 1 ? "" : "s");
  else printf("RESULT %s: PASS\n", c->name);
  return failures ? 1 : 0;
}
