/*
 * case_misuse.c - `misuse MODELDIR`: what a careless or hostile host or model does to CudaEp.
 *
 *   options      unknown key (through AppendExecutionProvider_V2 and as a raw config entry), bad
 *                values (device_id=99, paging=maybe), a backend other than the device's: session
 *                creation fails naming the key or value
 *   external     external-data initializers past the end of the file, outside the model's folder
 *                (.., an absolute path, a symlink out), with a byte size that disagrees with the
 *                shape, missing, a directory, or without a length and past the end: session
 *                creation (or the run) fails, refused by the one who must (ORT for what its loader
 *                validates, CudaEp for the rest) with that one's message; valid control models
 *                (one without a length entry) compute X @ W exactly
 *   device data  a Gather index outside its table, as a runtime input: the Run fails (CudaEp's
 *                error names the node, the input and the value), with and without CUDA graphs,
 *                and the next valid Run works
 *   threads      8 threads calling Run on one session at once: every output correct (a plain
 *                session, and one with enable_cuda_graph=1)
 *   unregister   UnregisterExecutionProviderLibrary while a session lives: fails cleanly or works;
 *                the session keeps working or fails with a status; registering again works
 *
 * With --cpu-only the option and unregister checks have nothing to test and are skipped; the
 * external-data models run on ORT's CPU EP, whose own refusals are then what is checked. Note that
 * ORT 1.24 and 1.30 check external-data locations themselves when they load a model (.., absolute,
 * symlinks out, and on 1.30 missing files), so those refusals come from ORT before CudaEp reads
 * anything; each line says who refused.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "models.h"

#define A(Name) ORT_API_FN(rt->api, Name)

/* test_options: the options of the session under test, as the mlp case uses them. */
static void test_options(ort_rt* rt, rt_session_opts* o) {
  ep_options(rt, o);
  add_ep_option(o, "tf32", "0");
  o->disable_cpu_fallback = rt->ep_mode;
}

/* --- options --------------------------------------------------------------------------------- */

typedef struct bad_option {
  const char* key;
  const char* value;
  int raw; /* 1: a raw session config entry; 0: an option of AppendExecutionProvider_V2 */
  const char* named;  /* the error must contain this ... */
  const char* named2; /* ... or this */
} bad_option;

static const bad_option bad_options[] = {
    {"no_such_key", "1", 0, "no_such_key", NULL},
    {"ep.cudaep.no_such_key", "1", 1, "no_such_key", NULL},
    {"device_id", "99", 0, "device_id", "99"},
    {"paging", "maybe", 0, "paging", "maybe"},
};

/* check_backend_option: a session option naming another backend than its device's is refused
 * (the session would run elsewhere than on the device ORT assigned), naming the option. */
static int check_backend_option(ort_rt* rt, const char* path) {
  const OrtKeyValuePairs* kv = ORT_API_FN(rt->api, EpDevice_EpMetadata)(rt->devices[0]);
  const char* sim = kv ? ORT_API_FN(rt->api, GetKeyValue)(kv, "simulated") : NULL;
  const char* other = (sim && !strcmp(sim, "1")) ? "cuda" : "sim";
  rt_session_opts o;
  test_options(rt, &o);
  for (size_t i = 0; i < o.num_ep_options; i++) /* ep_options may have set the device's own */
    if (!strcmp(o.ep_keys[i], "backend")) o.ep_values[i] = other;
  int has = 0;
  for (size_t i = 0; i < o.num_ep_options; i++) has |= !strcmp(o.ep_keys[i], "backend");
  if (!has) add_ep_option(&o, "backend", other);
  rt_session s;
  rt_error e;
  char what[2600];
  if (rt_session_create(rt, path, &o, &s, &e, 1) == 0) {
    rt_session_release(rt, &s);
    textf(what, sizeof what, "EP option backend=%s on a %s device: session creation fails (it succeeded)", other,
          !strcmp(other, "cuda") ? "simulated" : "CUDA");
    return ok(0, what);
  }
  printf("    backend=%s -> [%s] %s\n", other, rt_error_code_name(e.code), e.msg);
  textf(what, sizeof what, "EP option backend=%s on a %s device: refused by CudaEp as contradicting the device", other,
        !strcmp(other, "cuda") ? "simulated" : "CUDA");
  return ok(ep_own_error(e.msg) && strstr(e.msg, "contradicts the session's device") != NULL, what);
}

