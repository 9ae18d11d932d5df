/*
 * ort_host_api.h - the OrtApi slots a *host* calls (environment, sessions, EP libraries), on top
 * of capi/ort/ort_abi.h, which describes only what the plugin EP itself calls.
 *
 * Each function has its zero-based slot index in OrtApi (ORT_API_SLOT_<Name>), the first API
 * version that has it (ORT_API_SINCE_<Name>) and its exact function-pointer type
 * (OrtApi_<Name>_fn), so ORT_API_FN(api, Name) from ort_abi.h reads it. Indices and signatures
 * come from include/onnxruntime/core/session/onnxruntime_c_api.h (ORT_API_VERSION 24, the 1.24.x
 * layout of 415 slots); slots of shipped versions never move. Slots newer than the negotiated
 * version must not be read (ORT_API_HAS).
 *
 * Checked at run time: the scratch host that proved the plugin-EP round trip on ORT 1.23.2,
 * 1.24.3 and 1.30.0 used CreateEnv, CreateSession, Run, CreateSessionOptions,
 * SetSessionGraphOptimizationLevel, CreateCpuMemoryInfo, Release{Env,Session,SessionOptions},
 * RegisterExecutionProviderLibrary, UnregisterExecutionProviderLibrary, GetEpDevices and
 * SessionOptionsAppendExecutionProvider_V2 at these indices; the other slots here are exercised
 * by ort_host itself on every run of `make test-ort`.
 */
#ifndef CUDAEP_CTESTS_ORT_HOST_API_H
#define CUDAEP_CTESTS_ORT_HOST_API_H

#include "ort_abi.h"

/* GraphOptimizationLevel (onnxruntime_c_api.h). */
typedef enum GraphOptimizationLevel {
  ORT_DISABLE_ALL = 0,
  ORT_ENABLE_BASIC = 1,
  ORT_ENABLE_EXTENDED = 2,
  ORT_ENABLE_LAYOUT = 3,
  ORT_ENABLE_ALL = 99
} GraphOptimizationLevel;

/* Made by CreateIoBinding, released with ReleaseIoBinding (case_iobinding.c). */
typedef struct OrtIoBinding OrtIoBinding;

/* Since 1.24: what Session_GetEpGraphAssignmentInfo returns (owned by the session). */
typedef struct OrtEpAssignedSubgraph OrtEpAssignedSubgraph;
typedef struct OrtEpAssignedNode OrtEpAssignedNode;

/* The custom logger of CreateEnvWithCustomLogger: called from any ORT thread. */
typedef void (*OrtLoggingFunction)(void* param, OrtLoggingLevel severity, const char* category, const char* logid,
                                   const char* code_location, const char* message);

/* --- version 1 ------------------------------------------------------------------------------ */
#define ORT_API_SLOT_CreateEnv 3
#define ORT_API_SINCE_CreateEnv 1
typedef OrtStatusPtr (*OrtApi_CreateEnv_fn)(OrtLoggingLevel log_severity_level, const char* logid, OrtEnv** out);
#define ORT_API_SLOT_CreateEnvWithCustomLogger 4
#define ORT_API_SINCE_CreateEnvWithCustomLogger 1
typedef OrtStatusPtr (*OrtApi_CreateEnvWithCustomLogger_fn)(OrtLoggingFunction logging_function, void* logger_param,
                                                            OrtLoggingLevel log_severity_level, const char* logid,
                                                            OrtEnv** out);
#define ORT_API_SLOT_CreateSession 7
#define ORT_API_SINCE_CreateSession 1
typedef OrtStatusPtr (*OrtApi_CreateSession_fn)(const OrtEnv* env, const ORTCHAR_T* model_path,
                                                const OrtSessionOptions* options, OrtSession** out);
#define ORT_API_SLOT_CreateSessionFromArray 8
#define ORT_API_SINCE_CreateSessionFromArray 1
typedef OrtStatusPtr (*OrtApi_CreateSessionFromArray_fn)(const OrtEnv* env, const void* model_data,
                                                         size_t model_data_length, const OrtSessionOptions* options,
                                                         OrtSession** out);
#define ORT_API_SLOT_Run 9
#define ORT_API_SINCE_Run 1
typedef OrtStatusPtr (*OrtApi_Run_fn)(OrtSession* session, const OrtRunOptions* run_options,
                                      const char* const* input_names, const OrtValue* const* inputs, size_t input_len,
                                      const char* const* output_names, size_t output_names_len, OrtValue** outputs);
