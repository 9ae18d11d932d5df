/*
 * capi_internal.h — private declarations shared by the cgo files of capi and status.c. Not
 * installed; hosts include only cudaep.h.
 */
#ifndef CUDAEP_CAPI_INTERNAL_H
#define CUDAEP_CAPI_INTERNAL_H

#include "cudaep.h"

/*
 * cgo has no const: an export parameter declared *C.char is emitted as `char*`, which
 * conflicts with the header's `const char*`. Exports use these typedefs instead, which cgo
 * emits by name and which are the same C types as the header's, so the compiler still checks
 * every export against its declaration in cudaep.h.
 */
typedef const char cudaep_cchar;
typedef const CudaEpStatus cudaep_cstatus;
typedef const void cudaep_cvoid;
typedef const char* const cudaep_cstring;
typedef const CudaEpTensorInfo cudaep_ctensor_info;
typedef const CudaEpTensor cudaep_ctensor;
typedef const CudaEpAttribute cudaep_cattribute;
typedef const CudaEpLaunchConfig cudaep_claunch_config;
typedef const CudaEpKernelArg cudaep_ckernel_arg;
typedef const CudaEpKernel cudaep_ckernel;
typedef const CudaEpBuffer cudaep_cbuffer;
typedef const CudaEpWeightSpec cudaep_cweight_spec;
typedef const CudaEpRegion cudaep_cregion;

/*
 * cudaep_status_new makes a status with code and a copy of the len bytes at msg (which need
 * not be NUL-terminated and may be NULL when len is 0). It never fails: when malloc does, it
 * returns the static out-of-memory status, which CudaEpReleaseStatus ignores.
 */
CudaEpStatus* cudaep_status_new(CudaEpErrorCode code, const char* msg, size_t len);

#endif /* CUDAEP_CAPI_INTERNAL_H */
