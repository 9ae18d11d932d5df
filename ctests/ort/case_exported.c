/*
 * case_exported.c - `exported DIR`: a Llama decoder written by `transformers` and exported by
 * `torch.onnx.export`, not by us (bench/scripts/llama_decode.py --export-only on the GPU machine,
 * 2 layers of hidden size 64, vocabulary 256, seeded random weights), in float32 and in bfloat16
 * with the same weights: DIR/<float32|bfloat16>/<prefill|decode>/model.onnx, weights as external
 * data beside each. The graphs have static shapes (a key/value cache of EX_CACHE positions):
 *
 *   prefill  input_ids int64 [1, EX_PROMPT] -> logits float [1, EX_PROMPT, EX_VOCAB],
 *            present_key_<l>, present_value_<l> [1, EX_KV_HEADS, EX_CACHE, EX_HEAD_DIM]
 *   decode   input_ids int64 [1, 1], cache_position int64 [1], past_key_<l>, past_value_<l>
 *            -> logits float [1, 1, EX_VOCAB], present_key_<l>, present_value_<l>
 *
 * float32: a CudaEp session (CPU fallback disabled: CudaEp must claim every node the exporter
 * wrote) and a plain CPU session prefill the same prompt and decode EX_STEPS tokens greedily,
 * each feeding its own cache back; every step's logits agree within rtol 1e-3, atol 1e-4 and the
 * tokens are identical. bfloat16 (CudaEp only: ORT's CPU EP has no bfloat16 MatMul) decodes the
 * CPU session's tokens (teacher-forced), and its logits stay within EX_BF16_TOL of the float32
 * CPU session's, relative to the largest logit of the step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "models.h"

#define EX_VOCAB 256
#define EX_LAYERS 2
#define EX_KV_HEADS 2
#define EX_HEAD_DIM 16
#define EX_PROMPT 8
#define EX_STEPS 16
#define EX_CACHE 24
#define EX_RTOL 1e-3
#define EX_ATOL 1e-4
/* bfloat16 keeps 8 significant bits: every weight, activation and cache entry is rounded to a
 * relative 2^-9. Over these two layers the logits measured at most 0.0078 of the step's largest
 * float32 logit away from float32 (simulator, 17 runs); the bound leaves four times that. */
#define EX_BF16_TOL 0.03

/* A decoder in two sessions and its state. */
typedef struct ex_gen {
  rt_session prefill, decode;
  int open;
  host_tensor cache[2 * EX_LAYERS];
  host_tensor logits; /* the last run's */
} ex_gen;

static void ex_close(ort_rt* rt, ex_gen* g) {
  for (int l = 0; l < 2 * EX_LAYERS; l++) host_tensor_free(&g->cache[l]);
  host_tensor_free(&g->logits);
  if (g->open) {
    rt_session_release(rt, &g->prefill);
    rt_session_release(rt, &g->decode);
  }
  memset(g, 0, sizeof *g);
}

static int ex_open(ort_rt* rt, const char* dir, const char* dtype, const rt_session_opts* o, ex_gen* g) {
  memset(g, 0, sizeof *g);
  char sub[4096], path[4096];
  rt_error e;
  const char* graphs[2] = {"prefill", "decode"};
  rt_session* s[2] = {&g->prefill, &g->decode};
  for (int i = 0; i < 2; i++) {
    if (join_path(sub, sizeof sub, dir, dtype) < 0 || join_path(path, sizeof path, sub, graphs[i]) < 0 ||
        join_path(sub, sizeof sub, path, "model.onnx") < 0)
      return -1;
    if (rt_session_create(rt, sub, o, s[i], &e, 0) < 0) {
      printf("  FAIL a session for %s: [%s] %s\n", sub, rt_error_code_name(e.code), e.msg);
      if (i == 1) rt_session_release(rt, &g->prefill);
      return -1;
    }
  }
  g->open = 1;
  return 0;
}

/* ex_take keeps a run's outputs: logits first, then the cache in the model's order. */
static void ex_take(ex_gen* g, host_tensor* out) {
  host_tensor_free(&g->logits);
  g->logits = out[0];
  for (int l = 0; l < 2 * EX_LAYERS; l++) {
    host_tensor_free(&g->cache[l]);
    g->cache[l] = out[1 + l];
  }
}