#define ORT_API_SLOT_CreateSessionOptions 10
#define ORT_API_SINCE_CreateSessionOptions 1
typedef OrtStatusPtr (*OrtApi_CreateSessionOptions_fn)(OrtSessionOptions** options);
#define ORT_API_SLOT_SetSessionLogSeverityLevel 22
#define ORT_API_SINCE_SetSessionLogSeverityLevel 1
typedef OrtStatusPtr (*OrtApi_SetSessionLogSeverityLevel_fn)(OrtSessionOptions* options, int session_log_severity_level);
#define ORT_API_SLOT_SetSessionGraphOptimizationLevel 23
#define ORT_API_SINCE_SetSessionGraphOptimizationLevel 1
typedef OrtStatusPtr (*OrtApi_SetSessionGraphOptimizationLevel_fn)(OrtSessionOptions* options,
                                                                   GraphOptimizationLevel graph_optimization_level);
#define ORT_API_SLOT_SetIntraOpNumThreads 24
#define ORT_API_SINCE_SetIntraOpNumThreads 1
typedef OrtStatusPtr (*OrtApi_SetIntraOpNumThreads_fn)(OrtSessionOptions* options, int intra_op_num_threads);
#define ORT_API_SLOT_SessionGetInputCount 30
#define ORT_API_SINCE_SessionGetInputCount 1
typedef OrtStatusPtr (*OrtApi_SessionGetInputCount_fn)(const OrtSession* session, size_t* out);
#define ORT_API_SLOT_SessionGetOutputCount 31
#define ORT_API_SINCE_SessionGetOutputCount 1
typedef OrtStatusPtr (*OrtApi_SessionGetOutputCount_fn)(const OrtSession* session, size_t* out);
/* The name is allocated with `allocator`; free it with AllocatorFree. */
#define ORT_API_SLOT_SessionGetInputName 36
#define ORT_API_SINCE_SessionGetInputName 1
typedef OrtStatusPtr (*OrtApi_SessionGetInputName_fn)(const OrtSession* session, size_t index,
                                                      OrtAllocator* allocator, char** value);
#define ORT_API_SLOT_SessionGetOutputName 37
#define ORT_API_SINCE_SessionGetOutputName 1
typedef OrtStatusPtr (*OrtApi_SessionGetOutputName_fn)(const OrtSession* session, size_t index,
                                                       OrtAllocator* allocator, char** value);
#define ORT_API_SLOT_CreateCpuMemoryInfo 69
#define ORT_API_SINCE_CreateCpuMemoryInfo 1
typedef OrtStatusPtr (*OrtApi_CreateCpuMemoryInfo_fn)(OrtAllocatorType type, OrtMemType mem_type, OrtMemoryInfo** out);
#define ORT_API_SLOT_ReleaseEnv 92
#define ORT_API_SINCE_ReleaseEnv 1
typedef void (*OrtApi_ReleaseEnv_fn)(OrtEnv* input);
#define ORT_API_SLOT_ReleaseSession 95
#define ORT_API_SINCE_ReleaseSession 1
typedef void (*OrtApi_ReleaseSession_fn)(OrtSession* input);
#define ORT_API_SLOT_ReleaseSessionOptions 100
#define ORT_API_SINCE_ReleaseSessionOptions 1
typedef void (*OrtApi_ReleaseSessionOptions_fn)(OrtSessionOptions* input);

/* --- later versions ------------------------------------------------------------------------ */
#define ORT_API_SLOT_AddSessionConfigEntry 130
#define ORT_API_SINCE_AddSessionConfigEntry 5
typedef OrtStatusPtr (*OrtApi_AddSessionConfigEntry_fn)(OrtSessionOptions* options, const char* config_key,
                                                        const char* config_value);
/* Version 5: session allocators and IoBinding. Slots 131-142 follow AddSessionConfigEntry (130)
 * in both the header's struct OrtApi and onnxruntime_c_api.cc's initializer list ("IoBinding and
 * above are propagated in the same order to C# API"), which ends version 5 at
 * SetGlobalSpinControl (149). */
/* The allocator wraps the session's own allocator for mem_info and is valid while the session
 * lives; release it with ReleaseAllocator. */
#define ORT_API_SLOT_CreateAllocator 131
#define ORT_API_SINCE_CreateAllocator 5
typedef OrtStatusPtr (*OrtApi_CreateAllocator_fn)(const OrtSession* session, const OrtMemoryInfo* mem_info,
                                                  OrtAllocator** out);
