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
 * prints one "LIST <passed|failed|declined|folded> <test> <ops>[ | leaves <ops>]" line per test
 * (scripts/ort-node-table.py turns them into the docs' table).
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
  int passed, failed, total, declined;
} op_row;

typedef struct tally {
  int passed, failed, unsupported, declined, ort_refused, unreadable, folded;
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

/* select_test decides whether a model is in scope; `label` gets its ops joined by '+'. */
static int select_test(const char* model_path, char* label, size_t cap, char* why, size_t why_cap) {
  uint8_t* buf;
  size_t len;
  char err[512];
  label[0] = 0;
  if (read_file(model_path, ONNX_PB_MAX_FILE, &buf, &len, err, sizeof err) < 0) {
    textf(why, why_cap, "%s", err);
    return 0;
  }
  model_summary s;
  int rc = model_summarize(buf, len, &s, err, sizeof err);
  free(buf);
  if (rc < 0) {
    textf(why, why_cap, "cannot read model: %s", err);
    return 0;
  }
  for (size_t i = 0; i < s.num_ops; i++) {
    size_t l = strlen(label);
    textf(label + l, cap - l, "%s%s", i ? "+" : "", s.ops[i]);
  }
  if (s.num_nodes == 0) return textf(why, why_cap, "no nodes"), 0;
  if (s.custom_domain) return textf(why, why_cap, "a node outside the ONNX domain"), 0;
  if (s.has_subgraph) return textf(why, why_cap, "a subgraph"), 0;
  for (size_t i = 0; i < s.num_ops; i++)
    if (!op_supported(s.ops[i])) return textf(why, why_cap, "op %s", s.ops[i]), 0;
  if (!s.all_float) return textf(why, why_cap, "%s", s.first_non_float), 0;
  return 1;
}

/* run_data_set feeds one test_data_set folder and compares every output: 0 when all match, -1
 * when the run fails or an output differs, -2 when the host cannot read the test's data
 * (sequences, strings: only with --all-ops). */
static int run_data_set(ort_rt* rt, rt_session* s, const char* set_dir, char* why, size_t cap) {
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
  }
  for (size_t i = 0; i < s->num_outputs; i++) {
    textf(file, sizeof file, "output_%zu.pb", i);
    if (join_path(path, sizeof path, set_dir, file) < 0 ||
        tensor_proto_read_file(path, &want[i], err, sizeof err) < 0) {
      textf(why, cap, "expected output %zu (%s): %s", i, s->output_names[i], err);
      goto out;
    }
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

  for (size_t ti = 0; ti < n; ti++) {
    const char* name = tests[ti];
    if (filter && *filter && !strstr(name, filter)) continue;
    char test_dir[4096], model[4096], label[512], why[2048];
    if (join_path(test_dir, sizeof test_dir, dir, name) < 0 || join_path(model, sizeof model, test_dir, "model.onnx") < 0)
      continue;
    if (!select_test(model, label, sizeof label, why, sizeof why) && !(all && label[0])) {
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
    int test_ok = ns > 0, unreadable = 0;
    if (ns == 0) textf(why, sizeof why, "no test_data_set_* folders");
    for (size_t si = 0; si < ns && test_ok; si++) {
      char set_dir[4096];
      int rc = join_path(set_dir, sizeof set_dir, test_dir, sets[si]) < 0 ? -1
                                                                             : run_data_set(rt, &s, set_dir, why, sizeof why);
      if (rc < 0) {
        test_ok = 0;
        unreadable = rc == -2;
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

  printf("\n  %-40s %s\n", "op", all ? "passed/claimed (ops with a pass or a failure; tests declined)" : "passed/total");
  for (int i = 0; i < t.num_rows; i++) {
    const op_row* r = &t.rows[i];
    if (!all && r->total > 0) printf("  %-40s %d/%d\n", r->op, r->passed, r->total);
    if (all && (r->passed || r->failed)) {
      printf("  %-40s %d/%d", r->op, r->passed, r->total - r->declined);
      if (r->declined) printf("  (%d declined)", r->declined);
      printf("\n");
    }
  }
  printf("\n  %d passed, %d failed, %d skipped(unsupported)", t.passed, t.failed, t.unsupported);
  if (t.declined) printf(", %d declined(left to CPU by CudaEp)", t.declined);
  if (t.ort_refused) printf(", %d skipped(ORT refuses the model)", t.ort_refused);
  if (t.unreadable) printf(", %d skipped(data the host cannot read)", t.unreadable);
  if (t.folded) printf(", %d skipped(ORT folded every node away)", t.folded);
  printf("\n");
  if (t.passed + t.failed + t.declined == 0) {
    printf("  FAIL no test was selected (filter \"%s\")\n", filter ? filter : "");
    return 1;
  }
  return t.failed;
}
