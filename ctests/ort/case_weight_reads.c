/*
 * case_weight_reads.c - `weight_reads MODELDIR`: who reads an external-data file, ORT or CudaEp,
 * while a CudaEp-only session over MODELDIR/weight_reads (gen_models.py) is created and run.
 *
 * The file's pages are dropped from the page cache first (posix_fadvise DONTNEED: it holds
 * only clean pages). Then, after session creation and after RUNS runs, for the resident mode
 * (weights loaded once) and for paging=on (streamed at every run), it reports
 *
 *   cache    the file's pages in the page cache (mincore over a mapping of this case's own,
 *            which touches no page): what anyone read of the file, ORT and CudaEp together;
 *   mapped   each mapping of the file in this process (/proc/self/smaps) with its size and the
 *            pages faulted in through it (Rss) or copied on write (Private_Dirty): CudaEp maps
 *            the file shared and read-only, ORT's own mappings are private;
 *   CudaEp   the bytes CudaEp counted reading from external-data files (CudaEpGetOrtStats).
 *
 * It checks what README and docs/ORT.md say of it: no private mapping of the file (ORT's) is
 * left holding a page or a copied page after session creation or after the runs; with
 * paging=on, where CudaEp reads nothing at session creation, the page cache then holds less
 * than one weight matrix of the file (ORT reads the small bias its optimizer rewrites, and the
 * readahead around it, and no weight), and after the runs no more than CudaEp's own mapping
 * faulted in; CudaEp reads the weights itself (once in the resident mode,
 * at every run when paging); the session computes what ORT's CPU EP computes.
 * `scripts/ort-weight-reads.sh` runs it on a 2 GiB file under strace, which shows ORT's opens
 * and mappings of the file (they come and go within session creation).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cases.h"

#define RUNS 3
#define LAYER_BYTES ((uint64_t)2048 * 2048 * 4) /* one weight matrix of gen_models.py's weight_reads */

typedef struct reading {
  uint64_t cached;         /* bytes of the file in the page cache */
  uint64_t shared_rss;     /* bytes faulted in through shared mappings of the file (CudaEp's) */
  uint64_t private_rss;    /* ... through private mappings of the file (ORT's) */
  uint64_t private_dirty;  /* bytes of private mappings copied on write */
  uint64_t private_size;   /* total size of the private mappings */
  int private_maps, shared_maps;
  uint64_t rss_file;       /* VmRSS's file-backed part (RssFile), every file of the process */
  uint64_t cudaep_read;    /* CudaEpOrtStats.weight_file_bytes */
} reading;

/* cached_bytes counts the file's pages in the page cache through our own mapping `m`. */
static uint64_t cached_bytes(void* m, size_t len) {
  long page = sysconf(_SC_PAGESIZE);
  size_t pages = (len + (size_t)page - 1) / (size_t)page;
  unsigned char* vec = malloc(pages ? pages : 1);
  if (!vec || mincore(m, len, vec) != 0) {
    free(vec);
    return UINT64_MAX;
  }
  uint64_t n = 0;
  for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
  free(vec);
  return n * (uint64_t)page;
}

static uint64_t rss_file(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "RssFile: %" SCNu64 " kB", &kb) == 1) break;
  fclose(f);
  return kb * 1024;
}

/* scan_maps sums /proc/self/smaps over the mappings of `path` (by device and inode), except the
 * one starting at `ours`. */
static void scan_maps(reading* r, dev_t dev, ino_t ino, uintptr_t ours) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (!f) return;
  char line[4096];
  int in = 0, priv = 0;
  while (fgets(line, sizeof line, f)) {
    uintptr_t lo, hi;
    char perms[8];
    unsigned long long off, inode;
    unsigned maj, min;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %llx %x:%x %llu", &lo, &hi, perms, &off, &maj, &min, &inode) == 7) {
      in = inode == (unsigned long long)ino && (dev_t)makedev(maj, min) == dev && lo != ours;
      priv = perms[3] == 'p';
      if (in) {
        if (priv) {
          r->private_maps++;
          r->private_size += hi - lo;
        } else {
          r->shared_maps++;
        }
      }
      continue;
    }
    if (!in) continue;
    unsigned long long kb;
    if (sscanf(line, "Rss: %llu kB", &kb) == 1) {
      if (priv) r->private_rss += kb * 1024;
      else r->shared_rss += kb * 1024;
    } else if (sscanf(line, "Private_Dirty: %llu kB", &kb) == 1 && priv) {
      r->private_dirty += kb * 1024;
    }
  }
  fclose(f);
}