#define ORT_API_SLOT_ReleaseAllocator 132
#define ORT_API_SINCE_ReleaseAllocator 5
typedef void (*OrtApi_ReleaseAllocator_fn)(OrtAllocator* input);
/* run_options may be NULL (ORT then uses default run options). */
#define ORT_API_SLOT_RunWithBinding 133
#define ORT_API_SINCE_RunWithBinding 5
typedef OrtStatusPtr (*OrtApi_RunWithBinding_fn)(OrtSession* session, const OrtRunOptions* run_options,
                                                 const OrtIoBinding* binding_ptr);
#define ORT_API_SLOT_CreateIoBinding 134
#define ORT_API_SINCE_CreateIoBinding 5
typedef OrtStatusPtr (*OrtApi_CreateIoBinding_fn)(OrtSession* session, OrtIoBinding** out);
#define ORT_API_SLOT_ReleaseIoBinding 135
#define ORT_API_SINCE_ReleaseIoBinding 5
typedef void (*OrtApi_ReleaseIoBinding_fn)(OrtIoBinding* input);
/* The binding keeps its own reference to the value: the caller may release its OrtValue. */
#define ORT_API_SLOT_BindInput 136
#define ORT_API_SINCE_BindInput 5
typedef OrtStatusPtr (*OrtApi_BindInput_fn)(OrtIoBinding* binding_ptr, const char* name, const OrtValue* val_ptr);
#define ORT_API_SLOT_BindOutput 137
#define ORT_API_SINCE_BindOutput 5
typedef OrtStatusPtr (*OrtApi_BindOutput_fn)(OrtIoBinding* binding_ptr, const char* name, const OrtValue* val_ptr);
/* ORT allocates the output on the device of mem_info_ptr at the next RunWithBinding. */
#define ORT_API_SLOT_BindOutputToDevice 138
#define ORT_API_SINCE_BindOutputToDevice 5
typedef OrtStatusPtr (*OrtApi_BindOutputToDevice_fn)(OrtIoBinding* binding_ptr, const char* name,
                                                     const OrtMemoryInfo* mem_info_ptr);
/* The array is allocated with `allocator` (free it there after releasing each value); NULL and 0
 * when nothing is bound. */
#define ORT_API_SLOT_GetBoundOutputValues 140
#define ORT_API_SINCE_GetBoundOutputValues 5
typedef OrtStatusPtr (*OrtApi_GetBoundOutputValues_fn)(const OrtIoBinding* binding_ptr, OrtAllocator* allocator,
                                                       OrtValue*** output, size_t* output_count);
/* NOTE: these two return void, not OrtStatus*. */
#define ORT_API_SLOT_ClearBoundInputs 141
#define ORT_API_SINCE_ClearBoundInputs 5
typedef void (*OrtApi_ClearBoundInputs_fn)(OrtIoBinding* binding_ptr);
#define ORT_API_SLOT_ClearBoundOutputs 142
#define ORT_API_SINCE_ClearBoundOutputs 5
typedef void (*OrtApi_ClearBoundOutputs_fn)(OrtIoBinding* binding_ptr);
/* Version 22: plugin EP libraries and devices. */
#define ORT_API_SLOT_RegisterExecutionProviderLibrary 301
#define ORT_API_SINCE_RegisterExecutionProviderLibrary 22
typedef OrtStatusPtr (*OrtApi_RegisterExecutionProviderLibrary_fn)(OrtEnv* env, const char* registration_name,
                                                                   const ORTCHAR_T* path);
#define ORT_API_SLOT_UnregisterExecutionProviderLibrary 302
#define ORT_API_SINCE_UnregisterExecutionProviderLibrary 22
typedef OrtStatusPtr (*OrtApi_UnregisterExecutionProviderLibrary_fn)(OrtEnv* env, const char* registration_name);
/* The array and the devices are owned by the environment. */
#define ORT_API_SLOT_GetEpDevices 303
#define ORT_API_SINCE_GetEpDevices 22
typedef OrtStatusPtr (*OrtApi_GetEpDevices_fn)(const OrtEnv* env, const OrtEpDevice* const** ep_devices,
                                               size_t* num_ep_devices);
/* The options become session config entries "ep.<lower-cased EP name>.<key>". */
#define ORT_API_SLOT_SessionOptionsAppendExecutionProvider_V2 304
#define ORT_API_SINCE_SessionOptionsAppendExecutionProvider_V2 22
typedef OrtStatusPtr (*OrtApi_SessionOptionsAppendExecutionProvider_V2_fn)(
    OrtSessionOptions* session_options, OrtEnv* env, const OrtEpDevice* const* ep_devices, size_t num_ep_devices,
    const char* const* ep_option_keys, const char* const* ep_option_vals, size_t num_ep_options);
