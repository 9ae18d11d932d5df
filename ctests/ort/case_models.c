/*
 * case_models.c - `mlp`, `split` and `graph`: the models of gen_models.py, each run in a session
 * under test (CudaEp appended) and in a plain ORT CPU session on the same random inputs; every
 * output must agree within rtol 1e-4 (atol 1e-5).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "models.h"

int make_mlp_input(host_tensor* x, int64_t batch, uint64_t seed) {
  int64_t dims[2] = {batch, MLP_IN};
  char err[256];
  if (host_tensor_alloc(x, ONNX_PB_FLOAT, dims, 2, err, sizeof err) < 0) {
    printf("  FAIL input: %s\n", err);
    return -1;
  }
  fill_random(x, seed, 2.0f);
  return 0;
}

int run_and_compare(ort_rt* rt, rt_session* test, rt_session* ref, host_tensor* x, char* why, size_t cap) {
  host_tensor got, want;
  rt_error e;
  if (rt_run(rt, ref, x, 1, &want, &e, 1) < 0) {
    textf(why, cap, "the CPU reference session's Run failed: [%s] %s", rt_error_code_name(e.code), e.msg);
    return -1;
  }
  if (rt_run(rt, test, x, 1, &got, &e, 1) < 0) {
    textf(why, cap, "Run failed: [%s] %s", rt_error_code_name(e.code), e.msg);
    host_tensor_free(&want);
    return -1;
  }
  int rc = compare_tensors(&got, &want, MODEL_RTOL, MODEL_ATOL, why, cap);
  host_tensor_free(&got);
  host_tensor_free(&want);
  return rc;
}

int open_pair(ort_rt* rt, const char* dir, const char* file, const rt_session_opts* test_opts, rt_session* test,
              rt_session* ref) {
  char path[4096];
  if (join_path(path, sizeof path, dir, file) < 0) return -1;
  rt_session_opts plain;
  memset(&plain, 0, sizeof plain);
  rt_error e;
  if (rt_session_create(rt, path, &plain, ref, &e, 0) < 0) {
    printf("  FAIL a plain CPU session for %s: [%s] %s\n", path, rt_error_code_name(e.code), e.msg);
    return -1;
  }
  if (rt_session_create(rt, path, test_opts, test, &e, 0) < 0) {
    printf("  FAIL the session under test for %s: [%s] %s\n", path, rt_error_code_name(e.code), e.msg);
    rt_session_release(rt, ref);
    return -1;
  }
  printf("  opened %s (%s)\n", path, rt->ep_mode ? "CudaEp appended" : "cpu-only");
  return 0;
}

/* check_log: ORT logged no error naming CudaEp since `mark` (see rt_log_mark). */
static int check_log(unsigned long mark) {
  char logged[2048], what[2200];
  unsigned long n = rt_log_ep_errors_since(mark, logged, sizeof logged);
  if (n) textf(what, sizeof what, "ORT logged no error naming CudaEp (it logged %lu, the last: %s)", n, logged);
  else textf(what, sizeof what, "ORT logged no error naming CudaEp");
  return ok(n == 0, what);
}

/* check_all_on_ep: in ep_mode, every node of the session must be on CudaEp. */
static int check_all_on_ep(ort_rt* rt, rt_session* s) {
  size_t en = 0, es = 0, on = 0;
  char mine[512], other[512];
  int rc = rt_print_assignment(rt, s, 0, &en, &es, &on, mine, sizeof mine, other, sizeof other);
  if (rc != 0 || !rt->ep_mode) return rc < 0 ? ok(0, "reading the node assignment") : 0;
  char what[1200];
  textf(what, sizeof what, "CudaEp runs every node: %zu node(s) in %zu subgraph(s) [%s], %zu elsewhere [%s]", en, es,
        mine, on, other);
  return ok(en > 0 && on == 0, what);
}