static int check_options(ort_rt* rt, const char* dir) {
  if (!rt->ep_mode) {
    printf("  skip options (cpu-only: no CudaEp to validate them)\n");
    return 0;
  }
  char path[4096];
  if (join_path(path, sizeof path, dir, "mlp.onnx") < 0) return 1;
  int f = 0;
  for (size_t i = 0; i < sizeof bad_options / sizeof bad_options[0]; i++) {
    const bad_option* b = &bad_options[i];
    rt_session_opts o;
    test_options(rt, &o);
    if (b->raw) {
      o.config_keys[0] = b->key;
      o.config_values[0] = b->value;
      o.num_config = 1;
    } else {
      add_ep_option(&o, b->key, b->value);
    }
    rt_session s;
    rt_error e;
    int rc = rt_session_create(rt, path, &o, &s, &e, 1);
    char what[2600];
    if (rc == 0) {
      rt_session_release(rt, &s);
      textf(what, sizeof what, "%s %s=%s: session creation fails (it succeeded)",
            b->raw ? "config entry" : "EP option", b->key, b->value);
      f += ok(0, what);
      continue;
    }
    printf("    %s=%s -> [%s] %s\n", b->key, b->value, rt_error_code_name(e.code), e.msg);
    int named = strstr(e.msg, b->named) || (b->named2 && strstr(e.msg, b->named2));
    textf(what, sizeof what, "%s %s=%s: session creation fails naming %s%s%s", b->raw ? "config entry" : "EP option",
          b->key, b->value, b->named, b->named2 ? " or " : "", b->named2 ? b->named2 : "");
    f += ok(named, what);
  }
  f += check_backend_option(rt, path);
  return f;
}

/* --- external data --------------------------------------------------------------------------- */

/* Who must refuse a model with CudaEp registered, and what its message must contain. ORT 1.24 and
 * 1.30 validate external-data locations themselves when they load a model (.., absolute paths,
 * symlinks out; 1.30 also missing files), so those never reach CudaEp; the others must be
 * refused by CudaEp's own checks (capi/ort checkExternal and externalLength), with its message. */
typedef enum { BY_CUDAEP, BY_ORT, BY_EITHER } refuser;

typedef struct ext_model {
  const char* file;
  const char* what;
  refuser by;
  const char* cudaep_says; /* CudaEp's message contains this (BY_CUDAEP, BY_EITHER) */
  const char* ort_says;    /* ORT's message contains this (BY_ORT, BY_EITHER) */
} ext_model;

/* Each must fail at session creation or at Run, with CudaEp and (checked with --cpu-only) with
 * ORT's CPU EP alone. */
static const ext_model bad_models[] = {
    {"ext_past_end.onnx", "offset + length past the end of the file", BY_CUDAEP, "48 bytes at offset 0 pass the end of the 24-byte file", NULL},
    {"ext_offset_past_end.onnx", "offset past the end of the file", BY_CUDAEP, "at offset 4096 pass the end of the 48-byte file", NULL},
    {"ext_dotdot.onnx", "location ../outside.bin (outside the model's folder)", BY_ORT, NULL, "escapes"},
    {"ext_absolute.onnx", "an absolute location", BY_ORT, NULL, "bsolute path"},
    {"ext_symlink.onnx", "a symlink to a file outside the model's folder", BY_ORT, NULL, "escapes"},
    {"ext_size_mismatch.onnx", "length 40 for a [4,3] float tensor (48 bytes)", BY_CUDAEP, "its length is 40 bytes, the tensor needs 48", NULL},
    {"ext_missing.onnx", "a file that does not exist", BY_EITHER, "no such file or directory", "does not exist"},
    {"ext_directory.onnx", "a directory inside the model's folder", BY_CUDAEP, "\"a_directory\" is not a regular file", NULL},
    {"ext_no_length_past_end.onnx", "no length, and 24 of the tensor's 48 bytes in the file", BY_CUDAEP,
     "48 bytes at offset 0 pass the end of the 24-byte file", NULL},
};

