/*
 * case_node_tests.c - `node_tests [DIR]`: ONNX's single-operator conformance tests
 * (DIR/<test>/model.onnx + test_data_set_N/{input,output}_K.pb) for the ops CudaEp supports.
 *
 * A test is selected when every node is an ONNX-domain op from supported_ops and every typed
 * value is a float32 tensor; the others are counted as skipped(unsupported). A selected test runs
 * in a session with CudaEp appended and CPU fallback disabled, so it passes only if CudaEp took
 * every node and computed outputs within rtol 1e-4, atol 1e-5 of the expected ones.
 *
 * When session creation fails, the host tells apart:
 *   - ORT refusing the model itself (a plain CPU session fails too): skipped, not CudaEp's fault;
 *   - CudaEp declining a node (ORT's "fallback to CPU EP has been explicitly disabled"): counted
 *     as declined, with the nodes CudaEp left listed (a failure with --strict);
 *   - everything else (CudaEp claimed the nodes and then refused them, or ORT refused what CudaEp
 *     returned): a failure.
 * A test also fails when ORT logs an error naming CudaEp while it runs (ORT carries on without an
 * EP whose GetCapability fails, so only its log shows that).
 *
 * bfloat16 in ONNX 1.12's data: numpy has no bfloat16, so the generator stored bfloat16 bits as
 * uint16 TensorProtos (test_cast_*BFLOAT16*, test_castlike_*BFLOAT16*). A uint16 tensor that the
 * model declares bfloat16 is read as the bfloat16 bits it holds. The generator also made its
 * float32-to-bfloat16 expectations by truncation (backend/test/case/node/cast.py keeps the high
 * 16 bits), while ONNX's own float32_to_bfloat16 and CudaEp round to nearest, ties to even. A test
 * whose only mismatch is exactly that is counted apart, as "truncated", never as a pass or a
 * failure: every element of the expected output must be its float32 input truncated, every
 * element of the output the input rounded to nearest even (check_truncation), and the host says
 * how many differ. Any other mismatch is a failure. A test whose input data has another shape than
 * its model declares (test_castlike_*BFLOAT16*: "like" is [1] in the data, [3,4] in the model)
 * cannot run on any EP (ORT refuses the Run): it is counted and listed as "misfit", not run.
 * With --cpu-only, selected tests run on ORT's CPU EP alone (proving readers and comparisons).
 *
 * Flags (before DIR):
 *   --all-ops         run every test, whatever its ops and types. With CudaEp: a probe that CudaEp
 *                     claims only what it computes correctly (declines are fine, wrong results and
 *                     broken sessions are failures); with --cpu-only: the TensorProto reader and the
 *                     comparisons over all of ONNX's node tests (random and sequence ops fail there).
 *                     Tests whose data the host cannot read (sequences, strings) are skipped.
 *   --allow-fallback  keep CPU fallback enabled (what a user's session does)
 *   --strict          a node CudaEp declines counts as a failure
 * CUDAEP_ORT_NODE_FILTER=TEXT runs only the tests whose name contains TEXT; CUDAEP_ORT_NODE_LIST=1
 * prints one "LIST <passed|failed|truncated|misfit|declined|folded> <test> <ops>[ | leaves <ops>]" line per test
 * (scripts/ort-node-table.py turns them into the docs' table).
 *
 * Progress goes to stderr, so that stdout stays the report: a line when the run starts, one every
 * CUDAEP_ORT_PROGRESS_EVERY tests gone through (default 100; 0: no progress lines) with the counts
 * so far, and one when it is done. `--all-ops` over ONNX's 932 tests takes most of a minute.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"

#define MAX_TESTS 4096
#define MAX_DATA_SETS 16
#define MAX_OP_ROWS 1024
#define RTOL 1e-4
#define ATOL 1e-5
#define FALLBACK_REFUSED "fallback to CPU EP has been explicitly disabled"

typedef struct op_row {
  char op[96];
  int passed, failed, total, declined, truncated;
} op_row;

typedef struct tally {
  int passed, failed, unsupported, declined, ort_refused, unreadable, folded, truncated, misfit;
  op_row rows[MAX_OP_ROWS];
  int num_rows;
} tally;

static op_row* row_for(tally* t, const char* op) {
  for (int i = 0; i < t->num_rows; i++)
    if (!strcmp(t->rows[i].op, op)) return &t->rows[i];
  if (t->num_rows == MAX_OP_ROWS - 1) { /* the last row collects the rest */
    op_row* r = &t->rows[t->num_rows++];
    textf(r->op, sizeof r->op, "(other ops)");
    return r;
  }
  if (t->num_rows == MAX_OP_ROWS) return &t->rows[MAX_OP_ROWS - 1];
  op_row* r = &t->rows[t->num_rows++];
  textf(r->op, sizeof r->op, "%s", op);
  return r;
}

