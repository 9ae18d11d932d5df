/*
 * shim.h - the C side of cudaep's ONNX Runtime plugin execution provider.
 *
 * ORT calls C function pointers and hands over C function tables; cgo can neither store Go
 * functions in C tables nor call C function pointers. So this shim (shim.c) owns the
 * entry points CreateEpFactories/ReleaseEpFactory, fills ORT's tables with static
 * trampolines that forward to the Go exports (package ort), and wraps each ORT API slot the Go
 * side calls in a plain C function. It holds no logic of its own.
 *
 * Declarations only: the cgo preamble of every Go file with //export includes this header.
 */
#ifndef CUDAEP_ORT_SHIM_H
#define CUDAEP_ORT_SHIM_H

#include "ort_abi.h"

/* The tables negotiated in CreateEpFactories (one ORT per process). */
extern const OrtApi* cudaep_ort_api;
extern const OrtEpApi* cudaep_ort_ep_api;
extern uint32_t cudaep_ort_version;

/* The objects ORT holds: its table first, then the handle of the Go object behind it. */
typedef struct CudaEpOrtFactory {
    OrtEpFactory f;
    uint64_t handle;
    const OrtLogger* logger; /* ORT's default logger from CreateEpFactories: valid while the environment lives */
} CudaEpOrtFactory;

typedef struct CudaEpOrtEp {
    OrtEp ep;
    uint64_t handle;
} CudaEpOrtEp;

typedef struct CudaEpOrtComputeInfo {
    OrtNodeComputeInfo ci;
    uint64_t handle;
} CudaEpOrtComputeInfo;

/* A device-memory allocator ORT holds (one per memory info it asks the factory for). */
typedef struct CudaEpOrtAllocator {
    OrtAllocator a;
    uint64_t handle;
    OrtMemoryInfo* info; /* ours, released with the allocator */
} CudaEpOrtAllocator;

/* A sync stream ORT holds (one per session stream ORT makes, or per device for the factory's):
 * the Go stream's handle and the native stream handle GetHandle returns. */
typedef struct CudaEpOrtStream {
    OrtSyncStreamImpl s;
    uint64_t handle;
    void* native;
} CudaEpOrtStream;

/* A notification ORT holds: the handle of the Go notification (a fence once activated). */
typedef struct CudaEpOrtNotification {
    OrtSyncNotificationImpl n;
    uint64_t handle;
} CudaEpOrtNotification;

/* Object construction (tables filled, handle stored); free with free(). */
CudaEpOrtEp* cudaep_ort_new_ep(uint64_t handle);
CudaEpOrtComputeInfo* cudaep_ort_new_compute_info(uint64_t handle);
void cudaep_ort_free(void* p);
CudaEpOrtStream* cudaep_ort_new_stream(uint64_t handle, uint64_t native);
CudaEpOrtNotification* cudaep_ort_new_notification(uint64_t handle);
/* The CudaEp stream behind one of ORT's streams, or NULL when the stream is not CudaEp's. */
CudaEpOrtStream* cudaep_ort_our_stream(OrtSyncStream* s);
/* Whether a memory device is CudaEp's device memory, and its device id. */
int cudaep_ort_memory_device_ours(const OrtMemoryDevice* d, int32_t* device_id);
void cudaep_ort_set_library_version(const char* version);

/* Device memory: allocators, the data transfer, EP device allocator info, values. */
OrtStatus* cudaep_ort_new_allocator(uint64_t handle, int32_t device_id, int pinned, CudaEpOrtAllocator** out);
void cudaep_ort_free_allocator(CudaEpOrtAllocator* a);
OrtStatus* cudaep_ort_add_allocator_info(OrtEpDevice* d, int32_t device_id, int pinned, OrtMemoryInfo** kept);
void cudaep_ort_release_memory_info(OrtMemoryInfo* info);
OrtStatus* cudaep_ort_memory_info_device(const OrtMemoryInfo* mi, int* is_gpu, int* is_pinned, int32_t* device_id,
                                         int* device_type, uint32_t* vendor, int* mem_type, const char** name);
void* cudaep_ort_ptr(uint64_t address); /* a device address as the void* ORT's allocator returns */
OrtStatus* cudaep_ort_value_memory(const OrtValue* v, void** data, size_t* bytes, int* on_gpu, int32_t* device_id);