int case_mlp(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  unsigned long mark = rt_log_mark();
  rt_session_opts o;
  ep_options(rt, &o);
  add_ep_option(&o, "tf32", "0");
  o.disable_cpu_fallback = rt->ep_mode;
  o.record_assignment = 1;
  rt_session test, ref;
  CudaEpOrtStats before, after;
  if (rt->ep_mode && rt_ep_stats(rt, &before) < 0) return 1;
  if (open_pair(rt, argv[1], "mlp.onnx", &o, &test, &ref) < 0) return 1;
  int f = check_all_on_ep(rt, &test);
  if (rt->ep_mode) {
    /* W1, B1 and W2 are external data (41,472 bytes); B2 is inline (64 bytes). */
    char what[256];
    f += rt_ep_stats(rt, &after) < 0;
    textf(what, sizeof what, "CudaEp read the 41472 external-data weight bytes from the file itself (%llu)",
          (unsigned long long)(after.weight_file_bytes - before.weight_file_bytes));
    f += ok(after.weight_file_bytes - before.weight_file_bytes == 41472, what);
    textf(what, sizeof what, "and copied the 64 inline bytes from ORT's value (%llu)",
          (unsigned long long)(after.weight_ort_bytes - before.weight_ort_bytes));
    f += ok(after.weight_ort_bytes - before.weight_ort_bytes == 64, what);
  }
  static const int64_t batches[] = {1, 3, 64, 7};
  if (rt->ep_mode) f += rt_ep_stats(rt, &before) < 0;
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
    host_tensor x;
    if (make_mlp_input(&x, batches[i], 100 + (uint64_t)i) < 0) {
      f++;
      continue;
    }
    char why[1024] = "", what[1200];
    int rc = run_and_compare(rt, &test, &ref, &x, why, sizeof why);
    textf(what, sizeof what, "batch %lld matches the CPU session%s%s", (long long)batches[i], rc ? ": " : "", why);
    f += ok(rc == 0, what);
    host_tensor_free(&x);
  }
  if (rt->ep_mode) {
    /* Stream-aware: ORT runs the partition on the session's CudaEp stream, and each Compute
     * returns with its work queued (ORT's copy of the output, on that stream, waits for it). */
    char what[256];
    f += rt_ep_stats(rt, &after) < 0;
    textf(what, sizeof what, "each of the 4 runs was queued on a CudaEp stream (%llu of %llu runs), on %llu live stream(s)",
          (unsigned long long)(after.stream_runs - before.stream_runs), (unsigned long long)(after.runs - before.runs),
          (unsigned long long)after.sync_streams);
    f += ok(after.stream_runs - before.stream_runs == 4 && after.runs - before.runs == 4 && after.sync_streams > 0, what);
  }
  /* Negative control: the comparison must notice outputs for different inputs. */
  {
    host_tensor x1, x2, y1, y2;
    rt_error e;
    if (make_mlp_input(&x1, 3, 7) == 0 && make_mlp_input(&x2, 3, 8) == 0 && rt_run(rt, &test, &x1, 1, &y1, &e, 0) == 0) {
      if (rt_run(rt, &ref, &x2, 1, &y2, &e, 0) == 0) {
        char why[1024];
        f += ok(compare_tensors(&y1, &y2, MODEL_RTOL, MODEL_ATOL, why, sizeof why) < 0,
                "negative control: outputs for different inputs are told apart");
        host_tensor_free(&y2);
      } else {
        f++;
      }
      host_tensor_free(&y1);
    } else {
      f++;
    }
    host_tensor_free(&x1);
    host_tensor_free(&x2);
  }
  rt_session_release(rt, &test);
  rt_session_release(rt, &ref);
  return f + check_log(mark);
}