static int cmp_names(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

/* list_dir returns the sorted names in dir that start with `prefix` (at most `max`). */
static size_t list_dir(const char* dir, const char* prefix, char** names, size_t max) {
  DIR* d = opendir(dir);
  if (!d) return 0;
  size_t n = 0;
  struct dirent* e;
  size_t pl = strlen(prefix);
  while ((e = readdir(d)) != NULL && n < max) {
    if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, pl)) continue;
    names[n] = strdup(e->d_name);
    if (names[n]) n++;
  }
  closedir(d);
  qsort(names, n, sizeof names[0], cmp_names);
  return n;
}

static void free_names(char** names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
}

/* select_test decides whether a model is in scope; `label` gets its ops joined by '+', *out the
 * model's summary. */
static int select_test(const char* model_path, model_summary* out, char* label, size_t cap, char* why, size_t why_cap) {
  uint8_t* buf;
  size_t len;
  char err[512];
  label[0] = 0;
  memset(out, 0, sizeof *out);
  if (read_file(model_path, ONNX_PB_MAX_FILE, &buf, &len, err, sizeof err) < 0) {
    textf(why, why_cap, "%s", err);
    return 0;
  }
  int rc = model_summarize(buf, len, out, err, sizeof err);
  free(buf);
  if (rc < 0) {
    textf(why, why_cap, "cannot read model: %s", err);
    return 0;
  }
  for (size_t i = 0; i < out->num_ops; i++) {
    size_t l = strlen(label);
    textf(label + l, cap - l, "%s%s", i ? "+" : "", out->ops[i]);
  }
  if (out->num_nodes == 0) return textf(why, why_cap, "no nodes"), 0;
  if (out->custom_domain) return textf(why, why_cap, "a node outside the ONNX domain"), 0;
  if (out->has_subgraph) return textf(why, why_cap, "a subgraph"), 0;
  for (size_t i = 0; i < out->num_ops; i++)
    if (!op_supported(out->ops[i])) return textf(why, why_cap, "op %s", out->ops[i]), 0;
  if (!out->all_float) return textf(why, why_cap, "%s", out->first_non_float), 0;
  return 1;
}

/* as_declared reads a uint16 tensor that the model declares bfloat16 as the bfloat16 bits it
 * holds (ONNX 1.12's generator stored bfloat16 data as numpy uint16; same size, same bits). */
static void as_declared(host_tensor* t, const model_value* declared) {
  if (declared && t->data_type == ONNX_PB_UINT16 && declared->elem_type == ONNX_PB_BFLOAT16)
    t->data_type = ONNX_PB_BFLOAT16;
}

/* misfit tells whether input t's shape contradicts the one the model declares (another rank, or
 * another size of a fixed dimension): ORT refuses such a Run before any EP sees it ("Invalid
 * rank for input"), whatever the EPs. Returns 1 with the shapes in why. */
