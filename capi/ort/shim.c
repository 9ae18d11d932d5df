/*
 * shim.c - the entry points, ORT table trampolines and ORT API slot wrappers of cudaep's ONNX
 * Runtime plugin execution provider (see shim.h). Every decision is made in Go (package ort);
 * this file only moves arguments across.
 */
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "_cgo_export.h"

const OrtApi* cudaep_ort_api;
const OrtEpApi* cudaep_ort_ep_api;
uint32_t cudaep_ort_version;

#define A(Name) ORT_API_FN(cudaep_ort_api, Name)
#define E(Name) ORT_EP_API_FN(cudaep_ort_ep_api, Name)

static const char cudaep_ort_ep_name[] = "CudaEp";
static const char cudaep_ort_vendor[] = "cudaep";
static char cudaep_ort_library_version[32] = "0.0.0";

void cudaep_ort_set_library_version(const char* version) {
    strncpy(cudaep_ort_library_version, version, sizeof cudaep_ort_library_version - 1);
}

/* --- factory trampolines --------------------------------------------------------------- */

static const char* f_GetName(const OrtEpFactory* f) { (void)f; return cudaep_ort_ep_name; }
static const char* f_GetVendor(const OrtEpFactory* f) { (void)f; return cudaep_ort_vendor; }
static uint32_t f_GetVendorId(const OrtEpFactory* f) { (void)f; return 0x10DE; }
static const char* f_GetVersion(const OrtEpFactory* f) { (void)f; return cudaep_ort_library_version; }
static bool f_IsStreamAware(const OrtEpFactory* f) { (void)f; return true; }

static OrtStatus* f_GetSupportedDevices(OrtEpFactory* f, const OrtHardwareDevice* const* devices, size_t num_devices,
                                        OrtEpDevice** ep_devices, size_t max_ep_devices, size_t* num_ep_devices) {
    return cudaepOrtGetSupportedDevices((CudaEpOrtFactory*)f, (OrtHardwareDevice**)devices, num_devices, ep_devices,
                                        max_ep_devices, num_ep_devices);
}

static OrtStatus* f_CreateEp(OrtEpFactory* f, const OrtHardwareDevice* const* devices,
                             const OrtKeyValuePairs* const* ep_metadata, size_t num_devices,
                             const OrtSessionOptions* session_options, const OrtLogger* logger, OrtEp** ep) {
    (void)devices;
    return cudaepOrtCreateEp((CudaEpOrtFactory*)f, (OrtKeyValuePairs**)ep_metadata, num_devices,
                             (OrtSessionOptions*)session_options, (OrtLogger*)logger, ep);
}

static void f_ReleaseEp(OrtEpFactory* f, OrtEp* ep) {
    (void)f;
    cudaepOrtReleaseEp((CudaEpOrtEp*)ep);
}

/* --- device memory --------------------------------------------------------------------- */

/* Our memory: a GPU memory device of vendor 0x10DE (the only GPU memory this process's ORT
 * knows is ours: ORT's own CUDA EP is not in the CPU build). */
static int is_our_gpu(const OrtMemoryDevice* d) {
    return d && E(MemoryDevice_GetDeviceType)(d) == OrtMemoryInfoDeviceType_GPU && E(MemoryDevice_GetVendorId)(d) == 0x10DE &&
           E(MemoryDevice_GetMemoryType)(d) == OrtDeviceMemoryType_DEFAULT;
}
/* Our pinned host memory: host-accessible memory of the same GPU device (the CPU reads it). */
static int is_our_pinned(const OrtMemoryDevice* d) {
    return d && E(MemoryDevice_GetDeviceType)(d) == OrtMemoryInfoDeviceType_GPU && E(MemoryDevice_GetVendorId)(d) == 0x10DE &&
           E(MemoryDevice_GetMemoryType)(d) == OrtDeviceMemoryType_HOST_ACCESSIBLE;
}
static int is_cpu(const OrtMemoryDevice* d) { return d && E(MemoryDevice_GetDeviceType)(d) == OrtMemoryInfoDeviceType_CPU; }
static int is_host(const OrtMemoryDevice* d) { return is_cpu(d) || is_our_pinned(d); }

static bool dt_CanCopy(const OrtDataTransferImpl* dt, const OrtMemoryDevice* src, const OrtMemoryDevice* dst) {
    (void)dt;
    return (is_our_gpu(src) && (is_host(dst) || is_our_gpu(dst))) || (is_host(src) && is_our_gpu(dst));
}

static OrtStatus* dt_CopyTensors(OrtDataTransferImpl* dt, const OrtValue** src, OrtValue** dst, OrtSyncStream** streams,
                                 size_t n) {
    (void)dt;
    return cudaepOrtCopyTensors((OrtValue**)src, dst, streams, n);
}

/* --- sync streams and notifications ------------------------------------------------------ */