int case_split(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  unsigned long mark = rt_log_mark();
  rt_session_opts o;
  ep_options(rt, &o);
  add_ep_option(&o, "tf32", "0");
  o.record_assignment = 1; /* CPU fallback stays enabled: LeakyRelu must run on the CPU EP */
  o.log_info = 1;          /* CudaEp says at INFO why it leaves LeakyRelu */
  rt_log_watch("leaves node");
  rt_session test, ref;
  if (open_pair(rt, argv[1], "split.onnx", &o, &test, &ref) < 0) return 1;
  int f = 0;
  if (rt->ep_mode) {
    char said[2048], what2[2300];
    unsigned long hits = rt_log_found(said, sizeof said);
    textf(what2, sizeof what2, "CudaEp logged why it leaves the LeakyRelu node (%lu message(s)): %s", hits, said);
    f += ok(hits >= 1 && strstr(said, "LeakyRelu") != NULL && strstr(said, "not implemented") != NULL, what2);
  }
  rt_log_watch(NULL);
  size_t en = 0, es = 0, on = 0;
  char mine[512], other[512], what[1400];
  int rc = rt_print_assignment(rt, &test, 0, &en, &es, &on, mine, sizeof mine, other, sizeof other);
  if (rc < 0) f += ok(0, "reading the node assignment");
  if (rc == 0 && rt->ep_mode) {
    textf(what, sizeof what, "CudaEp runs two partitions: %zu subgraph(s), %zu node(s) [%s]", es, en, mine);
    f += ok(es >= 2, what);
    textf(what, sizeof what, "LeakyRelu stays on another EP: %zu node(s) [%s]", on, other);
    f += ok(strstr(other, "LeakyRelu") != NULL && strstr(mine, "LeakyRelu") == NULL, what);
  }
  static const int64_t batches[] = {1, 5, 32};
  CudaEpOrtStats before, after;
  if (rt->ep_mode) f += rt_ep_stats(rt, &before) < 0;
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
    host_tensor x;
    if (make_mlp_input(&x, batches[i], 200 + (uint64_t)i) < 0) {
      f++;
      continue;
    }
    char why[1024] = "";
    rc = run_and_compare(rt, &test, &ref, &x, why, sizeof why);
    textf(what, sizeof what, "batch %lld matches the CPU session%s%s", (long long)batches[i], rc ? ": " : "", why);
    f += ok(rc == 0, what);
    host_tensor_free(&x);
  }
  if (rt->ep_mode) {
    /* The CPU node reads the first partition's output: ORT orders it after that partition's
     * queued work with a notification (a fence the host waits for). */
    f += rt_ep_stats(rt, &after) < 0;
    textf(what, sizeof what, "ORT ordered the CPU node after CudaEp's queued work with notifications (%llu activated)",
          (unsigned long long)(after.notifications - before.notifications));
    f += ok(after.notifications - before.notifications >= 3, what);
  }
  rt_session_release(rt, &test);
  rt_session_release(rt, &ref);
  return f + check_log(mark);
}

