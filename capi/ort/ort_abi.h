/*
 * ort_abi.h - the slice of the ONNX Runtime plugin-EP C ABI that our adapter uses.
 *
 * What this is
 *   A self-contained replacement for the parts of onnxruntime_c_api.h and
 *   onnxruntime_ep_c_api.h that the Go plugin execution provider needs. It includes
 *   no upstream header (onnxruntime_ep_c_api.h has no include guard and cannot be
 *   included twice), only <stddef.h>, <stdint.h> and <stdbool.h>.
 *
 *   - Opaque handle types, enums (upstream names and values).
 *   - The structs the EP *implements* (OrtApiBase, OrtEpFactory, OrtEp,
 *     OrtNodeComputeInfo, OrtNodeFusionOptions, OrtAllocator, OrtDataTransferImpl,
 *     OrtSyncStreamImpl, OrtSyncNotificationImpl), every member, upstream order.
 *   - For the two big tables ORT hands us, OrtApi and OrtEpApi, NOT the struct:
 *     for each function we call, the zero-based slot index (ORT_API_SLOT_<Name>,
 *     ORT_EP_API_SLOT_<Name>), the first API version that has the slot
 *     (ORT_API_SINCE_<Name>, ORT_EP_API_SINCE_<Name>) and the exact function
 *     pointer type (OrtApi_<Name>_fn, OrtEpApi_<Name>_fn).
 *     Every member of those structs is one pointer-sized slot, deprecated ones
 *     included. A slot may only be read when its SINCE version is <= the version
 *     negotiated with OrtApiBase::GetApi (ORT returns tables that are longer than
 *     what an older version promises, but never call past what you negotiated).
 *
 * Where it was taken from (microsoft/onnxruntime, read through the stored-source index)
 *   - include/onnxruntime/core/session/onnxruntime_c_api.h, the revision with
 *     `#define ORT_API_VERSION 24` and a 415-member OrtApi (the ORT 1.24.x
 *     release layout; index file id 15150328331, commit not reported by the index).
 *   - onnxruntime/core/session/onnxruntime_c_api.cc @ 003d03582b884c750c3b8832dde0a9a9cd1c7670
 *     (the positional `ort_api_1_to_25` initializer with its "End of Version N"
 *     markers and the offsetof static_asserts: ReleaseCustomOpDomain==101,
 *     ReleaseModelMetadata==118, ..., SetEpDynamicOptions==284, GetEpApi==317,
 *     CreateExternalInitializerInfo==389; all 22 anchors reproduce with this list).
 *   - include/onnxruntime/core/session/onnxruntime_ep_c_api.h, the 1.24 revision
 *     (OrtEp ends at IsConcurrentRunSupported, OrtEpFactory at GetCustomOpDomains;
 *     index file id 7334062427), cross-checked with
 *     onnxruntime/core/session/plugin_ep/ep_api.cc (`ort_ep_api` initializer,
 *     asserts ReleaseEpDevice==1, GetSyncIdForLastWaitOnSyncStream==15,
 *     GetEnvConfigEntries==49).
 *
 * RE-CHECK THE SLOT INDICES AGAINST THE UPSTREAM HEADERS WHENEVER THE NEGOTIATED
 * API VERSION CHANGES (or a slot newer than version 23 is added here). A wrong
 * index calls a different function with the wrong arguments and crashes the host.
 * Slots of shipped versions never move (ORT appends only), so indices <= 389
 * (OrtApi) and <= 49 (OrtEpApi) are final.
 *
 * Checked at run time (scratch test, not part of the repo): a C plugin EP and a C host built only
 * from this header called the ORT_API_SLOT_* / ORT_EP_API_SLOT_* below (v24 slots only where 24
 * was negotiated) against the npm onnxruntime-node builds of ORT 1.30.0 and 1.24.3 (negotiated 24)
 * and 1.23.2 (GetApi(24) == NULL, negotiated 23): graph walk, fusion, Compile with an external
 * and an in-memory initializer, Compute, session options, key-value pairs, memory infos and
 * memory devices, hardware devices. All results matched; none crashed. Not called there (index
 * checked only against the upstream sources): ReleaseGraph, OpAttr_GetTensorAttributeAsOrtValue,
 * SyncStream_GetHandle, EpGraphSupportInfo_AddSingleNode, EpDevice_AddAllocatorInfo,
 * SyncStream_GetImpl (the last two were exercised on 1.30 by the earlier Go prototype).
 *
 * Calling convention: ORT_API_CALL is empty on Linux/macOS (it is __stdcall only
 * on Windows, which this header does not support). ORTCHAR_T is char on non-Windows.
 */
#ifndef GO_CUDAEP_CAPI_ORT_ORT_ABI_H
#define GO_CUDAEP_CAPI_ORT_ORT_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef _WIN32
#error "ort_abi.h assumes the non-Windows ABI (empty ORT_API_CALL, char paths)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The API version this header describes, and the oldest one the adapter accepts. */
#define ORT_ABI_API_VERSION 24
#define ORT_ABI_API_VERSION_MIN 23

/* Number of slots in each shipped version of the tables (for bounds checks). */
#define ORT_API_NUM_SLOTS_V22 318
#define ORT_API_NUM_SLOTS_V23 390
#define ORT_API_NUM_SLOTS_V24 415
#define ORT_EP_API_NUM_SLOTS_V22 2
#define ORT_EP_API_NUM_SLOTS_V23 16
#define ORT_EP_API_NUM_SLOTS_V24 50

/* ------------------------------------------------------------------------- */
/* Opaque types                                                               */
/* ------------------------------------------------------------------------- */

typedef struct OrtApi OrtApi;       /* only ever used through slot indices */
typedef struct OrtEpApi OrtEpApi;   /* only ever used through slot indices */

typedef struct OrtEnv OrtEnv;
typedef struct OrtStatus OrtStatus; /* NULL means success */
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtSession OrtSession;
typedef struct OrtValue OrtValue;
typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtTypeInfo OrtTypeInfo;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtCustomOpDomain OrtCustomOpDomain;
typedef struct OrtOpAttr OrtOpAttr;
typedef struct OrtLogger OrtLogger;
typedef struct OrtValueInfo OrtValueInfo;
typedef struct OrtNode OrtNode;
typedef struct OrtGraph OrtGraph;
typedef struct OrtModelMetadata OrtModelMetadata;
typedef struct OrtHardwareDevice OrtHardwareDevice;
typedef struct OrtEpDevice OrtEpDevice;
typedef struct OrtKeyValuePairs OrtKeyValuePairs;
typedef struct OrtSyncStream OrtSyncStream;
typedef struct OrtExternalInitializerInfo OrtExternalInitializerInfo;
typedef struct OrtDeviceEpIncompatibilityDetails OrtDeviceEpIncompatibilityDetails;
typedef struct OrtKernelInfo OrtKernelInfo;
typedef struct OrtKernelContext OrtKernelContext;

/* from onnxruntime_ep_c_api.h */
typedef struct OrtEp OrtEp;
typedef struct OrtEpFactory OrtEpFactory;
typedef struct OrtEpGraphSupportInfo OrtEpGraphSupportInfo;
typedef struct OrtMemoryDevice OrtMemoryDevice; /* wraps onnxruntime::OrtDevice */
typedef struct OrtNodeComputeContext OrtNodeComputeContext;
typedef struct OrtDataTransferImpl OrtDataTransferImpl;
typedef struct OrtSyncNotificationImpl OrtSyncNotificationImpl;
typedef struct OrtSyncStreamImpl OrtSyncStreamImpl;
typedef struct OrtKernelRegistry OrtKernelRegistry;
/* A real struct upstream (1.24); we only pass pointers to it, so opaque here. */
typedef struct OrtExternalResourceImporterImpl OrtExternalResourceImporterImpl;
typedef struct OrtNodeFusionOptions OrtNodeFusionOptions;
typedef struct OrtNodeComputeInfo OrtNodeComputeInfo;

typedef OrtStatus* OrtStatusPtr;
typedef char ORTCHAR_T; /* non-Windows */

/* ------------------------------------------------------------------------- */
/* Enums (upstream names and values, ORT_API_VERSION 24)                      */
/* ------------------------------------------------------------------------- */

typedef enum ONNXTensorElementDataType {
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED = 0,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT = 1,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 = 2,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 = 3,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16 = 4,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16 = 5,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 = 6,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 = 7,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING = 8,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL = 9,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 = 10,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE = 11,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32 = 12,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64 = 13,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64 = 14,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128 = 15,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16 = 16,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN = 17,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FNUZ = 18,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2 = 19,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ = 20,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT4 = 21,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT4 = 22,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT4E2M1 = 23,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT2 = 24,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT2 = 25
} ONNXTensorElementDataType;

typedef enum ONNXType {
  ONNX_TYPE_UNKNOWN = 0,
  ONNX_TYPE_TENSOR = 1,
  ONNX_TYPE_SEQUENCE = 2,
  ONNX_TYPE_MAP = 3,
  ONNX_TYPE_OPAQUE = 4,
  ONNX_TYPE_SPARSETENSOR = 5,
  ONNX_TYPE_OPTIONAL = 6
} ONNXType;

