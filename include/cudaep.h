/*
 * cudaep.h — the C ABI of cudaep, a CUDA execution provider for ONNX-Runtime-style inference
 * hosts.
 *
 * This header is the contract. It is append-only once released: existing functions, enum
 * values and struct layouts never change; new ones are added at the end and announced by a
 * higher CUDAEP_ABI_VERSION. The library reports the ABI it implements through
 * CudaEpGetVersion, so a host can refuse a library older than the header it was built with.
 *
 * CONVENTIONS THAT HOLD FOR EVERY FUNCTION (unless its own comment says otherwise)
 *
 * Status.  A function returns CudaEpStatus*: NULL means success. Otherwise the status carries a
 *   CudaEpErrorCode and a message; read them with CudaEpGetErrorCode / CudaEpGetErrorMessage
 *   and free the status with CudaEpReleaseStatus. The caller owns every returned status.
 *   Ignoring one leaks it, so the functions are declared warn_unused_result.
 *
 * Handles.  Objects (options, providers) are opaque 64-bit handles, not pointers. 0
 *   (CUDAEP_NULL_HANDLE) is never a valid handle. A handle that is zero, forged, or of another
 *   object type yields CUDAEP_INVALID_HANDLE; a handle that was valid but has been released
 *   yields CUDAEP_STALE_HANDLE (so does releasing it twice). A bad handle is never a crash.
 *
 * Out-parameters.  Pointers named out_* or marked "out" must not be NULL (NULL yields
 *   CUDAEP_INVALID_ARGUMENT). They are written only when the function succeeds; on error their
 *   contents are left as they were.
 *
 * Strings in.  `const char*` arguments must be NUL-terminated UTF-8. The library copies what it
 *   keeps before returning; the caller may free or reuse the memory at once.
 *
 * Strings out.  Functions that return a string of unbounded length use the two-call idiom:
 *     CudaEpStatus* f(handle, char* buf, size_t buf_size, size_t* out_needed);
 *   *out_needed receives the string's size in bytes INCLUDING the terminating NUL. With
 *   buf == NULL and buf_size == 0 only *out_needed is written. With a buffer of at least
 *   *out_needed bytes the NUL-terminated string is copied into it (nothing past its NUL is
 *   touched). A non-NULL buffer that is too small, a NULL buf with a nonzero buf_size, and a
 *   NULL out_needed are errors (CUDAEP_INVALID_ARGUMENT; for a short buffer the message says
 *   how many bytes are needed) and nothing is written: a string is never silently truncated.
 *
 * Thread safety.  Every function may be called from any thread, concurrently, on the same or
 *   different handles. Calls on one provider are serialized where the device requires it.
 *   Releasing a handle while another thread is using it is safe: the other call either
 *   completes on the still-alive object or fails with CUDAEP_STALE_HANDLE; the object is
 *   destroyed when the last such call (and, later, the last child object) lets go of it.
 *
 * Failures inside the library.  An internal fault (a Go panic) is caught at the boundary and
 *   returned as CUDAEP_FAIL with its message; it never unwinds into the caller.
 *
 * Process.  The library embeds the Go runtime, which starts when the library is loaded. Load
 *   it once per process. After fork(), the child must not call into it (exec first).
 */
#ifndef CUDAEP_H
#define CUDAEP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. CudaEpGetVersion returns the library's. */
#define CUDAEP_ABI_VERSION 1

/* CUDAEP_API marks every function of the ABI (the library exports these and nothing else). */
#if defined(__GNUC__) || defined(__clang__)
#define CUDAEP_API __attribute__((visibility("default")))
#define CUDAEP_MUST_USE __attribute__((warn_unused_result))
#else
#define CUDAEP_API
#define CUDAEP_MUST_USE
#endif