static void s_Release(OrtSyncStreamImpl* s) {
    cudaepOrtReleaseStream(((CudaEpOrtStream*)s)->handle);
    free(s);
}
static void* s_GetHandle(OrtSyncStreamImpl* s) { return ((CudaEpOrtStream*)s)->native; }
static OrtStatus* s_CreateNotification(OrtSyncStreamImpl* s, OrtSyncNotificationImpl** out) {
    return cudaepOrtCreateNotification(((CudaEpOrtStream*)s)->handle, out);
}
static OrtStatus* s_Flush(OrtSyncStreamImpl* s) {
    (void)s; /* work is submitted as it is queued */
    return NULL;
}
static OrtStatus* s_OnSessionRunEnd(OrtSyncStreamImpl* s) { return cudaepOrtStreamRunEnd(((CudaEpOrtStream*)s)->handle); }

CudaEpOrtStream* cudaep_ort_new_stream(uint64_t handle, uint64_t native) {
    CudaEpOrtStream* s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->s.ort_version_supported = cudaep_ort_version;
    s->s.Release = s_Release;
    s->s.GetHandle = s_GetHandle;
    s->s.CreateNotification = s_CreateNotification;
    s->s.Flush = s_Flush;
    s->s.OnSessionRunEnd = s_OnSessionRunEnd;
    s->handle = handle;
    s->native = (void*)(uintptr_t)native;
    return s;
}

CudaEpOrtStream* cudaep_ort_our_stream(OrtSyncStream* s) {
    if (!s) return NULL;
    const OrtSyncStreamImpl* impl = E(SyncStream_GetImpl)(s);
    return impl && impl->Release == s_Release ? (CudaEpOrtStream*)impl : NULL;
}

static void n_Release(OrtSyncNotificationImpl* n) {
    cudaepOrtReleaseNotification(((CudaEpOrtNotification*)n)->handle);
    free(n);
}
static OrtStatus* n_Activate(OrtSyncNotificationImpl* n) { return cudaepOrtActivate(((CudaEpOrtNotification*)n)->handle); }
static OrtStatus* n_WaitOnDevice(OrtSyncNotificationImpl* n, OrtSyncStream* consumer) {
    CudaEpOrtStream* ours = cudaep_ort_our_stream(consumer);
    return cudaepOrtWaitOnDevice(((CudaEpOrtNotification*)n)->handle, ours ? ours->handle : 0);
}
static OrtStatus* n_WaitOnHost(OrtSyncNotificationImpl* n) { return cudaepOrtWaitOnHost(((CudaEpOrtNotification*)n)->handle); }

CudaEpOrtNotification* cudaep_ort_new_notification(uint64_t handle) {
    CudaEpOrtNotification* n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->n.ort_version_supported = cudaep_ort_version;
    n->n.Release = n_Release;
    n->n.Activate = n_Activate;
    n->n.WaitOnDevice = n_WaitOnDevice;
    n->n.WaitOnHost = n_WaitOnHost;
    n->handle = handle;
    return n;
}

int cudaep_ort_memory_device_ours(const OrtMemoryDevice* d, int32_t* device_id) {
    if (!is_our_gpu(d)) return 0;
    *device_id = (int32_t)E(MemoryDevice_GetDeviceId)(d);
    return 1;
}

static OrtStatus* f_CreateSyncStreamForDevice(OrtEpFactory* f, const OrtMemoryDevice* memory_device,
                                              const OrtKeyValuePairs* stream_options, OrtSyncStreamImpl** stream) {
    (void)f;
    (void)stream_options;
    return cudaepOrtFactoryStream((OrtMemoryDevice*)memory_device, stream);
}

static void dt_Release(OrtDataTransferImpl* dt) { free(dt); }

static OrtStatus* f_CreateDataTransfer(OrtEpFactory* f, OrtDataTransferImpl** data_transfer) {
    (void)f;
    OrtDataTransferImpl* dt = calloc(1, sizeof *dt);
    if (!dt) return A(CreateStatus)(ORT_FAIL, "cudaep: out of host memory");
    dt->ort_version_supported = cudaep_ort_version;
    dt->Release = dt_Release;
    dt->CanCopy = dt_CanCopy;
    dt->CopyTensors = dt_CopyTensors;
    *data_transfer = dt;
    return NULL;
}

static void* a_Alloc(OrtAllocator* a, size_t size) { return cudaepOrtAlloc(((CudaEpOrtAllocator*)a)->handle, size); }
static void a_Free(OrtAllocator* a, void* p) { cudaepOrtFree(((CudaEpOrtAllocator*)a)->handle, p); }
static const OrtMemoryInfo* a_Info(const OrtAllocator* a) { return ((const CudaEpOrtAllocator*)a)->info; }
static void* a_Reserve(OrtAllocator* a, size_t size) { return a_Alloc(a, size); }