typedef struct file_view {
  const char* path;
  void* map;
  size_t len;
  dev_t dev;
  ino_t ino;
} file_view;

static void take(ort_rt* rt, const file_view* v, reading* r) {
  memset(r, 0, sizeof *r);
  r->cached = cached_bytes(v->map, v->len);
  scan_maps(r, v->dev, v->ino, (uintptr_t)v->map);
  r->rss_file = rss_file();
  CudaEpOrtStats st;
  if (rt_ep_stats(rt, &st) == 0) r->cudaep_read = st.weight_file_bytes;
}

/* phase marks where a phase starts for strace (scripts/ort-weight-reads.sh splits its log
 * there): an access() of a path that names the phase and does not exist. */
static void phase(const char* name) {
  char path[256];
  textf(path, sizeof path, "/cudaep-weight-reads-phase/%s", name);
  (void)access(path, F_OK);
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_reading(const char* phase, const reading* r, const reading* base) {
  printf("    %-26s cache %8.1f MiB | ORT: %d private map(s) of %8.1f MiB, Rss %7.1f MiB, dirty %5.1f MiB | "
         "CudaEp: %d shared map(s), Rss %8.1f MiB, read %8.1f MiB | process RssFile %+8.1f MiB\n",
         phase, mib(r->cached), r->private_maps, mib(r->private_size), mib(r->private_rss), mib(r->private_dirty),
         r->shared_maps, mib(r->shared_rss), mib(r->cudaep_read - base->cudaep_read),
         ((double)r->rss_file - (double)base->rss_file) / (1024.0 * 1024.0));
}

/* measure runs one mode: creates the session, runs it RUNS times, and checks the readings. */
static int measure(ort_rt* rt, const file_view* v, const char* model, const char* paging, host_tensor* x, host_tensor* y0) {
  int f = 0;
  char what[512];
  int fd = open(v->path, O_RDONLY); /* written back first: DONTNEED drops clean pages only */
  if (fd < 0 || fdatasync(fd) != 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
    if (fd >= 0) close(fd);
    return ok(0, "drop the file's pages from the page cache (posix_fadvise)");
  }
  close(fd);
  reading before, created, ran;
  take(rt, v, &before);
  printf("  -- paging=%s, a %.0f MiB external-data file\n", paging, mib(v->len));
  print_reading("before the session", &before, &before);

  rt_session_opts o;
  ep_options(rt, &o);
  o.disable_cpu_fallback = 1;
  add_ep_option(&o, "paging", paging);
  rt_session s;
  rt_error e;
  char name[64];
  textf(name, sizeof name, "paging=%s:session-creation", paging);
  phase(name);
  if (rt_session_create(rt, model, &o, &s, &e, 0) < 0) return ok(0, "create the CudaEp-only session");
  textf(name, sizeof name, "paging=%s:runs", paging);
  phase(name);
  take(rt, v, &created);
  print_reading("after session creation", &created, &before);
  host_tensor y = {0};
  for (int i = 0; i < RUNS; i++) {
    if (i) host_tensor_free(&y);
    if (rt_run(rt, &s, x, 1, &y, &e, 0) < 0) {
      rt_session_release(rt, &s);
      return ok(0, "run the session");
    }
  }
  textf(name, sizeof name, "paging=%s:release", paging);
  phase(name);
  take(rt, v, &ran);
  char label[64];
  textf(label, sizeof label, "after %d runs", RUNS);
  print_reading(label, &ran, &before);
  rt_session_release(rt, &s);
  phase("between");

  char why[1024] = "";
  int rc = compare_tensors(&y, y0, 1e-4, 1e-5, why, sizeof why);
  textf(what, sizeof what, "paging=%s: the output matches ORT's CPU EP%s%s", paging, rc ? ": " : "", why);
  f += ok(rc == 0, what);
  host_tensor_free(&y);

  const reading* at[2] = {&created, &ran};
  const char* when[2] = {"after session creation", "after the runs"};
  for (int i = 0; i < 2; i++) {
    textf(what, sizeof what, "paging=%s, %s: ORT faulted in %.1f MiB and copied %.1f MiB through its %d private mapping(s) (want 0)",
          paging, when[i], mib(at[i]->private_rss), mib(at[i]->private_dirty), at[i]->private_maps);
    f += ok(at[i]->private_rss == 0 && at[i]->private_dirty == 0, what);
  }
  if (before.cached != 0) {
    /* A filesystem whose page cache is its storage (tmpfs) keeps the pages: the cache says
     * nothing about who read them there. */
    printf("  skip paging=%s: page-cache checks (DONTNEED left %.1f MiB of the file cached: tmpfs?)\n", paging,
           mib(before.cached));
  } else if (!strcmp(paging, "on")) {
    /* CudaEp reads nothing at session creation with paging=on, so what is cached then is ORT's:
     * the pages of the small initializers its optimizer rewrites (the bias; it maps them
     * privately and reads them) and the readahead around them (read_ahead_kb), never a weight
     * matrix (16 MiB each). */
    textf(what, sizeof what, "paging=on: after session creation the page cache holds %.1f MiB of the file (ORT's reads: want less than "
          "one %.0f MiB weight matrix)", mib(created.cached), mib(LAYER_BYTES));
    f += ok(created.cached < LAYER_BYTES, what);
    textf(what, sizeof what, "paging=on: after the runs the cache holds %.1f MiB, CudaEp's mapping faulted in %.1f MiB (want no more)",
          mib(ran.cached), mib(ran.shared_rss));
    f += ok(ran.cached <= ran.shared_rss, what);
  }
  /* Resident: the file once. Paging: every byte at every run (a small initializer shared by
   * several layers is streamed with each of them, so a little more). */
  uint64_t got = ran.cudaep_read - before.cudaep_read, want = strcmp(paging, "on") ? v->len : v->len * RUNS;
  textf(what, sizeof what, "paging=%s: CudaEp read the weights itself: %" PRIu64 " bytes (want %s%" PRIu64 ")", paging, got,
        strcmp(paging, "on") ? "" : "at least ", want);
  f += ok(strcmp(paging, "on") ? got == want : got >= want, what);
  return f;
}

int case_weight_reads(ort_rt* rt, int argc, char** argv) {
  if (argc < 2) return ok(0, "weight_reads needs MODELDIR");
  if (!rt->ep_mode) {
    printf("  skip weight_reads (cpu-only: no CudaEp)\n");
    return 0;
  }
  char dir[4096], model[4096], data[4096];
  if (join_path(dir, sizeof dir, argv[1], "weight_reads") < 0 || join_path(model, sizeof model, dir, "model.onnx") < 0 ||
      join_path(data, sizeof data, dir, "weights.bin") < 0)
    return ok(0, "paths fit");
  file_view v = {.path = data};
  struct stat st;
  int fd = open(data, O_RDONLY);
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return ok(0, "open weight_reads/weights.bin");
  }
  v.len = (size_t)st.st_size;
  v.dev = st.st_dev;
  v.ino = st.st_ino;
  v.map = mmap(NULL, v.len, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (v.map == MAP_FAILED) return ok(0, "map weights.bin to look at its page-cache residency");

  /* The reference, first: ORT's CPU EP reads the file itself, so its session is gone (and the
   * pages dropped again) before anything is measured. */
  int f = 0;
  char err[256];
  host_tensor x, y0 = {0};
  int64_t xd[2] = {1, 2048};
  if (host_tensor_alloc(&x, ONNX_PB_FLOAT, xd, 2, err, sizeof err) < 0) return ok(0, err);
  fill_random(&x, 7, 1.0f);
  rt_session_opts co;
  memset(&co, 0, sizeof co);
  rt_session cpu;
  rt_error e;
  phase("cpu-ep-reference");
  if (rt_session_create(rt, model, &co, &cpu, &e, 0) < 0 || rt_run(rt, &cpu, &x, 1, &y0, &e, 0) < 0) {
    munmap(v.map, v.len);
    host_tensor_free(&x);
    return ok(0, "the CPU EP's reference run");
  }
  rt_session_release(rt, &cpu);
  phase("between");

  f += measure(rt, &v, model, "off", &x, &y0);
  f += measure(rt, &v, model, "on", &x, &y0);
  host_tensor_free(&x);
  host_tensor_free(&y0);
  munmap(v.map, v.len);
  return f;
}