typedef enum OrtLoggingLevel {
  ORT_LOGGING_LEVEL_VERBOSE = 0,
  ORT_LOGGING_LEVEL_INFO = 1,
  ORT_LOGGING_LEVEL_WARNING = 2,
  ORT_LOGGING_LEVEL_ERROR = 3,
  ORT_LOGGING_LEVEL_FATAL = 4
} OrtLoggingLevel;

typedef enum OrtErrorCode {
  ORT_OK = 0,
  ORT_FAIL = 1,
  ORT_INVALID_ARGUMENT = 2,
  ORT_NO_SUCHFILE = 3,
  ORT_NO_MODEL = 4,
  ORT_ENGINE_ERROR = 5,
  ORT_RUNTIME_EXCEPTION = 6,
  ORT_INVALID_PROTOBUF = 7,
  ORT_MODEL_LOADED = 8,
  ORT_NOT_IMPLEMENTED = 9,
  ORT_INVALID_GRAPH = 10,
  ORT_EP_FAIL = 11,
  ORT_MODEL_LOAD_CANCELED = 12,
  ORT_MODEL_REQUIRES_COMPILATION = 13,
  ORT_NOT_FOUND = 14
} OrtErrorCode;

typedef enum OrtOpAttrType {
  ORT_OP_ATTR_UNDEFINED = 0,
  ORT_OP_ATTR_INT = 1,
  ORT_OP_ATTR_INTS = 2,
  ORT_OP_ATTR_FLOAT = 3,
  ORT_OP_ATTR_FLOATS = 4,
  ORT_OP_ATTR_STRING = 5,
  ORT_OP_ATTR_STRINGS = 6,
  ORT_OP_ATTR_GRAPH = 7,
  ORT_OP_ATTR_TENSOR = 8
} OrtOpAttrType;

typedef enum OrtAllocatorType {
  OrtInvalidAllocator = -1,
  OrtDeviceAllocator = 0,
  OrtArenaAllocator = 1,
  OrtReadOnlyAllocator = 2
} OrtAllocatorType;

typedef enum OrtMemType {
  OrtMemTypeCPUInput = -2,
  OrtMemTypeCPUOutput = -1,
  OrtMemTypeCPU = OrtMemTypeCPUOutput,
  OrtMemTypeDefault = 0
} OrtMemType;

/* Matches OrtDevice::MemoryType values. */
typedef enum OrtDeviceMemoryType {
  OrtDeviceMemoryType_DEFAULT = 0,
  OrtDeviceMemoryType_HOST_ACCESSIBLE = 5
} OrtDeviceMemoryType;

typedef enum OrtMemoryInfoDeviceType {
  OrtMemoryInfoDeviceType_CPU = 0,
  OrtMemoryInfoDeviceType_GPU = 1,
  OrtMemoryInfoDeviceType_FPGA = 2,
  OrtMemoryInfoDeviceType_NPU = 3
} OrtMemoryInfoDeviceType;

typedef enum OrtHardwareDeviceType {
  OrtHardwareDeviceType_CPU = 0,
  OrtHardwareDeviceType_GPU = 1,
  OrtHardwareDeviceType_NPU = 2
} OrtHardwareDeviceType;

typedef enum OrtCompiledModelCompatibility {
  OrtCompiledModelCompatibility_EP_NOT_APPLICABLE = 0,
  OrtCompiledModelCompatibility_EP_SUPPORTED_OPTIMAL = 1,
  OrtCompiledModelCompatibility_EP_SUPPORTED_PREFER_RECOMPILATION = 2,
  OrtCompiledModelCompatibility_EP_UNSUPPORTED = 3
} OrtCompiledModelCompatibility;

/* onnxruntime_ep_c_api.h, since 1.23 */
typedef enum OrtEpDataLayout {
  OrtEpDataLayout_NCHW = 0,
  OrtEpDataLayout_NHWC = 1,
  OrtEpDataLayout_Default = OrtEpDataLayout_NCHW
} OrtEpDataLayout;

/* ------------------------------------------------------------------------- */
/* Structs implemented by the EP (or by ORT and read by the EP)               */
/* ------------------------------------------------------------------------- */

/* Not versioned; can never change. */
typedef struct OrtApiBase {
  const OrtApi* (*GetApi)(uint32_t version); /* NULL if the version is unsupported */
  const char* (*GetVersionString)(void);
} OrtApiBase;

/* Members: version 1.0 (version..Info), 1.18 (Reserve), 1.23 (GetStats, AllocOnStream). */
typedef struct OrtAllocator {
  uint32_t version; /* ORT_API_VERSION the implementer was built for */
  void* (*Alloc)(struct OrtAllocator* this_, size_t size);
  void (*Free)(struct OrtAllocator* this_, void* p);
  const struct OrtMemoryInfo* (*Info)(const struct OrtAllocator* this_);
  void* (*Reserve)(struct OrtAllocator* this_, size_t size);                                   /* 1.18, optional */
  OrtStatusPtr (*GetStats)(const struct OrtAllocator* this_, OrtKeyValuePairs** out);          /* 1.23, optional */
  void* (*AllocOnStream)(struct OrtAllocator* this_, size_t size, OrtSyncStream* stream);      /* 1.23, optional */
} OrtAllocator;

/* 1.23 */
struct OrtDataTransferImpl {
  uint32_t ort_version_supported;
  void (*Release)(OrtDataTransferImpl* this_ptr);
  bool (*CanCopy)(const OrtDataTransferImpl* this_ptr, const OrtMemoryDevice* src_memory_device,
                  const OrtMemoryDevice* dst_memory_device);
  OrtStatusPtr (*CopyTensors)(OrtDataTransferImpl* this_ptr, const OrtValue** src_tensors, OrtValue** dst_tensors,
                              OrtSyncStream** streams, size_t num_tensors);
};

/* 1.23 */
struct OrtSyncNotificationImpl {
  uint32_t ort_version_supported;
  void (*Release)(OrtSyncNotificationImpl* this_ptr);
  OrtStatusPtr (*Activate)(OrtSyncNotificationImpl* this_ptr);
  OrtStatusPtr (*WaitOnDevice)(OrtSyncNotificationImpl* this_ptr, OrtSyncStream* consumer_stream);
  OrtStatusPtr (*WaitOnHost)(OrtSyncNotificationImpl* this_ptr);
};

/* 1.23 */
struct OrtSyncStreamImpl {
  uint32_t ort_version_supported;
  void (*Release)(OrtSyncStreamImpl* this_ptr);
  void* (*GetHandle)(OrtSyncStreamImpl* this_ptr); /* native handle, e.g. CUstream */
  OrtStatusPtr (*CreateNotification)(OrtSyncStreamImpl* this_ptr, OrtSyncNotificationImpl** notification);
  OrtStatusPtr (*Flush)(OrtSyncStreamImpl* this_ptr);
  OrtStatusPtr (*OnSessionRunEnd)(OrtSyncStreamImpl* this_ptr);
};

/* 1.23. Passed by the EP to EpGraphSupportInfo_AddNodesToFuse. */
struct OrtNodeFusionOptions {
  uint32_t ort_version_supported;
  bool drop_constant_initializers;
};

/* 1.23 */
struct OrtNodeComputeInfo {
  uint32_t ort_version_supported;
  OrtStatus* (*CreateState)(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* compute_context,
                            void** compute_state);
  OrtStatus* (*Compute)(OrtNodeComputeInfo* this_ptr, void* compute_state, OrtKernelContext* kernel_context);
  void (*ReleaseState)(OrtNodeComputeInfo* this_ptr, void* compute_state);
};

/* OrtEp: 1.22 (ort_version_supported, GetName), 1.23 (GetCapability..GetCompiledModelCompatibilityInfo),
 * 1.24 (GetKernelRegistry, IsConcurrentRunSupported). ORT reads a member only when
 * ort_version_supported is at least the member's version. */
struct OrtEp {
  uint32_t ort_version_supported;
  const char* (*GetName)(const OrtEp* this_ptr);                                                      /* 1.22 */
  OrtStatusPtr (*GetCapability)(OrtEp* this_ptr, const OrtGraph* graph,
                                OrtEpGraphSupportInfo* graph_support_info);                           /* 1.23 */
  OrtStatusPtr (*Compile)(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count,
                          OrtNodeComputeInfo** node_compute_infos, OrtNode** ep_context_nodes);       /* 1.23 */
  void (*ReleaseNodeComputeInfos)(OrtEp* this_ptr, OrtNodeComputeInfo** node_compute_infos,
                                  size_t num_node_compute_infos);                                     /* 1.23 */
  OrtStatusPtr (*GetPreferredDataLayout)(OrtEp* this_ptr, OrtEpDataLayout* preferred_data_layout);   /* 1.23, opt */
  OrtStatusPtr (*ShouldConvertDataLayoutForOp)(OrtEp* this_ptr, const char* domain, const char* op_type,
                                               OrtEpDataLayout target_data_layout,
                                               int* should_convert);                                 /* 1.23, opt */
  OrtStatusPtr (*SetDynamicOptions)(OrtEp* this_ptr, const char* const* option_keys,
                                    const char* const* option_values, size_t num_options);            /* 1.23, opt */
  OrtStatusPtr (*OnRunStart)(OrtEp* this_ptr, const OrtRunOptions* run_options);                     /* 1.23, opt */
  OrtStatusPtr (*OnRunEnd)(OrtEp* this_ptr, const OrtRunOptions* run_options, bool sync_stream);     /* 1.23, opt */
  OrtStatusPtr (*CreateAllocator)(OrtEp* this_ptr, const OrtMemoryInfo* memory_info,
                                  OrtAllocator** allocator);                                          /* 1.23, opt */
  OrtStatusPtr (*CreateSyncStreamForDevice)(OrtEp* this_ptr, const OrtMemoryDevice* memory_device,
                                            OrtSyncStreamImpl** stream);                              /* 1.23, opt */
  const char* (*GetCompiledModelCompatibilityInfo)(OrtEp* this_ptr, const OrtGraph* graph);          /* 1.23, opt */
  OrtStatusPtr (*GetKernelRegistry)(OrtEp* this_ptr, const OrtKernelRegistry** kernel_registry);     /* 1.24, opt */
  OrtStatusPtr (*IsConcurrentRunSupported)(OrtEp* this_ptr, bool* is_supported);                     /* 1.24, opt */
};

