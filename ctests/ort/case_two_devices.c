/*
 * case_two_devices.c - `two_devices`: CudaEp on two devices in one process. ORT lists one EP
 * device per device, each offering its own device_id; a session on each device runs the MLP at
 * the same time from two threads, each against a CPU session; and ORT's CopyTensors moves a
 * tensor from one device's memory to the other's and back through CudaEp's data transfer
 * (CudaEpCopyPeer underneath: directly, or staged through pinned memory).
 *
 * The simulator has as many devices as CUDAEP_SIM_DEVICES says (CMake sets 2 for this case, and
 * CUDAEP_SIM_PEERS=none for a second run, so both copy paths are taken); with fewer than two
 * CudaEp devices (one GPU) the case says what it needs and passes without checking.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "models.h"

#define A(Name) ORT_API_FN(rt->api, Name)

/* --- two sessions at once ----------------------------------------------------------------------- */

typedef struct runner {
  ort_rt* rt;
  rt_session *test, *ref;
  int device, runs, bad;
  char why[1024];
} runner;

static void* run_many(void* arg) {
  runner* r = arg;
  static const int64_t batches[] = {1, 5, 32, 2};
  for (int i = 0; i < r->runs; i++) {
    host_tensor x;
    if (make_mlp_input(&x, batches[i % 4], 9000 + 100 * (uint64_t)r->device + (uint64_t)i) < 0) {
      r->bad++;
      continue;
    }
    if (run_and_compare(r->rt, r->test, r->ref, &x, r->why, sizeof r->why) < 0) r->bad++;
    host_tensor_free(&x);
  }
  return NULL;
}

/* --- CopyTensors between the devices' memories ---------------------------------------------------- */

/* value_over wraps a host float array as a CPU tensor. */
static OrtValue* value_over(ort_rt* rt, float* data, int64_t n) {
  OrtValue* v = NULL;
  if (rt_check(rt, A(CreateTensorWithDataAsOrtValue)(rt->cpu_mem, data, (size_t)n * sizeof(float), &n, 1,
                                                     ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &v),
               "CreateTensorWithDataAsOrtValue") < 0)
    return NULL;
  return v;
}

static int copy1(ort_rt* rt, const OrtValue* src, OrtValue* dst, const char* what) {
  const OrtValue* s[1] = {src};
  OrtValue* d[1] = {dst};
  return rt_check(rt, A(CopyTensors)(rt->env, s, d, NULL, 1), what);
}

static int check_copies(ort_rt* rt, rt_session* sessions) {
  int f = 0;
  char what[512];
  enum { N = 300000 }; /* 1.2 MB: several staging chunks would need a smaller chunk; one is enough here */
  static float host_a[N], host_b[N], back[N];
  for (int i = 0; i < N; i++) {
    host_a[i] = (float)(i % 977) * 0.25f + 1.0f;
    host_b[i] = -(float)(i % 613) - 2.0f;
  }
  OrtAllocator* alloc[2] = {NULL, NULL};
  OrtValue* dev[2] = {NULL, NULL};
  OrtValue *ha = value_over(rt, host_a, N), *hb = value_over(rt, host_b, N), *hback = value_over(rt, back, N);
  int64_t n = N;
  for (int d = 0; d < 2; d++) {
    const OrtMemoryInfo* mi = A(EpDevice_MemoryInfo)(rt->devices[d], OrtDeviceMemoryType_DEFAULT);
    if (!mi || rt_check(rt, A(CreateAllocator)(sessions[d].session, mi, &alloc[d]), "CreateAllocator") < 0 ||
        rt_check(rt, A(CreateTensorAsOrtValue)(alloc[d], &n, 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &dev[d]),
                 "CreateTensorAsOrtValue") < 0) {
      textf(what, sizeof what, "a tensor in device %d's memory", d);
      f += ok(0, what);
    }
  }
  if (!f && ha && hb && hback) {
    /* Device 0 holds A, device 1 holds B; copy 0 -> 1 and read device 1 back: A. */
    int rc = copy1(rt, ha, dev[0], "CopyTensors host -> device 0") | copy1(rt, hb, dev[1], "CopyTensors host -> device 1");
    rc |= copy1(rt, dev[0], dev[1], "CopyTensors device 0 -> device 1");
    memset(back, 0x5a, sizeof back);
    rc |= copy1(rt, dev[1], hback, "CopyTensors device 1 -> host");
    f += ok(rc == 0 && memcmp(back, host_a, sizeof back) == 0,
            "CopyTensors from device 0's memory to device 1's moves every byte");
    /* And back the other way with new contents. */
    rc = copy1(rt, hb, dev[1], "CopyTensors host -> device 1");
    rc |= copy1(rt, dev[1], dev[0], "CopyTensors device 1 -> device 0");
    memset(back, 0x5a, sizeof back);
    rc |= copy1(rt, dev[0], hback, "CopyTensors device 0 -> host");
    f += ok(rc == 0 && memcmp(back, host_b, sizeof back) == 0,
            "CopyTensors from device 1's memory to device 0's moves every byte");
  }
  for (int d = 0; d < 2; d++) {
    if (dev[d]) A(ReleaseValue)(dev[d]);
    if (alloc[d]) A(ReleaseAllocator)(alloc[d]);
  }
  if (ha) A(ReleaseValue)(ha);
  if (hb) A(ReleaseValue)(hb);
  if (hback) A(ReleaseValue)(hback);
  return f;
}

