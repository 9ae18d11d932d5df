/*
 * case_nbits.c - `nbits MODELDIR`: int4 weight-only models (com.microsoft.MatMulNBits, the form
 * ORT's quantizer, its model builder and Olive write LLMs in), from MODELDIR/nbits/ (gen_nbits.py)
 * and MODELDIR/decoder_int4_{sym,asym}.onnx (gen_decoder.py).
 *
 * Every single-node model runs in a plain ORT CPU session (the reference) and in a session with
 * CudaEp appended, CPU fallback allowed, on each of its data sets (A with M = 1, 3 and 17 rows,
 * of rank 2 or 3). The case reports which EP ran each MatMulNBits node (the session's node
 * assignment; below API 24 a second session with CPU fallback disabled tells) and checks:
 *
 *   claim      the valid models (bits 4, float32 and float16 A, block sizes 16 to 256, K a multiple
 *              of the block or not, zero points absent, packed or unpacked, flattened scales, bias,
 *              accuracy_level 0, 1 and 4, and bfloat16 A) must be claimed by CudaEp. Which ones is
 *              CUDAEP_ORT_NBITS_CLAIMS: unset or "all" (every valid model: the expectation once the
 *              MatMulNBits kernels exist), "none" (CudaEp may leave any of them to ORT), or a
 *              comma-separated list of the model names that must be claimed (the others may go
 *              either way; a name that is no model of the case fails the case), or "pending"
 *              (the kernels exist but their PTX is not generated yet: CudaEp must decline every
 *              valid model, and its reason must name the missing ptx/matmul_nbits.ptx, so the
 *              case fails, and says to set "all", the day the PTX is committed). 8-bit weights
 *              may go either way ("claim 4; 8 if cheap").
 *   refuse     bits 2, weight_prepacked=1 and a g_idx input: ORT's CPU EP runs them, CudaEp must
 *              decline the node, and its INFO line ("CudaEp leaves node ... to another EP: why")
 *              must name the reason (bits, weight_prepacked, g_idx; the op's own name does not
 *              count). With CUDAEP_ORT_NBITS_CLAIMS=none the reason is printed, not required.
 *   numbers    CudaEp's output against the CPU session's, and the CPU session's against the exact
 *              result gen_nbits.py computed in double precision (which proves the models mean
 *              what the generator says, so a shared misreading cannot pass), per element within
 *              nb_allowed's bound.
 *
 * bfloat16 A: ORT's CPU EP registers MatMulNBits for float and float16 only, so those models run
 * on CudaEp alone (a session that cannot place the node fails) against the CPU session of their
 * float32 twin, which holds the same bfloat16-exact values. With --cpu-only the twin is checked
 * against the exact result and the bfloat16 model is skipped.
 *
 * What ORT itself refuses is not in the set, so nothing here tests CudaEp against it: bits 3 (the
 * CPU kernel's constructor enforces 2, 4 or 8, in 1.24.3 and 1.30.0), block_size 8 (1.30.0's
 * constructor enforces 16 to 256; 1.24.3 opens the session and fails every Run: "a power of 2, and
 * >= 16") and scales of another type than A (the schema binds A and scales to T1: the model fails
 * ORT's type inference). ORT 1.24.3's schema has no weight_prepacked attribute ("Unrecognized
 * attribute"), so that model is skipped there.
 *
 * The int4 decoders: decoder_generate (case_decoder.c) on decoder_int4_sym.onnx (symmetric, block
 * 32) and decoder_int4_asym.onnx (packed zero points): logits and greedy tokens against the CPU
 * session; their 15 MatMulNBits nodes must be on CudaEp under the same CUDAEP_ORT_NBITS_CLAIMS
 * (names decoder_int4_sym, decoder_int4_asym); and on ORT's CPU EP the int4 forms' prefill logits
 * must stay within quantisation error of the float contrib form's (a check of the generator).
 * Where CudaEp must claim them, each runs again with paging=on: the same logits and tokens, and
 * CudaEp's counters show the packed int4 bytes streamed from the weight file (run_paged_decoder).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cases.h"
#include "models.h"

#define NB_CLAIMS_ENV "CUDAEP_ORT_NBITS_CLAIMS"
#define NB_NODE "weight_only_matmul" /* gen_nbits.py's node name */
#define NB_MAX_SETS 8

typedef enum { NB_CLAIM, NB_DECLINE, NB_EITHER } nb_expect;

enum {
  NB_LEVEL4 = 1,        /* accuracy_level 4: A may be quantised to int8 per block */
  NB_NO_CPU_KERNEL = 2, /* bfloat16: the reference is the CPU session of <name>_f32 */
};