static OrtStatus* new_gpu_memory_info(int32_t device_id, int pinned, OrtMemoryInfo** out) {
    if (pinned)
        return A(CreateMemoryInfo_V2)("CudaEpPinned", OrtMemoryInfoDeviceType_GPU, 0x10DE, device_id,
                                       OrtDeviceMemoryType_HOST_ACCESSIBLE, 256, OrtDeviceAllocator, out);
    return A(CreateMemoryInfo_V2)("CudaEp", OrtMemoryInfoDeviceType_GPU, 0x10DE, device_id, OrtDeviceMemoryType_DEFAULT,
                                   256, OrtDeviceAllocator, out);
}

OrtStatus* cudaep_ort_new_allocator(uint64_t handle, int32_t device_id, int pinned, CudaEpOrtAllocator** out) {
    *out = NULL;
    CudaEpOrtAllocator* a = calloc(1, sizeof *a);
    if (!a) return A(CreateStatus)(ORT_FAIL, "cudaep: out of host memory");
    OrtStatus* st = new_gpu_memory_info(device_id, pinned, &a->info);
    if (st) {
        free(a);
        return st;
    }
    a->a.version = cudaep_ort_version;
    a->a.Alloc = a_Alloc;
    a->a.Free = a_Free;
    a->a.Info = a_Info;
    a->a.Reserve = a_Reserve;
    a->handle = handle;
    *out = a;
    return NULL;
}

void cudaep_ort_free_allocator(CudaEpOrtAllocator* a) {
    if (!a) return;
    if (a->info) A(ReleaseMemoryInfo)(a->info);
    free(a);
}

static OrtStatus* f_CreateAllocator(OrtEpFactory* f, const OrtMemoryInfo* memory_info,
                                    const OrtKeyValuePairs* allocator_options, OrtAllocator** allocator) {
    (void)allocator_options;
    return cudaepOrtCreateAllocator((CudaEpOrtFactory*)f, (OrtMemoryInfo*)memory_info, allocator);
}

static void f_ReleaseAllocator(OrtEpFactory* f, OrtAllocator* allocator) {
    (void)f;
    cudaepOrtReleaseAllocator((CudaEpOrtAllocator*)allocator);
}

/* ORT keeps the pointer EpDevice_AddAllocatorInfo is given (it does not copy the info): the
 * info must live as long as the EP device, so the caller keeps it and releases it with the
 * factory (cudaep_ort_release_memory_info). */
OrtStatus* cudaep_ort_add_allocator_info(OrtEpDevice* d, int32_t device_id, int pinned, OrtMemoryInfo** kept) {
    *kept = NULL;
    OrtStatus* st = new_gpu_memory_info(device_id, pinned, kept);
    if (st) return st;
    st = E(EpDevice_AddAllocatorInfo)(d, *kept);
    if (st) {
        A(ReleaseMemoryInfo)(*kept);
        *kept = NULL;
    }
    return st;
}

void cudaep_ort_release_memory_info(OrtMemoryInfo* info) {
    if (info) A(ReleaseMemoryInfo)(info);
}

OrtStatus* cudaep_ort_memory_info_device(const OrtMemoryInfo* mi, int* is_gpu, int* is_pinned, int32_t* device_id,
                                         int* device_type, uint32_t* vendor, int* mem_type, const char** name) {
    *name = NULL;
    *is_gpu = 0;
    *is_pinned = 0;
    if (!mi) return A(CreateStatus)(ORT_INVALID_ARGUMENT, "cudaep: no memory info");
    const OrtMemoryDevice* d = E(MemoryInfo_GetMemoryDevice)(mi);
    if (!d) return A(CreateStatus)(ORT_INVALID_ARGUMENT, "cudaep: a memory info without a memory device");
    *device_type = (int)E(MemoryDevice_GetDeviceType)(d);
    *vendor = E(MemoryDevice_GetVendorId)(d);
    *mem_type = (int)E(MemoryDevice_GetMemoryType)(d);
    *device_id = (int32_t)E(MemoryDevice_GetDeviceId)(d);
    *is_gpu = is_our_gpu(d);
    *is_pinned = is_our_pinned(d);
    return A(MemoryInfoGetName)(mi, name);
}

void* cudaep_ort_ptr(uint64_t address) { return (void*)(uintptr_t)address; }

OrtStatus* cudaep_ort_value_memory(const OrtValue* v, void** data, size_t* bytes, int* on_gpu, int32_t* device_id) {
    const OrtMemoryDevice* d = E(Value_GetMemoryDevice)(v);
    *on_gpu = is_our_gpu(d);
    *device_id = d ? (int32_t)E(MemoryDevice_GetDeviceId)(d) : 0;
    if (d && !*on_gpu && !is_host(d)) return A(CreateStatus)(ORT_NOT_IMPLEMENTED, "cudaep: a tensor in memory that is neither the CPU's nor CudaEp's");
    OrtStatus* st = A(GetTensorSizeInBytes)(v, bytes);
    if (st) return st;
    return A(GetTensorMutableData)((OrtValue*)v, data);
}