/* The W of gen_models.py's misuse models: 0.25 * (i + 1) * (-1)^i, shape [4, 3]. */
static float ext_w(int i) { return 0.25f * (float)(i + 1) * ((i % 2) ? -1.0f : 1.0f); }

/* open_and_run creates a session for misuse/<file> and runs X[2,4]; returns 0 when both work
 * (the output goes to *y), else -1 with the error in *e and `stage` naming where it failed. */
static int open_and_run(ort_rt* rt, const char* dir, const char* file, host_tensor* x, host_tensor* y, rt_error* e,
                        const char** stage) {
  char mdir[4096], path[4096];
  *stage = "finding the model";
  if (join_path(mdir, sizeof mdir, dir, "misuse") < 0 || join_path(path, sizeof path, mdir, file) < 0) {
    e->failed = 1;
    textf(e->msg, sizeof e->msg, "path too long");
    return -1;
  }
  rt_session_opts o;
  test_options(rt, &o);
  rt_session s;
  *stage = "session creation";
  if (rt_session_create(rt, path, &o, &s, e, 1) < 0) return -1;
  *stage = "Run";
  int rc = rt_run(rt, &s, x, 1, y, e, 1);
  rt_session_release(rt, &s);
  return rc;
}

static int check_external(ort_rt* rt, const char* dir) {
  int f = 0;
  char err[256], what[2600];
  host_tensor x, want;
  int64_t xd[2] = {2, 4}, yd[2] = {2, 3};
  if (host_tensor_alloc(&x, ONNX_PB_FLOAT, xd, 2, err, sizeof err) < 0 ||
      host_tensor_alloc(&want, ONNX_PB_FLOAT, yd, 2, err, sizeof err) < 0)
    return ok(0, err);
  fill_random(&x, 42, 1.0f);
  const float* xv = (const float*)x.data;
  float* wv = (float*)want.data;
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 3; c++) {
      double acc = 0;
      for (int k = 0; k < 4; k++) acc += (double)xv[r * 4 + k] * ext_w(k * 3 + c);
      wv[r * 3 + c] = (float)acc;
    }

  /* The controls: valid external-data models compute X @ W (ext_no_length has no length entry,
   * which ONNX defines as the tensor's size from the offset). */
  static const char* const controls[] = {"ext_ok.onnx", "ext_no_length.onnx"};
  host_tensor y;
  rt_error e;
  const char* stage;
  for (size_t i = 0; i < sizeof controls / sizeof controls[0]; i++) {
    if (open_and_run(rt, dir, controls[i], &x, &y, &e, &stage) < 0) {
      textf(what, sizeof what, "control %s loads and runs: %s failed: [%s] %s", controls[i], stage,
            rt_error_code_name(e.code), e.msg);
      f += ok(0, what);
    } else {
      char why[1024] = "";
      int rc = compare_tensors(&y, &want, MODEL_RTOL, MODEL_ATOL, why, sizeof why);
      textf(what, sizeof what, "control %s computes X @ W from its external data%s%s", controls[i], rc ? ": " : "", why);
      f += ok(rc == 0, what);
      host_tensor_free(&y);
    }
  }

  for (size_t i = 0; i < sizeof bad_models / sizeof bad_models[0]; i++) {
    const ext_model* m = &bad_models[i];
    int rc = open_and_run(rt, dir, m->file, &x, &y, &e, &stage);
    if (rc == 0) {
      char why[1024] = "";
      int same = compare_tensors(&y, &want, MODEL_RTOL, MODEL_ATOL, why, sizeof why) == 0;
      host_tensor_free(&y);
      textf(what, sizeof what, "%s (%s): refused (it loaded and ran%s)", m->file, m->what,
            same ? ", reading the weights" : ", computing garbage");
      f += ok(0, what);
      continue;
    }
    printf("    %s -> %s: [%s] %s\n", m->file, stage, rt_error_code_name(e.code), e.msg);
    if (!rt->ep_mode) { /* ORT's CPU EP alone: its own refusal, whatever its words */
      textf(what, sizeof what, "%s (%s): %s fails with an error (refused by ORT)", m->file, m->what, stage);
      f += ok(e.msg[0] != 0, what);
      continue;
    }
    int by_cudaep = ep_own_error(e.msg);
    int right = by_cudaep ? m->by != BY_ORT && strstr(e.msg, m->cudaep_says) != NULL
                          : m->by != BY_CUDAEP && strstr(e.msg, m->ort_says) != NULL;
    const char* want_who = m->by == BY_CUDAEP ? "CudaEp" : m->by == BY_ORT ? "ORT, before CudaEp read it" : "ORT or CudaEp";
    textf(what, sizeof what, "%s (%s): %s fails, refused by %s (want %s, saying \"%s\")", m->file, m->what, stage,
          by_cudaep ? "CudaEp" : "ORT", want_who, by_cudaep ? (m->cudaep_says ? m->cudaep_says : "-") : (m->ort_says ? m->ort_says : "-"));
    f += ok(right, what);
  }
  host_tensor_free(&x);
  host_tensor_free(&want);
  return f;
}