/* OrtEpFactory: 1.22 (..ReleaseEp), 1.23 (GetVendorId..CreateSyncStreamForDevice),
 * 1.24 (GetHardwareDeviceIncompatibilityDetails..GetCustomOpDomains). */
struct OrtEpFactory {
  uint32_t ort_version_supported;
  const char* (*GetName)(const OrtEpFactory* this_ptr);                                               /* 1.22 */
  const char* (*GetVendor)(const OrtEpFactory* this_ptr);                                             /* 1.22 */
  OrtStatusPtr (*GetSupportedDevices)(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                      size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices,
                                      size_t* num_ep_devices);                                        /* 1.22 */
  OrtStatusPtr (*CreateEp)(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                           const OrtKeyValuePairs* const* ep_metadata_pairs, size_t num_devices,
                           const OrtSessionOptions* session_options, const OrtLogger* logger,
                           OrtEp** ep);                                                               /* 1.22 */
  void (*ReleaseEp)(OrtEpFactory* this_ptr, struct OrtEp* ep);                                        /* 1.22 */
  uint32_t (*GetVendorId)(const OrtEpFactory* this_ptr);                                              /* 1.23 */
  const char* (*GetVersion)(const OrtEpFactory* this_ptr);                                            /* 1.23, SemVer */
  OrtStatusPtr (*ValidateCompiledModelCompatibilityInfo)(OrtEpFactory* this_ptr,
                                                         const OrtHardwareDevice* const* devices,
                                                         size_t num_devices, const char* compatibility_info,
                                                         OrtCompiledModelCompatibility* model_compatibility); /* 1.23 */
  OrtStatusPtr (*CreateAllocator)(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                  const OrtKeyValuePairs* allocator_options,
                                  OrtAllocator** allocator);                                          /* 1.23 */
  void (*ReleaseAllocator)(OrtEpFactory* this_ptr, OrtAllocator* allocator);                          /* 1.23 */
  /* REQUIRED once ort_version_supported >= 23, even for a CPU-memory EP (it may set *data_transfer = NULL):
   * ORT 1.23.2, 1.24.3 and 1.30.0 call it unconditionally during RegisterExecutionProviderLibrary and
   * crash on a NULL slot (tested). ValidateCompiledModelCompatibilityInfo, CreateAllocator,
   * ReleaseAllocator and CreateSyncStreamForDevice were left NULL in that test without harm
   * (no EpDevice_AddAllocatorInfo, IsStreamAware returning false). */
  OrtStatusPtr (*CreateDataTransfer)(OrtEpFactory* this_ptr, OrtDataTransferImpl** data_transfer);   /* 1.23 */
  bool (*IsStreamAware)(const OrtEpFactory* this_ptr);                                                /* 1.23 */
  OrtStatusPtr (*CreateSyncStreamForDevice)(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                            const OrtKeyValuePairs* stream_options,
                                            OrtSyncStreamImpl** stream);                              /* 1.23 */
  OrtStatusPtr (*GetHardwareDeviceIncompatibilityDetails)(OrtEpFactory* this_ptr, const OrtHardwareDevice* hw,
                                                          OrtDeviceEpIncompatibilityDetails* details); /* 1.24, opt */
  OrtStatusPtr (*CreateExternalResourceImporterForDevice)(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device,
                                                          OrtExternalResourceImporterImpl** out_importer); /* 1.24, opt */
  OrtStatusPtr (*GetNumCustomOpDomains)(OrtEpFactory* this_ptr, size_t* num_domains);                /* 1.24, opt */
  OrtStatusPtr (*GetCustomOpDomains)(OrtEpFactory* this_ptr, OrtCustomOpDomain** domains,
                                     size_t num_domains);                                             /* 1.24, opt */
};

/* Entry points the EP library exports (names "CreateEpFactories" and "ReleaseEpFactory"). */
typedef OrtStatus* (*CreateEpApiFactoriesFn)(const char* registered_name, const OrtApiBase* ort_api_base,
                                             const OrtLogger* default_logger, OrtEpFactory** factories,
                                             size_t max_factories, size_t* num_factories);
typedef OrtStatus* (*ReleaseEpApiFactoryFn)(OrtEpFactory* factory);

/* ------------------------------------------------------------------------- */
/* OrtApi: slot indices, first version, function pointer types                */
/* ------------------------------------------------------------------------- */
/* OrtApi version boundaries (last slot of each version): 1:101 2:118 3:124 4:126
 * 5:149 6:157 7:161 8:169 9:191 10:203 11:209 12:218 13:224 14:238 15:254 16:265
 * 17:275 18:279 19:(none) 20:284 21:(none) 22:317 23:389 24:414. */

/* --- OrtStatus --- */
#define ORT_API_SLOT_CreateStatus 0
#define ORT_API_SINCE_CreateStatus 1
typedef OrtStatus* (*OrtApi_CreateStatus_fn)(OrtErrorCode code, const char* msg);
#define ORT_API_SLOT_GetErrorCode 1
#define ORT_API_SINCE_GetErrorCode 1
typedef OrtErrorCode (*OrtApi_GetErrorCode_fn)(const OrtStatus* status);
#define ORT_API_SLOT_GetErrorMessage 2
#define ORT_API_SINCE_GetErrorMessage 1
typedef const char* (*OrtApi_GetErrorMessage_fn)(const OrtStatus* status);
#define ORT_API_SLOT_ReleaseStatus 93
#define ORT_API_SINCE_ReleaseStatus 1
typedef void (*OrtApi_ReleaseStatus_fn)(OrtStatus* input);

/* --- OrtValue / tensors --- */
#define ORT_API_SLOT_CreateTensorAsOrtValue 48
#define ORT_API_SINCE_CreateTensorAsOrtValue 1
typedef OrtStatusPtr (*OrtApi_CreateTensorAsOrtValue_fn)(OrtAllocator* allocator, const int64_t* shape,
                                                         size_t shape_len, ONNXTensorElementDataType type,
                                                         OrtValue** out);
#define ORT_API_SLOT_CreateTensorWithDataAsOrtValue 49
#define ORT_API_SINCE_CreateTensorWithDataAsOrtValue 1
typedef OrtStatusPtr (*OrtApi_CreateTensorWithDataAsOrtValue_fn)(const OrtMemoryInfo* info, void* p_data,
                                                                 size_t p_data_len, const int64_t* shape,
                                                                 size_t shape_len, ONNXTensorElementDataType type,
                                                                 OrtValue** out);
#define ORT_API_SLOT_IsTensor 50
#define ORT_API_SINCE_IsTensor 1
typedef OrtStatusPtr (*OrtApi_IsTensor_fn)(const OrtValue* value, int* out);
#define ORT_API_SLOT_GetTensorMutableData 51
#define ORT_API_SINCE_GetTensorMutableData 1
typedef OrtStatusPtr (*OrtApi_GetTensorMutableData_fn)(OrtValue* value, void** out);
#define ORT_API_SLOT_CastTypeInfoToTensorInfo 55
#define ORT_API_SINCE_CastTypeInfoToTensorInfo 1
typedef OrtStatusPtr (*OrtApi_CastTypeInfoToTensorInfo_fn)(const OrtTypeInfo* type_info,
                                                           const OrtTensorTypeAndShapeInfo** out);
#define ORT_API_SLOT_GetOnnxTypeFromTypeInfo 56
#define ORT_API_SINCE_GetOnnxTypeFromTypeInfo 1
typedef OrtStatusPtr (*OrtApi_GetOnnxTypeFromTypeInfo_fn)(const OrtTypeInfo* type_info, enum ONNXType* out);
#define ORT_API_SLOT_GetTensorElementType 60
#define ORT_API_SINCE_GetTensorElementType 1
typedef OrtStatusPtr (*OrtApi_GetTensorElementType_fn)(const OrtTensorTypeAndShapeInfo* info,
                                                       enum ONNXTensorElementDataType* out);
#define ORT_API_SLOT_GetDimensionsCount 61
#define ORT_API_SINCE_GetDimensionsCount 1
typedef OrtStatusPtr (*OrtApi_GetDimensionsCount_fn)(const OrtTensorTypeAndShapeInfo* info, size_t* out);
#define ORT_API_SLOT_GetDimensions 62
#define ORT_API_SINCE_GetDimensions 1
typedef OrtStatusPtr (*OrtApi_GetDimensions_fn)(const OrtTensorTypeAndShapeInfo* info, int64_t* dim_values,
                                                size_t dim_values_length);
