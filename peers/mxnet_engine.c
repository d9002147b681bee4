/*
 * Drives MXNet's dependency engine (libmxnet.so from the `mxnet` wheel)
 * through its C API on the empty-op workloads of depengine's design notes,
 * so that both engines are measured the same way on the same machine:
 * time from the first push to the return of MXNDArrayWaitAll, divided by
 * the number of ops; one pushing thread; empty bodies.
 *
 * Vars are NDArrays (MXNDArrayCreate with delayed allocation); ops are
 * pushed with MXEnginePushSyncND. The engine kind and worker counts come
 * from MXNet's own environment variables (MXNET_ENGINE_TYPE,
 * MXNET_CPU_WORKER_NTHREADS), set by the calling script.
 *
 * usage: mxnet_engine WORKLOAD OPS [VARS] [RUNS]
 *   WORKLOAD: indep | chain | readers
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void *NDArrayHandle;
typedef const void *ContextHandle;
typedef const void *EngineFnPropertyHandle;
typedef void (*EngineSyncFunc)(void *, void *);
typedef void (*EngineFuncParamDeleter)(void *);

extern int MXNDArrayCreate(const uint32_t *shape, uint32_t ndim, int dev_type,
                           int dev_id, int delay_alloc, NDArrayHandle *out);
extern int MXNDArrayFree(NDArrayHandle handle);
extern int MXNDArrayWaitAll(void);
extern const char *MXGetLastError(void);
extern int MXEnginePushSyncND(EngineSyncFunc sync_func, void *func_param,
                              EngineFuncParamDeleter deleter,
                              ContextHandle ctx_handle,
                              NDArrayHandle *const_nds_handle, int num_const_nds,
                              NDArrayHandle *mutable_nds_handle,
                              int num_mutable_nds,
                              EngineFnPropertyHandle prop_handle, int priority,
                              const char *opr_name);

/* mxnet::Context: { DeviceType dev_type (kCPU = 1); int32_t dev_id; } */
struct mx_context {
  int32_t dev_type;
  int32_t dev_id;
};

static void empty_op(void *rctx, void *param) {
  (void)rctx;
  (void)param;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void check(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "mxnet_engine: %s failed: %s\n", what, MXGetLastError());
    exit(1);
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double run(const char *workload, long ops, long nvars) {
  static const struct mx_context ctx = {1, 0};
  static const int prop = 0; /* FnProperty::kNormal */
  uint32_t shape[1] = {1};
  NDArrayHandle *vars = malloc(sizeof(NDArrayHandle) * (size_t)nvars);
  NDArrayHandle shared;
  for (long i = 0; i < nvars; i++)
    check(MXNDArrayCreate(shape, 1, 1, 0, 1, &vars[i]), "MXNDArrayCreate");
  check(MXNDArrayCreate(shape, 1, 1, 0, 1, &shared), "MXNDArrayCreate");
  check(MXNDArrayWaitAll(), "MXNDArrayWaitAll");
  double start = now_ns();
  if (strcmp(workload, "indep") == 0) {
    for (long i = 0; i < ops; i++)
      check(MXEnginePushSyncND(empty_op, NULL, NULL, &ctx, NULL, 0,
                               &vars[i % nvars], 1, &prop, 0, "indep"),
            "push");
  } else if (strcmp(workload, "chain") == 0) {
    for (long i = 0; i < ops; i++)
      check(MXEnginePushSyncND(empty_op, NULL, NULL, &ctx, NULL, 0, &shared, 1,
                               &prop, 0, "chain"),
            "push");
  } else if (strcmp(workload, "readers") == 0) {
    for (long i = 0; i < ops; i++)
      check(MXEnginePushSyncND(empty_op, NULL, NULL, &ctx, &shared, 1,
                               &vars[i % nvars], 1, &prop, 0, "readers"),
            "push");
  } else {
    fprintf(stderr, "mxnet_engine: unknown workload %s\n", workload);
    exit(2);
  }
  check(MXNDArrayWaitAll(), "MXNDArrayWaitAll");
  double elapsed = now_ns() - start;
  for (long i = 0; i < nvars; i++) MXNDArrayFree(vars[i]);
  MXNDArrayFree(shared);
  free(vars);
  return elapsed / (double)ops;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s indep|chain|readers OPS [VARS] [RUNS]\n", argv[0]);
    return 2;
  }
  const char *workload = argv[1];
  long ops = atol(argv[2]);
  long nvars = argc > 3 ? atol(argv[3]) : 1024;
  int runs = argc > 4 ? atoi(argv[4]) : 5;
  if (ops < 1 || nvars < 1 || runs < 1 || runs > 100) {
    fprintf(stderr, "mxnet_engine: OPS, VARS and RUNS must be positive\n");
    return 2;
  }
  run(workload, ops < 100000 ? ops : 100000, nvars); /* warm-up */
  double ns[100];
  for (int r = 0; r < runs; r++) ns[r] = run(workload, ops, nvars);
  qsort(ns, (size_t)runs, sizeof(double), cmp_double);
  const char *kind = getenv("MXNET_ENGINE_TYPE");
  printf("workload=%s engine=mxnet-%s ops=%ld runs=%d ns_per_op=%.1f min=%.1f max=%.1f\n",
         workload, kind ? kind : "default", ops, runs, ns[runs / 2], ns[0],
         ns[runs - 1]);
  return 0;
}