/* --- threads --------------------------------------------------------------------------------- */

#define THREADS 8
#define RUNS_PER_THREAD 25

typedef struct thread_arg {
  ort_rt* rt;
  rt_session* test;
  rt_session* ref;
  int index;
  int failures;
  char first[1024];
} thread_arg;

static void* run_thread(void* p) {
  thread_arg* a = p;
  for (int r = 0; r < RUNS_PER_THREAD; r++) {
    host_tensor x;
    int64_t batch = 1 + (a->index + r) % 8;
    if (make_mlp_input(&x, batch, (uint64_t)a->index * 1000 + (uint64_t)r) < 0) {
      a->failures++;
      continue;
    }
    char why[1024];
    if (run_and_compare(a->rt, a->test, a->ref, &x, why, sizeof why) < 0) {
      if (!a->failures) textf(a->first, sizeof a->first, "run %d (batch %lld): %s", r, (long long)batch, why);
      a->failures++;
    }
    host_tensor_free(&x);
  }
  return NULL;
}

/* check_threads runs THREADS threads of Runs on one session; with_graph adds
 * enable_cuda_graph=1 (a run that captures must not disturb the others). */
static int check_threads(ort_rt* rt, const char* dir, int with_graph) {
  rt_session_opts o;
  test_options(rt, &o);
  if (with_graph) add_ep_option(&o, "enable_cuda_graph", "1");
  rt_session test, ref;
  if (open_pair(rt, dir, "mlp.onnx", &o, &test, &ref) < 0) return 1;
  thread_arg args[THREADS];
  pthread_t threads[THREADS];
  int started = 0, f = 0;
  for (int i = 0; i < THREADS; i++) {
    memset(&args[i], 0, sizeof args[i]);
    args[i].rt = rt;
    args[i].test = &test;
    args[i].ref = &ref;
    args[i].index = i;
    if (pthread_create(&threads[i], NULL, run_thread, &args[i]) != 0) break;
    started++;
  }
  int failures = 0;
  for (int i = 0; i < started; i++) {
    pthread_join(threads[i], NULL);
    failures += args[i].failures;
    if (args[i].failures) printf("    thread %d: %d failure(s), first: %s\n", i, args[i].failures, args[i].first);
  }
  char what[256];
  textf(what, sizeof what, "%d threads x %d concurrent Runs on one session%s: %d wrong or failed", started,
        RUNS_PER_THREAD, with_graph ? " with enable_cuda_graph=1" : "", failures);
  f += ok(started == THREADS && failures == 0, what);
  rt_session_release(rt, &test);
  rt_session_release(rt, &ref);
  return f;
}