#define ORT_API_SLOT_GetSymbolicDimensions 63
#define ORT_API_SINCE_GetSymbolicDimensions 1
typedef OrtStatusPtr (*OrtApi_GetSymbolicDimensions_fn)(const OrtTensorTypeAndShapeInfo* info,
                                                        const char* dim_params[], size_t dim_params_length);
#define ORT_API_SLOT_GetTensorShapeElementCount 64
#define ORT_API_SINCE_GetTensorShapeElementCount 1
typedef OrtStatusPtr (*OrtApi_GetTensorShapeElementCount_fn)(const OrtTensorTypeAndShapeInfo* info, size_t* out);
#define ORT_API_SLOT_GetTensorTypeAndShape 65
#define ORT_API_SINCE_GetTensorTypeAndShape 1
typedef OrtStatusPtr (*OrtApi_GetTensorTypeAndShape_fn)(const OrtValue* value, OrtTensorTypeAndShapeInfo** out);
#define ORT_API_SLOT_GetTypeInfo 66
#define ORT_API_SINCE_GetTypeInfo 1
typedef OrtStatusPtr (*OrtApi_GetTypeInfo_fn)(const OrtValue* value, OrtTypeInfo** out);
#define ORT_API_SLOT_GetValueType 67
#define ORT_API_SINCE_GetValueType 1
typedef OrtStatusPtr (*OrtApi_GetValueType_fn)(const OrtValue* value, enum ONNXType* out);

/* --- OrtMemoryInfo / OrtAllocator --- */
#define ORT_API_SLOT_CreateMemoryInfo 68
#define ORT_API_SINCE_CreateMemoryInfo 1
typedef OrtStatusPtr (*OrtApi_CreateMemoryInfo_fn)(const char* name, enum OrtAllocatorType type, int id,
                                                   enum OrtMemType mem_type, OrtMemoryInfo** out);
#define ORT_API_SLOT_CompareMemoryInfo 70
#define ORT_API_SINCE_CompareMemoryInfo 1
typedef OrtStatusPtr (*OrtApi_CompareMemoryInfo_fn)(const OrtMemoryInfo* info1, const OrtMemoryInfo* info2,
                                                    int* out);
#define ORT_API_SLOT_MemoryInfoGetName 71
#define ORT_API_SINCE_MemoryInfoGetName 1
typedef OrtStatusPtr (*OrtApi_MemoryInfoGetName_fn)(const OrtMemoryInfo* ptr, const char** out);
#define ORT_API_SLOT_MemoryInfoGetId 72
#define ORT_API_SINCE_MemoryInfoGetId 1
typedef OrtStatusPtr (*OrtApi_MemoryInfoGetId_fn)(const OrtMemoryInfo* ptr, int* out);
#define ORT_API_SLOT_MemoryInfoGetMemType 73
#define ORT_API_SINCE_MemoryInfoGetMemType 1
typedef OrtStatusPtr (*OrtApi_MemoryInfoGetMemType_fn)(const OrtMemoryInfo* ptr, OrtMemType* out);
#define ORT_API_SLOT_MemoryInfoGetType 74
#define ORT_API_SINCE_MemoryInfoGetType 1
typedef OrtStatusPtr (*OrtApi_MemoryInfoGetType_fn)(const OrtMemoryInfo* ptr, OrtAllocatorType* out);
#define ORT_API_SLOT_AllocatorAlloc 75
#define ORT_API_SINCE_AllocatorAlloc 1
typedef OrtStatusPtr (*OrtApi_AllocatorAlloc_fn)(OrtAllocator* ort_allocator, size_t size, void** out);
#define ORT_API_SLOT_AllocatorFree 76
#define ORT_API_SINCE_AllocatorFree 1
typedef OrtStatusPtr (*OrtApi_AllocatorFree_fn)(OrtAllocator* ort_allocator, void* p);
#define ORT_API_SLOT_AllocatorGetInfo 77
#define ORT_API_SINCE_AllocatorGetInfo 1
typedef OrtStatusPtr (*OrtApi_AllocatorGetInfo_fn)(const OrtAllocator* ort_allocator,
                                                   const struct OrtMemoryInfo** out);
#define ORT_API_SLOT_GetAllocatorWithDefaultOptions 78
#define ORT_API_SINCE_GetAllocatorWithDefaultOptions 1
typedef OrtStatusPtr (*OrtApi_GetAllocatorWithDefaultOptions_fn)(OrtAllocator** out);

/* --- OrtKernelContext (inputs/outputs inside OrtNodeComputeInfo::Compute) --- */
#define ORT_API_SLOT_KernelContext_GetInputCount 88
#define ORT_API_SINCE_KernelContext_GetInputCount 1
typedef OrtStatusPtr (*OrtApi_KernelContext_GetInputCount_fn)(const OrtKernelContext* context, size_t* out);
#define ORT_API_SLOT_KernelContext_GetOutputCount 89
#define ORT_API_SINCE_KernelContext_GetOutputCount 1
typedef OrtStatusPtr (*OrtApi_KernelContext_GetOutputCount_fn)(const OrtKernelContext* context, size_t* out);
#define ORT_API_SLOT_KernelContext_GetInput 90
#define ORT_API_SINCE_KernelContext_GetInput 1
typedef OrtStatusPtr (*OrtApi_KernelContext_GetInput_fn)(const OrtKernelContext* context, size_t index,
                                                         const OrtValue** out);
#define ORT_API_SLOT_KernelContext_GetOutput 91
#define ORT_API_SINCE_KernelContext_GetOutput 1
typedef OrtStatusPtr (*OrtApi_KernelContext_GetOutput_fn)(OrtKernelContext* context, size_t index,
                                                          const int64_t* dim_values, size_t dim_count,
                                                          OrtValue** out);

/* --- Release functions (version 1) --- */
#define ORT_API_SLOT_ReleaseMemoryInfo 94
#define ORT_API_SINCE_ReleaseMemoryInfo 1
typedef void (*OrtApi_ReleaseMemoryInfo_fn)(OrtMemoryInfo* input);
#define ORT_API_SLOT_ReleaseValue 96
#define ORT_API_SINCE_ReleaseValue 1
typedef void (*OrtApi_ReleaseValue_fn)(OrtValue* input);
#define ORT_API_SLOT_ReleaseTypeInfo 98
#define ORT_API_SINCE_ReleaseTypeInfo 1
typedef void (*OrtApi_ReleaseTypeInfo_fn)(OrtTypeInfo* input);
#define ORT_API_SLOT_ReleaseTensorTypeAndShapeInfo 99
#define ORT_API_SINCE_ReleaseTensorTypeAndShapeInfo 1
typedef void (*OrtApi_ReleaseTensorTypeAndShapeInfo_fn)(OrtTensorTypeAndShapeInfo* input);

/* --- versions 10..17 --- */
#define ORT_API_SLOT_KernelContext_GetGPUComputeStream 193
#define ORT_API_SINCE_KernelContext_GetGPUComputeStream 10
typedef OrtStatusPtr (*OrtApi_KernelContext_GetGPUComputeStream_fn)(const OrtKernelContext* context, void** out);
#define ORT_API_SLOT_GetTensorMemoryInfo 194
#define ORT_API_SINCE_GetTensorMemoryInfo 10
typedef OrtStatusPtr (*OrtApi_GetTensorMemoryInfo_fn)(const OrtValue* value, const OrtMemoryInfo** mem_info);
/* NOTE: returns void, not OrtStatus*. */
#define ORT_API_SLOT_MemoryInfoGetDeviceType 225
#define ORT_API_SINCE_MemoryInfoGetDeviceType 14
typedef void (*OrtApi_MemoryInfoGetDeviceType_fn)(const OrtMemoryInfo* ptr, OrtMemoryInfoDeviceType* out);
#define ORT_API_SLOT_HasSessionConfigEntry 237
#define ORT_API_SINCE_HasSessionConfigEntry 14
typedef OrtStatusPtr (*OrtApi_HasSessionConfigEntry_fn)(const OrtSessionOptions* options, const char* config_key,
                                                        int* out);
/* If config_value is NULL, *size is set to the needed size (including the NUL). Fails if the key is absent. */
#define ORT_API_SLOT_GetSessionConfigEntry 238
#define ORT_API_SINCE_GetSessionConfigEntry 14
typedef OrtStatusPtr (*OrtApi_GetSessionConfigEntry_fn)(const OrtSessionOptions* options, const char* config_key,
                                                        char* config_value, size_t* size);
#define ORT_API_SLOT_KernelContext_GetLogger 246
#define ORT_API_SINCE_KernelContext_GetLogger 15
typedef OrtStatusPtr (*OrtApi_KernelContext_GetLogger_fn)(const OrtKernelContext* context, const OrtLogger** logger);
#define ORT_API_SLOT_Logger_LogMessage 247
#define ORT_API_SINCE_Logger_LogMessage 15
typedef OrtStatusPtr (*OrtApi_Logger_LogMessage_fn)(const OrtLogger* logger, OrtLoggingLevel log_severity_level,
                                                    const char* message, const ORTCHAR_T* file_path,
                                                    int line_number, const char* func_name);
