/*
 * case_iobinding.c - `iobinding MODELDIR`: a host keeps the MLP's input and output in CudaEp's
 * device memory and runs the session through ORT's IoBinding, as users of a GPU EP do to keep
 * tensors on the device between runs. Every output is copied back and compared with a plain CPU
 * session on the same input (rtol 1e-4, atol 1e-5, as the model cases).
 *
 *   memory   CudaEp's EP device declares device memory (EpDevice_MemoryInfo DEFAULT: GPU, vendor
 *            0x10DE); the session under test gives an allocator for it (CreateAllocator), the
 *            environment has a shared one (GetSharedAllocator), and the session wants X and Y
 *            there (SessionGetMemoryInfoForInputs/Outputs)
 *   device   4 runs (batch 1, 8, 8, 3): X made in device memory (CreateTensorAsOrtValue), filled
 *            with ORT's CopyTensors, bound with BindInput; Y bound with BindOutputToDevice;
 *            RunWithBinding; Y must lie in device memory and is copied back with CopyTensors
 *   shared   one run whose X comes from the environment's shared allocator
 *   mixed    a host X with a device Y (ORT copies X in), and a device X with a host Y
 *   pinned   X in CudaEp's pinned host memory, written in place, with a device Y
 *   graph    a session with enable_cuda_graph=1, 20 runs: X updated in place between runs
 *            (batch 8, another tensor of batch 3 in runs 10-14), Y bound once per shape so that
 *            ORT hands the EP the same output buffer again; no run may repeat the previous output
 *   cache    static key and value caches, each bound as both past and present (one device tensor
 *            each), with and without graphs: updated in place, one position a step; and a model
 *            that reads past after the update, which must see the cache as it was (CudaEp copies)
 *
 * Binding a device tensor that does not really lie in device memory (a freed allocation, a host
 * pointer labelled as device memory) cannot be expressed through ORT's API without undefined
 * behaviour in the host, so the negative side is covered by the mixed runs: ORT must copy a host
 * X into device memory itself, and a device X must still reach a host Y.
 *
 * With --cpu-only the same flow runs with ORT's CPU memory in place of CudaEp's device memory
 * (the location checks then expect CPU memory): the harness checked against ORT alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "models.h"

#define A(Name) ORT_API_FN(rt->api, Name)

/* The case's tally, printed at its end ("N passed, N failed"). */
static int passed, failed;

static int tally(int cond, const char* what) {
  if (cond) passed++;
  else failed++;
  return ok(cond, what);
}

/* --- memory infos ----------------------------------------------------------------------------- */

typedef struct mem_desc {
  OrtMemoryInfoDeviceType type;
  uint32_t vendor;
  int id;
  OrtDeviceMemoryType mem_type;
  const char* name;
} mem_desc;

static int describe(ort_rt* rt, const OrtMemoryInfo* mi, mem_desc* d) {
  memset(d, 0, sizeof *d);
  d->name = "";
  if (!mi) return -1;
  A(MemoryInfoGetDeviceType)(mi, &d->type);
  d->vendor = A(MemoryInfoGetVendorId)(mi);
  d->mem_type = A(MemoryInfoGetDeviceMemType)(mi);
  if (rt_check(rt, A(MemoryInfoGetId)(mi, &d->id), "MemoryInfoGetId") < 0) return -1;
  if (rt_check(rt, A(MemoryInfoGetName)(mi, &d->name), "MemoryInfoGetName") < 0) return -1;
  if (!d->name) d->name = "";
  return 0;
}

static void mem_text(ort_rt* rt, const OrtMemoryInfo* mi, char* buf, size_t cap) {
  static const char* const types[] = {"CPU", "GPU", "FPGA", "NPU"};
  mem_desc d;
  if (describe(rt, mi, &d) < 0) {
    textf(buf, cap, "%s", mi ? "(unreadable memory info)" : "(no memory info)");
    return;
  }
  textf(buf, cap, "%s %d vendor 0x%04x %s memory \"%s\"", (d.type >= 0 && d.type <= 3) ? types[d.type] : "?", d.id,
        d.vendor, d.mem_type == OrtDeviceMemoryType_DEFAULT ? "default" : "host-accessible", d.name);
}

/* same_memory: mi and want describe the same memory (device type, vendor, device id, memory type).
 * CompareMemoryInfo is not used: it also compares names and allocator types, which ORT's own
 * copies of an EP's memory info need not keep. */
static int same_memory(ort_rt* rt, const OrtMemoryInfo* mi, const OrtMemoryInfo* want) {
  mem_desc a, b;
  if (describe(rt, mi, &a) < 0 || describe(rt, want, &b) < 0) return 0;
  return a.type == b.type && a.vendor == b.vendor && a.id == b.id && a.mem_type == b.mem_type;
}

/* value_in: the tensor v lies in the memory `want` describes; otherwise why says where it is. */
static int value_in(ort_rt* rt, const OrtValue* v, const OrtMemoryInfo* want, const char* what, char* why, size_t cap) {
  const OrtMemoryInfo* mi = NULL;
  rt_error e;
  if (rt_take(rt, A(GetTensorMemoryInfo)(v, &mi), "GetTensorMemoryInfo", &e, 1) < 0) {
    textf(why, cap, "GetTensorMemoryInfo(%s): [%s] %s", what, rt_error_code_name(e.code), e.msg);
    return -1;
  }
  if (same_memory(rt, mi, want)) return 0;
  char got[256], wanted[256];
  mem_text(rt, mi, got, sizeof got);
  mem_text(rt, want, wanted, sizeof wanted);
  textf(why, cap, "%s lies in %s, not in %s", what, got, wanted);
  return -1;
}

/* --- tensors between host and device ----------------------------------------------------------- */

/* wrap makes a CPU OrtValue over t's data (t keeps owning it). */
static int wrap(ort_rt* rt, host_tensor* t, OrtValue** out, rt_error* e) {
  *out = NULL;
  return rt_take(rt,
                 A(CreateTensorWithDataAsOrtValue)(rt->cpu_mem, t->data, t->count * t->elem_size, t->dims, t->ndims,
                                                   (ONNXTensorElementDataType)t->data_type, out),
                 "CreateTensorWithDataAsOrtValue", e, 1);
}