typedef struct nb_model {
  const char* name;
  nb_expect expect;
  const char* reason;       /* NB_DECLINE: what CudaEp's INFO line must name */
  int flags;
  const char* ort_may_refuse; /* an ORT build may refuse the model itself, saying this (an
                                 attribute its schema does not have yet): then it is skipped */
} nb_model;

/* The models of gen_nbits.py (VALID, then REFUSED) and what CudaEp must do with each. */
static const nb_model nb_models[] = {
    {"f32_b16_k64_sym", NB_CLAIM, NULL, 0, NULL},
    {"f32_b16_k40_zp_pad", NB_CLAIM, NULL, 0, NULL},
    {"f32_b32_k256_zp_bias", NB_CLAIM, NULL, 0, NULL},
    {"f32_b32_k200_zp_pad", NB_CLAIM, NULL, 0, NULL},
    {"f32_b64_k320_uzp_bias", NB_CLAIM, NULL, 0, NULL},
    {"f32_b128_k384_sym_s1d", NB_CLAIM, NULL, 0, NULL},
    {"f32_b128_k100_zp1d_pad", NB_CLAIM, NULL, 0, NULL},
    {"f32_b256_k512_sym_bias", NB_CLAIM, NULL, 0, NULL},
    {"f32_b256_k300_zp_pad", NB_CLAIM, NULL, 0, NULL},
    {"f32_b32_k96_rank3_bias", NB_CLAIM, NULL, 0, NULL},
    {"f32_b64_k160_rank3_uzp_pad", NB_CLAIM, NULL, 0, NULL},
    {"f32_b32_k128_level1", NB_CLAIM, NULL, 0, NULL},
    {"f32_b32_k128_level4", NB_CLAIM, NULL, NB_LEVEL4, NULL},
    {"f16_b16_k72_zp_bias_pad", NB_CLAIM, NULL, 0, NULL},
    {"f16_b32_k128_sym", NB_CLAIM, NULL, 0, NULL},
    {"f16_b64_k256_uzp", NB_CLAIM, NULL, 0, NULL},
    {"f16_b128_k160_zp1d_s1d_pad", NB_CLAIM, NULL, 0, NULL},
    {"f16_b256_k256_sym_bias", NB_CLAIM, NULL, 0, NULL},
    {"f16_b32_k64_rank3_zp", NB_CLAIM, NULL, 0, NULL},
    {"bf16_b32_k128_zp_bias", NB_CLAIM, NULL, NB_NO_CPU_KERNEL, NULL},
    {"bf16_b64_k200_sym_pad", NB_CLAIM, NULL, NB_NO_CPU_KERNEL, NULL},
    {"f32_b32_k96_bits8_zp", NB_EITHER, NULL, 0, NULL},
    {"refuse_bits2", NB_DECLINE, "bits", 0, NULL},
    {"refuse_weight_prepacked", NB_DECLINE, "weight_prepacked", 0, "Unrecognized attribute: weight_prepacked"},
    {"refuse_g_idx", NB_DECLINE, "g_idx", 0, NULL},
};
#define NB_NUM_MODELS (sizeof nb_models / sizeof nb_models[0])

/* The int4 decoders, and how many MatMulNBits nodes each has (7 projections a layer, 2 layers,
 * the LM head). */
static const char* const nb_decoders[] = {"decoder_int4_sym", "decoder_int4_asym"};
#define NB_DECODER_NODES 15

/* --- which models CudaEp must claim ------------------------------------------------------------ */

/* nb_policy: CUDAEP_ORT_NBITS_CLAIMS ("" means unset). */
static const char* nb_policy(void) {
  const char* p = getenv(NB_CLAIMS_ENV);
  return p ? p : "";
}

/* nb_listed: whether the comma-separated list names name exactly. */
static int nb_listed(const char* list, const char* name) {
  size_t n = strlen(name);
  for (const char* p = list; *p;) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && !strncmp(p, name, n)) return 1;
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

/* nb_claim_required: whether CudaEp must claim model `name` (a valid model or an int4 decoder). */
static int nb_claim_required(const char* name) {
  const char* p = nb_policy();
  if (!*p || !strcmp(p, "all")) return 1;
  if (!strcmp(p, "none") || !strcmp(p, "pending")) return 0;
  return nb_listed(p, name);
}

/* nb_pending: whether the policy says the kernels' PTX is pending (see the file's comment). */
static int nb_pending(void) { return !strcmp(nb_policy(), "pending"); }

/* NB_PENDING_REASON is what CudaEp's decline says while the PTX is pending (ep/kernels). */
#define NB_PENDING_REASON "has no ptx/matmul_nbits.ptx"

/* check_policy: every name CUDAEP_ORT_NBITS_CLAIMS lists is a model CudaEp is to claim (a typo
 * would weaken the case silently). */