#define ORT_API_SLOT_Logger_GetLoggingSeverityLevel 248
#define ORT_API_SINCE_Logger_GetLoggingSeverityLevel 15
typedef OrtStatusPtr (*OrtApi_Logger_GetLoggingSeverityLevel_fn)(const OrtLogger* logger, OrtLoggingLevel* out);
#define ORT_API_SLOT_KernelContext_GetAllocator 253
#define ORT_API_SINCE_KernelContext_GetAllocator 15
typedef OrtStatusPtr (*OrtApi_KernelContext_GetAllocator_fn)(const OrtKernelContext* context,
                                                             const OrtMemoryInfo* mem_info, OrtAllocator** out);
/* *out: bytes needed (on failure) or bytes written (on success). Not for GRAPH attributes. */
#define ORT_API_SLOT_ReadOpAttr 272
#define ORT_API_SINCE_ReadOpAttr 17
typedef OrtStatusPtr (*OrtApi_ReadOpAttr_fn)(const OrtOpAttr* op_attr, OrtOpAttrType type, void* data, size_t len,
                                             size_t* out);

/* --- version 22 --- */
#define ORT_API_SLOT_ReleaseGraph 287
#define ORT_API_SINCE_ReleaseGraph 22
typedef void (*OrtApi_ReleaseGraph_fn)(OrtGraph* input);
#define ORT_API_SLOT_GetValueInfoName 289
#define ORT_API_SINCE_GetValueInfoName 22
typedef OrtStatusPtr (*OrtApi_GetValueInfoName_fn)(const OrtValueInfo* value_info, const char** name);
#define ORT_API_SLOT_GetValueInfoTypeInfo 290
#define ORT_API_SINCE_GetValueInfoTypeInfo 22
typedef OrtStatusPtr (*OrtApi_GetValueInfoTypeInfo_fn)(const OrtValueInfo* value_info, const OrtTypeInfo** type_info);
/* OrtKeyValuePairs: these return void (no OrtStatus). */
#define ORT_API_SLOT_CreateKeyValuePairs 295
#define ORT_API_SINCE_CreateKeyValuePairs 22
typedef void (*OrtApi_CreateKeyValuePairs_fn)(OrtKeyValuePairs** out);
#define ORT_API_SLOT_AddKeyValuePair 296
#define ORT_API_SINCE_AddKeyValuePair 22
typedef void (*OrtApi_AddKeyValuePair_fn)(OrtKeyValuePairs* kvps, const char* key, const char* value);
#define ORT_API_SLOT_GetKeyValue 297
#define ORT_API_SINCE_GetKeyValue 22
typedef const char* (*OrtApi_GetKeyValue_fn)(const OrtKeyValuePairs* kvps, const char* key);
#define ORT_API_SLOT_GetKeyValuePairs 298
#define ORT_API_SINCE_GetKeyValuePairs 22
typedef void (*OrtApi_GetKeyValuePairs_fn)(const OrtKeyValuePairs* kvps, const char* const** keys,
                                           const char* const** values, size_t* num_entries);
#define ORT_API_SLOT_RemoveKeyValuePair 299
#define ORT_API_SINCE_RemoveKeyValuePair 22
typedef void (*OrtApi_RemoveKeyValuePair_fn)(OrtKeyValuePairs* kvps, const char* key);
#define ORT_API_SLOT_ReleaseKeyValuePairs 300
#define ORT_API_SINCE_ReleaseKeyValuePairs 22
typedef void (*OrtApi_ReleaseKeyValuePairs_fn)(OrtKeyValuePairs* input);
/* OrtHardwareDevice accessors live in OrtApi (not OrtEpApi). */
#define ORT_API_SLOT_HardwareDevice_Type 307
#define ORT_API_SINCE_HardwareDevice_Type 22
typedef OrtHardwareDeviceType (*OrtApi_HardwareDevice_Type_fn)(const OrtHardwareDevice* device);
#define ORT_API_SLOT_HardwareDevice_VendorId 308
#define ORT_API_SINCE_HardwareDevice_VendorId 22
typedef uint32_t (*OrtApi_HardwareDevice_VendorId_fn)(const OrtHardwareDevice* device);
#define ORT_API_SLOT_HardwareDevice_Vendor 309
#define ORT_API_SINCE_HardwareDevice_Vendor 22
typedef const char* (*OrtApi_HardwareDevice_Vendor_fn)(const OrtHardwareDevice* device);
#define ORT_API_SLOT_HardwareDevice_DeviceId 310
#define ORT_API_SINCE_HardwareDevice_DeviceId 22
typedef uint32_t (*OrtApi_HardwareDevice_DeviceId_fn)(const OrtHardwareDevice* device);
#define ORT_API_SLOT_HardwareDevice_Metadata 311
#define ORT_API_SINCE_HardwareDevice_Metadata 22
typedef const OrtKeyValuePairs* (*OrtApi_HardwareDevice_Metadata_fn)(const OrtHardwareDevice* device);
#define ORT_API_SLOT_EpDevice_EpName 312
#define ORT_API_SINCE_EpDevice_EpName 22
typedef const char* (*OrtApi_EpDevice_EpName_fn)(const OrtEpDevice* ep_device);
#define ORT_API_SLOT_EpDevice_EpVendor 313
#define ORT_API_SINCE_EpDevice_EpVendor 22
typedef const char* (*OrtApi_EpDevice_EpVendor_fn)(const OrtEpDevice* ep_device);
#define ORT_API_SLOT_EpDevice_EpMetadata 314
#define ORT_API_SINCE_EpDevice_EpMetadata 22
typedef const OrtKeyValuePairs* (*OrtApi_EpDevice_EpMetadata_fn)(const OrtEpDevice* ep_device);
#define ORT_API_SLOT_EpDevice_EpOptions 315
#define ORT_API_SINCE_EpDevice_EpOptions 22
typedef const OrtKeyValuePairs* (*OrtApi_EpDevice_EpOptions_fn)(const OrtEpDevice* ep_device);
#define ORT_API_SLOT_EpDevice_Device 316
#define ORT_API_SINCE_EpDevice_Device 22
typedef const OrtHardwareDevice* (*OrtApi_EpDevice_Device_fn)(const OrtEpDevice* ep_device);
/* How the EP obtains OrtEpApi: no version argument; the host's whole table comes back. */
#define ORT_API_SLOT_GetEpApi 317
#define ORT_API_SINCE_GetEpApi 22
typedef const OrtEpApi* (*OrtApi_GetEpApi_fn)(void);

/* --- version 23 --- */
#define ORT_API_SLOT_GetTensorSizeInBytes 318
#define ORT_API_SINCE_GetTensorSizeInBytes 23
typedef OrtStatusPtr (*OrtApi_GetTensorSizeInBytes_fn)(const OrtValue* ort_value, size_t* size);
#define ORT_API_SLOT_CreateMemoryInfo_V2 320
#define ORT_API_SINCE_CreateMemoryInfo_V2 23
typedef OrtStatusPtr (*OrtApi_CreateMemoryInfo_V2_fn)(const char* name, enum OrtMemoryInfoDeviceType device_type,
                                                      uint32_t vendor_id, int32_t device_id,
                                                      enum OrtDeviceMemoryType mem_type, size_t alignment,
                                                      enum OrtAllocatorType allocator_type, OrtMemoryInfo** out);
#define ORT_API_SLOT_MemoryInfoGetDeviceMemType 321
#define ORT_API_SINCE_MemoryInfoGetDeviceMemType 23
typedef OrtDeviceMemoryType (*OrtApi_MemoryInfoGetDeviceMemType_fn)(const OrtMemoryInfo* ptr);
#define ORT_API_SLOT_MemoryInfoGetVendorId 322
#define ORT_API_SINCE_MemoryInfoGetVendorId 23
typedef uint32_t (*OrtApi_MemoryInfoGetVendorId_fn)(const OrtMemoryInfo* ptr);
/* OrtValueInfo */
#define ORT_API_SLOT_ValueInfo_GetValueProducer 323
#define ORT_API_SINCE_ValueInfo_GetValueProducer 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_GetValueProducer_fn)(const OrtValueInfo* value_info,
                                                             const OrtNode** producer_node,
                                                             size_t* producer_output_index);
#define ORT_API_SLOT_ValueInfo_GetValueNumConsumers 324
#define ORT_API_SINCE_ValueInfo_GetValueNumConsumers 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_GetValueNumConsumers_fn)(const OrtValueInfo* value_info,
                                                                 size_t* num_consumers);
#define ORT_API_SLOT_ValueInfo_GetValueConsumers 325
#define ORT_API_SINCE_ValueInfo_GetValueConsumers 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_GetValueConsumers_fn)(const OrtValueInfo* value_info, const OrtNode** nodes,
                                                              int64_t* input_indices, size_t num_consumers);
/* Sets *initializer_value to NULL (no error) if value_info is not an initializer. */
#define ORT_API_SLOT_ValueInfo_GetInitializerValue 326
#define ORT_API_SINCE_ValueInfo_GetInitializerValue 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_GetInitializerValue_fn)(const OrtValueInfo* value_info,
                                                                const OrtValue** initializer_value);
/* Sets *info to NULL (no error) if not an external initializer; release with ReleaseExternalInitializerInfo. */
#define ORT_API_SLOT_ValueInfo_GetExternalInitializerInfo 327
#define ORT_API_SINCE_ValueInfo_GetExternalInitializerInfo 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_GetExternalInitializerInfo_fn)(const OrtValueInfo* value_info,
                                                                       OrtExternalInitializerInfo** info);
