/*
 * Shared by the peer drivers: reading the trace written by
 * `depengine bench --dump-trace`, busy bodies, push-to-start latencies,
 * the completing thread of `roundtrip`, and the one-line report that
 * matches `depengine bench`.
 *
 * Every driver is called as
 *   DRIVER WORKLOAD BODY_US WORKERS RUNS TRACE_FILE   (trace workloads)
 *   DRIVER roundtrip BODY_US WORKERS RUNS ROUNDS
 * and prints
 *   workload=W body_us=B system=S workers=N ops=O runs=R ns_per_op=M min=A max=B
 *   [efficiency=E] [p50_us= p99_us= makespan_ms=]
 * Time is taken from the first push to the return of the system's
 * wait-for-all; the median of RUNS runs after one warm-up run.
 */
#ifndef DEPENGINE_PEERS_COMMON_H
#define DEPENGINE_PEERS_COMMON_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRACE_MAGIC 0x54504544u /* "DEPT" little-endian */

struct trace {
  uint32_t nvars, nops;
  int32_t *prio;
  uint32_t *body_ns;
  uint32_t *off; /* start of op i's var ids in ids: reads, then writes */
  uint16_t *nr, *nw;
  uint32_t *ids;
  int32_t *hi_slot; /* index among the ops of priority > 0, or -1 */
  uint32_t nhigh;
  double total_body_ns;
};

static struct trace T;
static double *hi_push_ns, *hi_start_ns; /* per op of priority > 0 */
static double t0_ns;                     /* start of the current run */

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Spins on the clock until ns nanoseconds have passed. */
static void busy(uint32_t ns) {
  if (ns == 0) return;
  double until = now_ns() + (double)ns;
  while (now_ns() < until) {
  }
}

/*
 * PEER_CHECK=1: every body checks that the system kept the trace's order:
 * when op i starts, each var it uses has seen exactly the writes pushed
 * before i, and each var it writes also every read pushed before i.
 */
static int check_on;
static uint32_t *exp_w, *exp_r;     /* per var slot of each op */
static uint32_t *done_w, *done_r;   /* per var, updated atomically */
static unsigned long violations;

static void check_start(uint32_t i) {
  const uint32_t *v = T.ids + T.off[i];
  for (uint32_t k = 0; k < (uint32_t)T.nr[i] + T.nw[i]; k++) {
    uint32_t o = T.off[i] + k;
    int ok = __atomic_load_n(&done_w[v[k]], __ATOMIC_ACQUIRE) == exp_w[o];
    if (k >= T.nr[i])
      ok = ok && __atomic_load_n(&done_r[v[k]], __ATOMIC_ACQUIRE) == exp_r[o];
    if (!ok) __atomic_fetch_add(&violations, 1, __ATOMIC_RELAXED);
  }
}

static void check_end(uint32_t i) {
  const uint32_t *v = T.ids + T.off[i];
  for (uint32_t k = 0; k < (uint32_t)T.nr[i] + T.nw[i]; k++)
    __atomic_fetch_add(k < T.nr[i] ? &done_r[v[k]] : &done_w[v[k]], 1,
                       __ATOMIC_RELEASE);
}

/* The body of op i: records its start when it has priority, then spins. */
static void op_body(uint32_t i) {
  int32_t s = T.hi_slot[i];
  if (s >= 0) hi_start_ns[s] = now_ns();
  if (check_on) check_start(i);
  busy(T.body_ns[i]);
  if (check_on) check_end(i);
}

/* Called before each run: resets the per-var counters of PEER_CHECK. */
static void check_reset(void) {
  if (check_on) {
    memset(done_w, 0, (T.nvars + 1) * 4);
    memset(done_r, 0, (T.nvars + 1) * 4);
  }
}

/* Records the push of op i (call just before handing it to the system). */
static void op_pushed(uint32_t i) {
  int32_t s = T.hi_slot[i];
  if (s >= 0) hi_push_ns[s] = now_ns();
}

static void die(const char *what) {
  fprintf(stderr, "peer driver: %s\n", what);
  exit(2);
}

