/*
 * models.h - what the model cases share: the sizes gen_models.py uses and the helpers that run
 * one input through a session under test and a CPU reference session.
 */
#ifndef CUDAEP_CTESTS_ORT_MODELS_H
#define CUDAEP_CTESTS_ORT_MODELS_H

#include "ort_rt.h"

/* The MLP of gen_models.py (IN, HIDDEN, OUT there): X[batch, 64] -> Y[batch, 16]. */
#define MLP_IN 64
#define MLP_OUT 16
#define MODEL_RTOL 1e-4
#define MODEL_ATOL 1e-5

/* make_mlp_input allocates X[batch, MLP_IN] filled from `seed`. */
int make_mlp_input(host_tensor* x, int64_t batch, uint64_t seed);

/* run_and_compare runs x through ref and test and compares the outputs; thread-safe. */
int run_and_compare(ort_rt* rt, rt_session* test, rt_session* ref, host_tensor* x, char* why, size_t cap);

/* open_pair opens DIR/file twice: `ref` as a plain CPU session, `test` with test_opts. */
int open_pair(ort_rt* rt, const char* dir, const char* file, const rt_session_opts* test_opts, rt_session* test,
              rt_session* ref);

/* The tiny decoder of gen_decoder.py: its vocabulary, and how many tokens decoder_generate
 * decodes after its 8-token prompt. */
#define DEC_VOCAB 128
#define DEC_STEPS 16

/* decoder_run: what decoder_generate leaves for its caller. */
typedef struct decoder_run {
  int64_t cpu_tokens[DEC_STEPS];  /* the tokens the CPU session generated */
  host_tensor cpu_prefill_logits; /* the CPU session's logits for the prompt (the caller frees) */
  int assigned;                   /* the node assignment was read (ep_mode, API 24) */
  char ep_ops[4096];              /* then: the op types on CudaEp, space-separated */
  char other_ops[4096];           /* and those on other EPs */
} decoder_run;

/* decoder_generate runs the decoder DIR/file (a form of gen_decoder.py's) through a session
 * with CudaEp appended (CPU fallback allowed; its option paging set to `paging` unless that is
 * NULL) and a plain CPU session: an 8-token prefill and DEC_STEPS greedy steps (DEC_STEPS + 1
 * runs of each session), every step's logits compared, the tokens too. It prints its checks and
 * returns how many failed; *run is written either way. Not thread-safe (static sessions). */
int decoder_generate(ort_rt* rt, const char* dir, const char* file, const char* paging, decoder_run* run);

#endif /* CUDAEP_CTESTS_ORT_MODELS_H */
