/*
 * cases.h - the test cases of ort_host, one function each. A case prints one line per check
 * ("  ok ..." / "  FAIL ...") and returns the number of failed checks (0: the case passed).
 *
 * Every case runs in one of two modes (ort_rt.ep_mode): with CudaEp registered, the session under
 * test gets CudaEp appended (the EP contract's options, CPU fallback disabled where every node
 * is meant for the EP); with --cpu-only the same code runs without appending anything, so the
 * harness itself (models, readers, comparisons) is checked against ORT's CPU EP alone.
 */
#ifndef CUDAEP_CTESTS_ORT_CASES_H
#define CUDAEP_CTESTS_ORT_CASES_H

#include "ort_rt.h"

/* The operators the EP contract says CudaEp supports (float32); node tests using only these are
 * run with CPU fallback disabled. */
extern const char* const supported_ops[];
int op_supported(const char* op);

/* ep_options starts the options of a session under test: with_ep set, and backend=<value of
 * CUDAEP_TEST_BACKEND> when that variable is set (sim or cuda; the EP picks by itself otherwise).
 * In cpu-only mode the session under test gets ORT's optimizations disabled instead, so that
 * it differs from the reference session (unfused MatMul+Add against ORT's fused Gemm) and the
 * comparisons are not between bit-identical computations. */
void ep_options(const ort_rt* rt, rt_session_opts* o);

/* add_ep_option appends one ep.cudaep.<key> option (given as key) to o. */
void add_ep_option(rt_session_opts* o, const char* key, const char* value);

/* ok prints one check's line ("  ok   what" or "  FAIL what") and returns 1 when it failed. */
int ok(int cond, const char* what);

/* join_path writes dir/name into buf; returns -1 if it does not fit. */
int join_path(char* buf, size_t cap, const char* dir, const char* name);

/* ep_own_error: whether an ORT error message carries CudaEp's own status text, which CudaEp
 * prefixes with its name: "CudaEp: ..." at the start or after ORT's ": " (ORT's own messages
 * name CudaEp too, as in "Failed to add kernel for CudaEp_123_0 CudaEp CudaEp: Conflicting"). */
int ep_own_error(const char* msg);

/* The cases. argv[0] is the case name; model-based cases take the folder gen_models.py wrote. */
int case_devices(ort_rt* rt, int argc, char** argv);
int case_node_tests(ort_rt* rt, int argc, char** argv);
int case_mlp(ort_rt* rt, int argc, char** argv);
int case_split(ort_rt* rt, int argc, char** argv);
int case_graph(ort_rt* rt, int argc, char** argv);
int case_paging(ort_rt* rt, int argc, char** argv);
int case_decoder(ort_rt* rt, int argc, char** argv);
int case_nbits(ort_rt* rt, int argc, char** argv);
int case_exported(ort_rt* rt, int argc, char** argv);
int case_misuse(ort_rt* rt, int argc, char** argv);
int case_iobinding(ort_rt* rt, int argc, char** argv);
int case_two_devices(ort_rt* rt, int argc, char** argv);
int case_weight_reads(ort_rt* rt, int argc, char** argv);

#endif /* CUDAEP_CTESTS_ORT_CASES_H */