static uint32_t rd(FILE *f) {
  uint32_t w;
  if (fread(&w, 4, 1, f) != 1) die("truncated trace file");
  return w;
}

static void load_trace(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open the trace file");
  if (rd(f) != TRACE_MAGIC || rd(f) != 1) die("not a version-1 trace file");
  T.nvars = rd(f);
  T.nops = rd(f);
  size_t n = T.nops, cap = n * 2 + 16, used = 0;
  T.prio = (int32_t *)malloc(n * 4);
  T.body_ns = (uint32_t *)malloc(n * 4);
  T.off = (uint32_t *)malloc(n * 4);
  T.nr = (uint16_t *)malloc(n * 2);
  T.nw = (uint16_t *)malloc(n * 2);
  T.hi_slot = (int32_t *)malloc(n * 4);
  T.ids = (uint32_t *)malloc(cap * 4);
  for (size_t i = 0; i < n; i++) {
    T.prio[i] = (int32_t)rd(f);
    T.body_ns[i] = rd(f);
    T.nr[i] = (uint16_t)rd(f);
    T.nw[i] = (uint16_t)rd(f);
    T.total_body_ns += T.body_ns[i];
    T.hi_slot[i] = T.prio[i] > 0 ? (int32_t)T.nhigh++ : -1;
    size_t k = (size_t)T.nr[i] + T.nw[i];
    if (used + k > cap) {
      cap = (used + k) * 2;
      T.ids = (uint32_t *)realloc(T.ids, cap * 4);
    }
    T.off[i] = (uint32_t)used;
    if (k && fread(T.ids + used, 4, k, f) != k) die("truncated trace file");
    used += k;
  }
  fclose(f);
  const char *c = getenv("PEER_CHECK");
  check_on = c && *c == '1';
  if (check_on) {
    done_w = (uint32_t *)calloc(T.nvars + 1, 4);
    done_r = (uint32_t *)calloc(T.nvars + 1, 4);
    exp_w = (uint32_t *)malloc((used + 1) * 4);
    exp_r = (uint32_t *)malloc((used + 1) * 4);
    for (size_t i = 0; i < n; i++) {
      const uint32_t *v = T.ids + T.off[i];
      for (uint32_t k = 0; k < (uint32_t)T.nr[i] + T.nw[i]; k++) {
        exp_w[T.off[i] + k] = done_w[v[k]];
        exp_r[T.off[i] + k] = done_r[v[k]];
      }
      for (uint32_t k = 0; k < (uint32_t)T.nr[i] + T.nw[i]; k++)
        (k < T.nr[i] ? done_r : done_w)[v[k]]++;
    }
  }
  hi_push_ns = (double *)calloc(T.nhigh + 1, sizeof(double));
  hi_start_ns = (double *)calloc(T.nhigh + 1, sizeof(double));
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return v[n / 2];
}

/* Nearest-rank quantile of the latencies of the last run, in µs. */
static double latency_quantile_us(double q) {
  double *v = (double *)malloc((T.nhigh + 1) * sizeof(double));
  for (uint32_t i = 0; i < T.nhigh; i++) {
    double d = hi_start_ns[i] - hi_push_ns[i];
    v[i] = d > 0 ? d : 0;
  }
  qsort(v, T.nhigh, sizeof(double), cmp_double);
  size_t rank = (size_t)(q * T.nhigh + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > T.nhigh) rank = T.nhigh;
  double r = v[rank - 1] / 1e3;
  free(v);
  return r;
}

/* ---- roundtrip: a thread that completes what it is handed ---- */

typedef void (*complete_fn)(void *token);
static pthread_mutex_t rt_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rt_cv = PTHREAD_COND_INITIALIZER;
static void *rt_token;
static int rt_full, rt_stop;
static complete_fn rt_complete;
static uint32_t rt_body_ns;
static pthread_t rt_thread;