int case_graph(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  unsigned long mark = rt_log_mark();
  rt_session_opts o;
  ep_options(rt, &o);
  add_ep_option(&o, "enable_cuda_graph", "1");
  add_ep_option(&o, "tf32", "0");
  o.disable_cpu_fallback = rt->ep_mode;
  o.record_assignment = 1;
  rt_session test, ref;
  if (open_pair(rt, argv[1], "mlp.onnx", &o, &test, &ref) < 0) return 1;
  int f = check_all_on_ep(rt, &test);
  const int runs = 100;
  int bad = 0, run_errors = 0;
  host_tensor prev;
  memset(&prev, 0, sizeof prev);
  int same_as_prev = 0;
  for (int i = 0; i < runs; i++) {
    host_tensor x, got, want;
    /* Batch 8, except runs 60..69 at batch 3: a captured graph must not replay another shape. */
    int64_t batch = (i >= 60 && i < 70) ? 3 : 8;
    if (make_mlp_input(&x, batch, 1000 + (uint64_t)i) < 0) return f + 1;
    rt_error e;
    if (rt_run(rt, &ref, &x, 1, &want, &e, 0) < 0) {
      host_tensor_free(&x);
      run_errors++;
      continue;
    }
    if (rt_run(rt, &test, &x, 1, &got, &e, 0) < 0) {
      printf("    run %d: Run failed: [%s] %s\n", i, rt_error_code_name(e.code), e.msg);
      host_tensor_free(&want);
      host_tensor_free(&x);
      run_errors++;
      if (run_errors >= 5) break;
      continue;
    }
    char why[1024];
    if (compare_tensors(&got, &want, MODEL_RTOL, MODEL_ATOL, why, sizeof why) < 0) {
      if (bad < 5) printf("    run %d differs from the CPU session: %s\n", i, why);
      bad++;
    }
    /* A replay that keeps returning the first result is exactly what a stale graph does. */
    if (prev.data && compare_tensors(&got, &prev, 0, 0, why, sizeof why) == 0) same_as_prev++;
    host_tensor_free(&prev);
    prev = got;
    host_tensor_free(&want);
    host_tensor_free(&x);
  }
  host_tensor_free(&prev);
  char what[256];
  textf(what, sizeof what, "%d runs with changing inputs (batch 8, 3 in runs 60-69): %d Run error(s), %d mismatch(es)",
        runs, run_errors, bad);
  f += ok(run_errors == 0 && bad == 0, what);
  textf(what, sizeof what, "no run repeats the previous output (%d did)", same_as_prev);
  f += ok(same_as_prev == 0, what);
  rt_session_release(rt, &test);
  rt_session_release(rt, &ref);
  return f + check_log(mark);
}

/* DEEP_LAYERS and the sizes of gen_models.py's deep.onnx: 6 layers of W[64,64] + B[64]. */
#define DEEP_LAYERS 6
#define DEEP_LAYER_BYTES (64 * 64 * 4 + 64 * 4)

/* expect_refused: a session of DIR/file with `o` must fail to open with an error holding `want`. */
static int expect_refused(ort_rt* rt, const char* dir, const char* file, const rt_session_opts* o, const char* want,
                          const char* what) {
  char path[4096], line[2600];
  if (join_path(path, sizeof path, dir, file) < 0) return ok(0, "model path fits");
  rt_session s;
  rt_error e;
  if (rt_session_create(rt, path, o, &s, &e, 0) == 0) {
    rt_session_release(rt, &s);
    textf(line, sizeof line, "%s: the session opened", what);
    return ok(0, line);
  }
  textf(line, sizeof line, "%s: [%s] %s", what, rt_error_code_name(e.code), e.msg);
  return ok(strstr(e.msg, want) != NULL, line);
}

/* run_paged runs `runs` inputs of deep.onnx through test and ref and checks the outputs and that
 * every run streamed want_paged of the DEEP_LAYERS layers (the others resident, or none paged). */
static int run_paged(ort_rt* rt, rt_session* test, rt_session* ref, int want_paged, const char* label) {
  static const int64_t batches[] = {1, 5, 64, 5};
  const int runs = (int)(sizeof batches / sizeof batches[0]);
  CudaEpOrtStats before, after;
  int f = rt_ep_stats(rt, &before) < 0;
  for (int i = 0; i < runs; i++) {
    host_tensor x;
    if (make_mlp_input(&x, batches[i], 300 + (uint64_t)i) < 0) return f + 1;
    char why[1024] = "", what[1400];
    int rc = run_and_compare(rt, test, ref, &x, why, sizeof why);
    textf(what, sizeof what, "%s: batch %lld matches the CPU session%s%s", label, (long long)batches[i],
          rc ? ": " : "", why);
    f += ok(rc == 0, what);
    host_tensor_free(&x);
  }
  f += rt_ep_stats(rt, &after) < 0;
  unsigned long long layers = after.paged_layers - before.paged_layers, bytes = after.paged_bytes - before.paged_bytes,
                     read = after.weight_file_bytes - before.weight_file_bytes;
  unsigned long long want_layers = (unsigned long long)runs * (unsigned long long)want_paged;
  char what[512];
  textf(what, sizeof what, "%s: %llu layers paged (%d runs x %d layers: %llu expected), %llu bytes", label, layers, runs,
        want_paged, want_layers, bytes);
  f += ok(layers == want_layers && bytes == want_layers * DEEP_LAYER_BYTES, what);
  textf(what, sizeof what, "%s: every paged byte was read from the file (%llu)", label, read);
  f += ok(read == bytes, what);
  return f;
}