/* Statuses. */
OrtStatus* cudaep_ort_status(OrtErrorCode code, const char* msg);
const char* cudaep_ort_error_message(const OrtStatus* st);
void cudaep_ort_release_status(OrtStatus* st);

/* Key-value pairs. */
OrtKeyValuePairs* cudaep_ort_kv_new(void);
void cudaep_ort_kv_add(OrtKeyValuePairs* kv, const char* key, const char* value);
void cudaep_ort_kv_release(OrtKeyValuePairs* kv);
void cudaep_ort_kv_entries(const OrtKeyValuePairs* kv, const char* const** keys, const char* const** values, size_t* n);
const char* cudaep_ort_kv_get(const OrtKeyValuePairs* kv, const char* key);
OrtStatus* cudaep_ort_session_config(const OrtSessionOptions* so, OrtKeyValuePairs** out);

/* Devices. */
int cudaep_ort_hw_type(const OrtHardwareDevice* d);
uint32_t cudaep_ort_hw_vendor_id(const OrtHardwareDevice* d);
OrtStatus* cudaep_ort_create_hw_device(uint32_t vendor_id, uint32_t device_id, const char* vendor,
                                       const OrtKeyValuePairs* meta, OrtHardwareDevice** out);
void cudaep_ort_release_hw_device(OrtHardwareDevice* d);
OrtStatus* cudaep_ort_create_ep_device(OrtEpFactory* f, const OrtHardwareDevice* hw, const OrtKeyValuePairs* meta,
                                       const OrtKeyValuePairs* options, OrtEpDevice** out);

/* Graphs, nodes, values, attributes. */
OrtStatus* cudaep_ort_graph_nodes(const OrtGraph* g, const OrtNode*** nodes, size_t* n);
OrtStatus* cudaep_ort_graph_onnx_opset(const OrtGraph* g, int64_t* opset);
OrtStatus* cudaep_ort_graph_model_path(const OrtGraph* g, const char** path);
OrtStatus* cudaep_ort_graph_is_subgraph(const OrtGraph* g, int* is_subgraph);

/* Logging through an OrtLogger (a session's, or the factory's default one): whether level would
 * be printed, and one message. */
int cudaep_ort_log_enabled(const OrtLogger* logger, OrtLoggingLevel level);
void cudaep_ort_log(const OrtLogger* logger, OrtLoggingLevel level, const char* msg);
OrtStatus* cudaep_ort_graph_initializers(const OrtGraph* g, const OrtValueInfo*** out, size_t* n);
OrtStatus* cudaep_ort_node_strings(const OrtNode* n, const char** op, const char** domain, const char** name);
OrtStatus* cudaep_ort_node_ep(const OrtNode* n, const char** ep);
OrtStatus* cudaep_ort_node_values(const OrtNode* n, int outputs, const OrtValueInfo*** out, size_t* count);
OrtStatus* cudaep_ort_node_attributes(const OrtNode* n, const OrtOpAttr*** out, size_t* count);
OrtStatus* cudaep_ort_attr_header(const OrtOpAttr* a, const char** name, int* type);
/* A tensor attribute's value (release *v with cudaep_ort_release_value). */
OrtStatus* cudaep_ort_attr_tensor(const OrtOpAttr* a, OrtValue** v, int* elem, int64_t* dims, size_t cap, size_t* rank,
                                  const void** data, size_t* bytes);
void cudaep_ort_release_value(OrtValue* v);
OrtStatus* cudaep_ort_attr_read(const OrtOpAttr* a, int type, void* data, size_t len, size_t* out_len);
OrtStatus* cudaep_ort_value_info(const OrtValueInfo* v, const char** name, int* is_tensor, int* elem,
                                 int64_t* dims, size_t cap, size_t* rank);
OrtStatus* cudaep_ort_value_info_external(const OrtValueInfo* v, const char** path, int64_t* offset,
                                          size_t* size, int* found, OrtExternalInitializerInfo** info);