int case_two_devices(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  if (!rt->ep_mode) {
    printf("  cpu-only: nothing to check (the case is about CudaEp's devices)\n");
    return 0;
  }
  if (rt->num_devices < 2) {
    printf("  skip: needs 2 CudaEp devices, ORT lists %zu (CUDAEP_SIM_DEVICES=2 on the simulator, or a machine with two "
           "GPUs)\n",
           rt->num_devices);
    return 0;
  }
  int f = 0;
  char what[1400];
  const char* sim_devices = getenv("CUDAEP_SIM_DEVICES");
  const char* backend = getenv("CUDAEP_TEST_BACKEND");
  if (sim_devices && (!backend || !*backend || !strcmp(backend, "sim"))) {
    textf(what, sizeof what, "ORT lists one CudaEp device per simulated device (%zu, CUDAEP_SIM_DEVICES=%s)",
          rt->num_devices, sim_devices);
    f += ok(rt->num_devices == (size_t)atoi(sim_devices), what);
  }
  /* One EP device per device, each offering its own device_id. */
  for (size_t i = 0; i < rt->num_devices; i++) {
    const OrtKeyValuePairs* kv = A(EpDevice_EpOptions)(rt->devices[i]);
    const char* id = kv ? A(GetKeyValue)(kv, "device_id") : NULL;
    char want[16];
    snprintf(want, sizeof want, "%zu", i);
    textf(what, sizeof what, "EP device %zu offers device_id=%s", i, id ? id : "(none)");
    f += ok(id && !strcmp(id, want), what);
  }

  rt_session sessions[2], ref;
  int opened = 0;
  char path[4096];
  if (join_path(path, sizeof path, argv[1], "mlp.onnx") < 0) return f + 1;
  rt_session_opts plain;
  memset(&plain, 0, sizeof plain);
  rt_error e;
  if (rt_session_create(rt, path, &plain, &ref, &e, 0) < 0) return f + ok(0, "a plain CPU session for mlp.onnx");
  for (; opened < 2; opened++) {
    rt_session_opts o;
    ep_options(rt, &o);
    add_ep_option(&o, "tf32", "0");
    o.disable_cpu_fallback = 1;
    o.device_index = (size_t)opened;
    if (rt_session_create(rt, path, &o, &sessions[opened], &e, 0) < 0) {
      textf(what, sizeof what, "a session on EP device %d: [%s] %s", opened, rt_error_code_name(e.code), e.msg);
      f += ok(0, what);
      break;
    }
  }
  if (opened == 2) {
    CudaEpOrtStats st;
    if (rt_ep_stats(rt, &st) == 0) {
      textf(what, sizeof what, "two CudaEp sessions are alive (%u)", st.sessions);
      f += ok(st.sessions >= 2, what);
    }
    runner r[2];
    pthread_t t[2];
    for (int d = 0; d < 2; d++) {
      r[d] = (runner){.rt = rt, .test = &sessions[d], .ref = &ref, .device = d, .runs = 12};
      r[d].why[0] = 0;
      if (pthread_create(&t[d], NULL, run_many, &r[d]) != 0) r[d].runs = -1;
    }
    for (int d = 0; d < 2; d++) {
      if (r[d].runs >= 0) pthread_join(t[d], NULL);
      textf(what, sizeof what, "device %d: 12 runs concurrent with the other device's match the CPU session%s%s", d,
            r[d].bad ? ": " : "", r[d].why);
      f += ok(r[d].runs > 0 && r[d].bad == 0, what);
    }
    f += check_copies(rt, sessions);
  }
  for (int d = 0; d < opened; d++) rt_session_release(rt, &sessions[d]);
  rt_session_release(rt, &ref);
  return f;
}