int case_paging(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  if (!rt->ep_mode) {
    printf("  skip paging (cpu-only: paging is CudaEp's)\n");
    return 0;
  }
  unsigned long mark = rt_log_mark();
  int f = 0;
  struct {
    const char *paging, *budget, *label;
    int paged;
  } ok_cases[] = {
      {"on", "0", "paging=on", DEEP_LAYERS},
      {"on", "70000", "paging=on under a budget: every layer still paged", DEEP_LAYERS},
      {"auto", "40000", "paging=auto under a 40000-byte budget (99840 bytes of weights)", DEEP_LAYERS},
      /* Two layers (33280 bytes) stay resident beside the two 16640-byte slots: 66560 <= 70000. */
      {"auto", "70000", "paging=auto under a 70000-byte budget: two layers resident, four paged", DEEP_LAYERS - 2},
      {"auto", "100000", "paging=auto under a budget the weights fit", 0},
  };
  for (size_t c = 0; c < sizeof ok_cases / sizeof ok_cases[0]; c++) {
    rt_session_opts o;
    ep_options(rt, &o);
    add_ep_option(&o, "tf32", "0");
    add_ep_option(&o, "paging", ok_cases[c].paging);
    add_ep_option(&o, "weight_budget_bytes", ok_cases[c].budget);
    o.disable_cpu_fallback = 1;
    rt_session test, ref;
    if (open_pair(rt, argv[1], "deep.onnx", &o, &test, &ref) < 0) {
      f++;
      continue;
    }
    f += run_paged(rt, &test, &ref, ok_cases[c].paged, ok_cases[c].label);
    rt_session_release(rt, &test);
    rt_session_release(rt, &ref);
  }

  /* What paging cannot do is refused at session creation, naming the options. */
  struct {
    const char *paging, *budget, *graph, *want, *what;
  } bad[] = {
      {"off", "40000", "0", "paging=off", "weights over the budget with paging=off"},
      {"auto", "20000", "0", "weight_budget_bytes=20000", "a budget below two layers"},
      {"on", "0", "1", "enable_cuda_graph", "paging with CUDA graphs"},
  };
  for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
    rt_session_opts o;
    ep_options(rt, &o);
    add_ep_option(&o, "paging", bad[c].paging);
    add_ep_option(&o, "weight_budget_bytes", bad[c].budget);
    add_ep_option(&o, "enable_cuda_graph", bad[c].graph);
    o.disable_cpu_fallback = 1;
    f += expect_refused(rt, argv[1], "deep.onnx", &o, bad[c].want, bad[c].what);
  }

  CudaEpOrtStats st;
  f += rt_ep_stats(rt, &st) < 0;
  char what[256];
  textf(what, sizeof what,
        "nothing left: %u sessions, %llu partitions, %llu streams, %llu device bytes beyond %llu cached", st.sessions,
        (unsigned long long)st.partitions, (unsigned long long)st.sync_streams,
        (unsigned long long)(st.device_live_bytes - st.device_cached_bytes), (unsigned long long)st.device_cached_bytes);
  f += ok(st.sessions == 0 && st.partitions == 0 && st.sync_streams == 0 &&
              st.device_live_bytes == st.device_cached_bytes,
          what);
  return f + check_log(mark);
}