/* --- unregistering under a live session ------------------------------------------------------ */

static int run_once(ort_rt* rt, rt_session* test, rt_session* ref, uint64_t seed, char* why, size_t cap) {
  host_tensor x;
  if (make_mlp_input(&x, 4, seed) < 0) return textf(why, cap, "no input"), -1;
  int rc = run_and_compare(rt, test, ref, &x, why, cap);
  host_tensor_free(&x);
  return rc;
}

static int check_unregister(ort_rt* rt, const char* dir) {
  if (!rt->ep_mode) {
    printf("  skip unregister (cpu-only: no library registered)\n");
    return 0;
  }
  int f = 0;
  char why[1024] = "", what[2600];
  rt_session_opts o;
  test_options(rt, &o);
  rt_session test, ref;
  if (open_pair(rt, dir, "mlp.onnx", &o, &test, &ref) < 0) return 1;
  int rc = run_once(rt, &test, &ref, 1, why, sizeof why);
  textf(what, sizeof what, "the session runs before unregistering%s%s", rc ? ": " : "", why);
  f += ok(rc == 0, what);

  rt_error e;
  int un = rt_unregister_ep(rt, &e);
  if (un < 0) {
    printf("    UnregisterExecutionProviderLibrary with a live session -> [%s] %s\n", rt_error_code_name(e.code), e.msg);
    f += ok(e.msg[0] != 0, "unregistering with a live session fails cleanly, with a message");
  } else {
    printf("    UnregisterExecutionProviderLibrary with a live session succeeded\n");
  }
  rc = run_once(rt, &test, &ref, 2, why, sizeof why);
  if (un == 0 && rc != 0 && strstr(why, "Run failed")) {
    /* Unregistered under it: a clean error is acceptable, a crash would not have got here. */
    printf("    the session after unregistering fails cleanly: %s\n", why);
  } else {
    textf(what, sizeof what, "the session still computes correctly after the unregister call%s%s", rc ? ": " : "",
          why);
    f += ok(rc == 0, what);
  }
  rt_session_release(rt, &test);
  rt_session_release(rt, &ref);
  printf("  ok   releasing the session afterwards did not crash\n");

  if (un < 0) {
    un = rt_unregister_ep(rt, &e);
    if (un < 0) printf("    UnregisterExecutionProviderLibrary -> [%s] %s\n", rt_error_code_name(e.code), e.msg);
    f += ok(un == 0, "unregistering succeeds once the session is gone");
  }
  /* Registering again must bring the devices back and give working sessions. */
  rt_error re;
  int reg = rt_take(rt, A(RegisterExecutionProviderLibrary)(rt->env, RT_EP_REGISTRATION, rt->ep_path),
                    "RegisterExecutionProviderLibrary (again)", &re, 0);
  if (reg == 0) rt->registered = 1;
  int n = reg == 0 ? rt_refresh_devices(rt) : 0;
  textf(what, sizeof what, "registering again lists %d CudaEp device(s)", n);
  f += ok(reg == 0 && n >= 1, what);
  if (n >= 1 && open_pair(rt, dir, "mlp.onnx", &o, &test, &ref) == 0) {
    rc = run_once(rt, &test, &ref, 3, why, sizeof why);
    textf(what, sizeof what, "a new session after registering again computes correctly%s%s", rc ? ": " : "", why);
    f += ok(rc == 0, what);
    rt_session_release(rt, &test);
    rt_session_release(rt, &ref);
  } else if (n >= 1) {
    f++;
  }
  return f;
}

/* --- bad device data ------------------------------------------------------------------------- */

/* check_device_data runs misuse/gather_indices.onnx (Y = Gather(T[4,3], I)) with the index as
 * a runtime input: valid ones (1, and -1: the last row) give T's rows; 9 fails the Run, on
 * ORT's CPU EP and, with CudaEp, with CudaEp's error naming the node, the input and the value
 * (plain, and with enable_cuda_graph=1, where the step replays); the next valid run works. */