/* ------------------------------------------------------------------------------------------ */
/* Status                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* CudaEpErrorCode classifies a failure. The numbers are part of the ABI and never change. */
typedef enum CudaEpErrorCode {
    CUDAEP_OK = 0,               /* success (only ever reported for a NULL status) */
    CUDAEP_FAIL = 1,             /* an internal failure with no better code, including panics */
    CUDAEP_INVALID_ARGUMENT = 2, /* a NULL pointer, a bad option key or value, a short buffer */
    CUDAEP_INVALID_HANDLE = 3,   /* a handle that is 0, forged, or of another object type */
    CUDAEP_STALE_HANDLE = 4,     /* a handle that was released (including a double release) */
    CUDAEP_NOT_FOUND = 5,        /* no such device, or no loadable CUDA driver */
    CUDAEP_OUT_OF_MEMORY = 6,    /* host, device (CUDA_ERROR_OUT_OF_MEMORY) or handle tables */
    CUDAEP_CUDA_ERROR = 7,       /* any other CUDA driver, cuBLAS or NVRTC failure */
    CUDAEP_UNSUPPORTED = 8,      /* the backend cannot do this at all */
    CUDAEP_WRONG_STATE = 9       /* the object's state forbids the call (e.g. it was closed) */
} CudaEpErrorCode;

/* CudaEpStatus is an opaque error object in the C heap. NULL means success. */
typedef struct CudaEpStatus CudaEpStatus;

/*
 * CudaEpCreateStatus makes a status with code and a copy of message, as a host needs for
 * returning errors through callbacks and as tests use to check the round trip.
 *   code     CUDAEP_OK returns NULL (success). A value outside CudaEpErrorCode becomes
 *            CUDAEP_FAIL.
 *   message  copied; NULL is taken as "".
 * Returns a status the caller owns and frees with CudaEpReleaseStatus. If the C heap is
 * exhausted it returns a static CUDAEP_OUT_OF_MEMORY status (releasing it is harmless).
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCreateStatus(CudaEpErrorCode code, const char* message);

/*
 * CudaEpGetErrorCode returns status's code; CUDAEP_OK for NULL. Thread-safe; does not take
 * ownership.
 */
CUDAEP_API CudaEpErrorCode CudaEpGetErrorCode(const CudaEpStatus* status);

/*
 * CudaEpGetErrorMessage returns status's NUL-terminated message; "" for NULL. The string
 * belongs to the status and lives until CudaEpReleaseStatus(status). Thread-safe.
 */
CUDAEP_API const char* CudaEpGetErrorMessage(const CudaEpStatus* status);

/*
 * CudaEpReleaseStatus frees status. NULL is a no-op. Releasing the same status twice is
 * undefined behaviour, as with free(). Thread-safe for distinct statuses.
 */
CUDAEP_API void CudaEpReleaseStatus(CudaEpStatus* status);

/*
 * CudaEpGetErrorCodeName returns the enumerator's name, such as "CUDAEP_STALE_HANDLE", or
 * "CUDAEP_UNKNOWN_ERROR_CODE" for a number outside the enum. The string is static.
 * Thread-safe.
 */
CUDAEP_API const char* CudaEpGetErrorCodeName(CudaEpErrorCode code);

/* ------------------------------------------------------------------------------------------ */
/* Version                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/*
 * CudaEpGetVersion reports the ABI version the library implements and its library version.
 *   out_abi_version      receives the ABI version (compare with CUDAEP_ABI_VERSION).
 *   out_library_version  receives a static NUL-terminated semantic version such as "0.1.0",
 *                        valid for the life of the process; never free it.
 * Either may be NULL to skip it. Always succeeds. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetVersion(uint32_t* out_abi_version,
                                                          const char** out_library_version);

/* ------------------------------------------------------------------------------------------ */
/* Handles                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* The null handle, never valid. */
#define CUDAEP_NULL_HANDLE ((uint64_t)0)

/* CudaEpOptions names a set of provider options (key/value strings, ORT-style). */
typedef uint64_t CudaEpOptions;

/* CudaEpProvider names an execution provider on one device. */
typedef uint64_t CudaEpProvider;

