/*
 * case_decoder.c - `decoder MODELDIR`: greedy generation with the tiny Llama-style decoder of
 * gen_decoder.py (RMSNorm, rotary embeddings, grouped-query attention over a key/value cache,
 * SiLU MLP; plain ONNX), in a session with CudaEp appended (CPU fallback allowed: what CudaEp
 * does not claim runs on ORT's CPU EP) and in a plain CPU session.
 *
 * Both sessions prefill the same 8-token prompt, then decode 16 tokens greedily, each feeding its
 * own present keys and values back as the next step's past. Every step's logits must agree
 * within rtol 1e-3, atol 1e-4, and the 16 generated tokens must be identical. The node
 * assignment shows how much of the decoder CudaEp runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "models.h"

/* gen_decoder.py's sizes (DEC_VOCAB and DEC_STEPS are in models.h). */
#define DEC_KV_HEADS 2
#define DEC_HEAD_DIM 16
#define DEC_LAYERS 2
#define DEC_PROMPT 8
#define DEC_RTOL 1e-3
#define DEC_ATOL 1e-4

/* One generation: a session and its key/value cache (present of the last step). */
typedef struct gen {
  rt_session s;
  host_tensor past[2 * DEC_LAYERS];
  int64_t tokens[DEC_PROMPT + DEC_STEPS];
  host_tensor logits; /* the last step's */
} gen;

/* alloc_in allocates input `name` of the session (skipped when the model has no such input). */
static int alloc_in(const rt_session* s, host_tensor* in, const char* name, int32_t type, const int64_t* dims,
                    size_t ndims, char* err, size_t cap) {
  int k = rt_input_index(s, name);
  if (k < 0) return 0;
  return host_tensor_alloc(&in[k], type, dims, ndims, err, cap) < 0 ? -1 : 1;
}

/* step runs tokens [from, to) at positions from.. with the cache, keeps the new cache and the
 * logits; returns the greedy next token, or -1. The plain form takes position_ids and an
 * additive causal mask, the contrib form seqlens_k and total_sequence_length. */
static int64_t step(ort_rt* rt, gen* g, int from, int to, char* why, size_t cap) {
  int64_t seq = to - from, past = g->past[0].dims[2], total = past + seq;
  host_tensor in[RT_MAX_IO];
  memset(in, 0, sizeof in);
  char err[256];
  int64_t dims2[2] = {1, seq}, bias_dims[4] = {1, 1, seq, total}, one[1] = {1};
  int ids = rt_input_index(&g->s, "input_ids");
  int64_t next = -1;
  if (ids < 0 || g->s.num_inputs != 3 + 2 * DEC_LAYERS) {
    textf(why, cap, "the decoder's inputs are not input_ids, two position inputs and the caches");
    return -1;
  }
  if (host_tensor_alloc(&in[ids], ONNX_PB_INT64, dims2, 2, err, sizeof err) < 0 ||
      alloc_in(&g->s, in, "position_ids", ONNX_PB_INT64, dims2, 2, err, sizeof err) < 0 ||
      alloc_in(&g->s, in, "attn_bias", ONNX_PB_FLOAT, bias_dims, 4, err, sizeof err) < 0 ||
      alloc_in(&g->s, in, "seqlens_k", ONNX_PB_INT32, one, 1, err, sizeof err) < 0 ||
      alloc_in(&g->s, in, "total_sequence_length", ONNX_PB_INT32, NULL, 0, err, sizeof err) < 0) {
    textf(why, cap, "inputs: %s", err);
    goto out;
  }
  int pos = rt_input_index(&g->s, "position_ids"), bias = rt_input_index(&g->s, "attn_bias");
  int seqlens = rt_input_index(&g->s, "seqlens_k"), totals = rt_input_index(&g->s, "total_sequence_length");
  for (int64_t i = 0; i < seq; i++) {
    ((int64_t*)in[ids].data)[i] = g->tokens[from + i];
    if (pos >= 0) ((int64_t*)in[pos].data)[i] = from + i;
    for (int64_t j = 0; bias >= 0 && j < total; j++) /* causal: query i (at past+i) sees keys <= it */
      ((float*)in[bias].data)[i * total + j] = j <= past + i ? 0.0f : -1e9f;
  }
  if (seqlens >= 0) ((int32_t*)in[seqlens].data)[0] = (int32_t)(total - 1);
  if (totals >= 0) ((int32_t*)in[totals].data)[0] = (int32_t)total;
  for (int l = 0; l < 2 * DEC_LAYERS; l++) {
    char name[32];
    textf(name, sizeof name, "past_%s_%d", l % 2 ? "value" : "key", l / 2);
    int k = rt_input_index(&g->s, name);
    if (k < 0) {
      textf(why, cap, "no input %s", name);
      goto out;
    }
    in[k] = g->past[l]; /* borrowed: not freed below */
  }
  host_tensor out[RT_MAX_IO];
  memset(out, 0, sizeof out);
  rt_error e;
  if (rt_run(rt, &g->s, in, g->s.num_inputs, out, &e, 1) < 0) {
    textf(why, cap, "Run: [%s] %s", rt_error_code_name(e.code), e.msg);
    goto out;
  }
  /* Outputs: logits, then present_key_0, present_value_0, ... in the model's order. */
  host_tensor_free(&g->logits);
  g->logits = out[0];
  for (int l = 0; l < 2 * DEC_LAYERS; l++) {
    host_tensor_free(&g->past[l]);
    g->past[l] = out[1 + l];
  }
  const float* last = (const float*)g->logits.data + (seq - 1) * DEC_VOCAB;
  next = 0;
  for (int64_t v = 1; v < DEC_VOCAB; v++)
    if (last[v] > last[next]) next = v;
out:
  for (int i = 0; i < (int)g->s.num_inputs; i++) {
    int cache = 0;
    for (int l = 0; l < 2 * DEC_LAYERS; l++) cache |= in[i].data == g->past[l].data && in[i].data != NULL;
    if (!cache && (i == ids || i == pos || i == bias || i == seqlens || i == totals)) host_tensor_free(&in[i]);
  }
  return next;
}