/* --- EP trampolines -------------------------------------------------------------------- */

static const char* ep_GetName(const OrtEp* ep) { (void)ep; return cudaep_ort_ep_name; }

static OrtStatus* ep_GetCapability(OrtEp* ep, const OrtGraph* graph, OrtEpGraphSupportInfo* info) {
    return cudaepOrtGetCapability((CudaEpOrtEp*)ep, (OrtGraph*)graph, info);
}

static OrtStatus* ep_Compile(OrtEp* ep, const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count,
                             OrtNodeComputeInfo** node_compute_infos, OrtNode** ep_context_nodes) {
    (void)ep_context_nodes;
    return cudaepOrtCompile((CudaEpOrtEp*)ep, (OrtGraph**)graphs, (OrtNode**)fused_nodes, count, node_compute_infos);
}

static OrtStatus* ep_CreateSyncStreamForDevice(OrtEp* ep, const OrtMemoryDevice* memory_device,
                                               OrtSyncStreamImpl** stream) {
    return cudaepOrtSessionStream((CudaEpOrtEp*)ep, (OrtMemoryDevice*)memory_device, stream);
}

static void ep_ReleaseNodeComputeInfos(OrtEp* ep, OrtNodeComputeInfo** infos, size_t count) {
    (void)ep;
    for (size_t i = 0; i < count; i++) {
        cudaepOrtReleaseComputeInfo((CudaEpOrtComputeInfo*)infos[i]);
    }
}

static OrtStatus* ep_OnRunEnd(OrtEp* ep, const OrtRunOptions* run_options, bool sync_stream) {
    (void)run_options;
    (void)sync_stream;
    return cudaepOrtRunEnd((CudaEpOrtEp*)ep);
}

static OrtStatus* ep_IsConcurrentRunSupported(OrtEp* ep, bool* supported) {
    (void)ep;
    *supported = true; /* each partition serializes its own runs */
    return NULL;
}

CudaEpOrtEp* cudaep_ort_new_ep(uint64_t handle) {
    CudaEpOrtEp* e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->ep.ort_version_supported = cudaep_ort_version;
    e->ep.GetName = ep_GetName;
    e->ep.GetCapability = ep_GetCapability;
    e->ep.Compile = ep_Compile;
    e->ep.ReleaseNodeComputeInfos = ep_ReleaseNodeComputeInfos;
    e->ep.CreateSyncStreamForDevice = ep_CreateSyncStreamForDevice;
    e->ep.OnRunEnd = ep_OnRunEnd;
    if (cudaep_ort_version >= 24) e->ep.IsConcurrentRunSupported = ep_IsConcurrentRunSupported;
    e->handle = handle;
    return e;
}

/* --- compute trampolines --------------------------------------------------------------- */

static OrtStatus* ci_CreateState(OrtNodeComputeInfo* ci, OrtNodeComputeContext* ctx, void** state) {
    return cudaepOrtCreateState((CudaEpOrtComputeInfo*)ci, ctx, state);
}

static OrtStatus* ci_Compute(OrtNodeComputeInfo* ci, void* state, OrtKernelContext* kc) {
    (void)state;
    return cudaepOrtCompute((CudaEpOrtComputeInfo*)ci, kc);
}

static void ci_ReleaseState(OrtNodeComputeInfo* ci, void* state) {
    (void)ci;
    (void)state; /* the state is the compute info itself */
}

CudaEpOrtComputeInfo* cudaep_ort_new_compute_info(uint64_t handle) {
    CudaEpOrtComputeInfo* c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ci.ort_version_supported = cudaep_ort_version;
    c->ci.CreateState = ci_CreateState;
    c->ci.Compute = ci_Compute;
    c->ci.ReleaseState = ci_ReleaseState;
    c->handle = handle;
    return c;
}

void cudaep_ort_free(void* p) { free(p); }

/* --- entry points ---------------------------------------------------------------------- */