static int check_policy(void) {
  const char* p = nb_policy();
  printf("  %s=%s: %s\n", NB_CLAIMS_ENV, *p ? p : "(unset)",
         !*p || !strcmp(p, "all") ? "CudaEp must claim every valid model"
         : !strcmp(p, "none")     ? "CudaEp may leave any valid model to ORT's CPU EP"
         : !strcmp(p, "pending")  ? "the kernels' PTX is pending: CudaEp must decline every valid model, naming it"
                                  : "CudaEp must claim the models listed");
  if (!*p || !strcmp(p, "all") || !strcmp(p, "none") || !strcmp(p, "pending")) return 0;
  int f = 0;
  char word[256];
  for (const char* s = p; *s;) {
    const char* end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    textf(word, sizeof word, "%.*s", (int)len, s);
    int known = 0;
    for (size_t i = 0; i < NB_NUM_MODELS; i++)
      known |= nb_models[i].expect == NB_CLAIM && !strcmp(nb_models[i].name, word);
    for (size_t i = 0; i < sizeof nb_decoders / sizeof nb_decoders[0]; i++) known |= !strcmp(nb_decoders[i], word);
    if (!known) {
      char what[512];
      textf(what, sizeof what, "%s names \"%s\", which is no valid model of the case", NB_CLAIMS_ENV, word);
      f += ok(0, what);
    }
    if (!end) break;
    s = end + 1;
  }
  return f;
}

/* --- numbers ----------------------------------------------------------------------------------- */

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