/*
 * CudaEpGetLiveHandleCount reports how many handles (of every type) are issued and not yet
 * released, for leak checks at a host's teardown.
 *   out_count  receives the count.
 * Thread-safe; the count may change as soon as it is read if other threads are working.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetLiveHandleCount(uint64_t* out_count);

/* ------------------------------------------------------------------------------------------ */
/* Options                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/*
 * Option keys and values (all strings; keys and values are case-sensitive):
 *
 *   backend                 "cuda" (default) | "sim" | "auto". cuda fails with
 *                           CUDAEP_NOT_FOUND when no CUDA driver or device is usable; it never
 *                           falls back silently. sim is a simulated device for machines without
 *                           a GPU. auto picks cuda when a device is usable, else sim, and says
 *                           why (CudaEpProviderGetAutoReason).
 *   device_id               CUDA device ordinal, "0".."2147483647"; default "0".
 *   tf32                    "true" | "false" | "1" | "0"; default "false". Allows TF32 tensor-core
 *                           math in fp32 GEMMs.
 *   staging_pool_cap_bytes  pinned staging bytes retained for prefill paging, > 0; default
 *                           "536870912". Digits with an optional KiB/MiB/GiB/TiB suffix.
 *   residency_budget_bytes  device bytes paged weights may keep resident; "0" (default) = no
 *                           budget. Same syntax as above.
 *   prefill_double_buffer   "true" | "false" | "1" | "0"; default "false".
 */

/*
 * CudaEpCreateOptions creates an options object holding the defaults.
 *   out_options  receives the handle; release it with CudaEpReleaseOptions.
 * Errors: CUDAEP_INVALID_ARGUMENT (out_options NULL), CUDAEP_OUT_OF_MEMORY. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCreateOptions(CudaEpOptions* out_options);

/*
 * CudaEpSetOption validates value for key and stores it in options. key and value are copied.
 * Errors: CUDAEP_INVALID_HANDLE / CUDAEP_STALE_HANDLE; CUDAEP_INVALID_ARGUMENT for a NULL key
 * or value, an unknown key (the message lists the known keys) or a bad value (the message
 * names the key and the allowed values). On error options is unchanged.
 * Thread-safe: concurrent calls on one options object are serialized (the last one wins).
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpSetOption(CudaEpOptions options, const char* key,
                                                         const char* value);

/*
 * CudaEpGetOption returns the current value of key in options, in canonical form (byte
 * counts in plain digits, booleans as "true"/"false"), with the two-call string idiom.
 * Errors: as CudaEpSetOption for the handle and key; CUDAEP_INVALID_ARGUMENT for a NULL key
 * or out_needed, or a short buffer. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetOption(CudaEpOptions options, const char* key,
                                                         char* buf, size_t buf_size,
                                                         size_t* out_needed);

/*
 * CudaEpReleaseOptions releases options. Providers created from it keep their own copy and
 * are unaffected. Errors: CUDAEP_INVALID_HANDLE, CUDAEP_STALE_HANDLE (including a second
 * release). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseOptions(CudaEpOptions options);

/* ------------------------------------------------------------------------------------------ */
/* Provider                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/*
 * CudaEpCreateProvider opens the backend and device that options select and creates a
 * provider on it. options is only read; the provider keeps a copy, so options may be changed
 * or released afterwards.
 *   out_provider  receives the handle; release it with CudaEpReleaseProvider.
 * Errors: CUDAEP_INVALID_HANDLE / CUDAEP_STALE_HANDLE (options); CUDAEP_INVALID_ARGUMENT
 * (out_provider NULL); CUDAEP_NOT_FOUND when backend=cuda finds no loadable CUDA driver (the
 * message names every library path tried and suggests backend=sim) or device_id is at or past
 * the device count (the message names the count); CUDAEP_CUDA_ERROR for other driver failures;
 * CUDAEP_OUT_OF_MEMORY. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCreateProvider(CudaEpOptions options,
                                                              CudaEpProvider* out_provider);

/*
 * CudaEpReleaseProvider releases provider's handle at once: every later use of the handle fails
 * with CUDAEP_STALE_HANDLE. The provider itself (its context and device memory) is destroyed
 * when nothing uses it any more: immediately if no call is in flight on it and it has no
 * children, otherwise when the last of those lets go. If the destruction happens in this call
 * and fails, the error is returned; the handle is released all the same.
 * Errors: CUDAEP_INVALID_HANDLE, CUDAEP_STALE_HANDLE (including a second release),
 * CUDAEP_CUDA_ERROR from tearing down the device context. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseProvider(CudaEpProvider provider);

/*
 * CudaEpProviderGetBackendName returns the backend the provider runs on, "cuda" or "sim", with
 * the two-call string idiom. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpProviderGetBackendName(CudaEpProvider provider,
                                                                      char* buf, size_t buf_size,
                                                                      size_t* out_needed);

/*
 * CudaEpProviderGetAutoReason returns, for a provider created with backend=auto, why it chose
 * the backend it did (for example "auto chose sim: no usable CUDA driver (...)"); "" for an
 * explicit backend. Two-call string idiom. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpProviderGetAutoReason(CudaEpProvider provider,
                                                                     char* buf, size_t buf_size,
                                                                     size_t* out_needed);

/*
 * CudaEpProviderGetDeviceName returns the device's name (e.g. "NVIDIA H200") with the two-call
 * string idiom. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpProviderGetDeviceName(CudaEpProvider provider,
                                                                     char* buf, size_t buf_size,
                                                                     size_t* out_needed);

/*
 * CudaEpDeviceInfo describes a provider's device. The caller sets struct_size to
 * sizeof(CudaEpDeviceInfo) before the call; later ABI versions only append fields, and the
 * library writes no more than struct_size bytes, so a host built against an older header keeps
 * working with a newer library.
 */
