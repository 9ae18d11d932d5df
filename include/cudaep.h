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
 * Handles.  Objects (options, providers, buffers, kernels, modules, functions, lazy weights,
 *   paged weights, double buffers, tickets) are opaque 64-bit handles, not pointers. 0
 *   (CUDAEP_NULL_HANDLE) is never a valid handle. A handle that is zero, forged, or of another
 *   object type yields CUDAEP_INVALID_HANDLE; a handle that was valid but has been released
 *   yields CUDAEP_STALE_HANDLE (so does releasing it twice). A bad handle is never a crash.
 *
 * Parents and children (ABI 2).  Every object made from a provider (buffer, kernel, module,
 *   lazy weight, paged weight, double buffer) holds a reference to that provider for its
 *   whole life; a function holds its module, a ticket its double buffer. Releasing a parent's
 *   handle is therefore always safe: the handle dies at once (later uses fail with
 *   CUDAEP_STALE_HANDLE), the children keep working, and the parent object (a provider's
 *   context and device memory) is destroyed when its last child is released. Release
 *   children first to free device resources promptly. Objects of one provider cannot be
 *   mixed with another's (CUDAEP_INVALID_ARGUMENT).
 *
 * Parameter annotations (ABI 2).  Pointer parameters carry one of the empty macros below, as
 *   ORT's SAL annotations do; tools (the misuse test generator) read them:
 *     CUDAEP_IN       read by the call; must not be NULL (NULL yields CUDAEP_INVALID_ARGUMENT).
 *     CUDAEP_IN_OPT   read by the call; may be NULL where the function says so (an array may
 *                     be NULL when its count is 0).
 *     CUDAEP_OUT      written by the call; must not be NULL.
 *     CUDAEP_OUT_OPT  written by the call; may be NULL where the function says so.
 *     CUDAEP_INOUT    a struct whose struct_size the caller sets and the call fills; must not
 *                     be NULL.
 *
 * Out-parameters.  Pointers named out_* or marked "out" must not be NULL (NULL yields
 *   CUDAEP_INVALID_ARGUMENT) unless annotated CUDAEP_OUT_OPT. They are written only when the
 *   function succeeds; on error their contents are left as they were.
 *
 * Structs out (ABI 2).  A struct the library fills starts with uint32_t struct_size, which
 *   the caller sets to sizeof(the struct) before the call. The library writes no more than
 *   struct_size bytes (so a host built against an older, shorter layout keeps working with a
 *   newer library) and refuses a struct_size below the struct's first released layout.
 *
 * Sizes and counts (ABI 2).  Byte sizes and offsets are uint64_t and checked for overflow
 *   and against the object they address (CUDAEP_INVALID_ARGUMENT, before any device work).
 *   Array counts are bounded (CUDAEP_MAX_RANK dimensions, CUDAEP_MAX_ARRAY elements, ...) and
 *   checked before the array is read, so a wild count is an error, not an overrun.
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
 *   destroyed when the last such call (and the last child object) lets go of it.
 *
 * Streams and ordering (ABI 2).  A provider queues kernels, device copies, memsets, user
 *   kernel launches and graph replays on one compute stream, in call order; functions that
 *   queue work return without waiting for it. Host copies (CudaEpCopyToDevice,
 *   CudaEpCopyToHost) are ordered after everything queued before them and wait for exactly
 *   what they need. Weight uploads run on a separate copy stream that the compute stream is
 *   fenced on.
 *
 * The capture thread rule (ABI 2).  Graph capture is thread-local, as CUDA's is: the work a
 *   thread queues between CudaEpBeginCapture (or CudaEpRecapture) and CudaEpEndCapture (or
 *   CudaEpAbortCapture) is recorded into the graph instead of running, and Begin, every
 *   recorded call and End/Abort of one capture must be made on one OS thread. End or Abort
 *   from another thread fails with CUDAEP_WRONG_STATE and leaves the capture live.
 *
 * The capture window (ABI 2).  While a capture is live on a provider (from the moment
 *   CudaEpBeginCapture or CudaEpRecapture succeeds until CudaEpEndCapture or
 *   CudaEpAbortCapture ends it), one rule holds for every function on that provider and its
 *   children, checked before the driver is touched, so a refused call never breaks the
 *   capture:
 *   - the capturing thread may queue the work it records (CudaEpKernelExecute, CudaEpMemset,
 *     CudaEpCopyBuffer, CudaEpLaunchFunction) and end or abort the capture;
 *   - every other call that would touch the driver (allocations, host copies, waits, replays,
 *     resets, module loads, kernel creation, paging and double-buffer calls), on any thread,
 *     and the recordable calls on any other thread, fail with CUDAEP_WRONG_STATE ("inside a
 *     capture") and do nothing;
 *   - releases and cancels succeed: the handle is gone (the layer abandoned) at once, and what
 *     the call does to the driver (a free, a drain, an unload, a release fence) runs when the
 *     capture ends. CudaEpReleaseProvider is the exception: it is refused with
 *     CUDAEP_WRONG_STATE and the handle stays valid;
 *   - queries (capture status, stats, names, sizes) always work.
 *
 * One window per capturing thread (ABI 5).  A capture is its OS thread's, as CUDA's
 *   thread-local capture is: on the capturing thread a driver allocation, free, module load,
 *   or event or stream query or wait invalidates the capture whatever provider or device it
 *   is made for. So while a thread captures, the rule above also holds on that thread for
 *   every other provider (of any device) and its children: every call that would touch the
 *   driver, the recordable ones included (their work would run, not be recorded), and a
 *   second CudaEpBeginCapture, fail with CUDAEP_WRONG_STATE ("the calling OS thread captures
 *   for another provider ... inside a capture") before the driver is touched; releases and
 *   cancels succeed and do their driver work when that thread's capture ends, and releasing
 *   such a provider's handle (or its last child) on that thread destroys the provider then;
 *   queries answer without touching the driver (CudaEpDoubleBufferGetSlotState reports a
 *   slot's state as last seen). Other threads are not held back by a capture on a provider
 *   they do not call: their calls on other providers (double-buffer waits and releases
 *   included) run, except that a forced synchronization of the capturing device waits until
 *   the capture has ended (the capture gate, below).
 *
 * Argument errors first.  Argument errors (CUDAEP_INVALID_HANDLE, CUDAEP_STALE_HANDLE,
 *   CUDAEP_INVALID_ARGUMENT: what a call's arguments decide with the objects they name, such
 *   as a mapping that is not open or a tensor of the wrong shape) are reported before state
 *   errors (CUDAEP_WRONG_STATE), capture or not; so is CudaEpCreateDoubleBuffer's
 *   CUDAEP_DECLINED, which its size and the provider's options decide. A release or cancel that
 *   cannot succeed (a layer that is not pending, one already released or cancelled, a stale
 *   ticket) fails at the call, with nothing changed, also during a capture: what a capture
 *   defers has been checked, and a failure of its driver work is never reported by a later,
 *   unrelated call (a device fault behind one is sticky and fails the next call that touches
 *   the device; a double-buffer slot whose fence failed is quarantined).
 *
 *   A call that was already running when the capture began finished before the capture's
 *   first recorded work (a host copy's enqueue and wait are one step), and the capture gate is
 *   per device: a forced synchronization through another provider on the same GPU waits until
 *   the capture has ended.
 *
 * Bad device data.  A kernel that reads indices or lengths from device memory cannot check
 *   them when it is queued (Gather's indices, an integer Div's divisor, GroupQueryAttention's
 *   seqlens_k and total_sequence_length, a rotary position_ids). A value it cannot use (an
 *   index outside the axis, a divisor of 0, a length outside the cache) gives a memory-safe
 *   but meaningless output, and is recorded, also in graph replays: the first call that waits
 *   for the provider's compute stream afterwards (CudaEpSynchronizeCompute,
 *   CudaEpForceSynchronize, CudaEpDrainForUnmap, CudaEpCopyToHost, and CudaEpCopyToDevice of
 *   more than 64 KiB) completes its own work and then fails with CUDAEP_INVALID_ARGUMENT, whose
 *   message names the kernel's op (and node, inside ONNX Runtime), the input and the value,
 *   e.g. "Gather(float32[4,2], int64[1]) (kernel 13): input 'indices' holds 9, outside
 *   [-4, 4)". The first such
 *   value since the last report wins; each is reported once. A call that waits for nothing
 *   reports nothing. Checking costs one read of host memory per wait.
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
#define CUDAEP_ABI_VERSION 5

/* CUDAEP_API marks every function of the ABI (the library exports these and nothing else). */
#if defined(__GNUC__) || defined(__clang__)
#define CUDAEP_API __attribute__((visibility("default")))
#define CUDAEP_MUST_USE __attribute__((warn_unused_result))
#else
#define CUDAEP_API
#define CUDAEP_MUST_USE
#endif

/* Parameter annotations (ABI 2; see "Parameter annotations" above). They expand to nothing. */
#define CUDAEP_IN
#define CUDAEP_IN_OPT
#define CUDAEP_OUT
#define CUDAEP_OUT_OPT
#define CUDAEP_INOUT

/* Bounds on array counts (ABI 2), checked before an array is read. */
#define CUDAEP_MAX_RANK 32           /* dimensions of a tensor or weight shape */
#define CUDAEP_MAX_ARRAY 65536       /* elements of any other array argument */
#define CUDAEP_MAX_KERNEL_ARGS 24    /* arguments of one user kernel launch */
#define CUDAEP_MAX_KERNEL_TENSORS 8  /* inputs, and outputs, of one CudaEpKernelExecute */

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
    CUDAEP_WRONG_STATE = 9,      /* the object's state forbids the call (e.g. it was closed) */
    CUDAEP_STALE_GENERATION = 10, /* ABI 2: a ticket whose double-buffer slot was reused since */
    CUDAEP_DECLINED = 11         /* ABI 2: weight paging declined; load the weight the ordinary way */
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
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCreateStatus(CudaEpErrorCode code,
                                                           CUDAEP_IN_OPT const char* message);

/*
 * CudaEpGetErrorCode returns status's code; CUDAEP_OK for NULL. Thread-safe; does not take
 * ownership.
 */
CUDAEP_API CudaEpErrorCode CudaEpGetErrorCode(CUDAEP_IN_OPT const CudaEpStatus* status);

/*
 * CudaEpGetErrorMessage returns status's NUL-terminated message; "" for NULL. The string
 * belongs to the status and lives until CudaEpReleaseStatus(status). Thread-safe.
 */
CUDAEP_API const char* CudaEpGetErrorMessage(CUDAEP_IN_OPT const CudaEpStatus* status);

/*
 * CudaEpReleaseStatus frees status. NULL is a no-op. Releasing the same status twice is
 * undefined behaviour, as with free(). Thread-safe for distinct statuses.
 */
CUDAEP_API void CudaEpReleaseStatus(CUDAEP_IN_OPT CudaEpStatus* status);

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
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetVersion(CUDAEP_OUT_OPT uint32_t* out_abi_version,
                                                          CUDAEP_OUT_OPT const char** out_library_version);

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
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetLiveHandleCount(CUDAEP_OUT uint64_t* out_count);

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
 *   wait_mode               "spin" | "block" | "auto"; default "auto". How
 *                           CudaEpSynchronizeCompute waits: spin on a host-mapped word the compute
 *                           stream writes (then the driver wait after a bounded spin), or the
 *                           driver's stream synchronization. auto spins where the device can
 *                           write the word (checked when the provider is created) and blocks
 *                           otherwise; spin fails provider creation where it cannot.
 *   paging_path             "auto" (default) | "zero_copy" | "staging". How paged weights reach
 *                           the device: auto copies from the external-data file's pages
 *                           registered with the driver (kept registered across prefills) and
 *                           stages through pinned memory what it cannot register, reporting why;
 *                           zero_copy copies from registered pages only (a layer that cannot be
 *                           registered fails its upload); staging always stages and registers
 *                           nothing. With auto or zero_copy and prefill_double_buffer on,
 *                           CudaEpOpenExternalData registers the file when it opens it.
 *   register_cap_bytes      bytes of external-data files kept registered (page-locked) at once;
 *                           "0" (default) = a quarter of physical memory. A larger file pages
 *                           through a sliding window of registrations (the idle ones used
 *                           longest ago are undone first). Same syntax as the byte counts above.
 *   residency_slot_bytes    size of the residency's two slots; when not "0" and
 *                           prefill_double_buffer is on, CudaEpCreateProvider reserves them (device
 *                           buffers, events, staging buffers) so that the first prefill sets
 *                           nothing up, and a larger layer is declined oversize. "0" (default)
 *                           sizes them by the first routed layer, when it is prefetched. Must not
 *                           exceed half of residency_budget_bytes when a budget is set
 *                           (CUDAEP_INVALID_ARGUMENT), and two staging buffers of its size must fit
 *                           staging_pool_cap_bytes (CUDAEP_DECLINED).
 *
 *   Two staging buffers fit staging_pool_cap_bytes when twice the slot size, rounded up to
 *   whole host pages (pinned memory is allocated in pages: 4 KiB on x86-64 Linux), is at most
 *   the cap; a decline's message names the rounded size and the largest slot the cap admits.
 */

/*
 * CudaEpCreateOptions creates an options object holding the defaults.
 *   out_options  receives the handle; release it with CudaEpReleaseOptions.
 * Errors: CUDAEP_INVALID_ARGUMENT (out_options NULL), CUDAEP_OUT_OF_MEMORY. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCreateOptions(CUDAEP_OUT CudaEpOptions* out_options);

/*
 * CudaEpSetOption validates value for key and stores it in options. key and value are copied.
 * Errors: CUDAEP_INVALID_HANDLE / CUDAEP_STALE_HANDLE; CUDAEP_INVALID_ARGUMENT for a NULL key
 * or value, an unknown key (the message lists the known keys) or a bad value (the message
 * names the key and the allowed values). On error options is unchanged.
 * Thread-safe: concurrent calls on one options object are serialized (the last one wins).
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpSetOption(CudaEpOptions options, CUDAEP_IN const char* key,
                                                         CUDAEP_IN const char* value);

/*
 * CudaEpGetOption returns the current value of key in options, in canonical form (byte
 * counts in plain digits, booleans as "true"/"false"), with the two-call string idiom.
 * Errors: as CudaEpSetOption for the handle and key; CUDAEP_INVALID_ARGUMENT for a NULL key
 * or out_needed, or a short buffer. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetOption(CudaEpOptions options, CUDAEP_IN const char* key,
                                                         CUDAEP_OUT_OPT char* buf, size_t buf_size,
                                                         CUDAEP_OUT size_t* out_needed);

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
                                                              CUDAEP_OUT CudaEpProvider* out_provider);

/*
 * CudaEpReleaseProvider releases provider's handle at once: every later use of the handle fails
 * with CUDAEP_STALE_HANDLE. The provider itself (its context and device memory) is destroyed
 * when nothing uses it any more: immediately if no call is in flight on it and it has no
 * children, otherwise when the last of those lets go. If the destruction happens in this call
 * and fails, the error is returned; the handle is released all the same. A provider whose
 * children are released during a capture is destroyed after the capture ends. On an OS thread
 * that captures for another provider (see "One window per capturing thread") the destruction
 * waits until that capture ends, and its failure is not reported.
 * Errors: CUDAEP_INVALID_HANDLE, CUDAEP_STALE_HANDLE (including a second release),
 * CUDAEP_WRONG_STATE while a capture is live on the provider (nothing is released and the
 * handle stays valid: end or abort the capture first), CUDAEP_CUDA_ERROR from tearing down the
 * device context. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseProvider(CudaEpProvider provider);

/*
 * CudaEpProviderGetBackendName returns the backend the provider runs on, "cuda" or "sim", with
 * the two-call string idiom. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpProviderGetBackendName(CudaEpProvider provider,
                                                                      CUDAEP_OUT_OPT char* buf, size_t buf_size,
                                                                      CUDAEP_OUT size_t* out_needed);

/*
 * CudaEpProviderGetAutoReason returns, for a provider created with backend=auto, why it chose
 * the backend it did (for example "auto chose sim: no usable CUDA driver (...)"); "" for an
 * explicit backend. Two-call string idiom. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpProviderGetAutoReason(CudaEpProvider provider,
                                                                     CUDAEP_OUT_OPT char* buf, size_t buf_size,
                                                                     CUDAEP_OUT size_t* out_needed);

/*
 * CudaEpProviderGetDeviceName returns the device's name (e.g. "NVIDIA H200") with the two-call
 * string idiom. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpProviderGetDeviceName(CudaEpProvider provider,
                                                                     CUDAEP_OUT_OPT char* buf, size_t buf_size,
                                                                     CUDAEP_OUT size_t* out_needed);

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
                                                                     CUDAEP_INOUT CudaEpDeviceInfo* info);

/* ------------------------------------------------------------------------------------------ */
/* Provider: counters and synchronization (ABI 2)                                             */
/* ------------------------------------------------------------------------------------------ */

/*
 * CudaEpProviderStats counts a provider's device memory: every allocation it made (buffers,
 * paging slots, kernel workspaces) and every free. A buffer that a captured graph still
 * embeds counts as live until the graph is destroyed.
 */
typedef struct CudaEpProviderStats {
    uint32_t struct_size;       /* in: sizeof(CudaEpProviderStats) as the caller knows it */
    uint32_t reserved;          /* 0 */
    uint64_t device_allocs;     /* device allocations made */
    uint64_t device_frees;      /* device allocations freed */
    uint64_t device_live_bytes; /* bytes allocated and not yet freed */
} CudaEpProviderStats;

/*
 * CudaEpProviderGetStats fills *stats (struct_size at least 32, the ABI 2 layout) with the
 * provider's device-memory counters. Comparing two readings proves, for example, that graph
 * replay allocates nothing. Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for a NULL
 * stats or a short struct_size. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpProviderGetStats(CudaEpProvider provider,
                                                                CUDAEP_INOUT CudaEpProviderStats* stats);

/*
 * CudaEpSynchronize is the host's "wait for the provider" hook, deferred by design: it checks
 * the handle and returns at once without waiting, because every result a host reads goes
 * through CudaEpCopyToHost, which waits for exactly the work it needs. Use
 * CudaEpForceSynchronize for a real drain. Errors: a bad provider handle. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpSynchronize(CudaEpProvider provider);

/*
 * CudaEpForceSynchronize waits until all work of the provider's device is done. It first
 * waits for every live graph capture of other providers on the device to end (a device
 * synchronization would invalidate it).
 * Errors: a bad provider handle; CUDAEP_WRONG_STATE while a capture is live on this provider,
 * on any thread (the capture window: nothing is done and the capture is unharmed), or on a
 * thread that captures for another provider, of any device (nothing is done and that capture
 * is unharmed); CUDAEP_CUDA_ERROR for a device fault; CUDAEP_INVALID_ARGUMENT, after the
 * drain, for bad device data met by earlier work (see Bad device data). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpForceSynchronize(CudaEpProvider provider);

/*
 * CudaEpSynchronizeCompute waits for the work queued on the provider's compute stream
 * (kernel executions, graph replays, device copies): the stream alone, not a device drain, so
 * it is how a host waits for a replayed decode step. With wait_mode spin (auto's choice where
 * the device can) the stream writes a sequence number into a host-mapped word and the host
 * spins on it, falling back to the driver's stream synchronization after a bounded spin; with
 * block it is one stream synchronization. A device fault is reported either way.
 * Errors: a bad provider handle; CUDAEP_WRONG_STATE while a capture is live on the provider
 * (the capture window; synchronizing the capturing stream would invalidate the capture);
 * CUDAEP_CUDA_ERROR for a device fault; CUDAEP_INVALID_ARGUMENT, after the wait, for bad
 * device data met by the awaited work (see Bad device data). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpSynchronizeCompute(CudaEpProvider provider);

/*
 * CudaEpDrainForUnmap is CudaEpForceSynchronize under the name a host uses before unmapping
 * host memory that queued device work may still read. Same errors. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDrainForUnmap(CudaEpProvider provider);

/* ------------------------------------------------------------------------------------------ */
/* Device buffers (ABI 2)                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* CudaEpBuffer names device memory a provider allocated. */
typedef uint64_t CudaEpBuffer;

/*
 * CudaEpAllocBuffer allocates size bytes of device memory aligned to alignment bytes.
 *   size        > 0.
 *   alignment   a power of two; 0 means the driver's own 256 bytes.
 *   out_buffer  receives the handle; release it with CudaEpReleaseBuffer. The buffer holds
 *               its provider alive.
 * The contents are uninitialized. Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for
 * a zero size, an alignment that is not a power of two, a size that overflows once padded
 * for alignment or is larger than the device's memory, or a NULL out_buffer;
 * CUDAEP_WRONG_STATE while a capture is live on the provider (the capture window);
 * CUDAEP_OUT_OF_MEMORY when the device is exhausted. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpAllocBuffer(CudaEpProvider provider, uint64_t size,
                                                           uint64_t alignment,
                                                           CUDAEP_OUT CudaEpBuffer* out_buffer);

/*
 * CudaEpReleaseBuffer releases buffer. The memory is freed at once or, when captured graphs
 * still embed its address (see CudaEpBeginCapture's retain list), when the last of them is
 * destroyed, so a queued replay never reads reused memory. Work already queued on the buffer
 * may still run: the free is ordered after it. During a capture on the provider the release
 * succeeds and the free waits until the capture ends; so it does on an OS thread that captures
 * for another provider. Errors: a bad buffer handle (including a second release). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseBuffer(CudaEpBuffer buffer);

/*
 * CudaEpBufferGetSize returns the size buffer was allocated with (not its padded size).
 * Errors: a bad buffer handle; CUDAEP_INVALID_ARGUMENT for a NULL out_size. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpBufferGetSize(CudaEpBuffer buffer,
                                                             CUDAEP_OUT uint64_t* out_size);

/*
 * CudaEpBufferGetDevicePointer returns buffer's (aligned) device address, for handing the
 * memory to other CUDA code of the process (a DLPack export, a host's own kernels). The
 * address stays valid until the buffer is released (and no captured graph embeds it). On the
 * simulated backend the address is a fake, bounds-checked number that only this library can
 * dereference. Errors: a bad buffer handle; CUDAEP_INVALID_ARGUMENT for a NULL
 * out_device_ptr. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpBufferGetDevicePointer(CudaEpBuffer buffer,
                                                                      CUDAEP_OUT uint64_t* out_device_ptr);

/*
 * CudaEpCopyToDevice copies size bytes from host memory src into dst at byte dst_offset,
 * ordered after all work queued on the provider's compute stream, and returns once src may be
 * reused (src is read during the call only).
 * Errors: a bad buffer handle; CUDAEP_INVALID_ARGUMENT for a NULL src or a range outside the
 * buffer (nothing is copied); CUDAEP_WRONG_STATE while a capture is live on the provider (the
 * capture window: a host copy cannot be recorded; end or abort the capture first); the enqueue
 * and the wait are one step, never split by a capture that begins meanwhile; CUDAEP_CUDA_ERROR for a device
 * fault; CUDAEP_INVALID_ARGUMENT, with the bytes copied, for bad device data met by earlier
 * queued work when the copy is over 64 KiB and so waits (see Bad device data). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCopyToDevice(CudaEpBuffer dst, uint64_t dst_offset,
                                                            CUDAEP_IN const void* src, uint64_t size);

/*
 * CudaEpCopyToHost copies size bytes of src at byte src_offset into host memory dst, after
 * all work queued on the provider's compute stream (it waits for the compute stream, not the
 * whole device). dst belongs to the caller; the library writes it during the call only. On an
 * argument or state error nothing is written; on a device fault during the copy the contents
 * of dst are unspecified.
 * Errors: a bad buffer handle; CUDAEP_INVALID_ARGUMENT for a NULL dst or a range outside the
 * buffer; CUDAEP_WRONG_STATE while a capture is live on the provider (the capture window);
 * CUDAEP_CUDA_ERROR for a device fault (including one of earlier queued work);
 * CUDAEP_INVALID_ARGUMENT, with dst written, for bad device data met by earlier queued work
 * (see Bad device data). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCopyToHost(CUDAEP_OUT void* dst, CudaEpBuffer src,
                                                          uint64_t src_offset, uint64_t size);

/*
 * CudaEpCopyBuffer queues a copy of size bytes from src at src_offset to dst at dst_offset on
 * the compute stream and returns without waiting. It may be recorded into a graph (capture
 * thread rule). The two buffers must belong to one provider; the ranges may not overlap
 * unless they are identical.
 * Errors: bad buffer handles; CUDAEP_INVALID_ARGUMENT for a range outside either buffer,
 * overlapping ranges or buffers of two providers; CUDAEP_WRONG_STATE when called on another
 * thread than a live capture's (the capture window: it would be recorded into that graph).
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCopyBuffer(CudaEpBuffer dst, uint64_t dst_offset,
                                                          CudaEpBuffer src, uint64_t src_offset,
                                                          uint64_t size);

/*
 * CudaEpMemset queues setting size bytes of buffer at byte offset to value on the compute
 * stream and returns without waiting. It may be recorded into a graph (capture thread rule).
 * Errors: a bad buffer handle; CUDAEP_INVALID_ARGUMENT for a range outside the buffer;
 * CUDAEP_WRONG_STATE when called on another thread than a live capture's (the capture window).
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpMemset(CudaEpBuffer buffer, uint64_t offset,
                                                      uint64_t size, uint8_t value);

/* ------------------------------------------------------------------------------------------ */
/* Tensors and kernels (ABI 2)                                                                */
/* ------------------------------------------------------------------------------------------ */

/*
 * CudaEpDType is an element type, numbered as ONNX's TensorProto.DataType. Kernels support
 * the types their op's row of the support matrix lists (float32 for arithmetic; Identity also
 * copies float16, bfloat16, float64, int32, int64 and bool; NonZero reads float32, int32,
 * int64 and bool); lazy weights may have any of these types.
 */
typedef enum CudaEpDType {
    CUDAEP_DTYPE_FLOAT32 = 1,
    CUDAEP_DTYPE_UINT8 = 2,
    CUDAEP_DTYPE_INT8 = 3,
    CUDAEP_DTYPE_UINT16 = 4,
    CUDAEP_DTYPE_INT16 = 5,
    CUDAEP_DTYPE_INT32 = 6,
    CUDAEP_DTYPE_INT64 = 7,
    CUDAEP_DTYPE_BOOL = 9, /* one byte per element */
    CUDAEP_DTYPE_FLOAT16 = 10,
    CUDAEP_DTYPE_FLOAT64 = 11,
    CUDAEP_DTYPE_UINT32 = 12,
    CUDAEP_DTYPE_UINT64 = 13,
    CUDAEP_DTYPE_BFLOAT16 = 16,
    CUDAEP_DTYPE_FLOAT8E4M3FN = 17,
    CUDAEP_DTYPE_FLOAT8E5M2 = 19,
    CUDAEP_DTYPE_UINT4 = 21,
    CUDAEP_DTYPE_INT4 = 22
} CudaEpDType;

/*
 * CudaEpTensorInfo is a tensor's element type and shape. The library reads it during the call
 * it is passed to and keeps nothing.
 *   dtype    a CudaEpDType.
 *   rank     0 (a scalar: one element) .. CUDAEP_MAX_RANK.
 *   shape    rank dimensions, each >= 0 (kernels refuse 0); may be NULL only when rank is 0.
 *   strides  NULL for dense row-major. Otherwise rank strides in elements, which must be the
 *            dense row-major ones (a dimension of extent 1 may carry any stride): kernels need
 *            dense tensors, and other strides are refused with CUDAEP_UNSUPPORTED (copy the
 *            view into a dense buffer first).
 */
typedef struct CudaEpTensorInfo {
    int32_t dtype;
    uint32_t rank;
    const int64_t* shape;
    const int64_t* strides;
} CudaEpTensorInfo;

/*
 * CudaEpTensor is a tensor in device memory: its info plus where element 0 lives.
 *   memory  the handle of the memory: a CudaEpBuffer, a CudaEpPagedWeight, or a CudaEpTicket
 *           that has been waited for (CudaEpDoubleBufferWaitLayer) and not yet released or
 *           cancelled. It must belong to the kernel's provider.
 *   offset  byte offset of element 0 in that memory; offset + the tensor's byte size must lie
 *           inside it.
 */
typedef struct CudaEpTensor {
    CudaEpTensorInfo info;
    uint64_t memory;
    uint64_t offset;
} CudaEpTensor;

/* CudaEpAttributeType is the type of a node attribute's value (ONNX AttributeProto's). */
typedef enum CudaEpAttributeType {
    CUDAEP_ATTR_INT = 1,
    CUDAEP_ATTR_FLOAT = 2,
    CUDAEP_ATTR_INTS = 3,
    CUDAEP_ATTR_STRING = 4
} CudaEpAttributeType;

/*
 * CudaEpAttribute is one node attribute, such as Gemm's alpha or Softmax's axis. Only the
 * field that type selects is read; strings and arrays are copied during the call.
 */
typedef struct CudaEpAttribute {
    const char* name;    /* the attribute's ONNX name; must not be NULL */
    int32_t type;        /* a CudaEpAttributeType */
    float f;             /* CUDAEP_ATTR_FLOAT */
    int64_t i;           /* CUDAEP_ATTR_INT */
    const int64_t* ints; /* CUDAEP_ATTR_INTS: num_ints values; NULL only when num_ints is 0 */
    uint64_t num_ints;   /* at most CUDAEP_MAX_ARRAY */
    const char* s;       /* CUDAEP_ATTR_STRING; must not be NULL for that type */
} CudaEpAttribute;

/* CudaEpKernel names one operator instance of a provider, fixed to its input types and shapes. */
typedef uint64_t CudaEpKernel;

/*
 * CudaEpGetKernel returns the kernel for an ONNX operator (default domain) of the given opset
 * with the given input types and shapes (in ONNX input order) and attributes. The support
 * matrix: MatMul (float32), Gemm (float32: alpha, beta, transA, transB, optional C), Add, Sub,
 * Mul, Div (float32, numpy broadcasting), Relu, Sigmoid, Tanh, Gelu (approximate "none" |
 * "tanh"), Softmax (axis), Identity and NonZero (see CudaEpDType). Every combination the
 * provider cannot run is refused here, never at execute time.
 *   op          NUL-terminated op type, copied.
 *   opset       the opset the model imports, >= 1.
 *   inputs      num_inputs infos (at most CUDAEP_MAX_ARRAY); NULL only when num_inputs is 0.
 *   attributes  num_attributes attributes; NULL only when num_attributes is 0. A name given
 *               twice is an error.
 *   out_kernel  receives the handle; release it with CudaEpReleaseKernel.
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for NULL pointers, counts past their
 * bounds, an opset below 1, a negative dimension, an unknown attribute type or a duplicate
 * attribute; CUDAEP_UNSUPPORTED for an op, opset, dtype, shape, stride or attribute
 * combination the provider cannot run (the message names the op, the offending input and what
 * is supported); CUDAEP_WRONG_STATE while a capture is live on the provider (the capture
 * window: make kernels before capturing). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetKernel(CudaEpProvider provider, CUDAEP_IN const char* op,
                                                         int32_t opset,
                                                         CUDAEP_IN_OPT const CudaEpTensorInfo* inputs,
                                                         size_t num_inputs,
                                                         CUDAEP_IN_OPT const CudaEpAttribute* attributes,
                                                         size_t num_attributes,
                                                         CUDAEP_OUT CudaEpKernel* out_kernel);

/*
 * CudaEpReleaseKernel releases kernel. A captured graph that recorded it keeps working (it
 * holds the recorded launch, not the kernel). Errors: a bad kernel handle. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseKernel(CudaEpKernel kernel);

/*
 * CudaEpKernelGetName returns the kernel's description, e.g. "Add(float32[2,3], float32[3])",
 * with the two-call string idiom. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpKernelGetName(CudaEpKernel kernel,
                                                             CUDAEP_OUT_OPT char* buf, size_t buf_size,
                                                             CUDAEP_OUT size_t* out_needed);

/*
 * CudaEpKernelGetCaptureSupport sets *out_supported to 1 when the kernel's work may be
 * recorded into a CUDA graph, 0 when it may not (NonZero, whose output size must be read back
 * to the host; CudaEpKernelGetCaptureReason says why). Errors: a bad kernel handle;
 * CUDAEP_INVALID_ARGUMENT for a NULL out_supported. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpKernelGetCaptureSupport(CudaEpKernel kernel,
                                                                       CUDAEP_OUT int32_t* out_supported);

/*
 * CudaEpKernelGetCaptureReason returns why the kernel cannot be captured ("" when it can),
 * with the two-call string idiom. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpKernelGetCaptureReason(CudaEpKernel kernel,
                                                                      CUDAEP_OUT_OPT char* buf,
                                                                      size_t buf_size,
                                                                      CUDAEP_OUT size_t* out_needed);

/*
 * CudaEpKernelGetOutputCount returns the number of outputs CudaEpKernelExecute must be given.
 * Errors: a bad kernel handle; CUDAEP_INVALID_ARGUMENT for a NULL out_count. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpKernelGetOutputCount(CudaEpKernel kernel,
                                                                    CUDAEP_OUT size_t* out_count);

/*
 * CudaEpKernelGetOutputInfo returns output index's element type and shape, the shape with
 * the two-call idiom: *out_rank always receives the rank; with shape NULL and shape_capacity 0
 * only the type and rank are written; otherwise shape must hold *out_rank dimensions.
 * (NonZero declares an upper bound as its first output and its count as the second: see
 * CudaEpKernelNonZeroCount.)
 * Errors: a bad kernel handle; CUDAEP_INVALID_ARGUMENT for an index past the outputs, NULL
 * out_dtype or out_rank, a NULL shape with a nonzero capacity, or a capacity below the rank
 * (nothing is written then). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpKernelGetOutputInfo(CudaEpKernel kernel, size_t index,
                                                                   CUDAEP_OUT int32_t* out_dtype,
                                                                   CUDAEP_OUT_OPT int64_t* shape,
                                                                   size_t shape_capacity,
                                                                   CUDAEP_OUT size_t* out_rank);

/*
 * CudaEpKernelExecute queues the operator on the provider's compute stream, reading inputs
 * and writing outputs, and returns without waiting. Inside a capture on this thread the work
 * is recorded instead (capture thread rule). The tensors must have exactly the types and
 * shapes the kernel was made for (CudaEpKernelGetOutputInfo for the outputs), dense strides,
 * and memory of the kernel's provider; elementwise ops, Softmax and Identity may run in
 * place, other outputs must not overlap inputs. Calls on one kernel are serialized.
 *   inputs, outputs  arrays of num_inputs / num_outputs tensors (each count at most
 *                    CUDAEP_MAX_KERNEL_TENSORS); NULL only with a count of 0.
 * Errors: a bad kernel handle or memory handle in a tensor; CUDAEP_INVALID_ARGUMENT for NULL
 * arrays, wrong counts, types or shapes, a tensor outside its memory or at an offset that is not
 * a multiple of its element size (a misaligned access would fault the device for every
 * provider on it), a ticket not waited for, or memory of another provider; CUDAEP_UNSUPPORTED
 * for non-dense strides; CUDAEP_WRONG_STATE when called on another thread than a live
 * capture's (the capture window); CUDAEP_CUDA_ERROR from the device. On an argument or state
 * error nothing is queued. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpKernelExecute(CudaEpKernel kernel,
                                                             CUDAEP_IN_OPT const CudaEpTensor* inputs,
                                                             size_t num_inputs,
                                                             CUDAEP_IN_OPT const CudaEpTensor* outputs,
                                                             size_t num_outputs);

/*
 * CudaEpKernelNonZeroCount reads the number of non-zero elements a NonZero kernel found in its
 * last execution; count is that execution's second output (int64 [1]). The ONNX output is the
 * first rank*count elements of the first output, shaped [rank, count]. It waits for the
 * compute stream: this host read is why NonZero is the seam between captured segments.
 * Errors: a bad kernel handle; CUDAEP_INVALID_ARGUMENT for a kernel that is not NonZero, a
 * NULL count or out_count, or a count tensor other than int64 [1]; CUDAEP_WRONG_STATE while a
 * capture is live on the provider (the capture window); CUDAEP_CUDA_ERROR from the device. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpKernelNonZeroCount(CudaEpKernel kernel,
                                                                  CUDAEP_IN const CudaEpTensor* count,
                                                                  CUDAEP_OUT int64_t* out_count);

/* ------------------------------------------------------------------------------------------ */
/* User kernels (ABI 2)                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* CudaEpModule names device code a host brought: PTX it loaded or CUDA C compiled with NVRTC. */
typedef uint64_t CudaEpModule;

/* CudaEpFunction names one entry point of a module, ready to launch. It holds its module. */
typedef uint64_t CudaEpFunction;

/*
 * CudaEpCompileModule compiles CUDA C source with NVRTC and loads the resulting PTX. Entry
 * points must be declared extern "C" to be found by their source names.
 *   source        NUL-terminated CUDA C, copied.
 *   program_name  the program's name in compiler messages, e.g. "kernels.cu".
 *   options       num_options NVRTC options such as "--use_fast_math"; NULL only when
 *                 num_options is 0.
 *   out_module    receives the handle; release it with CudaEpReleaseModule.
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for NULL pointers or options;
 * CUDAEP_UNSUPPORTED on the simulated backend, which has no NVRTC (the message says so; load
 * PTX instead); CUDAEP_CUDA_ERROR for a compile error, whose message carries the compiler's
 * log, or a module that does not load; CUDAEP_NOT_FOUND when NVRTC cannot be loaded;
 * CUDAEP_WRONG_STATE while a capture is live on the provider (the capture window).
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCompileModule(CudaEpProvider provider,
                                                             CUDAEP_IN const char* source,
                                                             CUDAEP_IN const char* program_name,
                                                             CUDAEP_IN_OPT const char* const* options,
                                                             size_t num_options,
                                                             CUDAEP_OUT CudaEpModule* out_module);

/*
 * CudaEpLoadModule loads PTX text into the provider's context. The PTX's .entry declarations
 * are read for their parameter types, and every launch is checked against them; cubin and
 * fatbin images cannot be checked and are refused.
 *   ptx       ptx_size bytes of PTX text (a terminating NUL is optional), copied.
 *   out_module  receives the handle; release it with CudaEpReleaseModule.
 * On the simulated backend an entry point runs only if the simulator has a body registered
 * under its name: the library's built-in entry points (cudaep_*) do; others fail in
 * CudaEpModuleGetFunction with CUDAEP_CUDA_ERROR (CUDA_ERROR_NOT_FOUND).
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for a NULL ptx, a zero size, text that
 * is not PTX or declares no entry; CUDAEP_WRONG_STATE while a capture is live on the provider
 * (the capture window); CUDAEP_CUDA_ERROR when the driver refuses the module. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpLoadModule(CudaEpProvider provider, CUDAEP_IN const void* ptx,
                                                          size_t ptx_size, CUDAEP_OUT CudaEpModule* out_module);

/*
 * CudaEpReleaseModule releases module. It is unloaded once its functions are released too: the
 * unload first waits for the work queued on the provider's compute stream (a queued launch
 * reads the module's code). A module one of whose launches was recorded into a graph stays
 * loaded until the provider is destroyed, after its graphs, so a graph never outlives the code
 * it launches. A module released during a capture is unloaded after the provider's graphs are
 * destroyed. Errors: a bad module handle (including a second release); CUDAEP_CUDA_ERROR from
 * the wait or the unload (the handle is released all the same). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseModule(CudaEpModule module);

/*
 * CudaEpModuleGetPTX returns the module's PTX text (for a compiled module, what NVRTC made)
 * with the two-call string idiom. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpModuleGetPTX(CudaEpModule module, CUDAEP_OUT_OPT char* buf,
                                                            size_t buf_size, CUDAEP_OUT size_t* out_needed);

/*
 * CudaEpModuleGetFunction returns the entry point name of module.
 *   out_function  receives the handle; release it with CudaEpReleaseFunction.
 * Errors: a bad module handle; CUDAEP_INVALID_ARGUMENT for NULL pointers or a name the PTX
 * does not declare (the message lists the entries); CUDAEP_UNSUPPORTED for an entry with a
 * by-value struct parameter, which typed arguments cannot pass; CUDAEP_WRONG_STATE while a
 * capture is live on the provider (the capture window); CUDAEP_CUDA_ERROR from the driver.
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpModuleGetFunction(CudaEpModule module, CUDAEP_IN const char* name,
                                                                 CUDAEP_OUT CudaEpFunction* out_function);

/* CudaEpReleaseFunction releases function. Errors: a bad function handle. Thread-safe. */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseFunction(CudaEpFunction function);

/* CudaEpArgType is the type of one user kernel argument. */
typedef enum CudaEpArgType {
    CUDAEP_ARG_MEMORY = 1,     /* memory handle + value.offset: the checked device address */
    CUDAEP_ARG_DEVICE_PTR = 2, /* value.device_ptr: a raw device address, unchecked */
    CUDAEP_ARG_I32 = 3,
    CUDAEP_ARG_U32 = 4,
    CUDAEP_ARG_I64 = 5,
    CUDAEP_ARG_U64 = 6,
    CUDAEP_ARG_F32 = 7,
    CUDAEP_ARG_F64 = 8
} CudaEpArgType;

/*
 * CudaEpKernelArg is one typed user kernel argument. An argument must fit its parameter as the
 * PTX declares it: 8-byte integer or untyped parameters (.u64, .s64, .b64) take MEMORY,
 * DEVICE_PTR, I64 and U64; 4-byte and smaller integer parameters take I32 and U32; .f32 takes
 * F32 and .f64 takes F64 (untyped .b32/.b64 also take floats of their size).
 */
typedef struct CudaEpKernelArg {
    int32_t type;      /* a CudaEpArgType */
    uint32_t reserved; /* 0 */
    union {
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
        double f64;
        uint64_t device_ptr; /* CUDAEP_ARG_DEVICE_PTR */
        uint64_t offset;     /* CUDAEP_ARG_MEMORY: byte offset into memory, at most its size */
    } value;
    uint64_t memory; /* CUDAEP_ARG_MEMORY: a buffer, paged weight or waited-for ticket */
} CudaEpKernelArg;

/* CudaEpLaunchConfig is a user kernel launch's grid, block and dynamic shared memory. */
typedef struct CudaEpLaunchConfig {
    uint32_t grid_x, grid_y, grid_z;    /* blocks, each >= 1 */
    uint32_t block_x, block_y, block_z; /* threads per block, each >= 1 */
    uint32_t shared_mem_bytes;          /* dynamic shared memory per block */
    uint32_t reserved;                  /* 0 */
} CudaEpLaunchConfig;

/*
 * CudaEpLaunchFunction queues function on the provider's compute stream with args in
 * declaration order and returns without waiting. Inside a capture on this thread the launch
 * is recorded instead (capture thread rule); a user launch is pure stream work, so it may be
 * captured, and it is not part of CudaEpBeginCapture's audit. Launches of one function are
 * serialized.
 *   config  the launch shape.
 *   args    num_args arguments (at most CUDAEP_MAX_KERNEL_ARGS); NULL only when num_args is 0.
 * Errors: a bad function handle or memory handle; CUDAEP_INVALID_ARGUMENT for a NULL config, a
 * zero extent, a nonzero reserved field, an unknown argument type, an argument count or type
 * that does not fit the declaration, a memory offset past its end, a ticket not waited for or
 * memory of another provider (nothing is queued); CUDAEP_CUDA_ERROR for a launch the driver
 * refuses (limits) or a device fault. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpLaunchFunction(CudaEpFunction function,
                                                              CUDAEP_IN const CudaEpLaunchConfig* config,
                                                              CUDAEP_IN_OPT const CudaEpKernelArg* args,
                                                              size_t num_args);

/* ------------------------------------------------------------------------------------------ */
/* CUDA graphs (ABI 2)                                                                        */
/* ------------------------------------------------------------------------------------------ */

/*
 * A provider holds independent graph slots on its compute stream: PRIMARY (the M=1 decode
 * step), VERIFY (the fixed-width verify step) and KEYED slots, one per int64 key (a batch
 * size, say; at most 128 keys per provider). Each slot captures, replays and resets
 * independently. Every graph function names its slot with (slot_kind, slot_key): slot_key
 * must be 0 for PRIMARY and VERIFY and may be any value for KEYED. A bad kind or a nonzero
 * key of a fixed slot is CUDAEP_INVALID_ARGUMENT.
 */
typedef enum CudaEpSlotKind {
    CUDAEP_SLOT_PRIMARY = 1,
    CUDAEP_SLOT_VERIFY = 2,
    CUDAEP_SLOT_KEYED = 3
} CudaEpSlotKind;

/* CudaEpCaptureStatus is the compute stream's capture status, with the driver's values. */
typedef enum CudaEpCaptureStatus {
    CUDAEP_CAPTURE_NONE = 0,
    CUDAEP_CAPTURE_ACTIVE = 1,
    CUDAEP_CAPTURE_INVALIDATED = 2 /* a capture broken by an illegal call; abort it */
} CudaEpCaptureStatus;

/*
 * CudaEpBeginCapture audits kernels, then begins recording the compute stream into the slot:
 * a new graph when none is installed, else a further segment of the installed one (segmented
 * capture: run non-capturable seam kernels such as NonZero eagerly between
 * CudaEpReplaySegment calls). Until CudaEpEndCapture, the kernels, device copies, memsets and
 * user launches this thread queues on the provider are recorded, not run.
 *   kernels  the num_kernels kernels the step will execute, for the capturability audit
 *            (NULL only when num_kernels is 0). A kernel that cannot be captured rejects the
 *            whole sequence before the stream enters capture.
 *   retain   num_retain buffers the recorded work touches (NULL only when num_retain is 0).
 *            Their memory is kept until the graph is destroyed, so releasing a buffer while a
 *            graph embeds its address is safe. Pass every buffer the step reads or writes.
 *            Paged weights and double-buffer slots cannot be retained: their slots take other
 *            layers, so a graph must not read them (capture decode steps over resident
 *            buffers).
 * THE CAPTURE THREAD RULE applies: call Begin, the recorded calls and End/Abort on one OS
 * thread.
 * Errors: bad handles; CUDAEP_INVALID_ARGUMENT for NULL arrays, counts past CUDAEP_MAX_ARRAY,
 * a bad slot, or kernels/buffers of another provider; CUDAEP_UNSUPPORTED when the audit
 * rejects a kernel (the message contains "rejected before begin_capture" and names it; the
 * stream never entered capture); CUDAEP_WRONG_STATE when a capture is already live on the
 * provider, or the calling thread captures for another provider (one capture per thread);
 * CUDAEP_OUT_OF_MEMORY past 128 keyed slots; CUDAEP_CUDA_ERROR from the driver. On
 * every error nothing is left capturing. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpBeginCapture(CudaEpProvider provider, int32_t slot_kind,
                                                            int64_t slot_key,
                                                            CUDAEP_IN_OPT const CudaEpKernel* kernels,
                                                            size_t num_kernels,
                                                            CUDAEP_IN_OPT const CudaEpBuffer* retain,
                                                            size_t num_retain);

/*
 * CudaEpRecapture retires the slot's installed graph and begins capturing its successor, as
 * CudaEpBeginCapture does (same arguments, rule and errors). When CudaEpEndCapture finds the
 * new step's topology unchanged it updates the retired executable in place, which is much
 * cheaper than instantiating a new one (CudaEpGraphStats.updates counts it). With nothing
 * installed it is CudaEpBeginCapture. Replays of the retired graph fail from the moment it
 * starts. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpRecapture(CudaEpProvider provider, int32_t slot_kind,
                                                         int64_t slot_key,
                                                         CUDAEP_IN_OPT const CudaEpKernel* kernels,
                                                         size_t num_kernels,
                                                         CUDAEP_IN_OPT const CudaEpBuffer* retain,
                                                         size_t num_retain);

/*
 * CudaEpEndCapture ends the slot's live capture, instantiates (or updates) and uploads it, and
 * installs it as the slot's next segment, atomically for replayers. Capture thread rule: call
 * it on the thread that began the capture.
 * Errors: bad handle or slot; CUDAEP_WRONG_STATE with no live capture in the slot ("end
 * without begin"), from another thread (the capture stays live), or when the capture was
 * invalidated (for example by CudaEpForceSynchronize on the capturing thread: then nothing is
 * installed, the stream has left capture and earlier segments stay installed);
 * CUDAEP_CUDA_ERROR when the driver fails (nothing installed, nothing leaked). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpEndCapture(CudaEpProvider provider, int32_t slot_kind,
                                                          int64_t slot_key);

/*
 * CudaEpAbortCapture ends a capture that failed mid-record and discards it, so the compute
 * stream works again; segments installed earlier stay installed. With no live capture in the
 * slot it does nothing and succeeds. Capture thread rule: call it on the thread that began the
 * capture. Errors: bad handle or slot; CUDAEP_WRONG_STATE from another thread. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpAbortCapture(CudaEpProvider provider, int32_t slot_kind,
                                                            int64_t slot_key);

/*
 * CudaEpReplay launches every installed segment of the slot in capture order on the compute
 * stream and returns without waiting. It takes no lock and allocates nothing; it may run on
 * many threads at once and concurrently with CudaEpResetGraph. Admission and reset are
 * linearizable: a replay racing a reset either was admitted first, and then its launches are
 * enqueued and have completed before the reset returns (the reset waits for them), and it
 * returns success; or it returns CUDAEP_WRONG_STATE and enqueued nothing. A replay that begins
 * after the reset returned never launches the reset graph; it can only launch a graph a later
 * CudaEpEndCapture installed.
 * Errors: bad handle or slot; CUDAEP_WRONG_STATE when nothing is installed (never captured,
 * or reset), the graph was reset while this replay was being admitted, or a capture is live
 * on the provider (on any thread: the capture window); CUDAEP_CUDA_ERROR when a launch fails.
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReplay(CudaEpProvider provider, int32_t slot_kind,
                                                      int64_t slot_key);

/*
 * CudaEpReplaySegment launches one installed segment of the slot by its zero-based
 * capture-order index (for segmented capture: replay segment i, run the seam eagerly, replay
 * segment i+1). Errors: CudaEpReplay's, and CUDAEP_INVALID_ARGUMENT for an index past the
 * installed segments (also during a capture; with none installed it is CUDAEP_WRONG_STATE).
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReplaySegment(CudaEpProvider provider, int32_t slot_kind,
                                                             int64_t slot_key, size_t index);

/*
 * CudaEpResetGraph retires the slot's installed graph, waits for replays already admitted,
 * destroys its segments and only then releases the buffers they retained. No launch of it is
 * enqueued after the call returns.
 *   out_had_graph  may be NULL; else receives 1 when a graph was installed, 0 otherwise.
 * Errors: bad handle or slot; CUDAEP_WRONG_STATE whenever a capture is live on the provider,
 * in any slot, whether or not this slot holds a graph (the capture window: end or abort it
 * first). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpResetGraph(CudaEpProvider provider, int32_t slot_kind,
                                                          int64_t slot_key,
                                                          CUDAEP_OUT_OPT int32_t* out_had_graph);

/*
 * CudaEpHasExecutable sets *out_has to 1 when the slot has an installed graph to replay, else
 * 0. It takes no lock. Errors: bad handle or slot; CUDAEP_INVALID_ARGUMENT for a NULL out_has.
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpHasExecutable(CudaEpProvider provider, int32_t slot_kind,
                                                             int64_t slot_key, CUDAEP_OUT int32_t* out_has);

/*
 * CudaEpGetSegmentCount returns the number of installed segments of the slot (1 for a
 * whole-step capture, 0 with nothing installed). Errors: bad handle or slot;
 * CUDAEP_INVALID_ARGUMENT for a NULL out_count. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetSegmentCount(CudaEpProvider provider, int32_t slot_kind,
                                                               int64_t slot_key, CUDAEP_OUT size_t* out_count);

/*
 * CudaEpGetCaptureStatus returns the compute stream's capture status as the driver reports it
 * (a CudaEpCaptureStatus). Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for a NULL
 * out_status. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetCaptureStatus(CudaEpProvider provider,
                                                                CUDAEP_OUT int32_t* out_status);

/* CudaEpGraphStats are one slot's counters. */
typedef struct CudaEpGraphStats {
    uint32_t struct_size;       /* in: sizeof(CudaEpGraphStats) as the caller knows it */
    uint32_t reserved;          /* 0 */
    uint64_t lock_acquisitions; /* of the slot's mutex; replay takes none */
    uint64_t captures;          /* completed captures: segments installed */
    uint64_t replay_launches;   /* segment executables launched by replays */
    uint64_t instantiations;    /* executables instantiated */
    uint64_t updates;           /* retired executables updated in place after a recapture */
    uint64_t update_refusals;   /* in-place updates the driver refused (then instantiated) */
} CudaEpGraphStats;

/*
 * CudaEpGetGraphStats fills *stats (struct_size at least 56, the ABI 2 layout) with the slot's
 * counters. Errors: bad handle or slot; CUDAEP_INVALID_ARGUMENT for a NULL stats or a short
 * struct_size; CUDAEP_OUT_OF_MEMORY past 128 keyed slots. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetGraphStats(CudaEpProvider provider, int32_t slot_kind,
                                                             int64_t slot_key,
                                                             CUDAEP_INOUT CudaEpGraphStats* stats);

/* ------------------------------------------------------------------------------------------ */
/* Weight paging (ABI 2)                                                                      */
/* ------------------------------------------------------------------------------------------ */

/*
 * Every paging and double-buffer call below that touches the device (prefetch, page, wait,
 * release of a layer, creation of a double buffer, recovery, closing a file) follows the
 * capture window: during a live capture on the provider, or on a thread that captures for
 * another provider, it fails with CUDAEP_WRONG_STATE and does nothing; releases of paged
 * weights, tickets and double buffers, and cancels (CudaEpCancelWeight,
 * CudaEpDoubleBufferCancelLayer), succeed and do their device work when the capture ends.
 * A cancel or release is checked at the call: one that cannot succeed fails then, capture or
 * not, and the layer is no longer pending from that call on (its slot is reused only after
 * its release fence, recorded when the capture ends).
 *
 * Layer weights of an ONNX model with external data live in files. A provider maps such files
 * read-only and shared (CudaEpOpenExternalData); a lazy weight names the byte regions of those
 * files whose concatenation is the weight's device image. During prefill the residency streams
 * layer N+1's image to the device while layer N computes, through a two-slot double buffer:
 *
 *     CudaEpPrefetchWeight(p, 0, w[0], &d);
 *     for (n = 0; n < layers; n++) {
 *         if (n + 1 < layers) CudaEpPrefetchWeight(p, n + 1, w[n + 1], &d);
 *         CudaEpPageWeight(p, n, &pw);            (the compute stream waits for the upload)
 *         ... execute layer n's kernels with tensors on pw ...
 *         CudaEpReleasePagedWeight(pw);           (the slot may take layer n + 2)
 *     }
 *
 * The residency is configured by the provider's options: prefill_double_buffer (off by
 * default, or CUDAEP_PREFILL_DOUBLE_BUFFER=1 in the environment), residency_budget_bytes,
 * staging_pool_cap_bytes, paging_path, register_cap_bytes and residency_slot_bytes. A layer the residency does not take is declined with a typed reason
 * (CudaEpDecline) and the host loads it the ordinary way (CudaEpCopyToDevice).
 */

/* CudaEpBoundary is the kind of operator that consumes a weight. */
typedef enum CudaEpBoundary {
    CUDAEP_BOUNDARY_MATMUL = 1,                 /* dense MatMul/Gemm operand: pageable */
    CUDAEP_BOUNDARY_GATHER = 2,                 /* embedding table: not pageable (stays resident) */
    CUDAEP_BOUNDARY_BLOCK_QUANTIZED_MOE = 3,    /* packed MoE layer image: pageable */
    CUDAEP_BOUNDARY_BLOCK_QUANTIZED_MATMUL = 4  /* packed dense weight: pageable */
} CudaEpBoundary;

/* CudaEpRegion is length bytes at offset of the external-data file opened as mapping. */
typedef struct CudaEpRegion {
    uint64_t mapping;
    uint64_t offset;
    uint64_t length;
} CudaEpRegion;

/*
 * CudaEpWeightSpec describes a lazy weight. The regions' total length must equal the element
 * count times the element size (rounded up to whole bytes for 4-bit types), unless the
 * boundary is packed (block-quantized) and byte_count declares the image size instead.
 */
typedef struct CudaEpWeightSpec {
    int32_t boundary;             /* a CudaEpBoundary */
    int32_t dtype;                /* a CudaEpDType */
    uint32_t rank;                /* 0 .. CUDAEP_MAX_RANK */
    uint32_t reserved;            /* 0 */
    const int64_t* shape;         /* rank dimensions >= 0; NULL only when rank is 0 */
    uint64_t byte_count;          /* packed boundaries: the image size; otherwise 0 */
    const CudaEpRegion* regions;  /* num_regions regions, concatenated in order */
    uint64_t num_regions;         /* 1 .. CUDAEP_MAX_ARRAY */
} CudaEpWeightSpec;

/* CudaEpLazyWeight names a weight that lives in external-data files until paged. */
typedef uint64_t CudaEpLazyWeight;

/* CudaEpPagedWeight names a layer's weight image in a double-buffer slot of the residency. */
typedef uint64_t CudaEpPagedWeight;

/*
 * CudaEpOpenExternalData maps an ONNX external-data file read-only (MAP_SHARED, PROT_READ)
 * and returns its mapping id for CudaEpRegion.mapping. The file stays mapped until the
 * provider is destroyed; do not truncate it meanwhile (a region past a truncated end is
 * refused before any copy). With prefill_double_buffer on and paging_path auto or zero_copy,
 * the file is also registered with the driver now, up to register_cap_bytes (a registration
 * failure does not fail the call: the uploads register or stage what they need).
 *   path         NUL-terminated file name, copied.
 *   out_mapping  receives the id (a small integer of this provider, not a handle).
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for NULL pointers;
 * CUDAEP_NOT_FOUND for a missing file; CUDAEP_FAIL for another I/O error (the message names
 * the path). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpOpenExternalData(CudaEpProvider provider,
                                                                CUDAEP_IN const char* path,
                                                                CUDAEP_OUT uint64_t* out_mapping);

/*
 * CudaEpCreateLazyWeight validates spec against the provider's opened files and returns the
 * weight (which copies what it keeps of spec).
 *   out_weight  receives the handle; release it with CudaEpReleaseLazyWeight.
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for NULL pointers, bad counts, an
 * unknown boundary or dtype, a negative dimension, an empty region, a region past the end of
 * its file or of an unknown mapping, or an image size that disagrees with the shape.
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCreateLazyWeight(CudaEpProvider provider,
                                                                CUDAEP_IN const CudaEpWeightSpec* spec,
                                                                CUDAEP_OUT CudaEpLazyWeight* out_weight);

/* CudaEpReleaseLazyWeight releases weight. Errors: a bad lazy weight handle. Thread-safe. */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseLazyWeight(CudaEpLazyWeight weight);

/*
 * CudaEpLazyWeightGetSize returns the size of the weight's device image in bytes. Errors: a bad
 * lazy weight handle; CUDAEP_INVALID_ARGUMENT for a NULL out_bytes. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpLazyWeightGetSize(CudaEpLazyWeight weight,
                                                                 CUDAEP_OUT uint64_t* out_bytes);

/* CudaEpDeclineReason says why the residency did not take a weight. */
typedef enum CudaEpDeclineReason {
    CUDAEP_DECLINE_NONE = 0,          /* not declined: the weight was routed */
    CUDAEP_DECLINE_DISABLED = 1,      /* prefill double buffering is off (the default) */
    CUDAEP_DECLINE_BOUNDARY = 2,      /* the weight's boundary is not pageable */
    CUDAEP_DECLINE_OVERSIZE = 3,      /* larger than the slots (or half the residency budget) */
    CUDAEP_DECLINE_POOL_CAPACITY = 4, /* two staging buffers (whole pages) exceed staging_pool_cap_bytes */
    CUDAEP_DECLINE_BUSY = 5           /* both slots hold layers not yet released */
} CudaEpDeclineReason;

/* CudaEpDecline is the outcome of CudaEpPrefetchWeight. */
typedef struct CudaEpDecline {
    uint32_t struct_size; /* in: sizeof(CudaEpDecline) as the caller knows it */
    int32_t reason;       /* a CudaEpDeclineReason; CUDAEP_DECLINE_NONE when routed */
    uint64_t layer;       /* the layer */
    int32_t boundary;     /* the weight's CudaEpBoundary */
    uint32_t reserved;    /* 0 */
    uint64_t layer_bytes; /* OVERSIZE, POOL_CAPACITY: the layer's image size; else 0 */
    uint64_t capacity;    /* OVERSIZE, POOL_CAPACITY: the most a layer may have; else 0 */
} CudaEpDecline;

/*
 * CudaEpPrefetchWeight routes layer's weight through the residency's double buffer: it queues
 * the upload of its image into a free slot on the copy stream, one layer ahead of compute, and
 * returns without waiting. The first routed layer builds the pipeline, sized by that layer.
 * Prefetching a layer already pending with the same weight does nothing.
 *   layer        the layer's id in this prefill (any value; typically its index).
 *   decline      in/out (struct_size at least 40): on success, reason is CUDAEP_DECLINE_NONE
 *                when the layer was routed, or says why it was declined (then nothing was
 *                queued, no pipeline was built or changed, and the host loads the layer the
 *                ordinary way). A decline is a success, not an error status.
 * Errors: bad handles; CUDAEP_INVALID_ARGUMENT for a NULL or short decline, or a weight of
 * another provider; CUDAEP_FAIL for a file truncated since it was opened; CUDAEP_CUDA_ERROR
 * when the upload fails (its slot is quarantined; the pipeline keeps serving with the other).
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpPrefetchWeight(CudaEpProvider provider, uint64_t layer,
                                                              CudaEpLazyWeight weight,
                                                              CUDAEP_INOUT CudaEpDecline* decline);

/*
 * CudaEpPageWeight consumes a prefetched layer: the compute stream is fenced on its upload (the
 * host does not wait) and the returned paged weight names its bytes in the slot. Use it as the
 * memory of kernel tensors; release it once the kernels reading it are queued, so the slot can
 * take a later layer. The paged weight keeps the residency alive.
 *   out_weight  receives the handle; release it with CudaEpReleasePagedWeight.
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for a NULL out_weight;
 * CUDAEP_WRONG_STATE for a layer that was not prefetched (declined, already paged or
 * cancelled); CUDAEP_CUDA_ERROR when its upload failed. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpPageWeight(CudaEpProvider provider, uint64_t layer,
                                                          CUDAEP_OUT CudaEpPagedWeight* out_weight);

/*
 * CudaEpPagedWeightGetPointer returns the device address of the paged image, valid for work
 * queued before CudaEpReleasePagedWeight (prefer passing the handle as tensor memory, which is
 * bounds-checked). Errors: a bad paged weight handle; CUDAEP_INVALID_ARGUMENT for a NULL
 * out_device_ptr. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpPagedWeightGetPointer(CudaEpPagedWeight weight,
                                                                     CUDAEP_OUT uint64_t* out_device_ptr);

/*
 * CudaEpPagedWeightGetSize returns the paged image's size in bytes. Errors: a bad paged weight
 * handle; CUDAEP_INVALID_ARGUMENT for a NULL out_bytes. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpPagedWeightGetSize(CudaEpPagedWeight weight,
                                                                  CUDAEP_OUT uint64_t* out_bytes);

/*
 * CudaEpReleasePagedWeight records the slot's release fence after the compute work queued so
 * far (kernels already queued still read the old bytes) and releases the handle, freeing the
 * slot for a later layer (after a live capture ends, if one is live). Errors: a bad paged weight
 * handle (including a second release);
 * CUDAEP_CUDA_ERROR when recording the fence fails (the handle is released all the same).
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleasePagedWeight(CudaEpPagedWeight weight);

/*
 * CudaEpCancelWeight abandons a prefetched layer that will not be paged, freeing its slot for
 * reuse without quarantine. During a capture (see the paging section above) it succeeds: the
 * layer is no longer pending at once, and its slot's release fence is recorded when the
 * capture ends. Errors: a bad provider handle; CUDAEP_WRONG_STATE for a layer that is not
 * pending (never prefetched, declined, paged or cancelled), at the call and with nothing
 * changed, during a capture too. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCancelWeight(CudaEpProvider provider, uint64_t layer);

/* CudaEpResidencyStats count the residency's routing and paging. */
typedef struct CudaEpResidencyStats {
    uint32_t struct_size;       /* in: sizeof(CudaEpResidencyStats) as the caller knows it */
    uint32_t active;            /* 1 once the pipeline has been built (and not torn down) */
    uint64_t routed;            /* prefetches queued through the pipeline */
    uint64_t consumed;          /* layers paged */
    uint64_t released;          /* paged weights released */
    uint64_t cancelled;         /* routed layers cancelled before paging */
    uint64_t declined_oversize; /* OVERSIZE declines */
    uint64_t declined_busy;     /* BUSY declines */
    uint64_t fill_errors;       /* uploads that failed (each quarantined a slot) */
    uint64_t quarantined;       /* slots quarantined now */
    uint64_t zero_copy_layers;  /* uploads straight from the registered file mapping */
    uint64_t staging_layers;    /* uploads through pinned staging memory */
    uint64_t fallback_layers;   /* uploads that tried zero-copy and fell back to staging */
} CudaEpResidencyStats;

/*
 * CudaEpGetResidencyStats fills *stats (struct_size at least 96, the ABI 2 layout). Before the
 * pipeline is built everything is 0 but declined_oversize. Errors: a bad provider handle;
 * CUDAEP_INVALID_ARGUMENT for a NULL stats or a short struct_size. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetResidencyStats(CudaEpProvider provider,
                                                                 CUDAEP_INOUT CudaEpResidencyStats* stats);

/* ------------------------------------------------------------------------------------------ */
/* The double buffer, driven directly (ABI 2)                                                 */
/* ------------------------------------------------------------------------------------------ */

/*
 * A double buffer is the residency's two-slot pipeline without the residency: the host holds
 * a ticket per prefetched layer and waits, releases or cancels it itself. Each double buffer
 * has its own slots (it never sees another pipeline's bytes), uses the provider's copy and
 * compute streams, its pinned staging pool and its opened files, and ignores the
 * prefill_double_buffer gate. The loop:
 *
 *     CudaEpDoubleBufferPrefetch(db, 0, w[0], &t[0]);
 *     for (n = 0; n < layers; n++) {
 *         if (n + 1 < layers) CudaEpDoubleBufferPrefetch(db, n + 1, w[n + 1], &t[n + 1]);
 *         CudaEpDoubleBufferWaitLayer(t[n], &ptr, &len);   (enqueue-only fence)
 *         ... kernels with tensors whose memory is t[n] ...
 *         CudaEpDoubleBufferReleaseLayer(t[n]);           (release fence; slot reusable)
 *         CudaEpReleaseTicket(t[n]);                      (the handle)
 *     }
 *
 * A ticket names (double buffer, slot, slot generation, layer). Once its slot has been claimed
 * for another layer the ticket is stale: every use fails with CUDAEP_STALE_GENERATION and it
 * is never served the other layer's bytes.
 */

/* CudaEpDoubleBuffer names a directly driven two-slot prefill pipeline. */
typedef uint64_t CudaEpDoubleBuffer;

/* CudaEpTicket names the claim on one prefetched layer of a double buffer. */
typedef uint64_t CudaEpTicket;

/* CudaEpTransferMode chooses how a double buffer moves bytes to the device. */
typedef enum CudaEpTransferMode {
    CUDAEP_TRANSFER_ZERO_COPY = 0, /* register the file's extents and copy from them (falls back to staging) */
    CUDAEP_TRANSFER_STAGING = 1    /* always copy through pinned staging memory */
} CudaEpTransferMode;

/* CudaEpSlotState is where a double-buffer slot is in its cycle. */
typedef enum CudaEpSlotState {
    CUDAEP_SLOT_STATE_FREE = 0,       /* never held a layer */
    CUDAEP_SLOT_STATE_FILLING = 1,    /* upload queued, not known complete */
    CUDAEP_SLOT_STATE_READY = 2,      /* upload complete, not waited for */
    CUDAEP_SLOT_STATE_IN_USE = 3,     /* waited for: the compute stream may read it */
    CUDAEP_SLOT_STATE_DRAINING = 4,   /* released or cancelled: reusable after its fence */
    CUDAEP_SLOT_STATE_QUARANTINED = 5 /* an upload failed; never used again */
} CudaEpSlotState;

/*
 * CudaEpCreateDoubleBuffer builds a pipeline of two device slots of slot_bytes each.
 *   mode  a CudaEpTransferMode.
 *   out_double_buffer  receives the handle; release it with CudaEpReleaseDoubleBuffer.
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for a zero slot_bytes, a bad mode or a
 * NULL out_double_buffer; CUDAEP_DECLINED when two staging buffers of slot_bytes, each rounded
 * up to whole host pages, exceed the staging pool's retention cap (option
 * staging_pool_cap_bytes; the message names the rounded size, the cap and the largest slot it
 * admits), checked before anything is reserved and before the capture window;
 * CUDAEP_WRONG_STATE during a capture (the capture window); CUDAEP_OUT_OF_MEMORY when the
 * device is exhausted. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCreateDoubleBuffer(CudaEpProvider provider, uint64_t slot_bytes,
                                                                  int32_t mode,
                                                                  CUDAEP_OUT CudaEpDoubleBuffer* out_double_buffer);

/*
 * CudaEpReleaseDoubleBuffer releases the handle. The pipeline is drained (layers still
 * uploading, ready or in use get their release fence; outstanding uploads complete) and its
 * slots freed once its tickets are released too. Errors: a bad double buffer handle;
 * CUDAEP_CUDA_ERROR from the drain (the handle is released all the same). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseDoubleBuffer(CudaEpDoubleBuffer double_buffer);

/*
 * CudaEpDoubleBufferGetCapacity returns the slot size in bytes, the largest layer image the
 * pipeline takes. Errors: a bad handle; CUDAEP_INVALID_ARGUMENT for a NULL out_bytes.
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDoubleBufferGetCapacity(CudaEpDoubleBuffer double_buffer,
                                                                       CUDAEP_OUT uint64_t* out_bytes);

/*
 * CudaEpDoubleBufferGetSlotState returns slot 0 or 1's CudaEpSlotState. On an OS thread that
 * captures (for any provider) it does not ask the driver whether an upload has completed (an
 * event query there would invalidate the capture): an uploading slot reads
 * CUDAEP_SLOT_STATE_FILLING until a call on another thread, or after the capture, looks again.
 * Errors: a bad handle; CUDAEP_INVALID_ARGUMENT for a slot past 1 or a NULL out_state.
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDoubleBufferGetSlotState(CudaEpDoubleBuffer double_buffer,
                                                                        uint32_t slot,
                                                                        CUDAEP_OUT int32_t* out_state);

/* CudaEpDoubleBufferMetrics count what a double buffer did; every counter only grows. */
typedef struct CudaEpDoubleBufferMetrics {
    uint32_t struct_size;       /* in: sizeof(CudaEpDoubleBufferMetrics) as the caller knows it */
    uint32_t reserved;          /* 0 */
    uint64_t layers_prefetched; /* uploads queued */
    uint64_t layers_consumed;   /* waits that fenced the compute stream */
    uint64_t layers_released;   /* releases */
    uint64_t cancelled;         /* cancels of an uploading, ready or in-use layer */
    uint64_t stale_rejected;    /* tickets refused for a stale generation */
    uint64_t poisoned;          /* failed uploads (each quarantined its slot) */
    uint64_t slot_reuses;       /* uploads ordered after an earlier layer's release fence */
    uint64_t drained_at_close;  /* layers still uploading, ready or in use at teardown */
    uint64_t bytes_prefetched;  /* image bytes of the uploads queued */
    uint64_t zero_copy_layers;  /* uploads from registered file extents only */
    uint64_t staging_layers;    /* uploads through pinned staging only */
    uint64_t fallback_layers;   /* uploads that fell back from zero-copy to staging */
} CudaEpDoubleBufferMetrics;

/*
 * CudaEpDoubleBufferGetMetrics fills *metrics (struct_size at least 104, the ABI 2 layout).
 * Errors: a bad handle; CUDAEP_INVALID_ARGUMENT for a NULL metrics or a short struct_size.
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDoubleBufferGetMetrics(CudaEpDoubleBuffer double_buffer,
                                                                      CUDAEP_INOUT CudaEpDoubleBufferMetrics* metrics);

/*
 * CudaEpDoubleBufferPrefetch queues layer's image (weight's regions, concatenated) into a free
 * slot on the copy stream and returns its ticket without waiting for the upload. A free slot
 * is preferred; otherwise the slot released longest ago is reused, ordered after its release
 * fence. The regions are checked against the files before a slot is claimed.
 *   out_ticket  receives the ticket handle; release it with CudaEpReleaseTicket (releasing the
 *               handle does not release the layer: see CudaEpDoubleBufferReleaseLayer).
 * Errors: bad handles; CUDAEP_INVALID_ARGUMENT for a NULL out_ticket, a weight of another
 * provider or an image larger than the capacity; CUDAEP_WRONG_STATE when both slots hold
 * layers not yet released or cancelled; CUDAEP_FAIL for a truncated file; CUDAEP_CUDA_ERROR
 * when the upload fails (the slot is quarantined). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDoubleBufferPrefetch(CudaEpDoubleBuffer double_buffer,
                                                                    uint64_t layer, CudaEpLazyWeight weight,
                                                                    CUDAEP_OUT CudaEpTicket* out_ticket);

/*
 * CudaEpDoubleBufferWaitLayer fences the compute stream on the ticket's upload (enqueue-only:
 * the host does not wait) and returns the layer's device bytes: *out_device_ptr and
 * *out_bytes, valid for work queued before the layer is released or cancelled. After it the
 * ticket may be used as tensor or kernel-argument memory. Waiting again returns the same view.
 * Errors: a bad ticket handle; CUDAEP_INVALID_ARGUMENT for NULL pointers;
 * CUDAEP_STALE_GENERATION when the slot was reused for another layer; CUDAEP_WRONG_STATE for a
 * released or cancelled layer or a quarantined slot, and during a capture on the double
 * buffer's provider or on the calling thread (the capture window: nothing is done, nothing is
 * quarantined); CUDAEP_CUDA_ERROR when its upload failed. From a thread that does not capture,
 * a capture on another provider does not affect it. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDoubleBufferWaitLayer(CudaEpTicket ticket,
                                                                     CUDAEP_OUT uint64_t* out_device_ptr,
                                                                     CUDAEP_OUT uint64_t* out_bytes);

/*
 * CudaEpDoubleBufferReleaseLayer records the release fence after the compute work queued so
 * far and frees the ticket's slot for a later layer. The layer must have been waited for.
 * Errors: a bad ticket handle; CUDAEP_STALE_GENERATION; CUDAEP_WRONG_STATE for a layer not
 * waited for, already released or cancelled, and as CudaEpDoubleBufferWaitLayer during a
 * capture. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDoubleBufferReleaseLayer(CudaEpTicket ticket);

/*
 * CudaEpDoubleBufferCancelLayer abandons the ticket's layer (uploading, ready or in use) and
 * frees its slot for reuse without quarantine; a later upload into it is ordered after the
 * abandoned copy and any compute already queued on it. Cancelling a layer whose slot was
 * quarantined does nothing. During a capture it succeeds on every thread (see the paging
 * section): the layer is abandoned at once and the slot's release fence is recorded when the
 * capture ends. Errors: a bad ticket handle; CUDAEP_STALE_GENERATION; CUDAEP_WRONG_STATE for a
 * layer already released or cancelled, at the call, during a capture too. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDoubleBufferCancelLayer(CudaEpTicket ticket);

/* CudaEpTicketInfo describes a ticket. */
typedef struct CudaEpTicketInfo {
    uint32_t struct_size; /* in: sizeof(CudaEpTicketInfo) as the caller knows it */
    uint32_t slot;        /* the slot the layer was prefetched into, 0 or 1 */
    uint64_t layer;       /* the layer */
    uint64_t generation;  /* the slot generation the ticket is valid for */
} CudaEpTicketInfo;

/*
 * CudaEpTicketGetInfo fills *info (struct_size at least 24, the ABI 2 layout). Errors: a bad
 * ticket handle; CUDAEP_INVALID_ARGUMENT for a NULL info or a short struct_size. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpTicketGetInfo(CudaEpTicket ticket,
                                                             CUDAEP_INOUT CudaEpTicketInfo* info);

/*
 * CudaEpReleaseTicket releases the ticket handle (not the layer: a layer never released or
 * cancelled stays in its slot until the double buffer is torn down). Errors: a bad ticket
 * handle. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpReleaseTicket(CudaEpTicket ticket);



/* ------------------------------------------------------------------------------------------ */
/* Lifecycle additions (ABI 3)                                                                */
/* ------------------------------------------------------------------------------------------ */

/*
 * CudaEpRemoveGraph (ABI 3) resets a keyed slot, as CudaEpResetGraph does, and forgets its key,
 * making room for another: a provider holds at most 128 keyed slots at a time. Removing a key
 * that is not held does nothing. The removed key may be captured again later; tokens of its old
 * graphs never replay the new one.
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for the primary or verify slot (they
 * are permanent: reset them instead) or a bad slot kind; CUDAEP_WRONG_STATE while a capture is
 * live on the provider (the capture window). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpRemoveGraph(CudaEpProvider provider, int32_t slot_kind,
                                                           int64_t slot_key);

/*
 * CudaEpCloseExternalData (ABI 3) gives up one reference to an external-data file opened with
 * CudaEpOpenExternalData (opening one path again returns the same mapping and takes another
 * reference) and unmaps the file at the last one. Lazy weights naming the mapping fail
 * afterwards. Files still open are unmapped when the provider is destroyed. The file's pages
 * kept registered with the driver are unregistered before it is unmapped.
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for a mapping that is not open (never
 * opened, or closed), also during a capture; CUDAEP_WRONG_STATE while a layer read from the
 * file is in flight (nothing changes: release or cancel the layer, then close) or during a
 * capture (the capture window: unregistering calls the driver). Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCloseExternalData(CudaEpProvider provider, uint64_t mapping);

/*
 * CudaEpRecoverWeights (ABI 3) puts the residency's slots quarantined by failed fills back in
 * service (after a fill fails twice, every prefetch declines with CUDAEP_DECLINE_BUSY until
 * then).
 *   out_recovered  may be NULL; else receives the number of slots recovered.
 * Errors: a bad provider handle; CUDAEP_WRONG_STATE while a capture is live on the provider;
 * CUDAEP_CUDA_ERROR when waiting for the failed copy fails. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpRecoverWeights(CudaEpProvider provider,
                                                              CUDAEP_OUT_OPT uint32_t* out_recovered);

/*
 * CudaEpDoubleBufferRecover (ABI 3) puts the double buffer's quarantined slots back in service;
 * the failed layers' tickets become stale.
 *   out_recovered  may be NULL; else receives the number of slots recovered.
 * Errors: a bad handle; CUDAEP_WRONG_STATE while a capture is live on the provider;
 * CUDAEP_CUDA_ERROR when waiting for the failed copy fails. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDoubleBufferRecover(CudaEpDoubleBuffer double_buffer,
                                                                   CUDAEP_OUT_OPT uint32_t* out_recovered);

/*
 * CudaEpGetWeightFallback (ABI 3) returns why the residency's most recent zero-copy fill fell
 * back to staging (the layer, the slot and the driver's registration error), or "" when none
 * has, with the two-call string idiom.
 * Errors: a bad provider handle; CUDAEP_INVALID_ARGUMENT for a NULL out_needed or a short
 * buffer. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetWeightFallback(CudaEpProvider provider,
                                                                 CUDAEP_OUT_OPT char* buf, size_t buf_size,
                                                                 CUDAEP_OUT size_t* out_needed);

/*
 * CudaEpDoubleBufferGetFallback (ABI 3) is CudaEpGetWeightFallback for a double buffer.
 * Errors: a bad handle; CUDAEP_INVALID_ARGUMENT for a NULL out_needed or a short buffer.
 * Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpDoubleBufferGetFallback(CudaEpDoubleBuffer double_buffer,
                                                                       CUDAEP_OUT_OPT char* buf, size_t buf_size,
                                                                       CUDAEP_OUT size_t* out_needed);
/* ------------------------------------------------------------------------------------------ */
/* The ONNX Runtime adapter's counters (ABI 3)                                                */
/* ------------------------------------------------------------------------------------------ */

/*
 * CudaEpOrtStats are the process-wide counters of the ONNX Runtime plugin EP linked into this
 * library (docs/ORT.md): what lives now, and what it has done since the library was loaded.
 */
typedef struct CudaEpOrtStats {
    uint32_t struct_size;         /* in: sizeof(CudaEpOrtStats) as the caller knows it */
    uint32_t sessions;            /* sessions (OrtEps) using CudaEp alive */
    uint64_t partitions;          /* compiled partitions alive */
    uint64_t weight_file_bytes;   /* bytes CudaEp read from external-data files itself (resident
                                     loads, and paged layers at every run) */
    uint64_t weight_ort_bytes;    /* bytes of in-memory initializers copied from ORT's values */
    uint64_t paged_layers;        /* layers streamed through double buffers during runs */
    uint64_t paged_bytes;         /* their bytes */
    uint64_t runs;                /* partition runs */
    uint64_t captures;            /* CUDA graphs captured */
    uint64_t replays;             /* CUDA graphs replayed */
    uint64_t device_live_bytes;   /* device memory the adapter's providers hold, cached included */
    uint64_t device_cached_bytes; /* freed device allocations kept for reuse */
    uint64_t sync_streams;        /* CudaEp sync streams ORT holds now */
    uint64_t stream_runs;         /* partition runs queued on a CudaEp stream, returning unwaited */
    uint64_t notifications;       /* notifications ORT activated (fences recorded) */
    /* ABI 5: */
    uint64_t fused_nodes;         /* graph nodes partitions run inside fused kernels, or not at all (repeats) */
    uint64_t values_in_place;     /* partition inputs and outputs read or written in ORT's device
                                     tensors directly, summed over runs */
    uint64_t values_copied;       /* partition inputs and outputs copied through a plan's own
                                     buffers (host tensors, and the rest), summed over runs */
} CudaEpOrtStats;

/*
 * CudaEpGetOrtStats fills *stats (struct_size at least 112, the ABI 3 layout; 136 for the ABI 5
 * counters) with the ONNX Runtime adapter's counters. Errors: CUDAEP_INVALID_ARGUMENT for a NULL stats or a short
 * struct_size. Thread-safe.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpGetOrtStats(CUDAEP_INOUT CudaEpOrtStats* stats);
/* ------------------------------------------------------------------------------------------ */
/* Several devices (ABI 4)                                                                    */
/* ------------------------------------------------------------------------------------------ */

/*
 * One process may hold providers on several devices (device_id), from one thread or many.
 * Each keeps its own context, streams, graph slots, pinned memory and paging; the capture gate
 * is per device, so a capture on one device never holds back a drain, a replay or a copy on
 * another. Buffers of providers on different devices meet only in CudaEpCopyPeer.
 */

/* CudaEpPeerPath (ABI 4) says how CudaEpCopyPeer moved the bytes. */
typedef enum CudaEpPeerPath {
    CUDAEP_PEER_PATH_NONE = 0,   /* nothing was copied (size 0) */
    CUDAEP_PEER_PATH_DEVICE = 1, /* both buffers on one device: an ordinary device copy */
    CUDAEP_PEER_PATH_DIRECT = 2, /* between devices that reach each other: cuMemcpyPeerAsync */
    CUDAEP_PEER_PATH_STAGED = 3  /* between devices that do not: through pinned host memory */
} CudaEpPeerPath;

/*
 * CudaEpCopyPeer (ABI 4) queues a copy of size bytes from src at src_offset to dst at
 * dst_offset, where the two buffers may belong to providers on different devices (of one
 * backend), and returns without waiting for it.
 *   out_path  may be NULL; else receives the CudaEpPeerPath taken.
 * The copy is queued on the compute stream of dst's provider. It runs after the work queued
 * before the call on the compute streams of both buffers' providers, and the work either of
 * them queues afterwards runs after it: src may be overwritten through its provider, and dst
 * read through its provider (CudaEpCopyToHost waits for it), at once. Between two devices
 * that can access each other the bytes go directly (peer access is enabled on the first such
 * copy of a pair and kept); between two that cannot, through two pinned host slots of 8 MiB
 * that dst's provider allocates on its first staged copy and keeps until it is destroyed.
 * Within one device it is CudaEpCopyBuffer's device copy, but not recordable.
 * Errors: bad buffer handles; CUDAEP_INVALID_ARGUMENT for a range outside either buffer (size
 * and offsets are checked for overflow), overlapping ranges (identical ones copy nothing and
 * report CUDAEP_PEER_PATH_DEVICE) or buffers of two backends; CUDAEP_WRONG_STATE while a
 * capture is live on either provider (a copy between devices cannot be recorded: use
 * CudaEpCopyBuffer inside a capture);
 * CUDAEP_CUDA_ERROR for a driver failure (if part of the copy was queued, the call waits for
 * it before returning). Nothing is written to *out_path on error. Thread-safe: copies in
 * opposite directions between the same two providers may run concurrently.
 */
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpCopyPeer(CudaEpBuffer dst, uint64_t dst_offset, CudaEpBuffer src,
                                                        uint64_t src_offset, uint64_t size,
                                                        CUDAEP_OUT_OPT int32_t* out_path);

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

/* ABI 2 layouts. */
CUDAEP_STATIC_ASSERT(sizeof(CudaEpBuffer) == 8 && sizeof(CudaEpKernel) == 8 && sizeof(CudaEpModule) == 8 &&
                         sizeof(CudaEpFunction) == 8 && sizeof(CudaEpLazyWeight) == 8 &&
                         sizeof(CudaEpPagedWeight) == 8 && sizeof(CudaEpDoubleBuffer) == 8 &&
                         sizeof(CudaEpTicket) == 8,
                     "handles are 64 bits");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpDType) == 4, "enums are 32 bits");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpProviderStats, device_allocs) == 8, "CudaEpProviderStats layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpProviderStats, device_frees) == 16, "CudaEpProviderStats layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpProviderStats, device_live_bytes) == 24, "CudaEpProviderStats layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpProviderStats) == 32, "CudaEpProviderStats ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpTensorInfo, dtype) == 0, "CudaEpTensorInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpTensorInfo, rank) == 4, "CudaEpTensorInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpTensorInfo, shape) == 8, "CudaEpTensorInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpTensorInfo, strides) == 16, "CudaEpTensorInfo layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpTensorInfo) == 24, "CudaEpTensorInfo ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpTensor, memory) == 24, "CudaEpTensor layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpTensor, offset) == 32, "CudaEpTensor layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpTensor) == 40, "CudaEpTensor ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpAttribute, type) == 8, "CudaEpAttribute layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpAttribute, f) == 12, "CudaEpAttribute layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpAttribute, i) == 16, "CudaEpAttribute layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpAttribute, ints) == 24, "CudaEpAttribute layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpAttribute, num_ints) == 32, "CudaEpAttribute layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpAttribute, s) == 40, "CudaEpAttribute layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpAttribute) == 48, "CudaEpAttribute ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpKernelArg, reserved) == 4, "CudaEpKernelArg layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpKernelArg, value) == 8, "CudaEpKernelArg layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpKernelArg, memory) == 16, "CudaEpKernelArg layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpKernelArg) == 24, "CudaEpKernelArg ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpLaunchConfig, block_x) == 12, "CudaEpLaunchConfig layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpLaunchConfig, shared_mem_bytes) == 24, "CudaEpLaunchConfig layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpLaunchConfig) == 32, "CudaEpLaunchConfig ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpGraphStats, lock_acquisitions) == 8, "CudaEpGraphStats layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpGraphStats, update_refusals) == 48, "CudaEpGraphStats layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpGraphStats) == 56, "CudaEpGraphStats ABI 2 size");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpRegion) == 24, "CudaEpRegion ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpWeightSpec, rank) == 8, "CudaEpWeightSpec layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpWeightSpec, shape) == 16, "CudaEpWeightSpec layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpWeightSpec, byte_count) == 24, "CudaEpWeightSpec layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpWeightSpec, regions) == 32, "CudaEpWeightSpec layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpWeightSpec, num_regions) == 40, "CudaEpWeightSpec layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpWeightSpec) == 48, "CudaEpWeightSpec ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDecline, layer) == 8, "CudaEpDecline layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDecline, boundary) == 16, "CudaEpDecline layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDecline, layer_bytes) == 24, "CudaEpDecline layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDecline, capacity) == 32, "CudaEpDecline layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpDecline) == 40, "CudaEpDecline ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpResidencyStats, routed) == 8, "CudaEpResidencyStats layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpResidencyStats, fallback_layers) == 88, "CudaEpResidencyStats layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpResidencyStats) == 96, "CudaEpResidencyStats ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDoubleBufferMetrics, layers_prefetched) == 8, "CudaEpDoubleBufferMetrics layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpDoubleBufferMetrics, fallback_layers) == 96, "CudaEpDoubleBufferMetrics layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpDoubleBufferMetrics) == 104, "CudaEpDoubleBufferMetrics ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpTicketInfo, slot) == 4, "CudaEpTicketInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpTicketInfo, layer) == 8, "CudaEpTicketInfo layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpTicketInfo, generation) == 16, "CudaEpTicketInfo layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpTicketInfo) == 24, "CudaEpTicketInfo ABI 2 size");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpOrtStats, sessions) == 4, "CudaEpOrtStats layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpOrtStats, partitions) == 8, "CudaEpOrtStats layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpOrtStats, device_cached_bytes) == 80, "CudaEpOrtStats layout");
CUDAEP_STATIC_ASSERT(offsetof(CudaEpOrtStats, notifications) == 104, "CudaEpOrtStats layout");

/* ABI 4 layouts. */
CUDAEP_STATIC_ASSERT(sizeof(CudaEpPeerPath) == 4, "enums are 32 bits");

/* ABI 5 layouts. */
CUDAEP_STATIC_ASSERT(offsetof(CudaEpOrtStats, fused_nodes) == 112, "CudaEpOrtStats layout");
CUDAEP_STATIC_ASSERT(sizeof(CudaEpOrtStats) == 136, "CudaEpOrtStats ABI 5 size");

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUDAEP_H */