OrtStatus* CreateEpFactories(const char* registration_name, const OrtApiBase* ort_api_base,
                             const OrtLogger* default_logger, OrtEpFactory** factories, size_t max_factories,
                             size_t* num_factories) {
    (void)registration_name;
    if (!ort_api_base) return NULL; /* nothing to report an error with */
    uint32_t version = 24;
    const OrtApi* api = ort_api_base->GetApi(24);
    if (!api) {
        version = 23;
        api = ort_api_base->GetApi(23);
    }
    if (!api) {
        const OrtApi* v1 = ort_api_base->GetApi(1);
        if (!v1) return NULL;
        return ORT_API_FN(v1, CreateStatus)(ORT_NOT_IMPLEMENTED,
                                            "cudaep: this ONNX Runtime offers neither API 24 nor 23; cudaep needs 1.23 or later");
    }
    cudaep_ort_api = api;
    cudaep_ort_version = version;
    cudaep_ort_ep_api = A(GetEpApi)();
    if (!factories || !num_factories || max_factories < 1) {
        return A(CreateStatus)(ORT_INVALID_ARGUMENT, "cudaep: CreateEpFactories needs room for one factory");
    }
    CudaEpOrtFactory* f = calloc(1, sizeof *f);
    if (!f) return A(CreateStatus)(ORT_FAIL, "cudaep: out of host memory");
    f->f.ort_version_supported = version;
    f->logger = default_logger;
    f->f.GetName = f_GetName;
    f->f.GetVendor = f_GetVendor;
    f->f.GetSupportedDevices = f_GetSupportedDevices;
    f->f.CreateEp = f_CreateEp;
    f->f.ReleaseEp = f_ReleaseEp;
    f->f.GetVendorId = f_GetVendorId;
    f->f.GetVersion = f_GetVersion;
    f->f.CreateDataTransfer = f_CreateDataTransfer;
    f->f.CreateAllocator = f_CreateAllocator;
    f->f.ReleaseAllocator = f_ReleaseAllocator;
    f->f.IsStreamAware = f_IsStreamAware;
    f->f.CreateSyncStreamForDevice = f_CreateSyncStreamForDevice;
    OrtStatus* st = cudaepOrtNewFactory(f);
    if (st) {
        free(f);
        return st;
    }
    factories[0] = &f->f;
    *num_factories = 1;
    return NULL;
}

/* ReleaseEpFactory retires the factory's handle but never frees its struct: ORT may still call
 * through the factory's function table after releasing it (a session that outlived
 * UnregisterExecutionProviderLibrary releases its EP, allocators and streams through it, and
 * freeing it there made ORT call a reused slot), and those calls then find a retired handle and
 * fail or do nothing. It costs one small struct per registration; the library, a Go library,
 * is never unloaded anyway. */
OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
    if (!factory) return NULL;
    cudaepOrtReleaseFactory((CudaEpOrtFactory*)factory);
    return NULL;
}

/* --- statuses and key-value pairs ------------------------------------------------------ */

OrtStatus* cudaep_ort_status(OrtErrorCode code, const char* msg) { return A(CreateStatus)(code, msg); }
const char* cudaep_ort_error_message(const OrtStatus* st) { return A(GetErrorMessage)(st); }
void cudaep_ort_release_status(OrtStatus* st) {
    if (st) A(ReleaseStatus)(st);
}

OrtKeyValuePairs* cudaep_ort_kv_new(void) {
    OrtKeyValuePairs* kv = NULL;
    A(CreateKeyValuePairs)(&kv);
    return kv;
}
void cudaep_ort_kv_add(OrtKeyValuePairs* kv, const char* key, const char* value) { A(AddKeyValuePair)(kv, key, value); }
void cudaep_ort_kv_release(OrtKeyValuePairs* kv) {
    if (kv) A(ReleaseKeyValuePairs)(kv);
}
void cudaep_ort_kv_entries(const OrtKeyValuePairs* kv, const char* const** keys, const char* const** values, size_t* n) {
    *n = 0;
    if (kv) A(GetKeyValuePairs)(kv, keys, values, n);
}
const char* cudaep_ort_kv_get(const OrtKeyValuePairs* kv, const char* key) { return kv ? A(GetKeyValue)(kv, key) : NULL; }
OrtStatus* cudaep_ort_session_config(const OrtSessionOptions* so, OrtKeyValuePairs** out) {
    return A(GetSessionOptionsConfigEntries)(so, out);
}

/* --- devices --------------------------------------------------------------------------- */

int cudaep_ort_hw_type(const OrtHardwareDevice* d) { return (int)A(HardwareDevice_Type)(d); }
uint32_t cudaep_ort_hw_vendor_id(const OrtHardwareDevice* d) { return A(HardwareDevice_VendorId)(d); }

OrtStatus* cudaep_ort_create_hw_device(uint32_t vendor_id, uint32_t device_id, const char* vendor,
                                       const OrtKeyValuePairs* meta, OrtHardwareDevice** out) {
    *out = NULL;
    if (cudaep_ort_version < ORT_EP_API_SINCE_CreateHardwareDevice) {
        return NULL; /* ORT 1.23 cannot make a virtual device: none is offered */
    }
    return E(CreateHardwareDevice)(OrtHardwareDeviceType_GPU, vendor_id, device_id, vendor, meta, out);
}
void cudaep_ort_release_hw_device(OrtHardwareDevice* d) {
    if (d) E(ReleaseHardwareDevice)(d);
}
OrtStatus* cudaep_ort_create_ep_device(OrtEpFactory* f, const OrtHardwareDevice* hw, const OrtKeyValuePairs* meta,
                                       const OrtKeyValuePairs* options, OrtEpDevice** out) {
    return E(CreateEpDevice)(f, hw, meta, options, out);
}

