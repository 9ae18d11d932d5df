/*
 * case_devices.c - `devices`: CudaEp's EP devices as GetEpDevices lists them, and that
 * unregistering the library removes them and registering it again brings them back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"

#define A(Name) ORT_API_FN(rt->api, Name)

static const char* meta(ort_rt* rt, const OrtEpDevice* d, const char* key) {
  const OrtKeyValuePairs* kv = A(EpDevice_EpMetadata)(d);
  return kv ? A(GetKeyValue)(kv, key) : NULL;
}

/* check_device checks one CudaEp device against the EP contract. */
static int check_device(ort_rt* rt, size_t i, const OrtEpDevice* d, const char* want_backend) {
  int f = 0;
  char what[256];
  const OrtHardwareDevice* hw = A(EpDevice_Device)(d);
  const char* vendor = A(EpDevice_EpVendor)(d);
  textf(what, sizeof what, "device %zu: EP vendor is \"%s\" (want \"%s\")", i, vendor ? vendor : "(null)",
        RT_EP_VENDOR);
  f += ok(vendor && !strcmp(vendor, RT_EP_VENDOR), what);
  if (!hw) return f + ok(0, "device has a hardware device");
  const char* simulated = meta(rt, d, "simulated");
  int is_sim = simulated && !strcmp(simulated, "1");
  uint32_t vid = A(HardwareDevice_VendorId)(hw);
  const char* hw_vendor = A(HardwareDevice_Vendor)(hw);
  if (is_sim) {
    /* The simulated device is never presented as an NVIDIA GPU. */
    textf(what, sizeof what, "device %zu: the simulated device's hardware vendor is \"%s\", id 0x%04x (want \"%s\", not 0x%04x)",
          i, hw_vendor ? hw_vendor : "(null)", vid, RT_SIM_VENDOR, RT_EP_VENDOR_ID);
    f += ok(vid != RT_EP_VENDOR_ID && hw_vendor && !strcmp(hw_vendor, RT_SIM_VENDOR), what);
  } else {
    textf(what, sizeof what, "device %zu: hardware vendor id 0x%04x (want 0x%04x)", i, vid, RT_EP_VENDOR_ID);
    f += ok(vid == RT_EP_VENDOR_ID, what);
  }
  const OrtKeyValuePairs* options = A(EpDevice_EpOptions)(d);
  const char* opt_backend = options ? A(GetKeyValue)(options, "backend") : NULL;
  textf(what, sizeof what, "device %zu: the backend is the device's metadata, not an EP option a session overrides (option: %s)", i,
        opt_backend ? opt_backend : "none");
  f += ok(opt_backend == NULL, what);
  int type = (int)A(HardwareDevice_Type)(hw);
  textf(what, sizeof what, "device %zu: hardware type %d (want GPU = %d)", i, type, (int)OrtHardwareDeviceType_GPU);
  f += ok(type == OrtHardwareDeviceType_GPU, what);

  if (is_sim) {
    const char* backend = meta(rt, d, "backend");
    textf(what, sizeof what, "device %zu: simulated=1 with backend=%s (want sim)", i, backend ? backend : "(none)");
    f += ok(backend && !strcmp(backend, "sim"), what);
  } else {
    static const char* const keys[] = {"cuda_ordinal", "name", "compute_capability"};
    for (size_t k = 0; k < 3; k++) {
      const char* v = meta(rt, d, keys[k]);
      textf(what, sizeof what, "device %zu: a CUDA device's metadata has %s (%s)", i, keys[k], v ? v : "missing");
      f += ok(v && *v, what);
    }
  }
  if (want_backend && !strcmp(want_backend, "sim")) {
    textf(what, sizeof what, "device %zu: CUDAEP_TEST_BACKEND=sim, so the device is the simulated one", i);
    f += ok(is_sim, what);
  } else if (want_backend && !strcmp(want_backend, "cuda")) {
    textf(what, sizeof what, "device %zu: CUDAEP_TEST_BACKEND=cuda, so the device is a real CUDA device", i);
    f += ok(!is_sim, what);
  }
  return f;
}

/* reregister unregisters the library and registers it again with CUDAEP_BACKEND=value (unset
 * for NULL); it returns the registration's result (0 or -1) and leaves its error in e. */
static int reregister(ort_rt* rt, const char* value, rt_error* e) {
  rt_error ue;
  if (rt->registered && rt_unregister_ep(rt, &ue) < 0) printf("    UnregisterExecutionProviderLibrary: %s\n", ue.msg);
  if (value) setenv(RT_BACKEND_ENV, value, 1);
  else unsetenv(RT_BACKEND_ENV);
  OrtStatus* st = ORT_API_FN(rt->api, RegisterExecutionProviderLibrary)(rt->env, RT_EP_REGISTRATION, rt->ep_path);
  int reg = rt_take(rt, st, "RegisterExecutionProviderLibrary", e, 0);
  if (reg == 0) rt->registered = 1;
  return reg;
}