#define ORT_API_SLOT_ValueInfo_IsRequiredGraphInput 328
#define ORT_API_SINCE_ValueInfo_IsRequiredGraphInput 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_IsRequiredGraphInput_fn)(const OrtValueInfo* value_info,
                                                                 bool* is_required_graph_input);
#define ORT_API_SLOT_ValueInfo_IsOptionalGraphInput 329
#define ORT_API_SINCE_ValueInfo_IsOptionalGraphInput 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_IsOptionalGraphInput_fn)(const OrtValueInfo* value_info,
                                                                 bool* is_optional_graph_input);
#define ORT_API_SLOT_ValueInfo_IsGraphOutput 330
#define ORT_API_SINCE_ValueInfo_IsGraphOutput 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_IsGraphOutput_fn)(const OrtValueInfo* value_info, bool* is_graph_output);
#define ORT_API_SLOT_ValueInfo_IsConstantInitializer 331
#define ORT_API_SINCE_ValueInfo_IsConstantInitializer 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_IsConstantInitializer_fn)(const OrtValueInfo* value_info,
                                                                  bool* is_constant_initializer);
#define ORT_API_SLOT_ValueInfo_IsFromOuterScope 332
#define ORT_API_SINCE_ValueInfo_IsFromOuterScope 23
typedef OrtStatusPtr (*OrtApi_ValueInfo_IsFromOuterScope_fn)(const OrtValueInfo* value_info,
                                                             bool* is_from_outer_scope);
/* OrtGraph */
#define ORT_API_SLOT_Graph_GetName 333
#define ORT_API_SINCE_Graph_GetName 23
typedef OrtStatusPtr (*OrtApi_Graph_GetName_fn)(const OrtGraph* graph, const char** graph_name);
/* Empty string when the model was loaded from bytes. */
#define ORT_API_SLOT_Graph_GetModelPath 334
#define ORT_API_SINCE_Graph_GetModelPath 23
typedef OrtStatusPtr (*OrtApi_Graph_GetModelPath_fn)(const OrtGraph* graph, const ORTCHAR_T** model_path);
#define ORT_API_SLOT_Graph_GetOnnxIRVersion 335
#define ORT_API_SINCE_Graph_GetOnnxIRVersion 23
typedef OrtStatusPtr (*OrtApi_Graph_GetOnnxIRVersion_fn)(const OrtGraph* graph, int64_t* onnx_ir_version);
/* The model's opset imports: (domain, version) pairs; the ONNX domain is "". */
#define ORT_API_SLOT_Graph_GetNumOperatorSets 336
#define ORT_API_SINCE_Graph_GetNumOperatorSets 23
typedef OrtStatusPtr (*OrtApi_Graph_GetNumOperatorSets_fn)(const OrtGraph* graph, size_t* num_operator_sets);
#define ORT_API_SLOT_Graph_GetOperatorSets 337
#define ORT_API_SINCE_Graph_GetOperatorSets 23
typedef OrtStatusPtr (*OrtApi_Graph_GetOperatorSets_fn)(const OrtGraph* graph, const char** domains,
                                                        int64_t* opset_versions, size_t num_operator_sets);
#define ORT_API_SLOT_Graph_GetNumInputs 338
#define ORT_API_SINCE_Graph_GetNumInputs 23
typedef OrtStatusPtr (*OrtApi_Graph_GetNumInputs_fn)(const OrtGraph* graph, size_t* num_inputs);
#define ORT_API_SLOT_Graph_GetInputs 339
#define ORT_API_SINCE_Graph_GetInputs 23
typedef OrtStatusPtr (*OrtApi_Graph_GetInputs_fn)(const OrtGraph* graph, const OrtValueInfo** inputs,
                                                  size_t num_inputs);
#define ORT_API_SLOT_Graph_GetNumOutputs 340
#define ORT_API_SINCE_Graph_GetNumOutputs 23
typedef OrtStatusPtr (*OrtApi_Graph_GetNumOutputs_fn)(const OrtGraph* graph, size_t* num_outputs);
#define ORT_API_SLOT_Graph_GetOutputs 341
#define ORT_API_SINCE_Graph_GetOutputs 23
typedef OrtStatusPtr (*OrtApi_Graph_GetOutputs_fn)(const OrtGraph* graph, const OrtValueInfo** outputs,
                                                   size_t num_outputs);
#define ORT_API_SLOT_Graph_GetNumInitializers 342
#define ORT_API_SINCE_Graph_GetNumInitializers 23
typedef OrtStatusPtr (*OrtApi_Graph_GetNumInitializers_fn)(const OrtGraph* graph, size_t* num_initializers);
#define ORT_API_SLOT_Graph_GetInitializers 343
#define ORT_API_SINCE_Graph_GetInitializers 23
typedef OrtStatusPtr (*OrtApi_Graph_GetInitializers_fn)(const OrtGraph* graph, const OrtValueInfo** initializers,
                                                        size_t num_initializers);
#define ORT_API_SLOT_Graph_GetNumNodes 344
#define ORT_API_SINCE_Graph_GetNumNodes 23
typedef OrtStatusPtr (*OrtApi_Graph_GetNumNodes_fn)(const OrtGraph* graph, size_t* num_nodes);
#define ORT_API_SLOT_Graph_GetNodes 345
#define ORT_API_SINCE_Graph_GetNodes 23
typedef OrtStatusPtr (*OrtApi_Graph_GetNodes_fn)(const OrtGraph* graph, const OrtNode** nodes, size_t num_nodes);
#define ORT_API_SLOT_Graph_GetParentNode 346
#define ORT_API_SINCE_Graph_GetParentNode 23
typedef OrtStatusPtr (*OrtApi_Graph_GetParentNode_fn)(const OrtGraph* graph, const OrtNode** node);
/* OrtNode */
#define ORT_API_SLOT_Node_GetId 348
#define ORT_API_SINCE_Node_GetId 23
typedef OrtStatusPtr (*OrtApi_Node_GetId_fn)(const OrtNode* node, size_t* node_id);
#define ORT_API_SLOT_Node_GetName 349
#define ORT_API_SINCE_Node_GetName 23
typedef OrtStatusPtr (*OrtApi_Node_GetName_fn)(const OrtNode* node, const char** node_name);
#define ORT_API_SLOT_Node_GetOperatorType 350
#define ORT_API_SINCE_Node_GetOperatorType 23
typedef OrtStatusPtr (*OrtApi_Node_GetOperatorType_fn)(const OrtNode* node, const char** operator_type);
#define ORT_API_SLOT_Node_GetDomain 351
#define ORT_API_SINCE_Node_GetDomain 23
typedef OrtStatusPtr (*OrtApi_Node_GetDomain_fn)(const OrtNode* node, const char** domain_name);
/* The opset version in which the node's operator type was first defined (the schema's since_version). */
#define ORT_API_SLOT_Node_GetSinceVersion 352
#define ORT_API_SINCE_Node_GetSinceVersion 23
typedef OrtStatusPtr (*OrtApi_Node_GetSinceVersion_fn)(const OrtNode* node, int* since_version);
#define ORT_API_SLOT_Node_GetNumInputs 353
#define ORT_API_SINCE_Node_GetNumInputs 23
typedef OrtStatusPtr (*OrtApi_Node_GetNumInputs_fn)(const OrtNode* node, size_t* num_inputs);
/* Missing optional inputs appear as NULL entries. */
#define ORT_API_SLOT_Node_GetInputs 354
#define ORT_API_SINCE_Node_GetInputs 23
typedef OrtStatusPtr (*OrtApi_Node_GetInputs_fn)(const OrtNode* node, const OrtValueInfo** inputs, size_t num_inputs);
#define ORT_API_SLOT_Node_GetNumOutputs 355
#define ORT_API_SINCE_Node_GetNumOutputs 23
typedef OrtStatusPtr (*OrtApi_Node_GetNumOutputs_fn)(const OrtNode* node, size_t* num_outputs);
#define ORT_API_SLOT_Node_GetOutputs 356
#define ORT_API_SINCE_Node_GetOutputs 23
typedef OrtStatusPtr (*OrtApi_Node_GetOutputs_fn)(const OrtNode* node, const OrtValueInfo** outputs,
                                                  size_t num_outputs);
#define ORT_API_SLOT_Node_GetNumImplicitInputs 357
#define ORT_API_SINCE_Node_GetNumImplicitInputs 23
typedef OrtStatusPtr (*OrtApi_Node_GetNumImplicitInputs_fn)(const OrtNode* node, size_t* num_implicit_inputs);
#define ORT_API_SLOT_Node_GetImplicitInputs 358
#define ORT_API_SINCE_Node_GetImplicitInputs 23
typedef OrtStatusPtr (*OrtApi_Node_GetImplicitInputs_fn)(const OrtNode* node, const OrtValueInfo** implicit_inputs,
                                                         size_t num_implicit_inputs);
#define ORT_API_SLOT_Node_GetNumAttributes 359
#define ORT_API_SINCE_Node_GetNumAttributes 23
typedef OrtStatusPtr (*OrtApi_Node_GetNumAttributes_fn)(const OrtNode* node, size_t* num_attributes);
#define ORT_API_SLOT_Node_GetAttributes 360
#define ORT_API_SINCE_Node_GetAttributes 23
typedef OrtStatusPtr (*OrtApi_Node_GetAttributes_fn)(const OrtNode* node, const OrtOpAttr** attributes,
                                                     size_t num_attributes);