static void *rt_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&rt_mu);
    while (!rt_full && !rt_stop) pthread_cond_wait(&rt_cv, &rt_mu);
    if (!rt_full) {
      pthread_mutex_unlock(&rt_mu);
      return NULL;
    }
    void *tok = rt_token;
    rt_full = 0;
    pthread_mutex_unlock(&rt_mu);
    busy(rt_body_ns);
    rt_complete(tok);
  }
}

/* Hands token to the completing thread, which calls complete(token). */
static void rt_handoff(void *token) {
  pthread_mutex_lock(&rt_mu);
  rt_token = token;
  rt_full = 1;
  pthread_cond_signal(&rt_cv);
  pthread_mutex_unlock(&rt_mu);
}

static void rt_start(complete_fn f, uint32_t body_ns) {
  rt_complete = f;
  rt_body_ns = body_ns;
  rt_stop = 0;
  if (pthread_create(&rt_thread, NULL, rt_main, NULL) != 0) die("pthread_create");
}

static void rt_join(void) {
  pthread_mutex_lock(&rt_mu);
  rt_stop = 1;
  pthread_cond_signal(&rt_cv);
  pthread_mutex_unlock(&rt_mu);
  pthread_join(rt_thread, NULL);
}

/* ---- the driver's main ---- */

/* Replays T once with `workers` workers; returns elapsed ns. */
typedef double (*run_fn)(int workers);
/* Runs `rounds` round trips; returns elapsed ns (NULL: not supported). */
typedef double (*roundtrip_fn)(int workers, long rounds, uint32_t body_ns);

static int driver_main(int argc, char **argv, const char *system, run_fn run,
                       roundtrip_fn roundtrip) {
  if (argc < 6) {
    fprintf(stderr,
            "usage: %s WORKLOAD BODY_US WORKERS RUNS TRACE_FILE|ROUNDS\n",
            argv[0]);
    return 2;
  }
  const char *workload = argv[1];
  const char *body_us = argv[2];
  int workers = atoi(argv[3]);
  int runs = atoi(argv[4]);
  if (workers < 1 || runs < 1 || runs > 100) die("bad WORKERS or RUNS");
  double ns[100], eff[100], p50[100], p99[100], mk[100];
  long ops;
  int is_rt = strcmp(workload, "roundtrip") == 0;
  if (is_rt) {
    if (!roundtrip) {
      printf("workload=%s body_us=%s system=%s workers=%d unsupported\n",
             workload, body_us, system, workers);
      return 0;
    }
    ops = atol(argv[5]);
    uint32_t b = (uint32_t)(atof(body_us) * 1000.0 + 0.5);
    roundtrip(workers, ops < 10000 ? ops : 10000, b);
    for (int r = 0; r < runs; r++) ns[r] = roundtrip(workers, ops, b) / (double)ops;
  } else {
    if (!T.ids) load_trace(argv[5]);
    ops = T.nops;
    check_reset();
    run(workers); /* warm-up */
    for (int r = 0; r < runs; r++) {
      check_reset();
      double t = run(workers);
      ns[r] = t / (double)ops;
      eff[r] = T.total_body_ns / ((double)workers * t);
      mk[r] = t / 1e6;
      if (T.nhigh) {
        p50[r] = latency_quantile_us(0.5);
        p99[r] = latency_quantile_us(0.99);
      }
    }
  }
  double s[100];
  memcpy(s, ns, sizeof(double) * (size_t)runs);
  qsort(s, (size_t)runs, sizeof(double), cmp_double);
  printf("workload=%s body_us=%s system=%s workers=%d ops=%ld runs=%d "
         "ns_per_op=%.1f min=%.1f max=%.1f",
         workload, body_us, system, workers, ops, runs, s[runs / 2], s[0],
         s[runs - 1]);
  if (!is_rt && (T.total_body_ns > 0 || T.nhigh))
    printf(" efficiency=%.3f", median(eff, runs));
  if (!is_rt && T.nhigh)
    printf(" p50_us=%.1f p99_us=%.1f makespan_ms=%.1f", median(p50, runs),
           median(p99, runs), median(mk, runs));
  if (check_on) printf(" order_violations=%lu", violations);
  printf("\n");
  return violations ? 1 : 0;
}

#endif
