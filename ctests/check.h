/*
 * check.h — assertions for the C tests of cudaep. Each failed check prints where and why,
 * counts the failure, and the test's main returns check_result() (nonzero on any failure).
 */
#ifndef CUDAEP_CTESTS_CHECK_H
#define CUDAEP_CTESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaep.h"

static int check_failures;

static inline void check_fail(const char* file, int line, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: check failed: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    __atomic_add_fetch(&check_failures, 1, __ATOMIC_RELAXED); /* threads may fail checks too */
}

/* CHECK(cond): cond must hold. */
#define CHECK(cond)                                             \
    do {                                                        \
        if (!(cond)) check_fail(__FILE__, __LINE__, "%s", #cond); \
    } while (0)

/* CHECK_STR(got, want): two NUL-terminated strings must be equal. */
#define CHECK_STR(got, want)                                                                \
    do {                                                                                    \
        const char* g_ = (got);                                                             \
        const char* w_ = (want);                                                            \
        if (g_ == NULL || strcmp(g_, w_) != 0)                                              \
            check_fail(__FILE__, __LINE__, "%s is \"%s\", want \"%s\"", #got, g_ ? g_ : "(null)", w_); \
    } while (0)

/* CHECK_CONTAINS(s, part): part must occur in s. */
#define CHECK_CONTAINS(s, part)                                                             \
    do {                                                                                    \
        const char* s_ = (s);                                                               \
        if (s_ == NULL || strstr(s_, (part)) == NULL)                                       \
            check_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", s_ ? s_ : "(null)", (part)); \
    } while (0)

/* CHECK_OK(call): call must return NULL (success). A failure prints the status and frees it. */
#define CHECK_OK(call) check_ok_impl(__FILE__, __LINE__, #call, (call))

static inline int check_ok_impl(const char* file, int line, const char* expr, CudaEpStatus* st) {
    if (st == NULL) return 1;
    check_fail(file, line, "%s returned %s: %s", expr, CudaEpGetErrorCodeName(CudaEpGetErrorCode(st)),
               CudaEpGetErrorMessage(st));
    CudaEpReleaseStatus(st);
    return 0;
}

/*
 * CHECK_ERR(call, code, part): call must fail with code and a message containing part ("" for
 * any message). The status is freed.
 */
#define CHECK_ERR(call, code, part) check_err_impl(__FILE__, __LINE__, #call, (call), (code), (part))

static inline void check_err_impl(const char* file, int line, const char* expr, CudaEpStatus* st,
                                  CudaEpErrorCode want, const char* part) {
    if (st == NULL) {
        check_fail(file, line, "%s succeeded, want %s", expr, CudaEpGetErrorCodeName(want));
        return;
    }
    CudaEpErrorCode got = CudaEpGetErrorCode(st);
    const char* msg = CudaEpGetErrorMessage(st);
    if (got != want) {
        check_fail(file, line, "%s returned %s (%s), want %s", expr, CudaEpGetErrorCodeName(got), msg,
                   CudaEpGetErrorCodeName(want));
    } else if (strstr(msg, part) == NULL) {
        check_fail(file, line, "%s: message \"%s\" does not contain \"%s\"", expr, msg, part);
    }
    CudaEpReleaseStatus(st);
}

/* check_no_live_handles: every handle the test created must have been released. */
static inline void check_no_live_handles(void) {
    uint64_t live = 99;
    if (CHECK_OK(CudaEpGetLiveHandleCount(&live)) && live != 0) {
        check_fail(__FILE__, __LINE__, "%llu handles still live at teardown", (unsigned long long)live);
    }
}

/* check_result: the exit status for main, with a one-line verdict. */
static inline int check_result(const char* test) {
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", test, check_failures);
        return 1;
    }
    printf("%s: all checks passed\n", test);
    return 0;
}

/*
 * test_backend: the backend the ABI 2 tests run on, from CUDAEP_TEST_BACKEND (default "sim"),
 * so the same binaries run on a GPU machine with CUDAEP_TEST_BACKEND=cuda.
 */
static inline const char* test_backend(void) {
    const char* b = getenv("CUDAEP_TEST_BACKEND");
    return (b != NULL && *b != '\0') ? b : "sim";
}

/* test_on_sim: whether the tests run on the simulated device. */
static inline int test_on_sim(void) { return strcmp(test_backend(), "sim") == 0; }

/* new_test_options: an options object with the test backend. */
static inline CudaEpOptions new_test_options(void) {
    CudaEpOptions o = CUDAEP_NULL_HANDLE;
    if (CHECK_OK(CudaEpCreateOptions(&o))) {
        CHECK_OK(CudaEpSetOption(o, "backend", test_backend()));
    }
    return o;
}

/* new_sim_options: an options object with backend=sim (the ABI 1 tests check the simulated
 * device's own properties, so they always run on it). */
static inline CudaEpOptions new_sim_options(void) {
    CudaEpOptions o = CUDAEP_NULL_HANDLE;
    if (CHECK_OK(CudaEpCreateOptions(&o))) {
        CHECK_OK(CudaEpSetOption(o, "backend", "sim"));
    }
    return o;
}

#endif /* CUDAEP_CTESTS_CHECK_H */