/* in_cpu_memory: the tensor v lies in CPU memory. */
static int in_cpu_memory(ort_rt* rt, const OrtValue* v) {
  const OrtMemoryInfo* mi = NULL;
  mem_desc d;
  if (rt_check(rt, A(GetTensorMemoryInfo)(v, &mi), "GetTensorMemoryInfo") < 0 || describe(rt, mi, &d) < 0) return 0;
  return d.type == OrtMemoryInfoDeviceType_CPU;
}

/* copy_tensor copies src into dst with ORT's CopyTensors and no stream: ORT picks the data
 * transfer of the EP library that owns the memory (CudaEp's for its device memory), and the copy
 * has finished when it returns. The environment has no data transfer from CPU to CPU memory
 * (CopyTensors answers NOT_IMPLEMENTED), so those copies, which involve no EP, are memcpy. */
static int copy_tensor(ort_rt* rt, const OrtValue* src, OrtValue* dst, const char* what, char* why, size_t cap) {
  const OrtValue* srcs[1] = {src};
  OrtValue* dsts[1] = {dst};
  rt_error e;
  if (in_cpu_memory(rt, src) && in_cpu_memory(rt, dst)) {
    const void* from = NULL;
    void* to = NULL;
    size_t n = 0, m = 0;
    if (rt_take(rt, A(GetTensorData)(src, &from), "GetTensorData", &e, 1) < 0 ||
        rt_take(rt, A(GetTensorMutableData)(dst, &to), "GetTensorMutableData", &e, 1) < 0 ||
        rt_take(rt, A(GetTensorSizeInBytes)(src, &n), "GetTensorSizeInBytes", &e, 1) < 0 ||
        rt_take(rt, A(GetTensorSizeInBytes)(dst, &m), "GetTensorSizeInBytes", &e, 1) < 0) {
      textf(why, cap, "copying %s in CPU memory: %s", what, e.msg);
      return -1;
    }
    if (n != m) {
      textf(why, cap, "copying %s in CPU memory: %zu bytes into %zu", what, n, m);
      return -1;
    }
    if (n) memcpy(to, from, n);
    return 0;
  }
  if (rt_take(rt, A(CopyTensors)(rt->env, srcs, dsts, NULL, 1), "CopyTensors", &e, 1) < 0) {
    textf(why, cap, "CopyTensors (%s): [%s] %s", what, rt_error_code_name(e.code), e.msg);
    return -1;
  }
  return 0;
}

/* upload_into copies the host tensor x into the existing tensor dst (same shape). */
static int upload_into(ort_rt* rt, host_tensor* x, OrtValue* dst, char* why, size_t cap) {
  OrtValue* host = NULL;
  rt_error e;
  if (wrap(rt, x, &host, &e) < 0) {
    textf(why, cap, "wrapping the host input: %s", e.msg);
    return -1;
  }
  int rc = copy_tensor(rt, host, dst, "host X -> bound X", why, cap);
  A(ReleaseValue)(host);
  return rc;
}

/* make_tensor makes an uninitialised float tensor shaped like x with `alloc`, in its memory. */
static int make_tensor(ort_rt* rt, OrtAllocator* alloc, const host_tensor* x, OrtValue** out, char* why, size_t cap) {
  *out = NULL;
  rt_error e;
  if (rt_take(rt,
              A(CreateTensorAsOrtValue)(alloc, x->dims, x->ndims, (ONNXTensorElementDataType)x->data_type, out),
              "CreateTensorAsOrtValue", &e, 1) < 0) {
    textf(why, cap, "CreateTensorAsOrtValue: [%s] %s", rt_error_code_name(e.code), e.msg);
    *out = NULL;
    return -1;
  }
  return 0;
}