/* --- graphs ---------------------------------------------------------------------------- */

OrtStatus* cudaep_ort_graph_nodes(const OrtGraph* g, const OrtNode*** nodes, size_t* n) {
    *nodes = NULL;
    OrtStatus* st = A(Graph_GetNumNodes)(g, n);
    if (st || *n == 0) return st;
    *nodes = calloc(*n, sizeof **nodes);
    if (!*nodes) return A(CreateStatus)(ORT_FAIL, "cudaep: out of host memory");
    return A(Graph_GetNodes)(g, *nodes, *n);
}

OrtStatus* cudaep_ort_graph_onnx_opset(const OrtGraph* g, int64_t* opset) {
    *opset = 0;
    size_t n = 0;
    OrtStatus* st = A(Graph_GetNumOperatorSets)(g, &n);
    if (st || n == 0) return st;
    const char** domains = calloc(n, sizeof *domains);
    int64_t* versions = calloc(n, sizeof *versions);
    if (!domains || !versions) {
        free(domains);
        free(versions);
        return A(CreateStatus)(ORT_FAIL, "cudaep: out of host memory");
    }
    st = A(Graph_GetOperatorSets)(g, domains, versions, n);
    for (size_t i = 0; !st && i < n; i++) {
        if (domains[i] && (domains[i][0] == 0 || strcmp(domains[i], "ai.onnx") == 0)) *opset = versions[i];
    }
    free(domains);
    free(versions);
    return st;
}

OrtStatus* cudaep_ort_graph_model_path(const OrtGraph* g, const char** path) { return A(Graph_GetModelPath)(g, path); }

int cudaep_ort_log_enabled(const OrtLogger* logger, OrtLoggingLevel level) {
    OrtLoggingLevel at = ORT_LOGGING_LEVEL_FATAL;
    OrtStatus* st = A(Logger_GetLoggingSeverityLevel)(logger, &at);
    if (st) {
        A(ReleaseStatus)(st);
        return 0;
    }
    return level >= at;
}

void cudaep_ort_log(const OrtLogger* logger, OrtLoggingLevel level, const char* msg) {
    OrtStatus* st = A(Logger_LogMessage)(logger, level, msg, "capi/ort", 0, "CudaEp");
    if (st) A(ReleaseStatus)(st);
}

OrtStatus* cudaep_ort_graph_is_subgraph(const OrtGraph* g, int* is_subgraph) {
    const OrtNode* parent = NULL;
    OrtStatus* st = A(Graph_GetParentNode)(g, &parent);
    *is_subgraph = parent != NULL;
    return st;
}

OrtStatus* cudaep_ort_graph_initializers(const OrtGraph* g, const OrtValueInfo*** out, size_t* n) {
    *out = NULL;
    OrtStatus* st = A(Graph_GetNumInitializers)(g, n);
    if (st || *n == 0) return st;
    *out = calloc(*n, sizeof **out);
    if (!*out) return A(CreateStatus)(ORT_FAIL, "cudaep: out of host memory");
    return A(Graph_GetInitializers)(g, *out, *n);
}

OrtStatus* cudaep_ort_node_strings(const OrtNode* n, const char** op, const char** domain, const char** name) {
    OrtStatus* st = A(Node_GetOperatorType)(n, op);
    if (!st) st = A(Node_GetDomain)(n, domain);
    if (!st) st = A(Node_GetName)(n, name);
    return st;
}

OrtStatus* cudaep_ort_node_ep(const OrtNode* n, const char** ep) {
    *ep = NULL;
    return A(Node_GetEpName)(n, ep);
}

OrtStatus* cudaep_ort_node_values(const OrtNode* n, int outputs, const OrtValueInfo*** out, size_t* count) {
    *out = NULL;
    OrtStatus* st = outputs ? A(Node_GetNumOutputs)(n, count) : A(Node_GetNumInputs)(n, count);
    if (st || *count == 0) return st;
    *out = calloc(*count, sizeof **out);
    if (!*out) return A(CreateStatus)(ORT_FAIL, "cudaep: out of host memory");
    return outputs ? A(Node_GetOutputs)(n, *out, *count) : A(Node_GetInputs)(n, *out, *count);
}

OrtStatus* cudaep_ort_node_attributes(const OrtNode* n, const OrtOpAttr*** out, size_t* count) {
    *out = NULL;
    OrtStatus* st = A(Node_GetNumAttributes)(n, count);
    if (st || *count == 0) return st;
    *out = calloc(*count, sizeof **out);
    if (!*out) return A(CreateStatus)(ORT_FAIL, "cudaep: out of host memory");
    return A(Node_GetAttributes)(n, *out, *count);
}