typedef struct CudaEpDeviceInfo {
    uint32_t struct_size;        /* in: sizeof(CudaEpDeviceInfo) as the caller knows it */
    int32_t ordinal;             /* CUDA device ordinal */
    int32_t compute_major;       /* compute capability, major (9 for an H200) */
    int32_t compute_minor;       /* compute capability, minor */
    int32_t multiprocessors;     /* streaming multiprocessor count */
    uint32_t reserved;           /* 0; keeps the byte counts 8-aligned */
    uint64_t total_memory_bytes; /* device memory */
    uint64_t free_memory_bytes;  /* free device memory at the time of the call */
} CudaEpDeviceInfo;

/*
 * CudaEpProviderGetDeviceInfo fills *info (after checking info->struct_size) with the
 * provider's device description.
 *   info  in/out; must not be NULL; info->struct_size must be at least the size of the ABI 1
 *         layout (40 bytes). Only the fields up to struct_size are written, and only on success.
 * Errors: CUDAEP_INVALID_HANDLE / CUDAEP_STALE_HANDLE, CUDAEP_INVALID_ARGUMENT. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpProviderGetDeviceInfo(CudaEpProvider provider,
                                                                     CudaEpDeviceInfo* info);

/* ------------------------------------------------------------------------------------------ */
/* Layout pins: these never change once released.                                             */
/* ------------------------------------------------------------------------------------------ */

#if defined(__cplusplus)
#define CUDAEP_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define CUDAEP_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#else /* C99: a negative array size fails the build */
#define CUDAEP_STATIC_ASSERT_CAT2(a, b) a##b
#define CUDAEP_STATIC_ASSERT_CAT(a, b) CUDAEP_STATIC_ASSERT_CAT2(a, b)
#define CUDAEP_STATIC_ASSERT(cond, msg) \
    typedef char CUDAEP_STATIC_ASSERT_CAT(cudaep_static_assert_, __LINE__)[(cond) ? 1 : -1]
#endif

CUDAEP_STATIC_ASSERT(sizeof(CudaEpErrorCode) == 4, "CudaEpErrorCode is 32 bits");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpOptions) == 8, "handles are 64 bits");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpProvider) == 8, "handles are 64 bits");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDeviceInfo, struct_size) == 0, "CudaEpDeviceInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDeviceInfo, ordinal) == 4, "CudaEpDeviceInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDeviceInfo, compute_major) == 8, "CudaEpDeviceInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDeviceInfo, compute_minor) == 12, "CudaEpDeviceInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDeviceInfo, multiprocessors) == 16, "CudaEpDeviceInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDeviceInfo, total_memory_bytes) == 24, "CudaEpDeviceInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDeviceInfo, free_memory_bytes) == 32, "CudaEpDeviceInfo layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpDeviceInfo) == 40, "CudaEpDeviceInfo ABI 1 size");

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUDAEP_H */