/* upload makes a tensor with `alloc` and copies x into it. */
static int upload(ort_rt* rt, OrtAllocator* alloc, host_tensor* x, OrtValue** out, char* why, size_t cap) {
  if (make_tensor(rt, alloc, x, out, why, cap) < 0) return -1;
  if (upload_into(rt, x, *out, why, cap) < 0) {
    A(ReleaseValue)(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

/* download copies the tensor v (wherever it lies) into a new host tensor. */
static int download(ort_rt* rt, const OrtValue* v, host_tensor* out, char* why, size_t cap) {
  OrtTensorTypeAndShapeInfo* info = NULL;
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t ndims = 0;
  int64_t dims[ONNX_PB_MAX_DIMS];
  rt_error e;
  memset(out, 0, sizeof *out);
  if (rt_take(rt, A(GetTensorTypeAndShape)(v, &info), "GetTensorTypeAndShape", &e, 1) < 0) {
    textf(why, cap, "GetTensorTypeAndShape(Y): %s", e.msg);
    return -1;
  }
  int rc = -1;
  if (rt_take(rt, A(GetTensorElementType)(info, &type), "GetTensorElementType", &e, 1) < 0 ||
      rt_take(rt, A(GetDimensionsCount)(info, &ndims), "GetDimensionsCount", &e, 1) < 0 || ndims > ONNX_PB_MAX_DIMS ||
      rt_take(rt, A(GetDimensions)(info, dims, ndims), "GetDimensions", &e, 1) < 0) {
    textf(why, cap, "reading Y's type and shape: %s", e.failed ? e.msg : "too many dimensions");
    goto out;
  }
  if (host_tensor_alloc(out, (int32_t)type, dims, ndims, why, cap) < 0) goto out;
  OrtValue* host = NULL;
  if (wrap(rt, out, &host, &e) < 0) {
    textf(why, cap, "wrapping the host output: %s", e.msg);
    host_tensor_free(out);
    goto out;
  }
  /* A distinct non-zero pattern first: a copy that silently does nothing cannot pass. */
  memset(out->data, 0x5a, out->count * out->elem_size);
  rc = copy_tensor(rt, v, host, "bound Y -> host Y", why, cap);
  A(ReleaseValue)(host);
  if (rc < 0) host_tensor_free(out);
out:
  A(ReleaseTensorTypeAndShapeInfo)(info);
  return rc;
}

/* --- bound runs -------------------------------------------------------------------------------- */

/* bind binds X to x and Y to `y_mem` (ORT allocates Y there at the run), dropping what was bound. */
static int bind(ort_rt* rt, rt_session* s, OrtIoBinding* binding, const OrtValue* x, const OrtMemoryInfo* y_mem,
                char* why, size_t cap) {
  rt_error e;
  A(ClearBoundInputs)(binding);
  A(ClearBoundOutputs)(binding);
  if (rt_take(rt, A(BindInput)(binding, s->input_names[0], x), "BindInput", &e, 1) < 0) {
    textf(why, cap, "BindInput(%s): [%s] %s", s->input_names[0], rt_error_code_name(e.code), e.msg);
    return -1;
  }
  if (rt_take(rt, A(BindOutputToDevice)(binding, s->output_names[0], y_mem), "BindOutputToDevice", &e, 1) < 0) {
    textf(why, cap, "BindOutputToDevice(%s): [%s] %s", s->output_names[0], rt_error_code_name(e.code), e.msg);
    return -1;
  }
  return 0;
}

/* run_bound runs s with what `binding` holds, checks that the one bound output lies in y_mem and
 * copies it into *y (the caller frees it). *y_addr (if not NULL) gets the output's address, only
 * compared, never read: it is device memory. */
static int run_bound(ort_rt* rt, rt_session* s, OrtIoBinding* binding, const OrtMemoryInfo* y_mem, host_tensor* y,
                     const void** y_addr, char* why, size_t cap) {
  rt_error e;
  memset(y, 0, sizeof *y);
  if (rt_take(rt, A(RunWithBinding)(s->session, NULL, binding), "RunWithBinding", &e, 1) < 0) {
    textf(why, cap, "RunWithBinding: [%s] %s", rt_error_code_name(e.code), e.msg);
    return -1;
  }
  OrtValue** outs = NULL;
  size_t n = 0;
  if (rt_take(rt, A(GetBoundOutputValues)(binding, rt->alloc, &outs, &n), "GetBoundOutputValues", &e, 1) < 0) {
    textf(why, cap, "GetBoundOutputValues: [%s] %s", rt_error_code_name(e.code), e.msg);
    return -1;
  }
  int rc = -1;
  if (n != 1 || !outs || !outs[0]) textf(why, cap, "GetBoundOutputValues gave %zu values, want 1", n);
  else if (value_in(rt, outs[0], y_mem, "Y", why, cap) == 0) rc = download(rt, outs[0], y, why, cap);
  if (rc == 0 && y_addr && rt_check(rt, A(GetTensorData)(outs[0], y_addr), "GetTensorData") < 0) *y_addr = NULL;
  for (size_t i = 0; outs && i < n; i++)
    if (outs[i]) A(ReleaseValue)(outs[i]);
  if (outs) rt_check(rt, A(AllocatorFree)(rt->alloc, outs), "AllocatorFree");
  return rc;
}

/* against_cpu compares got with what the CPU session computes for x. */
static int against_cpu(ort_rt* rt, rt_session* ref, host_tensor* x, const host_tensor* got, char* why, size_t cap) {
  host_tensor want;
  rt_error e;
  if (rt_run(rt, ref, x, 1, &want, &e, 1) < 0) {
    textf(why, cap, "the CPU reference session's Run failed: [%s] %s", rt_error_code_name(e.code), e.msg);
    return -1;
  }
  int rc = compare_tensors(got, &want, MODEL_RTOL, MODEL_ATOL, why, cap);
  host_tensor_free(&want);
  return rc;
}

/* same_as: got equals prev exactly (a stale output repeated). */
static int same_as(const host_tensor* got, const host_tensor* prev) {
  char why[256];
  return prev->data && compare_tensors(got, prev, 0, 0, why, sizeof why) == 0;
}

/* What one bound run puts where. */
typedef struct run_spec {
  int64_t batch;
  uint64_t seed;
  OrtAllocator* x_alloc;      /* X is made with it and uploaded; NULL: X is bound as a host tensor */
  const OrtMemoryInfo* x_mem; /* where X must then lie */
  const OrtMemoryInfo* y_mem; /* where Y is bound */
} run_spec;

/* one_run binds, runs and compares one input; *got keeps the output (the caller frees it). */
static int one_run(ort_rt* rt, rt_session* test, rt_session* ref, OrtIoBinding* binding, const run_spec* r,
                   host_tensor* got, char* why, size_t cap) {
  host_tensor x;
  memset(got, 0, sizeof *got);
  if (make_mlp_input(&x, r->batch, r->seed) < 0) {
    textf(why, cap, "making the input");
    return -1;
  }
  OrtValue* xv = NULL;
  rt_error e;
  int rc = -1;
  if (r->x_alloc) {
    if (upload(rt, r->x_alloc, &x, &xv, why, cap) < 0 || value_in(rt, xv, r->x_mem, "X", why, cap) < 0) goto out;
  } else if (wrap(rt, &x, &xv, &e) < 0) {
    textf(why, cap, "wrapping the host input: %s", e.msg);
    goto out;
  }
  if (bind(rt, test, binding, xv, r->y_mem, why, cap) < 0) goto out;
  if (run_bound(rt, test, binding, r->y_mem, got, NULL, why, cap) < 0) goto out;
  rc = against_cpu(rt, ref, &x, got, why, cap);
out:
  /* The binding holds its own reference to X; dropping it here leaves none behind. */
  A(ClearBoundInputs)(binding);
  A(ClearBoundOutputs)(binding);
  if (xv) A(ReleaseValue)(xv);
  host_tensor_free(&x);
  return rc;
}

static int new_binding(ort_rt* rt, rt_session* s, OrtIoBinding** out) {
  *out = NULL;
  rt_error e;
  if (rt_take(rt, A(CreateIoBinding)(s->session, out), "CreateIoBinding", &e, 1) < 0) {
    char what[2300];
    textf(what, sizeof what, "CreateIoBinding: [%s] %s", rt_error_code_name(e.code), e.msg);
    *out = NULL;
    return tally(0, what);
  }
  return 0;
}

/* --- the parts ---------------------------------------------------------------------------------- */

/* check_placement: the session keeps X and Y in `dev` (where its first consumer and producer, on
 * CudaEp, want them): what makes binding device tensors worth it. */
static int check_placement(ort_rt* rt, rt_session* s, const OrtMemoryInfo* dev) {
  const OrtMemoryInfo* in_mem[RT_MAX_IO] = {0};
  const OrtMemoryInfo* out_mem[RT_MAX_IO] = {0};
  char what[1200], a[256], b[256];
  rt_error e;
  if (rt_take(rt, A(SessionGetMemoryInfoForInputs)(s->session, in_mem, s->num_inputs), "SessionGetMemoryInfoForInputs",
              &e, 1) < 0 ||
      rt_take(rt, A(SessionGetMemoryInfoForOutputs)(s->session, out_mem, s->num_outputs),
              "SessionGetMemoryInfoForOutputs", &e, 1) < 0) {
    textf(what, sizeof what, "SessionGetMemoryInfoFor{Inputs,Outputs}: [%s] %s", rt_error_code_name(e.code), e.msg);
    return tally(0, what);
  }
  mem_text(rt, in_mem[0], a, sizeof a);
  mem_text(rt, out_mem[0], b, sizeof b);
  textf(what, sizeof what, "the session wants X in %s and makes Y in %s", a, b);
  return tally(same_memory(rt, in_mem[0], dev) && same_memory(rt, out_mem[0], dev), what);
}

/* check_device_runs: device X -> device Y for batches 1, 8, 8, 3. */
static int check_device_runs(ort_rt* rt, rt_session* test, rt_session* ref, OrtAllocator* alloc,
                             const OrtMemoryInfo* dev) {
  static const int64_t batches[] = {1, 8, 8, 3};
  OrtIoBinding* binding = NULL;
  int f = new_binding(rt, test, &binding);
  if (!binding) return f;
  host_tensor prev;
  memset(&prev, 0, sizeof prev);
  CudaEpOrtStats before, after;
  if (rt->ep_mode && rt_ep_stats(rt, &before) < 0) f++;
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
    run_spec r = {batches[i], 300 + (uint64_t)i, alloc, dev, dev};
    host_tensor got;
    char why[1024] = "", what[1200];
    int rc = one_run(rt, test, ref, binding, &r, &got, why, sizeof why);
    if (rc == 0 && same_as(&got, &prev)) {
      textf(why, sizeof why, "the output repeats the previous run's");
      rc = -1;
    }
    textf(what, sizeof what, "run %zu, batch %lld: device X -> device Y matches the CPU session%s%s", i,
          (long long)batches[i], rc ? ": " : "", why);
    f += tally(rc == 0, what);
    host_tensor_free(&prev);
    prev = got;
  }
  host_tensor_free(&prev);
  A(ReleaseIoBinding)(binding);
  if (rt->ep_mode && rt_ep_stats(rt, &after) == 0) {
    /* The partition reads X and writes Y in ORT's device tensors, copying neither. */
    char what[512];
    uint64_t runs = sizeof batches / sizeof batches[0];
    uint64_t in_place = after.values_in_place - before.values_in_place, copied = after.values_copied - before.values_copied;
    textf(what, sizeof what, "%llu device runs read X and wrote Y in place: %llu values in place, %llu copied",
          (unsigned long long)runs, (unsigned long long)in_place, (unsigned long long)copied);
    f += tally(in_place == 2 * runs && copied == 0, what);
  }
  return f;
}

/* check_shared: X from the environment's shared allocator for the device memory. By ORT's
 * documentation one exists for every EP device's memory info. */
static int check_shared(ort_rt* rt, rt_session* test, rt_session* ref, const OrtMemoryInfo* dev) {
  OrtAllocator* shared = NULL;
  rt_error e;
  char what[2300];
  if (rt_take(rt, A(GetSharedAllocator)(rt->env, dev, &shared), "GetSharedAllocator", &e, 1) < 0) {
    textf(what, sizeof what, "GetSharedAllocator: [%s] %s", rt_error_code_name(e.code), e.msg);
    return tally(0, what);
  }
  if (!shared) {
    if (!rt->ep_mode) {
      printf("  skip the shared allocator: ORT %s keeps none for its CPU memory info\n", rt->version);
      return 0;
    }
    return tally(0, "GetSharedAllocator finds the environment's allocator for CudaEp's device memory");
  }
  OrtIoBinding* binding = NULL;
  int f = new_binding(rt, test, &binding);
  if (!binding) return f;
  run_spec r = {5, 400, shared, dev, dev};
  host_tensor got;
  char why[1024] = "";
  int rc = one_run(rt, test, ref, binding, &r, &got, why, sizeof why);
  textf(what, sizeof what, "batch 5, X from the environment's shared allocator: device X -> device Y matches%s%s",
        rc ? ": " : "", why);
  f += tally(rc == 0, what);
  host_tensor_free(&got);
  A(ReleaseIoBinding)(binding);
  return f;
}

/* check_pinned: X in CudaEp's pinned host memory (the EP device's host-accessible memory info),
 * written in place by the host, with a device Y: ORT copies X to the device with CudaEp's data
 * transfer. */
static int check_pinned(ort_rt* rt, rt_session* test, rt_session* ref, const OrtMemoryInfo* dev) {
  if (!rt->ep_mode) return 0; /* CudaEp's memory */
  char what[2300], text[256];
  const OrtMemoryInfo* pin = A(EpDevice_MemoryInfo)(rt->devices[0], OrtDeviceMemoryType_HOST_ACCESSIBLE);
  mem_desc d;
  int good = describe(rt, pin, &d) == 0 && d.type == OrtMemoryInfoDeviceType_GPU && d.vendor == RT_EP_VENDOR_ID &&
             d.mem_type == OrtDeviceMemoryType_HOST_ACCESSIBLE;
  mem_text(rt, pin, text, sizeof text);
  textf(what, sizeof what, "CudaEp's EP device declares pinned host memory: %s", text);
  int f = tally(good, what);
  if (!good) return f;
  OrtAllocator* pa = NULL;
  rt_error e;
  if (rt_take(rt, A(CreateAllocator)(test->session, pin, &pa), "CreateAllocator", &e, 1) < 0) {
    textf(what, sizeof what, "CreateAllocator(session under test, pinned memory): [%s] %s", rt_error_code_name(e.code),
          e.msg);
    return f + tally(0, what);
  }
  OrtIoBinding* binding = NULL;
  f += new_binding(rt, test, &binding);
  static const int64_t batches[] = {2, 6, 6};
  host_tensor prev;
  memset(&prev, 0, sizeof prev);
  for (size_t i = 0; binding && i < sizeof batches / sizeof batches[0]; i++) {
    host_tensor x, got;
    memset(&got, 0, sizeof got);
    char why[1024] = "";
    OrtValue* xv = NULL;
    void* data = NULL;
    int rc = -1;
    if (make_mlp_input(&x, batches[i], 500 + (uint64_t)i) < 0) return f + 1;
    if (make_tensor(rt, pa, &x, &xv, why, sizeof why) < 0 || value_in(rt, xv, pin, "X", why, sizeof why) < 0) goto next;
    if (rt_take(rt, A(GetTensorMutableData)(xv, &data), "GetTensorMutableData", &e, 1) < 0 || !data) {
      textf(why, sizeof why, "GetTensorMutableData of pinned X: %s", e.msg);
      goto next;
    }
    memcpy(data, x.data, x.count * x.elem_size); /* host-accessible: the host writes it in place */
    if (bind(rt, test, binding, xv, dev, why, sizeof why) < 0) goto next;
    if (run_bound(rt, test, binding, dev, &got, NULL, why, sizeof why) < 0) goto next;
    rc = against_cpu(rt, ref, &x, &got, why, sizeof why);
    if (rc == 0 && same_as(&got, &prev)) {
      textf(why, sizeof why, "the output repeats the previous run's");
      rc = -1;
    }
  next:
    A(ClearBoundInputs)(binding);
    A(ClearBoundOutputs)(binding);
    if (xv) A(ReleaseValue)(xv);
    textf(what, sizeof what, "run %zu, batch %lld: pinned X -> device Y matches the CPU session%s%s", i,
          (long long)batches[i], rc ? ": " : "", why);
    f += tally(rc == 0, what);
    host_tensor_free(&x);
    host_tensor_free(&prev);
    prev = got;
  }
  host_tensor_free(&prev);
  if (binding) A(ReleaseIoBinding)(binding);
  A(ReleaseAllocator)(pa);
  return f;
}

/* check_mixed: a host X with a device Y (ORT copies X into device memory itself), and a device X
 * with a host Y (ORT copies Y out of it). */
static int check_mixed(ort_rt* rt, rt_session* test, rt_session* ref, OrtAllocator* alloc, const OrtMemoryInfo* dev) {
  OrtIoBinding* binding = NULL;
  int f = new_binding(rt, test, &binding);
  if (!binding) return f;
  static const struct {
    const char* label;
    int device_x, device_y;
  } mixes[] = {{"host X -> device Y", 0, 1}, {"device X -> host Y", 1, 0}};
  for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
    run_spec r = {6, 500 + (uint64_t)i, mixes[i].device_x ? alloc : NULL, dev, mixes[i].device_y ? dev : rt->cpu_mem};
    host_tensor got;
    char why[1024] = "", what[1200];
    int rc = one_run(rt, test, ref, binding, &r, &got, why, sizeof why);
    textf(what, sizeof what, "batch 6, %s matches the CPU session%s%s", mixes[i].label, rc ? ": " : "", why);
    f += tally(rc == 0, what);
    host_tensor_free(&got);
  }
  A(ReleaseIoBinding)(binding);
  return f;
}

/* check_graph: enable_cuda_graph=1 with bound device tensors updated in place, the way CUDA-graph
 * users drive a GPU EP: the captured graph must see each run's new X and the reused Y buffer. */
static int check_graph(ort_rt* rt, const char* dir, OrtAllocator* alloc, const OrtMemoryInfo* dev) {
  rt_session_opts o;
  ep_options(rt, &o);
  add_ep_option(&o, "enable_cuda_graph", "1");
  add_ep_option(&o, "tf32", "0");
  o.disable_cpu_fallback = rt->ep_mode;
  rt_session test, ref;
  if (open_pair(rt, dir, "mlp.onnx", &o, &test, &ref) < 0) return tally(0, "opening the enable_cuda_graph=1 session pair");
  OrtIoBinding* binding = NULL;
  int f = new_binding(rt, &test, &binding);
  /* One device X per batch size, made once (through the first session's allocator: the memory
   * is the EP device's, not a session's) and refilled before every run. */
  OrtValue* xs[2] = {NULL, NULL};
  static const int64_t sizes[2] = {8, 3};
  char why[1024] = "", what[1200];
  for (int k = 0; k < 2 && binding; k++) {
    host_tensor shape;
    if (make_mlp_input(&shape, sizes[k], 1) < 0 || make_tensor(rt, alloc, &shape, &xs[k], why, sizeof why) < 0) {
      textf(what, sizeof what, "a device X of batch %lld: %s", (long long)sizes[k], why);
      f += tally(0, what);
    }
    host_tensor_free(&shape);
  }
  const int runs = 20;
  int bad = 0, errors = 0, repeats = 0, done = 0, same_buffer = 0, kept = 0;
  int64_t bound_batch = 0;
  const void* prev_addr = NULL;
  host_tensor prev;
  memset(&prev, 0, sizeof prev);
  for (int i = 0; i < runs && binding && xs[0] && xs[1]; i++) {
    int64_t batch = (i >= 10 && i < 15) ? 3 : 8;
    OrtValue* xv = xs[batch == 8 ? 0 : 1];
    host_tensor x, got;
    if (make_mlp_input(&x, batch, 2000 + (uint64_t)i) < 0) {
      errors++;
      break;
    }
    int rc = upload_into(rt, &x, xv, why, sizeof why);
    /* Rebind only when the shape changes: otherwise ORT keeps Y's buffer from the last run. */
    int rebound = batch != bound_batch;
    if (rc == 0 && rebound) {
      rc = bind(rt, &test, binding, xv, dev, why, sizeof why);
      bound_batch = rc == 0 ? batch : 0;
    }
    const void* y_addr = NULL;
    if (rc == 0) rc = run_bound(rt, &test, binding, dev, &got, &y_addr, why, sizeof why);
    if (rc < 0) {
      printf("    run %d (batch %lld): %s\n", i, (long long)batch, why);
      host_tensor_free(&x);
      if (++errors >= 3) break;
      continue;
    }
    done++;
    if (!rebound) kept++;
    if (!rebound && y_addr && y_addr == prev_addr) same_buffer++;
    prev_addr = y_addr;
    if (against_cpu(rt, &ref, &x, &got, why, sizeof why) < 0) {
      if (bad < 5) printf("    run %d (batch %lld) differs from the CPU session: %s\n", i, (long long)batch, why);
      bad++;
    }
    /* A replay that keeps returning an earlier result is exactly what a stale graph does. */
    if (same_as(&got, &prev)) repeats++;
    host_tensor_free(&prev);
    prev = got;
    host_tensor_free(&x);
  }
  host_tensor_free(&prev);
  if (binding) {
    textf(what, sizeof what,
          "enable_cuda_graph=1, %d of %d runs with X updated in place (batch 8, 3 in runs 10-14): %d error(s), "
          "%d mismatch(es)",
          done, runs, errors, bad);
    f += tally(done == runs && errors == 0 && bad == 0, what);
    /* Which buffer ORT hands the EP is ORT's choice: reported, not checked. */
    printf("    (ORT gave the EP the previous run's Y buffer in %d of the %d runs that kept their binding)\n",
           same_buffer, kept);
    textf(what, sizeof what, "enable_cuda_graph=1: no run repeats the previous output (%d did)", repeats);
    f += tally(done == runs && repeats == 0, what);
  }
  /* A fresh X tensor per run: more sets of addresses than CudaEp captures graphs for (4 per
   * plan); the runs past them copy through the plan's buffers and must still be right. All X
   * tensors stay alive, so every run has its own address. */
  OrtValue* fresh[7] = {NULL};
  int fresh_bad = 0, fresh_done = 0;
  CudaEpOrtStats before, after;
  int counted = rt->ep_mode && rt_ep_stats(rt, &before) == 0;
  for (int i = 0; i < 7 && binding; i++) {
    host_tensor x, got;
    if (make_mlp_input(&x, 8, 3000 + (uint64_t)i) < 0) break;
    int rc = make_tensor(rt, alloc, &x, &fresh[i], why, sizeof why);
    if (rc == 0) rc = upload_into(rt, &x, fresh[i], why, sizeof why);
    if (rc == 0) rc = bind(rt, &test, binding, fresh[i], dev, why, sizeof why);
    if (rc == 0) rc = run_bound(rt, &test, binding, dev, &got, NULL, why, sizeof why);
    if (rc == 0) {
      fresh_done++;
      if (against_cpu(rt, &ref, &x, &got, why, sizeof why) < 0) {
        printf("    fresh X %d differs from the CPU session: %s\n", i, why);
        fresh_bad++;
      }
      host_tensor_free(&got);
    } else {
      printf("    fresh X %d: %s\n", i, why);
    }
    host_tensor_free(&x);
  }
  if (binding) {
    textf(what, sizeof what, "enable_cuda_graph=1, 7 runs each with a new X tensor (past the 4 graphs a plan "
          "captures for in-place addresses): %d ran, %d mismatch(es)", fresh_done, fresh_bad);
    f += tally(fresh_done == 7 && fresh_bad == 0, what);
    if (counted && rt_ep_stats(rt, &after) == 0) {
      unsigned long long caps = after.captures - before.captures, copied = after.values_copied - before.values_copied;
      textf(what, sizeof what, "past the cap, runs copy X through the plan: %llu graph(s) captured, %llu value(s) copied",
            caps, copied);
      f += tally(caps <= 5 && copied > 0, what);
    }
  }
  for (int i = 0; i < 7; i++)
    if (fresh[i]) A(ReleaseValue)(fresh[i]);
  if (binding) A(ReleaseIoBinding)(binding);
  for (int k = 0; k < 2; k++)
    if (xs[k]) A(ReleaseValue)(xs[k]);
  rt_session_release(rt, &test);
  rt_session_release(rt, &ref);
  return f;
}

/* gen_models.py's cache models: a [1, CACHE_HEADS, CACHE_LEN, CACHE_DIM] cache. */
#define CACHE_HEADS 2
#define CACHE_LEN 8
#define CACHE_DIM 4
#define CACHE_N (CACHE_HEADS * CACHE_LEN * CACHE_DIM)

/* bind_host_input wraps the host tensor t as a CPU value and binds it as input `name`. */
static int bind_host_input(ort_rt* rt, OrtIoBinding* binding, const char* name, host_tensor* t, char* why, size_t cap) {
  OrtValue* v = NULL;
  rt_error e;
  if (wrap(rt, t, &v, &e) < 0) {
    textf(why, cap, "wrapping %s: %s", name, e.msg);
    return -1;
  }
  int rc = rt_take(rt, A(BindInput)(binding, name, v), "BindInput", &e, 1);
  if (rc < 0) textf(why, cap, "BindInput(%s): [%s] %s", name, rt_error_code_name(e.code), e.msg);
  A(ReleaseValue)(v); /* the binding holds its own reference */
  return rc < 0 ? -1 : 0;
}

/* cache_step runs step t of check_cache: the one position t % CACHE_LEN of each of the caches
 * device caches kv[c] (past_k and present_k, then past_v and present_v: both bound to kv[c])
 * takes new values; want[c] (the host's copy of cache c) is updated alike, and *sum gets the
 * model's last output, `extra` (cache.onnx's both, cache_reread.onnx's sum), bound in device
 * memory. */
static int cache_step(ort_rt* rt, rt_session* s, OrtIoBinding* binding, OrtValue* const* kv, int caches,
                      const OrtMemoryInfo* dev, int t, float (*want)[CACHE_N], const char* extra, host_tensor* sum,
                      char* why, size_t cap) {
  static const char* const past[2] = {"past_k", "past_v"}, * const present[2] = {"present_k", "present_v"},
                           * const news[2] = {"new_k", "new_v"};
  static const int64_t cd[4] = {1, 1, CACHE_LEN, 1}, nd[4] = {1, CACHE_HEADS, 1, CACHE_DIM};
  host_tensor cond, fresh[2];
  rt_error e;
  int rc = -1;
  memset(&cond, 0, sizeof cond);
  memset(fresh, 0, sizeof fresh);
  A(ClearBoundInputs)(binding);
  A(ClearBoundOutputs)(binding);
  if (host_tensor_alloc(&cond, ONNX_PB_BOOL, cd, 4, why, cap) < 0) goto out;
  memset(cond.data, 0, CACHE_LEN);
  ((unsigned char*)cond.data)[t % CACHE_LEN] = 1;
  if (bind_host_input(rt, binding, "cond", &cond, why, cap) < 0) goto out;
  for (int c = 0; c < caches; c++) {
    if (host_tensor_alloc(&fresh[c], ONNX_PB_FLOAT, nd, 4, why, cap) < 0) goto out;
    for (size_t i = 0; i < fresh[c].count; i++) ((float*)fresh[c].data)[i] = 100.0f * (float)(c + 1) + 10.0f * (float)t + (float)i;
    if (bind_host_input(rt, binding, news[c], &fresh[c], why, cap) < 0) goto out;
    if (rt_take(rt, A(BindInput)(binding, past[c], kv[c]), "BindInput", &e, 1) < 0 ||
        rt_take(rt, A(BindOutput)(binding, present[c], kv[c]), "BindOutput", &e, 1) < 0) {
      textf(why, cap, "binding cache %s: [%s] %s", past[c], rt_error_code_name(e.code), e.msg);
      goto out;
    }
  }
  if (rt_take(rt, A(BindOutputToDevice)(binding, extra, dev), "BindOutputToDevice", &e, 1) < 0) {
    textf(why, cap, "binding %s: [%s] %s", extra, rt_error_code_name(e.code), e.msg);
    goto out;
  }
  if (rt_take(rt, A(RunWithBinding)(s->session, NULL, binding), "RunWithBinding", &e, 1) < 0) {
    textf(why, cap, "RunWithBinding: [%s] %s", rt_error_code_name(e.code), e.msg);
    goto out;
  }
  {
    OrtValue** outs = NULL;
    size_t n = 0, want_n = (size_t)caches + 1;
    if (rt_take(rt, A(GetBoundOutputValues)(binding, rt->alloc, &outs, &n), "GetBoundOutputValues", &e, 1) < 0) {
      textf(why, cap, "GetBoundOutputValues: [%s] %s", rt_error_code_name(e.code), e.msg);
      goto out;
    }
    int got = n == want_n && outs && outs[n - 1] ? download(rt, outs[n - 1], sum, why, cap) : -1;
    if (got < 0 && !(n == want_n && outs && outs[n - 1])) textf(why, cap, "GetBoundOutputValues gave %zu values, want %zu", n, want_n);
    for (size_t i = 0; outs && i < n; i++)
      if (outs[i]) A(ReleaseValue)(outs[i]);
    if (outs) rt_check(rt, A(AllocatorFree)(rt->alloc, outs), "AllocatorFree");
    if (got < 0) goto out;
  }
  for (int c = 0; c < caches; c++)
    for (int h = 0; h < CACHE_HEADS; h++)
      for (int d = 0; d < CACHE_DIM; d++)
        want[c][(h * CACHE_LEN + t % CACHE_LEN) * CACHE_DIM + d] = ((float*)fresh[c].data)[h * CACHE_DIM + d];
  rc = 0;
out:
  A(ClearBoundInputs)(binding);
  A(ClearBoundOutputs)(binding);
  host_tensor_free(&cond);
  for (int c = 0; c < 2; c++) host_tensor_free(&fresh[c]);
  return rc;
}

/* check_cache: a decode loop's static key and value caches, each one device tensor bound as both
 * the past input and the present output of cache.onnx (present_k = Where(cond, new_k, past_k),
 * present_v likewise over the same cond: position t replaced; both = present_k + present_v),
 * as ORT's generative runtime binds a shared buffer, with and without enable_cuda_graph: 12
 * steps, each leaving exactly the host's copies of the caches behind and their sum in both.
 * CudaEp must run the two Wheres as one cudaep.WherePair (two fused nodes counted) and update
 * the caches in their own memory, copying nothing. Then cache_reread.onnx,
 * which reads past_k again after the update (sum = past_k + present_k, one partition): bound
 * the same way, the run must compute what separate buffers would (the cache before the update
 * plus after it), so CudaEp copies the cache instead. (Two partitions, each run on its own, would
 * not promise that: ORT runs them one after the other on the memory the host bound.) */
static int check_cache(ort_rt* rt, const char* dir, OrtAllocator* alloc, const OrtMemoryInfo* dev) {
  if (!rt->ep_mode) {
    printf("  cache: skipped without CudaEp (ORT's CPU kernels do not promise an output bound to an input's memory)\n");
    return 0;
  }
  int f = 0;
  char why[1024], what[1400], path[4096];
  for (int model = 0; model < 2; model++) {
    const char* file = model ? "cache_reread.onnx" : "cache.onnx";
    const int caches = model ? 1 : 2;
    for (int graph = 0; graph < 2; graph++) {
      rt_session_opts o;
      ep_options(rt, &o);
      add_ep_option(&o, "enable_cuda_graph", graph ? "1" : "0");
      o.disable_cpu_fallback = 1;
      rt_session s;
      rt_error e;
      textf(path, sizeof path, "%s/%s", dir, file);
      CudaEpOrtStats created;
      if (rt_ep_stats(rt, &created) < 0) memset(&created, 0, sizeof created);
      if (rt_session_create(rt, path, &o, &s, &e, 1) < 0) {
        textf(what, sizeof what, "%s: opening a session: [%s] %s", file, rt_error_code_name(e.code), e.msg);
        f += tally(0, what);
        continue;
      }
      OrtIoBinding* binding = NULL;
      host_tensor h, got, sum;
      static const int64_t kd[4] = {1, CACHE_HEADS, CACHE_LEN, CACHE_DIM};
      float want[2][CACHE_N], before[CACHE_N];
      OrtValue* kv[2] = {NULL, NULL};
      int steps = 12, done = 0, bad = 0, ready = 1;
      CudaEpOrtStats s0, s1;
      memset(&got, 0, sizeof got);
      why[0] = 0;
      if (host_tensor_alloc(&h, ONNX_PB_FLOAT, kd, 4, why, sizeof why) < 0) ready = 0;
      for (int c = 0; ready && c < caches; c++) {
        for (int i = 0; i < CACHE_N; i++) want[c][i] = ((float*)h.data)[i] = 0.5f * (float)i - 7.0f - (float)c;
        if (upload(rt, alloc, &h, &kv[c], why, sizeof why) < 0) ready = 0;
      }
      if (ready && new_binding(rt, &s, &binding) == 0 && binding && rt_ep_stats(rt, &s0) == 0) {
        for (int t = 0; t < steps; t++) {
          memcpy(before, want[0], sizeof before);
          memset(&sum, 0, sizeof sum);
          if (cache_step(rt, &s, binding, kv, caches, dev, t, want, model ? "sum" : "both", &sum, why, sizeof why) < 0) break;
          int ok_run = 1, c = 0;
          for (; ok_run && c < caches; c++) {
            host_tensor_free(&got);
            if (download(rt, kv[c], &got, why, sizeof why) < 0) break;
            ok_run = got.count == CACHE_N && memcmp(got.data, want[c], sizeof want[c]) == 0;
          }
          if (ok_run && c < caches) {
            host_tensor_free(&sum);
            break;
          }
          done++;
          for (int i = 0; ok_run && i < CACHE_N; i++)
            ok_run = ((float*)sum.data)[i] == (model ? before[i] + want[0][i] : want[0][i] + want[1][i]);
          host_tensor_free(&sum);
          if (!ok_run && bad++ < 3) printf("    %s step %d: a cache or sum differs from the host's copy\n", file, t);
        }
      }
      if (why[0]) printf("    %s: %s\n", file, why);
      textf(what, sizeof what, "%s, enable_cuda_graph=%d, past and present one device tensor per cache: %d of %d steps "
            "ran, %d differ from the host's copies", file, graph, done, steps, bad);
      f += tally(done == steps && bad == 0, what);
      if (done == steps && rt_ep_stats(rt, &s1) == 0) {
        unsigned long long copied = s1.values_copied - s0.values_copied, in_place = s1.values_in_place - s0.values_in_place;
        if (model == 0) {
          unsigned long long fused = s1.fused_nodes - created.fused_nodes;
          textf(what, sizeof what, "%s: the caches are updated in place by one WherePair (%llu fused nodes, %llu values "
                "in place, %llu copied; ORT hands over the three host inputs in device memory)", file, fused, in_place, copied);
          f += tally(fused >= 2 && copied == 0 && in_place == 8ull * (unsigned)steps, what);
        } else {
          textf(what, sizeof what, "%s: the cache is copied, not updated in place (%llu values copied)", file, copied);
          f += tally(copied >= 4ull * (unsigned)steps, what);
        }
      }
      host_tensor_free(&got);
      host_tensor_free(&h);
      if (binding) A(ReleaseIoBinding)(binding);
      for (int c = 0; c < 2; c++)
        if (kv[c]) A(ReleaseValue)(kv[c]);
      rt_session_release(rt, &s);
    }
  }
  return f;
}

/* --- the case ----------------------------------------------------------------------------------- */

int case_iobinding(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  passed = failed = 0;
  /* CopyTensors, GetSharedAllocator and EpDevice_MemoryInfo came with API 23, the oldest the host
   * negotiates; the check stays for a host that one day accepts older versions. */
  if (!ORT_API_HAS(rt->api_version, CopyTensors) || !ORT_API_HAS(rt->api_version, EpDevice_MemoryInfo)) {
    printf("  skip: ORT %s (API %u) has no CopyTensors/EpDevice_MemoryInfo (API %d)\n", rt->version, rt->api_version,
           ORT_API_SINCE_CopyTensors);
    printf("0 passed, 0 failed\n");
    return 0;
  }
  unsigned long mark = rt_log_mark();
  int f = 0;
  rt_session_opts o;
  ep_options(rt, &o);
  add_ep_option(&o, "tf32", "0");
  o.disable_cpu_fallback = rt->ep_mode;
  rt_session test, ref;
  if (open_pair(rt, argv[1], "mlp.onnx", &o, &test, &ref) < 0) {
    printf("0 passed, 1 failed\n");
    return 1;
  }
  char what[2300], text[256];
  OrtAllocator* alloc = NULL;
  if (!rt->ep_mode)
    printf("  cpu-only: \"device\" memory below is ORT's CPU memory, and no EP sees enable_cuda_graph\n");

  /* Where bound tensors live: CudaEp's device memory, or the CPU's without CudaEp. */
  const OrtMemoryInfo* dev = rt->cpu_mem;
  if (rt->ep_mode) {
    dev = A(EpDevice_MemoryInfo)(rt->devices[0], OrtDeviceMemoryType_DEFAULT);
    mem_desc d;
    int good = describe(rt, dev, &d) == 0 && d.type == OrtMemoryInfoDeviceType_GPU && d.vendor == RT_EP_VENDOR_ID &&
               d.mem_type == OrtDeviceMemoryType_DEFAULT;
    mem_text(rt, dev, text, sizeof text);
    textf(what, sizeof what, "CudaEp's EP device declares GPU device memory of vendor 0x%04x: %s", RT_EP_VENDOR_ID,
          text);
    f += tally(good, what);
  }

  /* An allocator for that memory from the session under test. */
  if (!f) {
    rt_error e;
    if (rt_take(rt, A(CreateAllocator)(test.session, dev, &alloc), "CreateAllocator", &e, 1) < 0) {
      textf(what, sizeof what, "CreateAllocator(session under test, device memory): [%s] %s",
            rt_error_code_name(e.code), e.msg);
      f += tally(0, what);
      alloc = NULL;
    } else {
      const OrtMemoryInfo* ai = NULL;
      if (rt_check(rt, A(AllocatorGetInfo)(alloc, &ai), "AllocatorGetInfo") < 0) ai = NULL;
      mem_text(rt, ai, text, sizeof text);
      textf(what, sizeof what, "CreateAllocator gives an allocator of that memory: %s", text);
      f += tally(same_memory(rt, ai, dev), what);
    }
  }

  if (alloc) {
    f += check_placement(rt, &test, dev);
    f += check_device_runs(rt, &test, &ref, alloc, dev);
    f += check_shared(rt, &test, &ref, dev);
    f += check_mixed(rt, &test, &ref, alloc, dev);
    f += check_pinned(rt, &test, &ref, dev);
    f += check_graph(rt, argv[1], alloc, dev);
    f += check_cache(rt, argv[1], alloc, dev);
    /* Every tensor made with the session's allocator is released by now, so it may go. */
    A(ReleaseAllocator)(alloc);
  }
  rt_session_release(rt, &test);
  rt_session_release(rt, &ref);
  char logged[2048];
  unsigned long n = rt_log_ep_errors_since(mark, logged, sizeof logged);
  if (n) textf(what, sizeof what, "ORT logged no error naming CudaEp (it logged %lu, the last: %s)", n, logged);
  else textf(what, sizeof what, "ORT logged no error naming CudaEp");
  f += tally(n == 0, what);
  printf("%d passed, %d failed\n", passed, failed);
  /* A part that gave up early counts one failure in f, perhaps with nothing in the tally. */
  return f > failed ? f : failed;
}