void cudaep_ort_release_external(OrtExternalInitializerInfo* info);
OrtStatus* cudaep_ort_value_info_data(const OrtValueInfo* v, const void** data, size_t* bytes);
OrtStatus* cudaep_ort_value_info_const(const OrtValueInfo* v, int* is_const);
void cudaep_ort_free_array(void* p);
OrtStatus* cudaep_ort_add_nodes_to_fuse(OrtEpGraphSupportInfo* info, const OrtNode* const* nodes, size_t n);
const char* cudaep_ort_compute_context_name(OrtNodeComputeContext* ctx);

/* Kernel context (Compute). A partition run reads its inputs and makes its outputs in two calls
 * (cudaep_ort_run_inputs, cudaep_ort_run_outputs) instead of one per value: each call from Go
 * costs a cgo transition, and every Go pointer it takes escapes to the heap. */

/* The most dimensions of a value the run calls carry (package ort's maxRank). */
#define CUDAEP_ORT_MAX_RANK 8

/* One input or output of a partition run. */
typedef struct CudaEpOrtRunValue {
    void* data;                         /* host memory, or a device address (never dereferenced) */
    int64_t dims[CUDAEP_ORT_MAX_RANK];  /* the shape: read for an input, given for an output */
    size_t rank;                        /* an input's rank may pass CUDAEP_ORT_MAX_RANK: dims then holds nothing */
    int elem;                           /* an input's ONNXTensorElementDataType */
    int on_cpu;                         /* the memory is the host's */
} CudaEpOrtRunValue;

/* What failed in a run call (CudaEpOrtRun.failed). */
enum {
    CUDAEP_ORT_RUN_OK = 0,
    CUDAEP_ORT_RUN_COUNTS = 1, /* counting the node's values */
    CUDAEP_ORT_RUN_INPUT = 2,  /* reading input `at` */
    CUDAEP_ORT_RUN_STREAM = 3, /* reading the node's stream */
    CUDAEP_ORT_RUN_OUTPUT = 4  /* making output `at` */
};

/* The values of a partition's runs: one block of C memory a partition allocates once
 * (cudaep_ort_new_run; free it with cudaep_ort_free) and reuses for every run, under its lock.
 * Not thread-safe: one run at a time. */
typedef struct CudaEpOrtRun {
    size_t cap_inputs, cap_outputs; /* the sizes of ins and outs */
    size_t inputs, outputs;         /* the counts ORT passes (set by cudaep_ort_run_inputs) */
    void* stream;                   /* the node's compute stream, or NULL (set by cudaep_ort_run_inputs) */
    int failed;                     /* CUDAEP_ORT_RUN_*: what the last call was doing when it failed */
    size_t at;                      /* the index of the value it was reading or making */
    CudaEpOrtRunValue* ins;         /* cap_inputs values, in the same block */
    CudaEpOrtRunValue* outs;        /* cap_outputs values, in the same block */
} CudaEpOrtRun;

/* cudaep_ort_new_run allocates a zeroed run for `inputs` inputs and `outputs` outputs; NULL when
 * out of memory. */
CudaEpOrtRun* cudaep_ort_new_run(size_t inputs, size_t outputs);

/* cudaep_ort_run_inputs sets r->inputs and r->outputs to the node's counts and, when they are
 * r's capacities, reads every input into r->ins (data, elem, rank, dims, on_cpu) and the node's
 * compute stream into r->stream. On counts that differ it reads nothing else and returns NULL:
 * the caller compares them. The returned status (NULL: success) is the caller's to release;
 * r->failed and r->at say where it failed. Input data stays valid while ORT runs the node. */
OrtStatus* cudaep_ort_run_inputs(OrtKernelContext* kc, CudaEpOrtRun* r);

/* cudaep_ort_run_outputs makes the node's r->outputs outputs with the shapes in r->outs (rank
 * at most CUDAEP_ORT_MAX_RANK) and sets each one's data and on_cpu. Status as above. */
OrtStatus* cudaep_ort_run_outputs(OrtKernelContext* kc, CudaEpOrtRun* r);

/* cudaep_ort_kernel_output makes output i with any rank (for shapes over CUDAEP_ORT_MAX_RANK). */
OrtStatus* cudaep_ort_kernel_output(OrtKernelContext* kc, size_t i, const int64_t* dims, size_t rank, void** data,
                                    int* on_cpu);

#endif /* CUDAEP_ORT_SHIM_H */