/* Unset optional attribute: *attribute = NULL, no error. Unknown name: error ORT_NOT_FOUND. */
#define ORT_API_SLOT_Node_GetAttributeByName 361
#define ORT_API_SINCE_Node_GetAttributeByName 23
typedef OrtStatusPtr (*OrtApi_Node_GetAttributeByName_fn)(const OrtNode* node, const char* attribute_name,
                                                          const OrtOpAttr** attribute);
#define ORT_API_SLOT_OpAttr_GetTensorAttributeAsOrtValue 362
#define ORT_API_SINCE_OpAttr_GetTensorAttributeAsOrtValue 23
typedef OrtStatusPtr (*OrtApi_OpAttr_GetTensorAttributeAsOrtValue_fn)(const OrtOpAttr* attribute,
                                                                      OrtValue** attr_tensor);
#define ORT_API_SLOT_OpAttr_GetType 363
#define ORT_API_SINCE_OpAttr_GetType 23
typedef OrtStatusPtr (*OrtApi_OpAttr_GetType_fn)(const OrtOpAttr* attribute, OrtOpAttrType* type);
#define ORT_API_SLOT_OpAttr_GetName 364
#define ORT_API_SINCE_OpAttr_GetName 23
typedef OrtStatusPtr (*OrtApi_OpAttr_GetName_fn)(const OrtOpAttr* attribute, const char** name);
#define ORT_API_SLOT_Node_GetNumSubgraphs 365
#define ORT_API_SINCE_Node_GetNumSubgraphs 23
typedef OrtStatusPtr (*OrtApi_Node_GetNumSubgraphs_fn)(const OrtNode* node, size_t* num_subgraphs);
#define ORT_API_SLOT_Node_GetSubgraphs 366
#define ORT_API_SINCE_Node_GetSubgraphs 23
typedef OrtStatusPtr (*OrtApi_Node_GetSubgraphs_fn)(const OrtNode* node, const OrtGraph** subgraphs,
                                                    size_t num_subgraphs, const char** attribute_names);
#define ORT_API_SLOT_Node_GetGraph 367
#define ORT_API_SINCE_Node_GetGraph 23
typedef OrtStatusPtr (*OrtApi_Node_GetGraph_fn)(const OrtNode* node, const OrtGraph** graph);
#define ORT_API_SLOT_Node_GetEpName 368
#define ORT_API_SINCE_Node_GetEpName 23
typedef OrtStatusPtr (*OrtApi_Node_GetEpName_fn)(const OrtNode* node, const char** out);
/* OrtExternalInitializerInfo */
#define ORT_API_SLOT_ReleaseExternalInitializerInfo 369
#define ORT_API_SINCE_ReleaseExternalInitializerInfo 23
typedef void (*OrtApi_ReleaseExternalInitializerInfo_fn)(OrtExternalInitializerInfo* input);
/* Path relative to the model's directory (join with the directory of Graph_GetModelPath). */
#define ORT_API_SLOT_ExternalInitializerInfo_GetFilePath 370
#define ORT_API_SINCE_ExternalInitializerInfo_GetFilePath 23
typedef const ORTCHAR_T* (*OrtApi_ExternalInitializerInfo_GetFilePath_fn)(const OrtExternalInitializerInfo* info);
#define ORT_API_SLOT_ExternalInitializerInfo_GetFileOffset 371
#define ORT_API_SINCE_ExternalInitializerInfo_GetFileOffset 23
typedef int64_t (*OrtApi_ExternalInitializerInfo_GetFileOffset_fn)(const OrtExternalInitializerInfo* info);
#define ORT_API_SLOT_ExternalInitializerInfo_GetByteSize 372
#define ORT_API_SINCE_ExternalInitializerInfo_GetByteSize 23
typedef size_t (*OrtApi_ExternalInitializerInfo_GetByteSize_fn)(const OrtExternalInitializerInfo* info);
/* Misc version 23 */
#define ORT_API_SLOT_GetRunConfigEntry 373
#define ORT_API_SINCE_GetRunConfigEntry 23
typedef const char* (*OrtApi_GetRunConfigEntry_fn)(const OrtRunOptions* options, const char* config_key);
#define ORT_API_SLOT_EpDevice_MemoryInfo 374
#define ORT_API_SINCE_EpDevice_MemoryInfo 23
typedef const OrtMemoryInfo* (*OrtApi_EpDevice_MemoryInfo_fn)(const OrtEpDevice* ep_device,
                                                              OrtDeviceMemoryType memory_type);
#define ORT_API_SLOT_GetTensorData 378
#define ORT_API_SINCE_GetTensorData 23
typedef OrtStatusPtr (*OrtApi_GetTensorData_fn)(const OrtValue* value, const void** out);
/* Alternative to GetSessionConfigEntry: all entries at once; release with ReleaseKeyValuePairs. */
#define ORT_API_SLOT_GetSessionOptionsConfigEntries 379
#define ORT_API_SINCE_GetSessionOptionsConfigEntries 23
typedef OrtStatusPtr (*OrtApi_GetSessionOptionsConfigEntries_fn)(const OrtSessionOptions* options,
                                                                 OrtKeyValuePairs** out);
#define ORT_API_SLOT_SyncStream_GetHandle 384
#define ORT_API_SINCE_SyncStream_GetHandle 23
typedef void* (*OrtApi_SyncStream_GetHandle_fn)(OrtSyncStream* stream);

/* --- version 24 (NOT callable when 23 was negotiated) --- */
#define ORT_API_SLOT_TensorTypeAndShape_HasShape 390
#define ORT_API_SINCE_TensorTypeAndShape_HasShape 24
typedef bool (*OrtApi_TensorTypeAndShape_HasShape_fn)(const OrtTensorTypeAndShapeInfo* info);
/* Index 414 is the last slot of the shipped 1.24 layout (415 slots). An unreleased
 * 1.25-development revision of onnxruntime_c_api.cc placed version 24's end at 411
 * without this function; the shipped 1.24.x header (measured: sizeof(OrtApi) == 3320,
 * offsetof(GetTensorElementTypeAndShapeDataReference) == 3312) has it at 414. */
#define ORT_API_SLOT_GetTensorElementTypeAndShapeDataReference 414
#define ORT_API_SINCE_GetTensorElementTypeAndShapeDataReference 24
typedef OrtStatusPtr (*OrtApi_GetTensorElementTypeAndShapeDataReference_fn)(const OrtValue* value,
                                                                            ONNXTensorElementDataType* elem_type,
                                                                            const int64_t** shape_data,
                                                                            size_t* shape_data_count);

/* ------------------------------------------------------------------------- */
/* OrtEpApi: slot indices, first version, function pointer types              */
/* ------------------------------------------------------------------------- */
/* OrtEpApi version boundaries: 22: 0..1, 23: 2..15, 24: 16..49. */

#define ORT_EP_API_SLOT_CreateEpDevice 0
#define ORT_EP_API_SINCE_CreateEpDevice 22
typedef OrtStatusPtr (*OrtEpApi_CreateEpDevice_fn)(OrtEpFactory* ep_factory, const OrtHardwareDevice* hardware_device,
                                                   const OrtKeyValuePairs* ep_metadata,
                                                   const OrtKeyValuePairs* ep_options, OrtEpDevice** ep_device);
#define ORT_EP_API_SLOT_ReleaseEpDevice 1
#define ORT_EP_API_SINCE_ReleaseEpDevice 22
typedef void (*OrtEpApi_ReleaseEpDevice_fn)(OrtEpDevice* input);
#define ORT_EP_API_SLOT_EpGraphSupportInfo_AddNodesToFuse 2
#define ORT_EP_API_SINCE_EpGraphSupportInfo_AddNodesToFuse 23
typedef OrtStatusPtr (*OrtEpApi_EpGraphSupportInfo_AddNodesToFuse_fn)(OrtEpGraphSupportInfo* graph_support_info,
                                                                      const OrtNode* const* nodes, size_t num_nodes,
                                                                      const OrtNodeFusionOptions* node_fusion_options);
#define ORT_EP_API_SLOT_EpGraphSupportInfo_AddSingleNode 3
#define ORT_EP_API_SINCE_EpGraphSupportInfo_AddSingleNode 23
typedef OrtStatusPtr (*OrtEpApi_EpGraphSupportInfo_AddSingleNode_fn)(OrtEpGraphSupportInfo* graph_support_info,
                                                                     const OrtNode* node);
/* Valid only during OrtNodeComputeInfo::CreateState. */
#define ORT_EP_API_SLOT_NodeComputeContext_NodeName 4
#define ORT_EP_API_SINCE_NodeComputeContext_NodeName 23
typedef const char* (*OrtEpApi_NodeComputeContext_NodeName_fn)(const OrtNodeComputeContext* context);
#define ORT_EP_API_SLOT_EpDevice_AddAllocatorInfo 5
#define ORT_EP_API_SINCE_EpDevice_AddAllocatorInfo 23
typedef OrtStatusPtr (*OrtEpApi_EpDevice_AddAllocatorInfo_fn)(OrtEpDevice* ep_device,
                                                              const OrtMemoryInfo* allocator_memory_info);