static int gen_open(ort_rt* rt, const char* path, const rt_session_opts* o, gen* g) {
  memset(g, 0, sizeof *g);
  rt_error e;
  if (rt_session_create(rt, path, o, &g->s, &e, 0) < 0) {
    printf("  FAIL a session for %s: [%s] %s\n", path, rt_error_code_name(e.code), e.msg);
    return -1;
  }
  char err[256];
  int64_t dims[4] = {1, DEC_KV_HEADS, 0, DEC_HEAD_DIM}; /* an empty cache before the prompt */
  for (int l = 0; l < 2 * DEC_LAYERS; l++)
    if (host_tensor_alloc(&g->past[l], ONNX_PB_FLOAT, dims, 4, err, sizeof err) < 0) return -1;
  static const int64_t prompt[DEC_PROMPT] = {3, 17, 42, 99, 5, 64, 101, 7};
  memcpy(g->tokens, prompt, sizeof prompt);
  return 0;
}

static void gen_close(ort_rt* rt, gen* g) {
  for (int l = 0; l < 2 * DEC_LAYERS; l++) host_tensor_free(&g->past[l]);
  host_tensor_free(&g->logits);
  rt_session_release(rt, &g->s);
}

int decoder_generate(ort_rt* rt, const char* dir, const char* file, const char* paging, decoder_run* run) {
  char path[4096], what[1400];
  memset(run, 0, sizeof *run);
  if (join_path(path, sizeof path, dir, file) < 0) return 1;
  printf("  -- %s%s%s\n", file, paging ? ", paging=" : "", paging ? paging : "");
  rt_session_opts o, plain;
  ep_options(rt, &o);
  add_ep_option(&o, "tf32", "0");
  if (paging) add_ep_option(&o, "paging", paging);
  o.record_assignment = 1; /* CPU fallback stays enabled: CudaEp need not claim every op */
  memset(&plain, 0, sizeof plain);
  static gen test, ref;
  int f = 0;
  if (gen_open(rt, path, &o, &test) < 0) return 1;
  if (gen_open(rt, path, &plain, &ref) < 0) {
    gen_close(rt, &test);
    return 1;
  }
  size_t en = 0, es = 0, on = 0;
  char* mine = run->ep_ops;
  char* other = run->other_ops;
  if (rt->ep_mode && rt_print_assignment(rt, &test.s, 1, &en, &es, &on, mine, sizeof run->ep_ops, other,
                                         sizeof run->other_ops) == 0) {
    run->assigned = 1;
    textf(what, sizeof what, "CudaEp runs %zu of the decoder's %zu nodes in %zu partition(s); ORT's CPU EP runs [%s]", en,
          en + on, es, other);
    f += ok(en > 0, what);
  }
  int pos = 0, matched = 0, same_tokens = 1;
  double worst = 0;
  char why[2048] = "";
  for (int s = 0; s <= DEC_STEPS && !why[0]; s++) {
    int from = s == 0 ? 0 : DEC_PROMPT + s - 1, to = s == 0 ? DEC_PROMPT : DEC_PROMPT + s;
    int64_t a = step(rt, &test, from, to, why, sizeof why);
    if (a < 0) break;
    int64_t b = step(rt, &ref, from, to, why, sizeof why);
    if (b < 0) break;
    char d[1024];
    if (s == 0) {
      char err[256];
      if (host_tensor_alloc(&run->cpu_prefill_logits, ref.logits.data_type, ref.logits.dims, ref.logits.ndims, err,
                            sizeof err) == 0)
        memcpy(run->cpu_prefill_logits.data, ref.logits.data, ref.logits.count * ref.logits.elem_size);
    }
    if (compare_tensors(&test.logits, &ref.logits, DEC_RTOL, DEC_ATOL, d, sizeof d) < 0) {
      textf(why, sizeof why, "step %d: logits differ from the CPU session's: %s", s, d);
      break;
    }
    for (size_t i = 0; i < test.logits.count; i++) {
      double gv = ((float*)test.logits.data)[i], wv = ((float*)ref.logits.data)[i];
      worst = fmax(worst, fabs(gv - wv) / (fabs(wv) + 1e-3));
    }
    matched++;
    if (s < DEC_STEPS) {
      test.tokens[DEC_PROMPT + s] = a;
      ref.tokens[DEC_PROMPT + s] = b;
      same_tokens &= a == b;
    }
    pos = to;
  }
  textf(what, sizeof what, "prefill of %d tokens and %d decode steps: %d of %d steps' logits match the CPU session "
        "(worst rel err %.2e)%s%s", DEC_PROMPT, DEC_STEPS, matched, DEC_STEPS + 1, worst, why[0] ? ": " : "", why);
  f += ok(matched == DEC_STEPS + 1, what);
  char toks[512] = "";
  for (int i = 0; i < DEC_STEPS; i++) textf(toks + strlen(toks), sizeof toks - strlen(toks), "%s%lld", i ? " " : "",
                                              (long long)test.tokens[DEC_PROMPT + i]);
  textf(what, sizeof what, "the %d greedy tokens are the CPU session's: [%s]", DEC_STEPS, toks);
  f += ok(same_tokens && matched == DEC_STEPS + 1 && pos == DEC_PROMPT + DEC_STEPS, what);
  /* The cache grew by one position per step. */
  textf(what, sizeof what, "the key/value cache holds %lld positions after the last step (want %d)",
        (long long)test.past[0].dims[2], DEC_PROMPT + DEC_STEPS);
  f += ok(test.past[0].dims[2] == DEC_PROMPT + DEC_STEPS, what);
  memcpy(run->cpu_tokens, ref.tokens + DEC_PROMPT, sizeof run->cpu_tokens);
  gen_close(rt, &test);
  gen_close(rt, &ref);
  return f;
}

int case_decoder(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  unsigned long mark = rt_log_mark();
  static decoder_run plain, contrib;
  int f = decoder_generate(rt, argv[1], "decoder.onnx", NULL, &plain);
  f += decoder_generate(rt, argv[1], "decoder_contrib.onnx", NULL, &contrib);
  host_tensor_free(&plain.cpu_prefill_logits);
  host_tensor_free(&contrib.cpu_prefill_logits);
  /* The two forms hold the same weights: ORT's CPU EP must generate the same tokens with both,
   * or one of the generated models is wrong. */
  f += ok(!memcmp(plain.cpu_tokens, contrib.cpu_tokens, sizeof plain.cpu_tokens),
          "the plain and the contrib-op forms generate the same tokens on ORT's CPU EP");
  char why[2048], what[2200];
  unsigned long n = rt_log_ep_errors_since(mark, why, sizeof why);
  if (n) textf(what, sizeof what, "ORT logged no error naming CudaEp (it logged %lu, the last: %s)", n, why);
  else textf(what, sizeof what, "ORT logged no error naming CudaEp");
  return f + ok(n == 0, what);
}