OrtStatus* cudaep_ort_attr_header(const OrtOpAttr* a, const char** name, int* type) {
    OrtOpAttrType t = ORT_OP_ATTR_UNDEFINED;
    OrtStatus* st = A(OpAttr_GetName)(a, name);
    if (!st) st = A(OpAttr_GetType)(a, &t);
    *type = (int)t;
    return st;
}

OrtStatus* cudaep_ort_attr_read(const OrtOpAttr* a, int type, void* data, size_t len, size_t* out_len) {
    return A(ReadOpAttr)(a, (OrtOpAttrType)type, data, len, out_len);
}

OrtStatus* cudaep_ort_value_info(const OrtValueInfo* v, const char** name, int* is_tensor, int* elem, int64_t* dims,
                                 size_t cap, size_t* rank) {
    *is_tensor = 0;
    *elem = 0;
    *rank = 0;
    OrtStatus* st = A(GetValueInfoName)(v, name);
    if (st) return st;
    const OrtTypeInfo* ti = NULL;
    st = A(GetValueInfoTypeInfo)(v, &ti);
    if (st || !ti) return st;
    enum ONNXType ot = ONNX_TYPE_UNKNOWN;
    st = A(GetOnnxTypeFromTypeInfo)(ti, &ot);
    if (st || ot != ONNX_TYPE_TENSOR) return st;
    const OrtTensorTypeAndShapeInfo* tsi = NULL;
    st = A(CastTypeInfoToTensorInfo)(ti, &tsi);
    if (st || !tsi) return st;
    *is_tensor = 1;
    enum ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    st = A(GetTensorElementType)(tsi, &et);
    if (st) return st;
    *elem = (int)et;
    st = A(GetDimensionsCount)(tsi, rank);
    if (st) return st;
    if (*rank > cap) return NULL; /* the caller sees rank > cap and refuses the value */
    return A(GetDimensions)(tsi, dims, *rank);
}

OrtStatus* cudaep_ort_value_info_external(const OrtValueInfo* v, const char** path, int64_t* offset, size_t* size,
                                          int* found, OrtExternalInitializerInfo** info) {
    *found = 0;
    *info = NULL;
    OrtStatus* st = A(ValueInfo_GetExternalInitializerInfo)(v, info);
    if (st || !*info) return st;
    *found = 1;
    *path = A(ExternalInitializerInfo_GetFilePath)(*info);
    *offset = A(ExternalInitializerInfo_GetFileOffset)(*info);
    *size = A(ExternalInitializerInfo_GetByteSize)(*info);
    return NULL;
}

void cudaep_ort_release_external(OrtExternalInitializerInfo* info) {
    if (info) A(ReleaseExternalInitializerInfo)(info);
}

OrtStatus* cudaep_ort_value_info_data(const OrtValueInfo* v, const void** data, size_t* bytes) {
    *data = NULL;
    *bytes = 0;
    const OrtValue* value = NULL;
    OrtStatus* st = A(ValueInfo_GetInitializerValue)(v, &value);
    if (st || !value) return st;
    st = A(GetTensorSizeInBytes)(value, bytes);
    if (st) return st;
    return A(GetTensorData)(value, data);
}

OrtStatus* cudaep_ort_value_info_const(const OrtValueInfo* v, int* is_const) {
    bool c = false;
    OrtStatus* st = A(ValueInfo_IsConstantInitializer)(v, &c);
    *is_const = c ? 1 : 0;
    return st;
}

void cudaep_ort_free_array(void* p) { free(p); }

OrtStatus* cudaep_ort_add_nodes_to_fuse(OrtEpGraphSupportInfo* info, const OrtNode* const* nodes, size_t n) {
    OrtNodeFusionOptions opts;
    memset(&opts, 0, sizeof opts);
    opts.ort_version_supported = cudaep_ort_version;
    opts.drop_constant_initializers = true;
    return E(EpGraphSupportInfo_AddNodesToFuse)(info, nodes, n, &opts);
}

const char* cudaep_ort_compute_context_name(OrtNodeComputeContext* ctx) { return E(NodeComputeContext_NodeName)(ctx); }

/* --- kernel context -------------------------------------------------------------------- */

static int value_on_cpu(const OrtValue* v) {
    const OrtMemoryInfo* mi = NULL;
    OrtStatus* st = A(GetTensorMemoryInfo)(v, &mi);
    if (st) {
        A(ReleaseStatus)(st);
        return 0;
    }
    return is_host(E(MemoryInfo_GetMemoryDevice)(mi));
}

CudaEpOrtRun* cudaep_ort_new_run(size_t inputs, size_t outputs) {
    CudaEpOrtRun* r = calloc(1, sizeof *r + (inputs + outputs) * sizeof(CudaEpOrtRunValue));
    if (!r) return NULL;
    r->cap_inputs = inputs;
    r->cap_outputs = outputs;
    r->ins = (CudaEpOrtRunValue*)(r + 1);
    r->outs = r->ins + inputs;
    return r;
}