static int check_device_data(ort_rt* rt, const char* dir) {
  char path[4096], mdir[4096], err[256], what[2600];
  if (join_path(mdir, sizeof mdir, dir, "misuse") < 0 || join_path(path, sizeof path, mdir, "gather_indices.onnx") < 0)
    return ok(0, "paths fit");
  int f = 0;
  for (int graph = 0; graph < (rt->ep_mode ? 2 : 1); graph++) {
    rt_session_opts o;
    test_options(rt, &o);
    if (graph) add_ep_option(&o, "enable_cuda_graph", "1");
    rt_session s;
    rt_error e;
    if (rt_session_create(rt, path, &o, &s, &e, 0) < 0) return f + ok(0, "create the gather_indices session");
    static const int64_t indices[] = {1, 9, -1, 9, 2};
    for (size_t r = 0; r < sizeof indices / sizeof indices[0]; r++) {
      int64_t d[1] = {1};
      host_tensor x, y;
      if (host_tensor_alloc(&x, ONNX_PB_INT64, d, 1, err, sizeof err) < 0) {
        f += ok(0, err);
        break;
      }
      ((int64_t*)x.data)[0] = indices[r];
      int rc = rt_run(rt, &s, &x, 1, &y, &e, 1);
      host_tensor_free(&x);
      int64_t i = indices[r];
      if (i >= -4 && i < 4) {
        int row = (int)(i < 0 ? i + 4 : i), right = rc == 0;
        for (int c = 0; right && c < 3; c++) right = ((const float*)y.data)[c] == 0.5f * (float)(row * 3 + c + 1);
        textf(what, sizeof what, "%sindex %lld: the Run gives row %d of T%s%s", graph ? "enable_cuda_graph=1, " : "",
              (long long)i, row, rc ? ": " : "", rc ? e.msg : "");
        f += ok(right, what);
        if (rc == 0) host_tensor_free(&y);
        continue;
      }
      if (rc == 0) host_tensor_free(&y);
      else printf("    index %lld -> [%s] %s\n", (long long)i, rt_error_code_name(e.code), e.msg);
      int named = rc != 0 && (!rt->ep_mode || (ep_own_error(e.msg) && strstr(e.msg, "node 'gather_rows' (Gather)") &&
                                               strstr(e.msg, "input 'indices' holds 9")));
      textf(what, sizeof what, "%sindex %lld: the Run fails%s", graph ? "enable_cuda_graph=1, " : "", (long long)i,
            rt->ep_mode ? " with CudaEp's error naming the node, the input and the value" : " (ORT's CPU EP)");
      f += ok(named, what);
    }
    rt_session_release(rt, &s);
  }
  return f;
}

int case_misuse(ort_rt* rt, int argc, char** argv) {
  (void)argc;
  const char* dir = argv[1];
  int f = 0;
  printf("  -- options\n");
  f += check_options(rt, dir);
  printf("  -- external data\n");
  f += check_external(rt, dir);
  printf("  -- bad device data\n");
  f += check_device_data(rt, dir);
  printf("  -- concurrent Run\n");
  f += check_threads(rt, dir, 0);
  if (rt->ep_mode) f += check_threads(rt, dir, 1);
  if (rt->ep_mode) {
    /* Every session above is closed, failed ones included: nothing of CudaEp may be left. */
    CudaEpOrtStats st;
    char what[256];
    f += rt_ep_stats(rt, &st) < 0;
    textf(what, sizeof what,
          "after the misuse, nothing left: %u sessions, %llu partitions, %llu streams, %llu device bytes beyond %llu "
          "cached",
          st.sessions, (unsigned long long)st.partitions, (unsigned long long)st.sync_streams,
          (unsigned long long)(st.device_live_bytes - st.device_cached_bytes), (unsigned long long)st.device_cached_bytes);
    f += ok(st.sessions == 0 && st.partitions == 0 && st.sync_streams == 0 &&
                st.device_live_bytes == st.device_cached_bytes,
            what);
  }
  printf("  -- unregistering under a live session\n");
  f += check_unregister(rt, dir);
  return f;
}