/* Version 23: shared allocators of EP devices, where a session keeps its inputs and outputs, and
 * copies between devices. Slots 375-377 lie between EpDevice_MemoryInfo (374) and GetTensorData
 * (378), 380-381 between GetSessionOptionsConfigEntries (379) and SyncStream_GetHandle (384), 386
 * between SyncStream_GetHandle and CreateExternalInitializerInfo (389), all in ort_abi.h. */
/* The allocator is owned by the environment (never released by the caller); NULL without an error
 * when none matches mem_info. */
#define ORT_API_SLOT_GetSharedAllocator 376
#define ORT_API_SINCE_GetSharedAllocator 23
typedef OrtStatusPtr (*OrtApi_GetSharedAllocator_fn)(OrtEnv* env, const OrtMemoryInfo* mem_info,
                                                     OrtAllocator** allocator);
/* Fills a caller array of num_inputs (num_outputs) memory infos, owned by the session. */
#define ORT_API_SLOT_SessionGetMemoryInfoForInputs 380
#define ORT_API_SINCE_SessionGetMemoryInfoForInputs 23
typedef OrtStatusPtr (*OrtApi_SessionGetMemoryInfoForInputs_fn)(const OrtSession* session,
                                                                const OrtMemoryInfo** inputs_memory_info,
                                                                size_t num_inputs);
#define ORT_API_SLOT_SessionGetMemoryInfoForOutputs 381
#define ORT_API_SINCE_SessionGetMemoryInfoForOutputs 23
typedef OrtStatusPtr (*OrtApi_SessionGetMemoryInfoForOutputs_fn)(const OrtSession* session,
                                                                 const OrtMemoryInfo** outputs_memory_info,
                                                                 size_t num_outputs);
/* Copies between one source device and one destination device with the data transfer registered
 * in env (an EP library's); with stream NULL the copy has finished when it returns. */
#define ORT_API_SLOT_CopyTensors 386
#define ORT_API_SINCE_CopyTensors 23
typedef OrtStatusPtr (*OrtApi_CopyTensors_fn)(const OrtEnv* env, const OrtValue* const* src_tensors,
                                              OrtValue* const* dst_tensors, OrtSyncStream* stream,
                                              size_t num_tensors);
/* Version 24: which EP got which nodes; needs the session config entry
 * "session.record_ep_graph_assignment_info"="1". Everything returned is owned by the session. */
#define ORT_API_SLOT_Session_GetEpGraphAssignmentInfo 407
#define ORT_API_SINCE_Session_GetEpGraphAssignmentInfo 24
typedef OrtStatusPtr (*OrtApi_Session_GetEpGraphAssignmentInfo_fn)(const OrtSession* session,
                                                                   const OrtEpAssignedSubgraph* const** ep_subgraphs,
                                                                   size_t* num_ep_subgraphs);
#define ORT_API_SLOT_EpAssignedSubgraph_GetEpName 408
#define ORT_API_SINCE_EpAssignedSubgraph_GetEpName 24
typedef OrtStatusPtr (*OrtApi_EpAssignedSubgraph_GetEpName_fn)(const OrtEpAssignedSubgraph* ep_subgraph,
                                                               const char** out);
#define ORT_API_SLOT_EpAssignedSubgraph_GetNodes 409
#define ORT_API_SINCE_EpAssignedSubgraph_GetNodes 24
typedef OrtStatusPtr (*OrtApi_EpAssignedSubgraph_GetNodes_fn)(const OrtEpAssignedSubgraph* ep_subgraph,
                                                              const OrtEpAssignedNode* const** ep_nodes,
                                                              size_t* num_ep_nodes);
#define ORT_API_SLOT_EpAssignedNode_GetName 410
#define ORT_API_SINCE_EpAssignedNode_GetName 24
typedef OrtStatusPtr (*OrtApi_EpAssignedNode_GetName_fn)(const OrtEpAssignedNode* ep_node, const char** out);
#define ORT_API_SLOT_EpAssignedNode_GetOperatorType 412
#define ORT_API_SINCE_EpAssignedNode_GetOperatorType 24
typedef OrtStatusPtr (*OrtApi_EpAssignedNode_GetOperatorType_fn)(const OrtEpAssignedNode* ep_node, const char** out);

#endif /* CUDAEP_CTESTS_ORT_HOST_API_H */