/* kernel_input reads input i into v. */
static OrtStatus* kernel_input(OrtKernelContext* kc, size_t i, CudaEpOrtRunValue* v) {
    const OrtValue* val = NULL;
    OrtStatus* st = A(KernelContext_GetInput)(kc, i, &val);
    if (st) return st;
    if (!val) return A(CreateStatus)(ORT_INVALID_ARGUMENT, "cudaep: a partition input is missing");
    OrtTensorTypeAndShapeInfo* tsi = NULL;
    st = A(GetTensorTypeAndShape)(val, &tsi);
    if (st) return st;
    enum ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    st = A(GetTensorElementType)(tsi, &et);
    if (!st) st = A(GetDimensionsCount)(tsi, &v->rank);
    if (!st && v->rank <= CUDAEP_ORT_MAX_RANK) st = A(GetDimensions)(tsi, v->dims, v->rank);
    A(ReleaseTensorTypeAndShapeInfo)(tsi);
    if (st) return st;
    v->elem = (int)et;
    v->on_cpu = value_on_cpu(val);
    const void* data = NULL;
    st = A(GetTensorData)(val, &data);
    v->data = (void*)data;
    return st;
}

OrtStatus* cudaep_ort_run_inputs(OrtKernelContext* kc, CudaEpOrtRun* r) {
    r->failed = CUDAEP_ORT_RUN_COUNTS;
    r->at = 0;
    r->stream = NULL;
    OrtStatus* st = A(KernelContext_GetInputCount)(kc, &r->inputs);
    if (!st) st = A(KernelContext_GetOutputCount)(kc, &r->outputs);
    if (st) return st;
    if (r->inputs != r->cap_inputs || r->outputs != r->cap_outputs) {
        r->failed = CUDAEP_ORT_RUN_OK;
        return NULL;
    }
    r->failed = CUDAEP_ORT_RUN_INPUT;
    for (size_t i = 0; i < r->inputs; i++) {
        r->at = i;
        st = kernel_input(kc, i, &r->ins[i]);
        if (st) return st;
    }
    r->failed = CUDAEP_ORT_RUN_STREAM;
    r->at = 0;
    st = A(KernelContext_GetGPUComputeStream)(kc, &r->stream);
    if (st) return st;
    r->failed = CUDAEP_ORT_RUN_OK;
    return NULL;
}

OrtStatus* cudaep_ort_run_outputs(OrtKernelContext* kc, CudaEpOrtRun* r) {
    r->failed = CUDAEP_ORT_RUN_OUTPUT;
    for (size_t j = 0; j < r->outputs; j++) {
        r->at = j;
        CudaEpOrtRunValue* v = &r->outs[j];
        if (v->rank > CUDAEP_ORT_MAX_RANK)
            return A(CreateStatus)(ORT_INVALID_ARGUMENT, "cudaep: an output's rank is over CUDAEP_ORT_MAX_RANK");
        OrtStatus* st = cudaep_ort_kernel_output(kc, j, v->dims, v->rank, &v->data, &v->on_cpu);
        if (st) return st;
    }
    r->failed = CUDAEP_ORT_RUN_OK;
    return NULL;
}

OrtStatus* cudaep_ort_kernel_output(OrtKernelContext* kc, size_t i, const int64_t* dims, size_t rank, void** data,
                                    int* on_cpu) {
    OrtValue* v = NULL;
    OrtStatus* st = A(KernelContext_GetOutput)(kc, i, dims, rank, &v);
    if (st) return st;
    *on_cpu = value_on_cpu(v);
    return A(GetTensorMutableData)(v, data);
}

OrtStatus* cudaep_ort_attr_tensor(const OrtOpAttr* a, OrtValue** v, int* elem, int64_t* dims, size_t cap, size_t* rank,
                                  const void** data, size_t* bytes) {
    *v = NULL;
    *data = NULL;
    *bytes = 0;
    *rank = 0;
    OrtStatus* st = A(OpAttr_GetTensorAttributeAsOrtValue)(a, v);
    if (st) return st;
    OrtTensorTypeAndShapeInfo* tsi = NULL;
    st = A(GetTensorTypeAndShape)(*v, &tsi);
    if (st) return st;
    enum ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    st = A(GetTensorElementType)(tsi, &et);
    if (!st) st = A(GetDimensionsCount)(tsi, rank);
    if (!st && *rank <= cap) st = A(GetDimensions)(tsi, dims, *rank);
    A(ReleaseTensorTypeAndShapeInfo)(tsi);
    if (st) return st;
    *elem = (int)et;
    st = A(GetTensorSizeInBytes)(*v, bytes);
    if (st) return st;
    return A(GetTensorData)(*v, data);
}

void cudaep_ort_release_value(OrtValue* v) {
    if (v) A(ReleaseValue)(v);
}