static int misfit(const host_tensor* t, const model_value* declared, char* why, size_t cap) {
  if (!declared || !declared->has_shape || declared->ndims > ONNX_PB_MAX_DIMS) return 0;
  int bad = declared->ndims != t->ndims;
  for (size_t d = 0; !bad && d < t->ndims; d++) bad = declared->dims[d] >= 0 && declared->dims[d] != t->dims[d];
  if (!bad) return 0;
  char got[128] = "", want[128] = "";
  for (size_t d = 0; d < t->ndims; d++) textf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "," : "", (long long)t->dims[d]);
  for (size_t d = 0; d < declared->ndims; d++) {
    if (declared->dims[d] >= 0) textf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? "," : "", (long long)declared->dims[d]);
    else textf(want + strlen(want), sizeof want - strlen(want), "%s?", d ? "," : "");
  }
  textf(why, cap, "its data has shape [%s], its model declares [%s]", got, want);
  return 1;
}

/* bf16_rne is float32 bits f rounded to nearest even bfloat16 (a NaN: its sign and top payload
 * bits, quiet); bf16_trunc keeps the high 16 bits. */
static uint16_t bf16_rne(uint32_t f) {
  if ((f & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((f >> 16) | 0x40u);
  return (uint16_t)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}
static uint16_t bf16_trunc(uint32_t f) { return (uint16_t)(f >> 16); }

/* check_truncation tells whether the mismatch of a bfloat16 output `got` with `want` is exactly
 * the test data's truncation: `in` is float32 of the same shape, every element of want is in's
 * truncated, every element of got in's rounded to nearest even, and they differ somewhere (each
 * by one bfloat16 ulp, as truncation and rounding can). Returns 1 with the evidence in why. */
static int check_truncation(const host_tensor* in, const host_tensor* got, const host_tensor* want, char* why, size_t cap) {
  if (in->data_type != ONNX_PB_FLOAT || got->data_type != ONNX_PB_BFLOAT16 || want->data_type != ONNX_PB_BFLOAT16 ||
      in->count != want->count || got->count != want->count || in->ndims != want->ndims ||
      (in->ndims && memcmp(in->dims, want->dims, in->ndims * sizeof in->dims[0])))
    return 0;
  size_t differ = 0;
  for (size_t i = 0; i < want->count; i++) {
    uint32_t f;
    memcpy(&f, (const char*)in->data + 4 * i, 4);
    uint16_t g = ((const uint16_t*)got->data)[i], w = ((const uint16_t*)want->data)[i];
    if (w != bf16_trunc(f) || g != bf16_rne(f)) return 0;
    if (g != w) {
      if ((uint16_t)(g - w) != 1) return 0;
      differ++;
    }
  }
  if (!differ) return 0;
  textf(why, cap, "the expected output is the float32 input truncated to bfloat16 (%zu of %zu elements), the "
        "output the input rounded to nearest even (%zu of %zu); %zu differ, each by one bfloat16 ulp",
        want->count, want->count, want->count, want->count, differ);
  return 1;
}

/* run_data_set feeds one test_data_set folder and compares every output: 0 when all match, -1
 * when the run fails or an output differs, -2 when the host cannot read the test's data
 * (sequences, strings: only with --all-ops), -3 when the only difference is a bfloat16 output
 * the test data made by truncation (check_truncation; the evidence in why), -4 when an input's
 * data does not fit the shape its model declares (misfit; nothing is run). */
static int run_data_set(ort_rt* rt, rt_session* s, const model_summary* m, const char* set_dir, char* why, size_t cap) {
  host_tensor in[RT_MAX_IO], want[RT_MAX_IO], got[RT_MAX_IO];
  memset(in, 0, sizeof in);
  memset(want, 0, sizeof want);
  memset(got, 0, sizeof got);
  char path[4096], err[512], file[64];
  int rc = -2;
  for (size_t i = 0; i < s->num_inputs; i++) {
    textf(file, sizeof file, "input_%zu.pb", i);
    if (join_path(path, sizeof path, set_dir, file) < 0 || tensor_proto_read_file(path, &in[i], err, sizeof err) < 0) {
      textf(why, cap, "input %zu (%s): %s", i, s->input_names[i], err);
      goto out;
    }
    const model_value* declared = model_value_find(m->inputs, m->num_inputs, s->input_names[i]);
    as_declared(&in[i], declared);
    char d[256];
    if (misfit(&in[i], declared, d, sizeof d)) {
      textf(why, cap, "input %zu (%s): %s; ORT refuses such a Run before any EP sees it", i, s->input_names[i], d);
      rc = -4;
      goto out;
    }
  }
  for (size_t i = 0; i < s->num_outputs; i++) {
    textf(file, sizeof file, "output_%zu.pb", i);
    if (join_path(path, sizeof path, set_dir, file) < 0 ||
        tensor_proto_read_file(path, &want[i], err, sizeof err) < 0) {
      textf(why, cap, "expected output %zu (%s): %s", i, s->output_names[i], err);
      goto out;
    }
    as_declared(&want[i], model_value_find(m->outputs, m->num_outputs, s->output_names[i]));
  }
  rc = -1;
  rt_error e;
  if (rt_run(rt, s, in, s->num_inputs, got, &e, 1) < 0) {
    textf(why, cap, "Run failed: [%s] %s", rt_error_code_name(e.code), e.msg);
    goto out;
  }
  rc = 0;
  for (size_t i = 0; i < s->num_outputs; i++) {
    char d[1024];
    if (compare_tensors(&got[i], &want[i], RTOL, ATOL, d, sizeof d) < 0) {
      char t[512];
      if (s->num_inputs > 0 && check_truncation(&in[0], &got[i], &want[i], t, sizeof t)) {
        textf(why, cap, "output %zu (%s): %s", i, s->output_names[i], t);
        rc = -3; /* and the other outputs must still match */
        continue;
      }
      textf(why, cap, "output %zu (%s): %s", i, s->output_names[i], d);
      rc = -1;
      break;
    }
  }
  for (size_t i = 0; i < s->num_outputs; i++) host_tensor_free(&got[i]);
out:
  for (size_t i = 0; i < RT_MAX_IO; i++) {
    host_tensor_free(&in[i]);
    host_tensor_free(&want[i]);
  }
  return rc;
}

/* explain_decline re-creates the session with fallback allowed and writes into `leaves` the ops
 * CudaEp left to another EP (printing where every node landed unless quiet). */
static void explain_decline(ort_rt* rt, const char* model, const rt_session_opts* base, int quiet, char* leaves,
                            size_t cap) {
  rt_session_opts o = *base;
  o.disable_cpu_fallback = 0;
  o.record_assignment = 1;
  rt_session s;
  rt_error e;
  textf(leaves, cap, "?");
  if (rt_session_create(rt, model, &o, &s, &e, 1) < 0) {
    if (!quiet)
      printf("      (with fallback allowed the session fails too: [%s] %s)\n", rt_error_code_name(e.code), e.msg);
    return;
  }
  char mine[512];
  size_t en = 0, on = 0;
  if (rt_print_assignment(rt, &s, 1, &en, NULL, &on, mine, sizeof mine, leaves, cap) == 0 && !quiet)
    printf("      with fallback allowed: CudaEp takes %zu node(s) [%s], leaves %zu [%s]\n", en, mine, on, leaves);
  rt_session_release(rt, &s);
}

int case_node_tests(ort_rt* rt, int argc, char** argv) {
  const char* dir = "/usr/share/libonnx-testdata/data/node";
  int all = 0, allow_fallback = 0, strict = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--all-ops")) all = 1;
    else if (!strcmp(argv[i], "--allow-fallback")) allow_fallback = 1;
    else if (!strcmp(argv[i], "--strict")) strict = 1;
    else if (argv[i][0] == '-') {
      printf("  FAIL unknown node_tests flag %s (--all-ops, --allow-fallback, --strict)\n", argv[i]);
      return 1;
    } else dir = argv[i];
  }
  const char* filter = getenv("CUDAEP_ORT_NODE_FILTER");
  /* --all-ops prints only the failures: the passes and declines of 900 tests drown them (ORT's
   * log too; errors naming CudaEp are still counted and reported with the test). */
  if (all) rt_log_set_print_level(ORT_LOGGING_LEVEL_FATAL);
#define NOTE(...) \
  do {            \
    if (!all) printf(__VA_ARGS__); \
  } while (0)
  static char* tests[MAX_TESTS];
  size_t n = list_dir(dir, "", tests, MAX_TESTS);
  if (n == 0) {
    printf("  FAIL no tests in %s (install libonnx-testdata, or pass the folder)\n", dir);
    return 1;
  }
  printf("  %zu tests in %s; mode: %s%s\n", n, dir,
         !rt->ep_mode ? "cpu-only (ORT's CPU EP)"
                      : allow_fallback ? "CudaEp appended, CPU fallback allowed" : "CudaEp appended, CPU fallback disabled",
         all ? "; every test, whatever its ops (--all-ops)" : "");
  static tally t;
  memset(&t, 0, sizeof t);
  int verbose_skips = getenv("CUDAEP_ORT_VERBOSE") != NULL;
  /* CUDAEP_ORT_NODE_LIST=1: one "LIST <passed|failed|declined> <test> <ops>" line per test, for
   * scripts/ort-node-table.py. */
  const char* list_env = getenv("CUDAEP_ORT_NODE_LIST");
  int list = list_env && !strcmp(list_env, "1");
  long every = 100;
  const char* every_env = getenv("CUDAEP_ORT_PROGRESS_EVERY");
  if (every_env && *every_env) {
    char* end = NULL;
    every = strtol(every_env, &end, 10);
    if (*end || every < 0) {
      printf("  FAIL CUDAEP_ORT_PROGRESS_EVERY=%s: want a count of tests (0: no progress lines)\n", every_env);
      free_names(tests, n);
      return 1;
    }
  }
  if (every) fprintf(stderr, "node_tests: going through %zu tests in %s, a line every %ld\n", n, dir, every);

  for (size_t ti = 0; ti < n; ti++) {
    if (every && ti > 0 && ti % (size_t)every == 0)
      fprintf(stderr, "node_tests: %zu/%zu tests gone through (%d passed, %d failed, %d declined so far)\n", ti, n,
              t.passed, t.failed, t.declined);
    const char* name = tests[ti];
    if (filter && *filter && !strstr(name, filter)) continue;
    char test_dir[4096], model[4096], label[512], why[2048];
    static model_summary summary;
    if (join_path(test_dir, sizeof test_dir, dir, name) < 0 || join_path(model, sizeof model, test_dir, "model.onnx") < 0)
      continue;
    if (!select_test(model, &summary, label, sizeof label, why, sizeof why) && !(all && label[0])) {
      t.unsupported++;
      if (verbose_skips) printf("  skip %s (%s): %s\n", name, label, why);
      continue;
    }
    op_row* row = row_for(&t, label);
    row->total++;

    rt_session_opts o;
    ep_options(rt, &o);
    if (rt->ep_mode) {
      o.disable_cpu_fallback = !allow_fallback;
      add_ep_option(&o, "tf32", "0");
      o.record_assignment = all; /* to tell a test ORT folded away from one CudaEp ran */
    }
    o.intra_threads = 1;
    rt_session s;
    rt_error e;
    char logged[2048];
    unsigned long mark = rt_log_mark();
    if (rt_session_create(rt, model, &o, &s, &e, 1) < 0) {
      /* Who refused? A plain CPU session says whether ORT can run the model at all. */
      rt_session_opts plain;
      memset(&plain, 0, sizeof plain);
      plain.intra_threads = 1;
      rt_session cpu;
      rt_error ce;
      if (rt_session_create(rt, model, &plain, &cpu, &ce, 1) < 0) {
        t.ort_refused++;
        row->total--;
        NOTE("  skip %s (%s): ORT refuses the model itself: [%s] %s\n", name, label, rt_error_code_name(ce.code),
             ce.msg);
        continue;
      }
      rt_session_release(rt, &cpu);
      if (rt->ep_mode && strstr(e.msg, FALLBACK_REFUSED) && rt_log_ep_errors_since(mark, logged, sizeof logged)) {
        /* Not a plain decline: a CudaEp callback failed, ORT logged it and left the nodes alone. */
        t.failed++;
        row->failed++;
        printf("  FAIL %s (%s): CudaEp failed while ORT partitioned the graph (ORT logged it and went on "
               "without CudaEp): %s\n", name, label, logged);
        continue;
      }
      if (rt->ep_mode && strstr(e.msg, FALLBACK_REFUSED)) {
        if (strict) t.failed++, row->failed++;
        else t.declined++, row->declined++;
        if (strict || !all)
          printf("  %s %s (%s): CudaEp declined a node, so it would run on the CPU EP: [%s] %s\n",
                 strict ? "FAIL" : "DECLINED", name, label, rt_error_code_name(e.code), e.msg);
        if (!all || list) {
          char leaves[512];
          explain_decline(rt, model, &o, all, leaves, sizeof leaves);
          if (list) printf("  LIST declined %s %s | leaves %s\n", name, label, leaves);
        }
        continue;
      }
      t.failed++;
      row->failed++;
      if (ep_own_error(e.msg))
        printf("  FAIL %s (%s): CudaEp claimed the nodes, then refused them at session creation: [%s] %s\n", name,
               label, rt_error_code_name(e.code), e.msg);
      else if (strstr(e.msg, RT_EP_NAME))
        printf("  FAIL %s (%s): ORT refused what CudaEp's claim made of the graph (a plain CPU session works): "
               "[%s] %s\n", name, label, rt_error_code_name(e.code), e.msg);
      else
        printf("  FAIL %s (%s): session creation with %s failed (a plain CPU session works): [%s] %s\n", name, label,
               rt->ep_mode ? "CudaEp appended" : "these options", rt_error_code_name(e.code), e.msg);
      continue;
    }

    if (all && rt->ep_mode) {
      /* ORT folds some single-op models to constants when it loads them (Shape of an input
       * of static shape, Constant): no node is left for any EP, and the test says nothing of
       * CudaEp. */
      size_t en = 0, on = 0;
      if (rt_print_assignment(rt, &s, 1, &en, NULL, &on, NULL, 0, NULL, 0) == 0 && en == 0 && on == 0) {
        rt_session_release(rt, &s);
        t.folded++;
        row->total--;
        if (list) printf("  LIST folded %s %s\n", name, label);
        continue;
      }
    }
    char* sets[MAX_DATA_SETS];
    size_t ns = list_dir(test_dir, "test_data_set_", sets, MAX_DATA_SETS);
    int test_ok = ns > 0, unreadable = 0, truncated = 0, misfit = 0;
    if (ns == 0) textf(why, sizeof why, "no test_data_set_* folders");
    for (size_t si = 0; si < ns && test_ok; si++) {
      char set_dir[4096];
      int rc = join_path(set_dir, sizeof set_dir, test_dir, sets[si]) < 0 ? -1
                                                                             : run_data_set(rt, &s, &summary, set_dir, why, sizeof why);
      if (rc == -3) { /* counted apart, but the other data sets still run */
        char tmp[2048];
        textf(tmp, sizeof tmp, "%s: %s", sets[si], why);
        memcpy(why, tmp, sizeof why);
        truncated = 1;
      } else if (rc < 0) {
        test_ok = 0;
        unreadable = rc == -2;
        misfit = rc == -4;
        char tmp[2048];
        textf(tmp, sizeof tmp, "%s: %s", sets[si], why);
        memcpy(why, tmp, sizeof why);
      }
    }
    free_names(sets, ns);
    rt_session_release(rt, &s);
    if (test_ok && rt_log_ep_errors_since(mark, logged, sizeof logged)) {
      test_ok = 0;
      textf(why, sizeof why, "ORT logged an error naming CudaEp: %s", logged);
    }
    if (!test_ok && unreadable && all) {
      t.unreadable++;
      row->total--;
      NOTE("  skip %s (%s): the host cannot read its data: %s\n", name, label, why);
    } else if (misfit) {
      /* Not a pass and not CudaEp's failure: the data cannot be fed to its own model. */
      t.misfit++;
      row->total--;
      printf("  MISFIT %s (%s): ONNX 1.12's data does not fit its model: %s\n", name, label, why);
      if (list) printf("  LIST misfit %s %s\n", name, label);
    } else if (test_ok && truncated) {
      t.truncated++;
      row->truncated++;
      printf("  TRUNCATED %s (%s): %sONNX 1.12's expected data is made by truncation, not round to nearest "
             "even: %s\n", name, label, rt->ep_mode ? "claimed; " : "", why);
      if (list) printf("  LIST truncated %s %s\n", name, label);
    } else if (test_ok) {
      t.passed++;
      row->passed++;
      NOTE("  pass %s (%s)\n", name, label);
      if (list) printf("  LIST passed %s %s\n", name, label);
    } else {
      t.failed++;
      row->failed++;
      printf("  FAIL %s (%s): %s\n", name, label, why);
      if (list) printf("  LIST failed %s %s\n", name, label);
    }
  }
  free_names(tests, n);
#undef NOTE
  if (every)
    fprintf(stderr, "node_tests: done, %zu/%zu tests gone through (%d passed, %d failed, %d declined)\n", n, n, t.passed,
            t.failed, t.declined);

  printf("\n  %-40s %s\n", "op", all ? "passed/claimed (ops with a pass or a failure; tests declined)" : "passed/total");
  for (int i = 0; i < t.num_rows; i++) {
    const op_row* r = &t.rows[i];
    if (!all && r->total > 0) {
      printf("  %-40s %d/%d", r->op, r->passed, r->total);
      if (r->truncated) printf("  (%d truncated)", r->truncated);
      printf("\n");
    }
    if (all && (r->passed || r->failed || r->truncated)) {
      printf("  %-40s %d/%d", r->op, r->passed, r->total - r->declined);
      if (r->truncated) printf("  (%d truncated)", r->truncated);
      if (r->declined) printf("  (%d declined)", r->declined);
      printf("\n");
    }
  }
  printf("\n  %d passed, %d failed, %d skipped(unsupported)", t.passed, t.failed, t.unsupported);
  if (t.truncated)
    printf(", %d truncated(claimed; the test's expected bfloat16 data is truncation, not round to nearest even)",
           t.truncated);
  if (t.declined) printf(", %d declined(left to CPU by CudaEp)", t.declined);
  if (t.ort_refused) printf(", %d skipped(ORT refuses the model)", t.ort_refused);
  if (t.unreadable) printf(", %d skipped(data the host cannot read)", t.unreadable);
  if (t.misfit) printf(", %d misfit(skipped: the test's data does not fit its model's declared shapes)", t.misfit);
  if (t.folded) printf(", %d skipped(ORT folded every node away)", t.folded);
  printf("\n");
  if (t.passed + t.failed + t.declined + t.truncated == 0) {
    printf("  FAIL no test was selected (filter \"%s\")\n", filter ? filter : "");
    return 1;
  }
  return t.failed;
}