/* ex_argmax is the greedy token of the last position of logits. */
static int64_t ex_argmax(const host_tensor* logits) {
  const float* last = (const float*)logits->data + logits->count - EX_VOCAB;
  int64_t best = 0;
  for (int64_t v = 1; v < EX_VOCAB; v++)
    if (last[v] > last[best]) best = v;
  return best;
}

static int ex_prefill(ort_rt* rt, ex_gen* g, const int64_t* prompt, char* why, size_t cap) {
  host_tensor in[1], out[RT_MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  int64_t dims[2] = {1, EX_PROMPT};
  char err[256];
  if (g->prefill.num_inputs != 1 || rt_input_index(&g->prefill, "input_ids") != 0) {
    textf(why, cap, "the prefill graph's only input is not input_ids");
    return -1;
  }
  if (host_tensor_alloc(&in[0], ONNX_PB_INT64, dims, 2, err, sizeof err) < 0) {
    textf(why, cap, "input_ids: %s", err);
    return -1;
  }
  memcpy(in[0].data, prompt, EX_PROMPT * sizeof *prompt);
  rt_error e;
  int rc = rt_run(rt, &g->prefill, in, 1, out, &e, 1);
  host_tensor_free(&in[0]);
  if (rc < 0) {
    textf(why, cap, "prefill Run: [%s] %s", rt_error_code_name(e.code), e.msg);
    return -1;
  }
  ex_take(g, out);
  return 0;
}

static int ex_step(ort_rt* rt, ex_gen* g, int64_t token, int64_t position, char* why, size_t cap) {
  host_tensor in[RT_MAX_IO], out[RT_MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  int ids = rt_input_index(&g->decode, "input_ids"), pos = rt_input_index(&g->decode, "cache_position");
  if (ids < 0 || pos < 0 || g->decode.num_inputs != 2 + 2 * EX_LAYERS) {
    textf(why, cap, "the decode graph's inputs are not input_ids, cache_position and the cache");
    return -1;
  }
  int64_t two[2] = {1, 1}, one[1] = {1};
  char err[256];
  int rc = -1;
  if (host_tensor_alloc(&in[ids], ONNX_PB_INT64, two, 2, err, sizeof err) < 0 ||
      host_tensor_alloc(&in[pos], ONNX_PB_INT64, one, 1, err, sizeof err) < 0) {
    textf(why, cap, "inputs: %s", err);
    goto out;
  }
  ((int64_t*)in[ids].data)[0] = token;
  ((int64_t*)in[pos].data)[0] = position;
  for (int l = 0; l < 2 * EX_LAYERS; l++) {
    char name[32];
    textf(name, sizeof name, "past_%s_%d", l % 2 ? "value" : "key", l / 2);
    int k = rt_input_index(&g->decode, name);
    if (k < 0) {
      textf(why, cap, "no input %s", name);
      goto out;
    }
    in[k] = g->cache[l]; /* borrowed: not freed below */
  }
  rt_error e;
  if (rt_run(rt, &g->decode, in, g->decode.num_inputs, out, &e, 1) < 0) {
    textf(why, cap, "decode Run at position %lld: [%s] %s", (long long)position, rt_error_code_name(e.code), e.msg);
    goto out;
  }
  ex_take(g, out);
  rc = 0;
out:
  host_tensor_free(&in[ids]);
  host_tensor_free(&in[pos]);
  return rc;
}

/* ex_rel_to_max: the largest |got - want| over want's largest |value|. */
static double ex_rel_to_max(const host_tensor* got, const host_tensor* want) {
  double worst = 0, top = 1e-30;
  for (size_t i = 0; i < want->count && i < got->count; i++) {
    double g = ((const float*)got->data)[i], w = ((const float*)want->data)[i];
    worst = fmax(worst, fabs(g - w));
    top = fmax(top, fabs(w));
  }
  return worst / top;
}

/* EX_BUDGET keeps some of the float32 export's weights resident and pages the rest: the
 * embedding table and the LM head (65,536 bytes each) and the norms' scales fit beside two slots
 * of the largest projection (32,768 bytes); the projections do not. */
#define EX_BUDGET "200000"

/* ex_paged decodes the CPU session's tokens again with paging=auto under EX_BUDGET: every run's
 * logits match the CPU session's as the resident ones did, and each run pages some layers but
 * not all the weights. */
static int ex_paged(ort_rt* rt, const char* dir, const rt_session_opts* base, const int64_t* prompt,
                    const int64_t* tokens, const host_tensor* want) {
  rt_session_opts o = *base;
  add_ep_option(&o, "paging", "auto");
  add_ep_option(&o, "weight_budget_bytes", EX_BUDGET);
  static ex_gen g;
  char why[2048] = "", what[2400];
  CudaEpOrtStats before, after;
  if (rt_ep_stats(rt, &before) < 0) return 1;
  if (ex_open(rt, dir, "float32", &o, &g) < 0) return 1;
  CudaEpOrtStats opened;
  if (rt_ep_stats(rt, &opened) < 0) return 1;
  int runs = 0;
  for (int s = 0; s <= EX_STEPS && !why[0]; s++) {
    int rc = s == 0 ? ex_prefill(rt, &g, prompt, why, sizeof why)
                    : ex_step(rt, &g, tokens[s - 1], EX_PROMPT + s - 1, why, sizeof why);
    if (rc < 0) break;
    char d[1024];
    if (compare_tensors(&g.logits, &want[s], EX_RTOL, EX_ATOL, d, sizeof d) < 0) {
      textf(why, sizeof why, "step %d: logits differ from the CPU session's: %s", s, d);
      break;
    }
    runs++;
  }
  ex_close(rt, &g);
  int f = 0;
  textf(what, sizeof what, "paging=auto, weight_budget_bytes=%s: %d of %d runs' logits match the CPU session%s%s",
        EX_BUDGET, runs, EX_STEPS + 1, why[0] ? ": " : "", why);
  f += ok(runs == EX_STEPS + 1, what);
  if (rt_ep_stats(rt, &after) == 0) {
    unsigned long long resident = opened.weight_file_bytes - before.weight_file_bytes;
    unsigned long long layers = after.paged_layers - opened.paged_layers;
    unsigned long long paged = (after.paged_bytes - opened.paged_bytes) / (unsigned long long)(runs ? runs : 1);
    textf(what, sizeof what, "paging=auto under the budget: %llu bytes loaded resident at session creation, %llu "
          "layers paged over %d runs, %llu bytes paged per run", resident, layers, runs, paged);
    f += ok(resident > 0 && layers > 0 && paged > 0, what);
  }
  return f;
}

int case_exported(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  unsigned long mark = rt_log_mark();
  static const int64_t prompt[EX_PROMPT] = {3, 17, 42, 99, 5, 64, 201, 7};
  rt_session_opts o, plain;
  ep_options(rt, &o);
  add_ep_option(&o, "tf32", "0");
  if (rt->ep_mode) o.disable_cpu_fallback = 1; /* CudaEp must claim every node of the export */
  o.log_info = 1;                               /* CudaEp says at INFO how many kernels it fused */
  rt_log_watch("fused partition");
  memset(&plain, 0, sizeof plain);
  static ex_gen test, ref, half;
  char why[2048] = "", what[2400];
  int f = 0;
  CudaEpOrtStats before, after;
  if (rt->ep_mode && rt_ep_stats(rt, &before) < 0) return 1;
  if (ex_open(rt, argv[1], "float32", &o, &test) < 0) return 1;
  if (ex_open(rt, argv[1], "float32", &plain, &ref) < 0) {
    ex_close(rt, &test);
    return 1;
  }
  if (rt->ep_mode) {
    /* The export's RMS norms, rotary embeddings, gated SiLUs and attentions run fused. */
    char said[1024];
    unsigned long hits = rt_log_found(said, sizeof said);
    long nodes = 0, kernels = 0;
    const char* at = strstr(said, ": ");
    if (at) sscanf(at, ": %ld nodes run as %ld kernels", &nodes, &kernels);
    int counted = rt_ep_stats(rt, &after) == 0;
    unsigned long long fused = counted ? after.fused_nodes - before.fused_nodes : 0;
    textf(what, sizeof what, "CudaEp fused the float32 graphs' chains: %llu nodes run inside fused kernels "
          "(%lu message(s), the last: %s)", fused, hits, said);
    f += ok(hits >= 2 && kernels > 0 && kernels < nodes && fused > 0, what);
  }
  rt_log_watch(NULL);
  printf("  -- float32, %s against ORT's CPU EP\n", rt->ep_mode ? "CudaEp alone" : "the CPU EP");
  int64_t tokens[EX_STEPS];
  int matched = 0, same = 1;
  double worst = 0;
  host_tensor ref_logits[EX_STEPS + 1];
  memset(ref_logits, 0, sizeof ref_logits);
  for (int s = 0; s <= EX_STEPS && !why[0]; s++) {
    int rc = s == 0 ? ex_prefill(rt, &test, prompt, why, sizeof why)
                    : ex_step(rt, &test, tokens[s - 1], EX_PROMPT + s - 1, why, sizeof why);
    if (rc < 0) break;
    rc = s == 0 ? ex_prefill(rt, &ref, prompt, why, sizeof why)
                : ex_step(rt, &ref, tokens[s - 1], EX_PROMPT + s - 1, why, sizeof why);
    if (rc < 0) break;
    char d[1024];
    if (compare_tensors(&test.logits, &ref.logits, EX_RTOL, EX_ATOL, d, sizeof d) < 0) {
      textf(why, sizeof why, "step %d: logits differ from the CPU session's: %s", s, d);
      break;
    }
    worst = fmax(worst, ex_rel_to_max(&test.logits, &ref.logits));
    /* Keep the CPU session's logits of each step for the bfloat16 run. */
    ref_logits[s] = ref.logits;
    ref.logits.data = NULL;
    ref.logits.count = 0;
    matched++;
    if (s < EX_STEPS) {
      int64_t a = ex_argmax(&test.logits), b = ex_argmax(&ref_logits[s]);
      same &= a == b;
      tokens[s] = b;
    }
  }
  textf(what, sizeof what, "prefill of %d tokens and %d decode steps: %d of %d runs' logits match the CPU session "
        "(worst |diff| %.2e of the largest logit)%s%s", EX_PROMPT, EX_STEPS, matched, EX_STEPS + 1, worst,
        why[0] ? ": " : "", why);
  f += ok(matched == EX_STEPS + 1, what);
  char toks[512] = "";
  for (int i = 0; i < EX_STEPS && i < matched; i++)
    textf(toks + strlen(toks), sizeof toks - strlen(toks), "%s%lld", i ? " " : "", (long long)tokens[i]);
  textf(what, sizeof what, "the %d greedy tokens are the CPU session's: [%s]", EX_STEPS, toks);
  f += ok(same && matched == EX_STEPS + 1, what);
  textf(what, sizeof what, "the cache is the static one: [1, %d, %lld, %d] (want %d positions)", EX_KV_HEADS,
        (long long)test.cache[0].dims[2], EX_HEAD_DIM, EX_CACHE);
  f += ok(test.cache[0].ndims == 4 && test.cache[0].dims[2] == EX_CACHE, what);
  ex_close(rt, &test);
  ex_close(rt, &ref);
  if (rt->ep_mode && matched == EX_STEPS + 1) f += ex_paged(rt, argv[1], &o, prompt, tokens, ref_logits);

  if (!rt->ep_mode) {
    printf("  -- bfloat16: not run without CudaEp (ORT's CPU EP has no bfloat16 MatMul)\n");
  } else if (matched == EX_STEPS + 1) {
    printf("  -- bfloat16, CudaEp alone, teacher-forced with the float32 CPU session's tokens\n");
    why[0] = 0;
    if (ex_open(rt, argv[1], "bfloat16", &o, &half) < 0) {
      f++;
    } else {
      double worst16 = 0;
      int runs = 0;
      for (int s = 0; s <= EX_STEPS; s++) {
        int rc = s == 0 ? ex_prefill(rt, &half, prompt, why, sizeof why)
                        : ex_step(rt, &half, tokens[s - 1], EX_PROMPT + s - 1, why, sizeof why);
        if (rc < 0) break;
        worst16 = fmax(worst16, ex_rel_to_max(&half.logits, &ref_logits[s]));
        runs++;
      }
      textf(what, sizeof what, "%d of %d bfloat16 runs: logits within %.2f of the step's largest float32 logit "
            "(worst %.4f)%s%s", runs, EX_STEPS + 1, EX_BF16_TOL, worst16, why[0] ? ": " : "", why);
      f += ok(runs == EX_STEPS + 1 && worst16 <= EX_BF16_TOL, what);
      ex_close(rt, &half);
    }
  }
  for (int s = 0; s <= EX_STEPS; s++) host_tensor_free(&ref_logits[s]);
  unsigned long n = rt_log_ep_errors_since(mark, why, sizeof why);
  if (n) textf(what, sizeof what, "ORT logged no error naming CudaEp (it logged %lu, the last: %s)", n, why);
  else textf(what, sizeof what, "ORT logged no error naming CudaEp");
  return f + ok(n == 0, what);
}