static double bf16_to_double(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* elem reads element i of a float tensor (float, float16, bfloat16 or double) as a double. */
static double elem(const host_tensor* t, size_t i) {
  switch (t->data_type) {
    case ONNX_PB_FLOAT: return ((const float*)t->data)[i];
    case ONNX_PB_DOUBLE: return ((const double*)t->data)[i];
    case ONNX_PB_FLOAT16: return half_to_double(((const uint16_t*)t->data)[i]);
    case ONNX_PB_BFLOAT16: return bf16_to_double(((const uint16_t*)t->data)[i]);
    default: return NAN;
  }
}

/* nb_allowed bounds |y - y'| for two computations of one element of Y = A . dequant(B)^T + bias,
 * y' of element type `type` (the less precise of the two), given
 *   mag    sum_k |a_k| (|q_k| + |zero_point|) |scale| + |bias| (magnitude.pb), which bounds
 *          sum_k |a_k w_k| however w = (q - z) s is formed (as (q - z) * s or q * s - z * s),
 *   int8b  what quantising A to int8 per block can move y by (int8_bound.pb; 0 unless the model
 *          has accuracy_level 4, which allows it, as ORT's CPU EP does on x86),
 *   sides  2 when both are float32 computations (CudaEp against ORT's CPU EP), 1 against the
 *          exact result.
 * The parts, each a worst case (no statistics, so the bound never flakes):
 *   float32 accumulation  (K + 2) 2^-24 mag per side: K - 1 additions in any order, the product
 *                         a_k w_k and forming w_k, each within 2^-24 relative (the classic
 *                         gamma_n bound of a dot product)
 *   weights in A's type   2^-11 mag (float16) or 2^-8 mag (bfloat16): a kernel may round the
 *                         dequantised weight to A's type to feed tensor cores (ORT's CPU EP does
 *                         not: it dequantises to float32)
 *   the output's rounding one unit in the last place of |y| in Y's type (2^-10 |y| for float16,
 *                         2^-7 for bfloat16, plus the smallest subnormal): two roundings of values
 *                         that differ by the above may land one unit apart
 *   int8 A                1.25 int8b per side (the margin covers the rounding of the int8 scale)
 * What is not allowed: accumulating in float16 or bfloat16, downcasting A when accuracy_level is
 * below 4 (so the float32 sessions run with tf32=0), any wrong code, scale, zero point or bias. */
static double nb_allowed(int32_t type, double y, double mag, double int8b, int64_t K, int sides) {
  double acc = sides * (double)(K + 2) * ldexp(1.0, -24) * mag;
  double weights = 0, out = 0;
  if (type == ONNX_PB_FLOAT16) {
    weights = ldexp(1.0, -11) * mag;
    out = ldexp(1.0, -10) * fabs(y) + ldexp(1.0, -24);
  } else if (type == ONNX_PB_BFLOAT16) {
    weights = ldexp(1.0, -8) * mag;
    out = ldexp(1.0, -7) * fabs(y) + ldexp(1.0, -133);
  }
  return acc + weights + out + sides * 1.25 * int8b;
}

/* nb_check compares got with want element by element within nb_allowed (want's value as y; as
 * the type, `type`, or when 0 the less precise of the two). *worst gets the largest
 * |got - want| / allowed seen (a pass keeps it <= 1). Returns 0, or -1 with the first bad element
 * in why. */
static int nb_check(const host_tensor* got, const host_tensor* want, const host_tensor* mag, const host_tensor* int8b,
                    int64_t K, int sides, int32_t type, double* worst, char* why, size_t cap) {
  if (got->count != want->count || got->count != mag->count || got->ndims != want->ndims ||
      memcmp(got->dims, want->dims, got->ndims * sizeof got->dims[0])) {
    textf(why, cap, "%zu elements of rank %zu, want %zu of rank %zu", got->count, got->ndims, want->count, want->ndims);
    return -1;
  }
  if (!type) type = got->data_type;
  if (want->data_type == ONNX_PB_FLOAT16 || want->data_type == ONNX_PB_BFLOAT16) type = want->data_type;
  size_t bad = 0;
  for (size_t i = 0; i < got->count; i++) {
    double g = elem(got, i), w = elem(want, i), m = elem(mag, i), b = int8b ? elem(int8b, i) : 0;
    double allowed = nb_allowed(type, w, m, b, K, sides), d = fabs(g - w);
    if (!(d <= allowed)) { /* NaN too */
      if (!bad) textf(why, cap, "element %zu: %.9g, want %.9g (|diff| %.3g > allowed %.3g, magnitude %.3g)", i, g, w, d,
                      allowed, m);
      bad++;
    }
    if (allowed > 0 && d / allowed > *worst) *worst = d / allowed;
    if (isnan(d)) *worst = INFINITY;
  }
  if (bad) {
    size_t len = strlen(why);
    textf(why + len, cap - len, "; %zu of %zu elements out of bounds", bad, got->count);
    return -1;
  }
  return 0;
}

/* --- one model --------------------------------------------------------------------------------- */

/* read_set reads data set i of model folder mdir: the input and the expected values (int8b and
 * swapped are left zeroed when the set has none). Returns 1 when there is no such set, -1 on an
 * error. */
static int read_set(const char* mdir, int i, host_tensor* a, host_tensor* exact, host_tensor* mag, host_tensor* int8b,
                    host_tensor* swapped, char* err, size_t cap) {
  char dir[4096], path[4200];
  textf(dir, sizeof dir, "%s/test_data_set_%d", mdir, i);
  struct stat st;
  if (stat(dir, &st) != 0) return 1;
  memset(int8b, 0, sizeof *int8b);
  memset(swapped, 0, sizeof *swapped);
  textf(path, sizeof path, "%s/swapped.pb", dir);
  if (stat(path, &st) == 0 && tensor_proto_read_file(path, swapped, err, cap) < 0) return -1;
  textf(path, sizeof path, "%s/input_0.pb", dir);
  if (tensor_proto_read_file(path, a, err, cap) < 0) return -1;
  textf(path, sizeof path, "%s/exact.pb", dir);
  if (tensor_proto_read_file(path, exact, err, cap) < 0) return -1;
  textf(path, sizeof path, "%s/magnitude.pb", dir);
  if (tensor_proto_read_file(path, mag, err, cap) < 0) return -1;
  textf(path, sizeof path, "%s/int8_bound.pb", dir);
  if (stat(path, &st) == 0 && tensor_proto_read_file(path, int8b, err, cap) < 0) return -1;
  return 0;
}

static int word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* reason_names: whether CudaEp's decline line names `word` in its reason (after "to another EP: "),
 * as a word of its own ("bits=2", "'g_idx'"; not the "Bits" of MatMulNBits). */
static int reason_names(const char* line, const char* word) {
  const char* why = strstr(line, "to another EP: ");
  const char* text = why ? why + strlen("to another EP: ") : line;
  size_t n = strlen(word);
  for (const char* p = text; (p = strcasestr(p, word)) != NULL; p++)
    if ((p == text || !word_char(p[-1])) && !word_char(p[n])) return 1;
  return 0;
}

/* reason_of copies the reason of CudaEp's decline line (what follows "to another EP: ", less the
 * "ep: get kernel: kernels: unsupported: node '...': " every kernel refusal starts with), at most
 * 300 bytes, into buf. */
static const char* reason_of(const char* line, char* buf, size_t cap) {
  const char* why = strstr(line, "to another EP: ");
  const char* s = why ? why + strlen("to another EP: ") : line;
  const char* node = strstr(s, "node '" NB_NODE "': ");
  if (node) s = node + strlen("node '" NB_NODE "': ");
  textf(buf, cap, "%.300s%s", s, strlen(s) > 300 ? "..." : "");
  return buf;
}

/* who_runs finds which EP got the MatMulNBits node of a session under test: 1 CudaEp, 0 another
 * EP, -1 unknown (an error, printed). Below API 24 it opens the model again with CPU fallback
 * disabled: that session opens only when CudaEp takes every node. */
static int who_runs(ort_rt* rt, rt_session* s, const char* path, char* where, size_t cap) {
  size_t en = 0, es = 0, on = 0;
  char mine[512], other[512];
  int rc = rt_print_assignment(rt, s, 1, &en, &es, &on, mine, sizeof mine, other, sizeof other);
  if (rc == 0) {
    int on_ep = strstr(mine, "MatMulNBits") != NULL, elsewhere = strstr(other, "MatMulNBits") != NULL;
    textf(where, cap, "%s", on_ep ? RT_EP_NAME : elsewhere ? "ORT's CPU EP" : "no EP");
    return on_ep && !elsewhere ? 1 : elsewhere && !on_ep ? 0 : -1;
  }
  if (rc < 0) return -1;
  rt_session_opts o;
  ep_options(rt, &o);
  add_ep_option(&o, "tf32", "0");
  o.disable_cpu_fallback = 1;
  rt_session probe;
  rt_error e;
  if (rt_session_create(rt, path, &o, &probe, &e, 1) == 0) {
    rt_session_release(rt, &probe);
    textf(where, cap, "%s (a session without CPU fallback opens)", RT_EP_NAME);
    return 1;
  }
  textf(where, cap, "ORT's CPU EP (a session without CPU fallback fails: %.200s)", e.msg);
  return 0;
}

/* open_model opens root/name/model.onnx into s with o; the error goes to e (quiet). */
static int open_model(ort_rt* rt, const char* root, const char* name, const rt_session_opts* o, rt_session* s,
                      rt_error* e, char* path, size_t cap) {
  textf(path, cap, "%s/%s/model.onnx", root, name);
  return rt_session_create(rt, path, o, s, e, 1);
}

static int run_model(ort_rt* rt, const char* root, const nb_model* m) {
  char what[3000], path[4096], ref_path[4096], ref_name[256];
  int f = 0;
  int cpu_kernel = !(m->flags & NB_NO_CPU_KERNEL);
  textf(ref_name, sizeof ref_name, cpu_kernel ? "%s" : "%s_f32", m->name);
  printf("  -- %s\n", m->name);

  rt_session_opts plain;
  memset(&plain, 0, sizeof plain);
  rt_session ref, test;
  memset(&test, 0, sizeof test);
  rt_error e;
  if (open_model(rt, root, ref_name, &plain, &ref, &e, ref_path, sizeof ref_path) < 0) {
    if (m->ort_may_refuse && strstr(e.msg, m->ort_may_refuse)) {
      printf("  skip %s: ORT %s refuses the model itself (\"%s\"), so there is nothing to test\n", m->name, rt->version,
             m->ort_may_refuse);
      return 0;
    }
    textf(what, sizeof what, "%s: a plain CPU session opens: [%s] %s", ref_name, rt_error_code_name(e.code), e.msg);
    return ok(0, what);
  }
  int have_test = 0, claimed = -1;
  char where[512] = "", said[2048] = "";
  unsigned long declines = 0;
  if (cpu_kernel || rt->ep_mode) {
    rt_session_opts o;
    ep_options(rt, &o);
    add_ep_option(&o, "tf32", "0");
    o.record_assignment = 1; /* CPU fallback stays enabled: CudaEp may decline */
    o.log_info = rt->ep_mode;
    rt_log_watch("leaves node \"" NB_NODE "\"");
    int rc = open_model(rt, root, m->name, &o, &test, &e, path, sizeof path);
    declines = rt_log_found(said, sizeof said);
    rt_log_watch(NULL);
    if (rc == 0) {
      have_test = 1;
      if (rt->ep_mode) claimed = who_runs(rt, &test, path, where, sizeof where);
    } else if (rt->ep_mode && !cpu_kernel) {
      claimed = 0;
      textf(where, sizeof where, "no EP (ORT's CPU EP has no bfloat16 MatMulNBits, and the session fails: %.200s...)",
            e.msg);
    } else {
      textf(what, sizeof what, "%s: the session under test opens: [%s] %s", m->name, rt_error_code_name(e.code), e.msg);
      f += ok(0, what);
    }
  } else {
    printf("  skip %s under test (cpu-only: ORT's CPU EP has no bfloat16 MatMulNBits); its float32 twin %s is "
           "checked against the exact result\n",
           m->name, ref_name);
  }

  if (rt->ep_mode) {
    const char* expected = m->expect == NB_DECLINE ? "decline" : m->expect == NB_EITHER ? "either" : "claim";
    int required = m->expect == NB_CLAIM && nb_claim_required(m->name);
    if (m->expect == NB_CLAIM && !required) expected = "claim (not required: " NB_CLAIMS_ENV ")";
    if (claimed < 0 && !where[0]) textf(where, sizeof where, "unknown");
    char brief[400];
    textf(what, sizeof what, "%s: MatMulNBits ran on %s (expected: %s)%s%s", m->name, where, expected,
          claimed == 0 && declines ? "; CudaEp's reason: " : "",
          claimed == 0 && declines ? reason_of(said, brief, sizeof brief) : "");
    if (m->expect == NB_DECLINE) {
      f += ok(claimed == 0, what);
      if (claimed == 0) {
        int named = declines > 0 && reason_names(said, m->reason);
        textf(what, sizeof what, "%s: CudaEp's INFO line names the reason (%s)%s", m->name, m->reason,
              declines ? "" : ": CudaEp logged no decline of the node");
        if (!strcmp(nb_policy(), "none") && !named)
          printf("  note %s (not required: %s=none)\n", what, NB_CLAIMS_ENV);
        else
          f += ok(named, what);
      }
    } else if (m->expect == NB_CLAIM && nb_pending()) {
      int named = claimed == 0 && declines > 0 && strstr(said, NB_PENDING_REASON) != NULL;
      textf(what, sizeof what, "%s: MatMulNBits ran on %s, CudaEp declining it because its PTX is pending (\"%s\")",
            m->name, where, NB_PENDING_REASON);
      f += ok(named, what);
      if (claimed == 1)
        printf("       (CudaEp claims %s: the MatMulNBits PTX is committed; set %s=all in ctests/ort/CMakeLists.txt)\n",
               m->name, NB_CLAIMS_ENV);
    } else if (required) {
      f += ok(claimed == 1, what);
      if (claimed != 1)
        printf("       (CudaEp must claim %s: its MatMulNBits kernels are meant to run it; set %s to a list of the "
               "models it claims, or to none, while they do not exist)\n",
               m->name, NB_CLAIMS_ENV);
    } else {
      printf("  info %s\n", what);
    }
  }

  /* The numbers, on every data set. */
  char mdir[4096], ref_dir[4096];
  textf(mdir, sizeof mdir, "%s/%s", root, m->name);
  textf(ref_dir, sizeof ref_dir, "%s/%s", root, ref_name);
  int sets = 0, bad_ref = 0, bad_test = 0, controls = 0;
  double worst_ref = 0, worst_test = 0;
  size_t told_apart = 0, control_elems = 0;
  char why_ref[1024] = "", why_test[1024] = "", shapes[256] = "";
  for (int i = 0; i < NB_MAX_SETS; i++) {
    host_tensor a, exact, mag, int8b, swapped, ra, rexact, rmag, rint8b, rswapped;
    char err[512];
    int rc = read_set(mdir, i, &a, &exact, &mag, &int8b, &swapped, err, sizeof err);
    if (rc == 1) break;
    if (rc < 0 || read_set(ref_dir, i, &ra, &rexact, &rmag, &rint8b, &rswapped, err, sizeof err) != 0) {
      textf(what, sizeof what, "%s: data set %d reads: %s", m->name, i, err);
      f += ok(0, what);
      break;
    }
    sets++;
    int64_t K = a.dims[a.ndims - 1];
    size_t len = strlen(shapes);
    textf(shapes + len, sizeof shapes - len, "%s[", len ? " " : "");
    for (size_t d = 0; d < a.ndims; d++) {
      len = strlen(shapes);
      textf(shapes + len, sizeof shapes - len, "%s%lld", d ? "," : "", (long long)a.dims[d]);
    }
    len = strlen(shapes);
    textf(shapes + len, sizeof shapes - len, "]");
    host_tensor want, got;
    if (rt_run(rt, &ref, &ra, 1, &want, &e, 1) < 0) {
      if (!bad_ref++) textf(why_ref, sizeof why_ref, "set %d: Run: [%s] %s", i, rt_error_code_name(e.code), e.msg);
    } else {
      char why[1024];
      if (nb_check(&want, &rexact, &rmag, rint8b.data ? &rint8b : NULL, K, 1, 0, &worst_ref, why, sizeof why) < 0 &&
          !bad_ref++)
        textf(why_ref, sizeof why_ref, "set %d: %s", i, why);
      if (rswapped.data) { /* the negative control: how many elements the bound tells apart */
        double ignored = 0;
        controls++;
        control_elems += want.count;
        for (size_t k = 0; k < want.count; k++) {
          host_tensor one_got = want, one_want = rswapped, one_mag = rmag, one_b = rint8b;
          /* element k alone, through the same check */
          one_got.data = (char*)want.data + k * want.elem_size;
          one_want.data = (char*)rswapped.data + k * rswapped.elem_size;
          one_mag.data = (char*)rmag.data + k * rmag.elem_size;
          one_b.data = rint8b.data ? (char*)rint8b.data + k * rint8b.elem_size : NULL;
          one_got.count = one_want.count = one_mag.count = one_b.count = 1;
          one_got.ndims = one_want.ndims = 0;
          told_apart += nb_check(&one_got, &one_want, &one_mag, one_b.data ? &one_b : NULL, K, 2, a.data_type,
                                 &ignored, why, sizeof why) < 0;
        }
      }
      if (have_test) {
        if (rt_run(rt, &test, &a, 1, &got, &e, 1) < 0) {
          if (!bad_test++)
            textf(why_test, sizeof why_test, "set %d: Run: [%s] %s", i, rt_error_code_name(e.code), e.msg);
        } else {
          /* Against the CPU session; for bfloat16, against its float32 twin's (CudaEp's type
           * as the type of the bound). */
          if (nb_check(&got, &want, &mag, int8b.data ? &int8b : NULL, K, 2, 0, &worst_test, why, sizeof why) < 0 &&
              !bad_test++)
            textf(why_test, sizeof why_test, "set %d: %s", i, why);
          host_tensor_free(&got);
        }
      }
      host_tensor_free(&want);
    }
    host_tensor_free(&a);
    host_tensor_free(&exact);
    host_tensor_free(&mag);
    host_tensor_free(&int8b);
    host_tensor_free(&swapped);
    host_tensor_free(&ra);
    host_tensor_free(&rexact);
    host_tensor_free(&rmag);
    host_tensor_free(&rint8b);
    host_tensor_free(&rswapped);
  }
  textf(what, sizeof what, "%s: ORT's CPU EP%s computes the exact result on %d data sets (A %s; worst %.2g of the "
        "bound)%s%s", m->name, cpu_kernel ? "" : " (the float32 twin)", sets, shapes, worst_ref,
        bad_ref ? ": " : "", why_ref);
  f += ok(sets > 0 && !bad_ref, what);
  if (controls) {
    /* A kernel reading the high nibble first would be this far off: the bound of CudaEp's check
     * (two sides, in the model's type) must notice it in most elements, or it means little. */
    textf(what, sizeof what, "%s: negative control: the result of the other nibble order is out of the bound in %zu "
          "of %zu elements (more than half needed)", m->name, told_apart, control_elems);
    f += ok(2 * told_apart > control_elems, what);
  }
  if (have_test) {
    textf(what, sizeof what, "%s: the session under test matches ORT's CPU EP on %d data sets (worst %.2g of the "
          "bound)%s%s", m->name, sets, worst_test, bad_test ? ": " : "", why_test);
    f += ok(sets > 0 && !bad_test, what);
  }
  if (have_test) rt_session_release(rt, &test);
  rt_session_release(rt, &ref);
  return f;
}

/* check_listing: every model folder gen_nbits.py wrote is in nb_models (a model added there
 * without an expectation here would go untested). */
static int check_listing(const char* root) {
  DIR* d = opendir(root);
  if (!d) {
    char what[4200];
    textf(what, sizeof what, "%s exists (gen_nbits.py writes it)", root);
    return ok(0, what);
  }
  int f = 0, n = 0;
  for (struct dirent* de; (de = readdir(d)) != NULL;) {
    if (de->d_name[0] == '.') continue;
    int known = 0;
    for (size_t i = 0; i < NB_NUM_MODELS && !known; i++) {
      char twin[300];
      textf(twin, sizeof twin, "%s_f32", nb_models[i].name);
      known = !strcmp(de->d_name, nb_models[i].name) ||
              ((nb_models[i].flags & NB_NO_CPU_KERNEL) && !strcmp(de->d_name, twin));
    }
    n++;
    if (!known) {
      char what[600];
      textf(what, sizeof what, "%s (written by gen_nbits.py) has an expectation in case_nbits.c", de->d_name);
      f += ok(0, what);
    }
  }
  closedir(d);
  printf("  %d model folders in %s, %zu models with an expectation\n", n, root, NB_NUM_MODELS);
  return f;
}

/* --- the int4 decoders --------------------------------------------------------------------------- */

static size_t count_word(const char* list, const char* word) {
  size_t n = 0, len = strlen(word);
  for (const char* p = list; (p = strstr(p, word)) != NULL; p += len)
    if ((p == list || p[-1] == ' ') && (p[len] == ' ' || p[len] == 0)) n++;
  return n;
}

/* run_paged_decoder runs int4 decoder `name` with paging=on (decoder_generate: the same logits
 * and tokens as the CPU session) and checks what CudaEp's counters say it streamed: every paged
 * byte read from the weight file, and less than twice the file's bytes a run: the packed int4
 * weights (each node's initializers start 256-byte aligned in a layer, so a run pages a few KiB
 * of padding beyond the file), not a dequantized form (4x the file's bytes and more). */
static int run_paged_decoder(ort_rt* rt, const char* dir, const char* name) {
  char file[256], data[4096], what[600];
  static decoder_run run;
  CudaEpOrtStats before, after;
  struct stat st;
  textf(file, sizeof file, "%s.weights.bin", name);
  if (join_path(data, sizeof data, dir, file) < 0 || stat(data, &st) != 0) return ok(0, "the int4 decoder's weight file is there");
  textf(file, sizeof file, "%s.onnx", name);
  int f = rt_ep_stats(rt, &before) < 0;
  f += decoder_generate(rt, dir, file, "on", &run);
  f += rt_ep_stats(rt, &after) < 0;
  host_tensor_free(&run.cpu_prefill_logits);
  unsigned long long bytes = after.paged_bytes - before.paged_bytes, read = after.weight_file_bytes - before.weight_file_bytes;
  unsigned long long runs = DEC_STEPS + 1, per_run = bytes / runs;
  textf(what, sizeof what, "%s, paging=on: %llu bytes paged in %llu runs (%llu a run; the weight file holds %lld), "
        "every one read from the file (%llu)", name, bytes, runs, per_run, (long long)st.st_size, read);
  return f + ok(bytes > 0 && per_run < 2 * (unsigned long long)st.st_size && read == bytes, what);
}

static int run_decoders(ort_rt* rt, const char* dir) {
  int f = 0;
  char what[1400];
  static decoder_run flt, q;
  f += decoder_generate(rt, dir, "decoder_contrib.onnx", NULL, &flt);
  for (size_t i = 0; i < sizeof nb_decoders / sizeof nb_decoders[0]; i++) {
    char file[256];
    textf(file, sizeof file, "%s.onnx", nb_decoders[i]);
    f += decoder_generate(rt, dir, file, NULL, &q);
    if (rt->ep_mode && q.assigned) {
      size_t on_ep = count_word(q.ep_ops, "MatMulNBits"), elsewhere = count_word(q.other_ops, "MatMulNBits");
      int required = nb_claim_required(nb_decoders[i]);
      textf(what, sizeof what, "%s: %zu of its %d MatMulNBits nodes ran on CudaEp, %zu on ORT's CPU EP (expected: %s)",
            nb_decoders[i], on_ep, NB_DECODER_NODES, elsewhere,
            required       ? "all on CudaEp"
            : nb_pending() ? "all on ORT's CPU EP: the kernels' PTX is pending"
                           : "claim (not required: " NB_CLAIMS_ENV ")");
      if (required) f += ok(on_ep == NB_DECODER_NODES && elsewhere == 0, what);
      else if (nb_pending()) f += ok(on_ep == 0 && elsewhere == NB_DECODER_NODES, what);
      else printf("  info %s\n", what);
    }
    /* The generator's check: int4 weights move the float decoder's logits by quantisation error
     * only (a transposed or misplaced weight would move them by their whole size). */
    double worst = 0, top = 0;
    size_t agree = 0;
    if (q.cpu_prefill_logits.count == flt.cpu_prefill_logits.count && q.cpu_prefill_logits.count > 0) {
      for (size_t k = 0; k < flt.cpu_prefill_logits.count; k++) {
        double a = elem(&q.cpu_prefill_logits, k), b = elem(&flt.cpu_prefill_logits, k);
        worst = fmax(worst, fabs(a - b));
        top = fmax(top, fabs(b));
      }
    }
    for (int t = 0; t < DEC_STEPS; t++) agree += q.cpu_tokens[t] == flt.cpu_tokens[t];
    textf(what, sizeof what, "%s on ORT's CPU EP: prefill logits within %.3f of the float form's (largest |logit| "
          "%.3f; at most a quarter of it allowed); %zu of %d greedy tokens the float form's", nb_decoders[i], worst,
          top, agree, DEC_STEPS);
    f += ok(top > 0 && worst <= 0.25 * top, what);
    host_tensor_free(&q.cpu_prefill_logits);
    if (rt->ep_mode && nb_claim_required(nb_decoders[i])) f += run_paged_decoder(rt, dir, nb_decoders[i]);
  }
  host_tensor_free(&flt.cpu_prefill_logits);
  return f;
}

int case_nbits(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  unsigned long mark = rt_log_mark();
  char root[4096];
  if (join_path(root, sizeof root, argv[1], "nbits") < 0) return 1;
  int f = check_policy();
  f += check_listing(root);
  rt_log_set_print_level(ORT_LOGGING_LEVEL_WARNING); /* the sessions under test log at INFO */
  for (size_t i = 0; i < NB_NUM_MODELS; i++) f += run_model(rt, root, &nb_models[i]);
  rt_log_set_print_level(ORT_LOGGING_LEVEL_VERBOSE);
  f += run_decoders(rt, argv[1]);
  char why[2048];
  unsigned long n = rt_log_ep_errors_since(mark, why, sizeof why);
  char what[2200];
  if (n) textf(what, sizeof what, "ORT logged no error naming CudaEp (it logged %lu, the last: %s)", n, why);
  else textf(what, sizeof what, "ORT logged no error naming CudaEp");
  return f + ok(n == 0, what);
}