#define ORT_EP_API_SLOT_MemoryInfo_GetMemoryDevice 6
#define ORT_EP_API_SINCE_MemoryInfo_GetMemoryDevice 23
typedef const OrtMemoryDevice* (*OrtEpApi_MemoryInfo_GetMemoryDevice_fn)(const OrtMemoryInfo* memory_info);
/* NULL if the value is not a tensor. */
#define ORT_EP_API_SLOT_Value_GetMemoryDevice 7
#define ORT_EP_API_SINCE_Value_GetMemoryDevice 23
typedef const OrtMemoryDevice* (*OrtEpApi_Value_GetMemoryDevice_fn)(const OrtValue* value);
#define ORT_EP_API_SLOT_MemoryDevice_AreEqual 8
#define ORT_EP_API_SINCE_MemoryDevice_AreEqual 23
typedef bool (*OrtEpApi_MemoryDevice_AreEqual_fn)(const OrtMemoryDevice* a, const OrtMemoryDevice* b);
#define ORT_EP_API_SLOT_MemoryDevice_GetDeviceType 9
#define ORT_EP_API_SINCE_MemoryDevice_GetDeviceType 23
typedef OrtMemoryInfoDeviceType (*OrtEpApi_MemoryDevice_GetDeviceType_fn)(const OrtMemoryDevice* memory_device);
#define ORT_EP_API_SLOT_MemoryDevice_GetMemoryType 10
#define ORT_EP_API_SINCE_MemoryDevice_GetMemoryType 23
typedef OrtDeviceMemoryType (*OrtEpApi_MemoryDevice_GetMemoryType_fn)(const OrtMemoryDevice* memory_device);
#define ORT_EP_API_SLOT_MemoryDevice_GetVendorId 11
#define ORT_EP_API_SINCE_MemoryDevice_GetVendorId 23
typedef uint32_t (*OrtEpApi_MemoryDevice_GetVendorId_fn)(const OrtMemoryDevice* memory_device);
#define ORT_EP_API_SLOT_MemoryDevice_GetDeviceId 12
#define ORT_EP_API_SINCE_MemoryDevice_GetDeviceId 23
typedef uint32_t (*OrtEpApi_MemoryDevice_GetDeviceId_fn)(const OrtMemoryDevice* memory_device);
#define ORT_EP_API_SLOT_SyncStream_GetImpl 13
#define ORT_EP_API_SINCE_SyncStream_GetImpl 23
typedef const OrtSyncStreamImpl* (*OrtEpApi_SyncStream_GetImpl_fn)(const OrtSyncStream* stream);
#define ORT_EP_API_SLOT_SyncStream_GetSyncId 14
#define ORT_EP_API_SINCE_SyncStream_GetSyncId 23
typedef uint64_t (*OrtEpApi_SyncStream_GetSyncId_fn)(const OrtSyncStream* stream);
#define ORT_EP_API_SLOT_GetSyncIdForLastWaitOnSyncStream 15
#define ORT_EP_API_SINCE_GetSyncIdForLastWaitOnSyncStream 23
typedef uint64_t (*OrtEpApi_GetSyncIdForLastWaitOnSyncStream_fn)(const OrtSyncStream* producer_stream,
                                                                 const OrtSyncStream* consumer_stream);
/* version 24 (NOT callable when 23 was negotiated) */
#define ORT_EP_API_SLOT_CreateHardwareDevice 16
#define ORT_EP_API_SINCE_CreateHardwareDevice 24
typedef OrtStatusPtr (*OrtEpApi_CreateHardwareDevice_fn)(OrtHardwareDeviceType type, uint32_t vendor_id,
                                                         uint32_t device_id, const char* vendor_name,
                                                         const OrtKeyValuePairs* metadata,
                                                         OrtHardwareDevice** hardware_device);
#define ORT_EP_API_SLOT_ReleaseHardwareDevice 17
#define ORT_EP_API_SINCE_ReleaseHardwareDevice 24
typedef void (*OrtEpApi_ReleaseHardwareDevice_fn)(OrtHardwareDevice* input);
/* Environment-level config entries (keys "ep_factory.<ep_name>.<key>"); release with ReleaseKeyValuePairs. */
#define ORT_EP_API_SLOT_GetEnvConfigEntries 49
#define ORT_EP_API_SINCE_GetEnvConfigEntries 24
typedef OrtStatusPtr (*OrtEpApi_GetEnvConfigEntries_fn)(OrtKeyValuePairs** config_entries);

/* ------------------------------------------------------------------------- */
/* Slot access helpers                                                        */
/* ------------------------------------------------------------------------- */
/* The tables are arrays of function pointers. ORT_API_FN(api, Name) reads slot
 * ORT_API_SLOT_Name of `api` (a const OrtApi*) as an OrtApi_Name_fn. The caller
 * must have checked ORT_API_SINCE_Name <= negotiated version. */
typedef void (*OrtAbiAnyFn)(void);
#define ORT_API_FN(api, Name) \
  ((OrtApi_##Name##_fn)(((const OrtAbiAnyFn*)(const void*)(api))[ORT_API_SLOT_##Name]))
#define ORT_EP_API_FN(ep_api, Name) \
  ((OrtEpApi_##Name##_fn)(((const OrtAbiAnyFn*)(const void*)(ep_api))[ORT_EP_API_SLOT_##Name]))
#define ORT_API_HAS(negotiated_version, Name) ((negotiated_version) >= ORT_API_SINCE_##Name)
#define ORT_EP_API_HAS(negotiated_version, Name) ((negotiated_version) >= ORT_EP_API_SINCE_##Name)

/* ------------------------------------------------------------------------- */
/* Layout pins (x86-64 / LP64)                                                */
/* ------------------------------------------------------------------------- */
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define ORT_ABI_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#elif defined(__cplusplus) && __cplusplus >= 201103L
#define ORT_ABI_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#elif !defined(__cplusplus)
/* C99: a negative array size fails the build. */
#define ORT_ABI_CAT_(a, b) a##b
#define ORT_ABI_CAT(a, b) ORT_ABI_CAT_(a, b)
#define ORT_ABI_STATIC_ASSERT(cond, msg) typedef char ORT_ABI_CAT(ort_abi_static_assert_line_, __LINE__)[(cond) ? 1 : -1]
#endif

#if defined(ORT_ABI_STATIC_ASSERT) && defined(__x86_64__) && defined(__LP64__)
ORT_ABI_STATIC_ASSERT(sizeof(OrtApiBase) == 16, "OrtApiBase is 2 slots");
ORT_ABI_STATIC_ASSERT(sizeof(OrtAllocator) == 56, "OrtAllocator: version + 6 slots");
ORT_ABI_STATIC_ASSERT(sizeof(OrtDataTransferImpl) == 32, "OrtDataTransferImpl: version + 3 slots");
ORT_ABI_STATIC_ASSERT(sizeof(OrtSyncNotificationImpl) == 40, "OrtSyncNotificationImpl: version + 4 slots");
ORT_ABI_STATIC_ASSERT(sizeof(OrtSyncStreamImpl) == 48, "OrtSyncStreamImpl: version + 5 slots");
ORT_ABI_STATIC_ASSERT(sizeof(OrtNodeFusionOptions) == 8, "OrtNodeFusionOptions: uint32 + bool, padded");
ORT_ABI_STATIC_ASSERT(offsetof(OrtNodeFusionOptions, drop_constant_initializers) == 4, "drop_constant_initializers");
ORT_ABI_STATIC_ASSERT(sizeof(OrtNodeComputeInfo) == 32, "OrtNodeComputeInfo: version + 3 slots");
ORT_ABI_STATIC_ASSERT(sizeof(OrtEp) == 120, "OrtEp (1.24): version + 14 slots");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEp, GetName) == 8, "OrtEp::GetName");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEp, GetCapability) == 16, "OrtEp::GetCapability");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEp, Compile) == 24, "OrtEp::Compile");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEp, ReleaseNodeComputeInfos) == 32, "OrtEp::ReleaseNodeComputeInfos");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEp, OnRunStart) == 64, "OrtEp::OnRunStart");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEp, CreateAllocator) == 80, "OrtEp::CreateAllocator");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEp, CreateSyncStreamForDevice) == 88, "OrtEp::CreateSyncStreamForDevice");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEp, IsConcurrentRunSupported) == 112, "OrtEp::IsConcurrentRunSupported");
ORT_ABI_STATIC_ASSERT(sizeof(OrtEpFactory) == 144, "OrtEpFactory (1.24): version + 17 slots");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEpFactory, ReleaseEp) == 40, "OrtEpFactory::ReleaseEp (end of 1.22)");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEpFactory, CreateSyncStreamForDevice) == 104,
                      "OrtEpFactory::CreateSyncStreamForDevice (end of 1.23)");
ORT_ABI_STATIC_ASSERT(offsetof(OrtEpFactory, GetCustomOpDomains) == 136, "OrtEpFactory::GetCustomOpDomains");
ORT_ABI_STATIC_ASSERT(sizeof(OrtErrorCode) == 4, "enums are int-sized");
#endif

#ifdef __cplusplus
}
#endif

#endif /* GO_CUDAEP_CAPI_ORT_ORT_ABI_H */