/* check_backend_env: CUDAEP_BACKEND, read when ORT registers the library, chooses what CudaEp
 * lists. The default (cuda) never lists the simulated device: with no usable driver it lists
 * nothing and says why on ORT's log, at WARNING; a bad value fails the registration, naming it.
 * The variable is restored, and the library registered as before, at the end. */
static int check_backend_env(ort_rt* rt) {
  int f = 0;
  char what[512], found[2048];
  const char* before = getenv(RT_BACKEND_ENV);
  char saved[64] = "";
  if (before) textf(saved, sizeof saved, "%s", before);
  rt_error e;

  for (int unset = 0; unset < 2; unset++) {
    rt_log_watch("CudaEp lists no device");
    int reg = reregister(rt, unset ? NULL : "cuda", &e);
    textf(what, sizeof what, "with %s, registering the library succeeds", unset ? "CUDAEP_BACKEND unset" : "CUDAEP_BACKEND=cuda");
    f += ok(reg == 0, what);
    int n = rt_refresh_devices(rt);
    int sims = 0;
    for (size_t i = 0; i < rt->num_devices; i++) {
      const char* s = meta(rt, rt->devices[i], "simulated");
      sims += s && !strcmp(s, "1");
    }
    textf(what, sizeof what, "with %s, no simulated device is listed (%d device(s), %d simulated)",
          unset ? "CUDAEP_BACKEND unset (cuda)" : "CUDAEP_BACKEND=cuda", n, sims);
    f += ok(n >= 0 && sims == 0, what);
    if (n == 0) {
      unsigned long hits = rt_log_found(found, sizeof found);
      textf(what, sizeof what, "listing nothing, CudaEp says why on ORT's log, naming CUDAEP_BACKEND=sim (%lu message(s): %.300s)",
            hits, found);
      f += ok(hits >= 1 && strstr(found, "CUDAEP_BACKEND=sim") != NULL, what);
    }
  }

  int reg = reregister(rt, "gpu0", &e);
  textf(what, sizeof what, "CUDAEP_BACKEND=gpu0 fails the registration, naming the value (%s)", reg < 0 ? e.msg : "it registered");
  f += ok(reg < 0 && strstr(e.msg, "CUDAEP_BACKEND=\"gpu0\"") != NULL, what);

  reg = reregister(rt, before ? saved : NULL, &e);
  f += ok(reg == 0 && rt_refresh_devices(rt) >= 1, "CUDAEP_BACKEND restored: registering again lists the devices as before");
  return f;
}

int case_devices(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  (void)argv;
  int f = 0;
  rt_print_devices(rt);
  if (!rt->ep_mode) {
    /* cpu-only: nothing is registered; the listing must still work and hold no CudaEp. */
    const OrtEpDevice* const* devs = NULL;
    size_t n = 0;
    f += ok(rt_check(rt, A(GetEpDevices)(rt->env, &devs, &n), "GetEpDevices") == 0 && n >= 1,
            "GetEpDevices lists at least ORT's CPU device");
    f += ok(rt_refresh_devices(rt) == 0, "no CudaEp device without the library (cpu-only)");
    return f;
  }

  const char* want_backend = getenv("CUDAEP_TEST_BACKEND");
  if (want_backend && !*want_backend) want_backend = NULL;
  char what[256];
  textf(what, sizeof what, "GetEpDevices lists %zu CudaEp device(s)", rt->num_devices);
  f += ok(rt->num_devices >= 1, what);
  for (size_t i = 0; i < rt->num_devices; i++) f += check_device(rt, i, rt->devices[i], want_backend);

  rt_error e;
  int un = rt_unregister_ep(rt, &e);
  if (un < 0) printf("    UnregisterExecutionProviderLibrary: [%s] %s\n", rt_error_code_name(e.code), e.msg);
  f += ok(un == 0, "UnregisterExecutionProviderLibrary succeeds");
  f += ok(rt_refresh_devices(rt) == 0, "after unregistering, GetEpDevices lists no CudaEp device");

  rt_error re;
  OrtStatus* st = ORT_API_FN(rt->api, RegisterExecutionProviderLibrary)(rt->env, RT_EP_REGISTRATION, rt->ep_path);
  int reg = rt_take(rt, st, "RegisterExecutionProviderLibrary (again)", &re, 0);
  if (reg == 0) rt->registered = 1;
  f += ok(reg == 0, "registering the library again succeeds");
  int n = rt_refresh_devices(rt);
  textf(what, sizeof what, "after registering again, GetEpDevices lists %d CudaEp device(s)", n);
  f += ok(n >= 1, what);
  for (size_t i = 0; i < rt->num_devices; i++) f += check_device(rt, i, rt->devices[i], want_backend);
  f += check_backend_env(rt);
  return f;
}
