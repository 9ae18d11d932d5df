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
  uint32_t vid = A(HardwareDevice_VendorId)(hw);
  textf(what, sizeof what, "device %zu: hardware vendor id 0x%04x (want 0x%04x)", i, vid, RT_EP_VENDOR_ID);
  f += ok(vid == RT_EP_VENDOR_ID, what);
  int type = (int)A(HardwareDevice_Type)(hw);
  textf(what, sizeof what, "device %zu: hardware type %d (want GPU = %d)", i, type, (int)OrtHardwareDeviceType_GPU);
  f += ok(type == OrtHardwareDeviceType_GPU, what);

  const char* simulated = meta(rt, d, "simulated");
  int is_sim = simulated && !strcmp(simulated, "1");
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
  return f;
}
