/*
 * Drives MXNet's dependency engine (libmxnet.so from the `mxnet` wheel)
 * through its C API on the benchmark traces written by
 * `depengine bench --dump-trace`, so that both engines run the same ops the
 * same way on the same machine: one pushing thread; time from the first
 * push to the return of MXNDArrayWaitAll.
 *
 * Vars are NDArrays (MXNDArrayCreate with delayed allocation); ops are
 * pushed with MXEnginePushSyncND (const = the vars read, mutable = the vars
 * written, the trace's priority; FnProperty::kCPUPrioritized when the trace
 * has ops of another priority than 0, kNormal otherwise). The engine kind and worker count come
 * from MXNet's own environment variables (MXNET_ENGINE_TYPE,
 * MXNET_CPU_WORKER_NTHREADS, MXNET_CPU_PRIORITY_NTHREADS), set by the
 * calling script; WORKERS is only reported.
 *
 * roundtrip: MXEnginePushAsyncND on x (FnProperty::kAsync) whose body hands
 * its completion callback to another thread, which calls it; then
 * MXNDArrayWaitToRead(x).
 *
 * usage: see common.h.
 */
#include "common.h"

typedef void *NDArrayHandle;
typedef const void *ContextHandle;
typedef const void *EngineFnPropertyHandle;
typedef void (*EngineSyncFunc)(void *, void *);
typedef void (*EngineAsyncFunc)(void *, void *, void *);
typedef void (*EngineFuncParamDeleter)(void *);

extern int MXNDArrayCreate(const uint32_t *shape, uint32_t ndim, int dev_type,
                           int dev_id, int delay_alloc, NDArrayHandle *out);
extern int MXNDArrayFree(NDArrayHandle handle);
extern int MXNDArrayWaitAll(void);
extern int MXNDArrayWaitToRead(NDArrayHandle handle);
extern const char *MXGetLastError(void);
extern int MXEnginePushSyncND(EngineSyncFunc sync_func, void *func_param,
                              EngineFuncParamDeleter deleter,
                              ContextHandle ctx_handle,
                              NDArrayHandle *const_nds_handle, int num_const_nds,
                              NDArrayHandle *mutable_nds_handle,
                              int num_mutable_nds,
                              EngineFnPropertyHandle prop_handle, int priority,
                              const char *opr_name);
extern int MXEnginePushAsyncND(EngineAsyncFunc async_func, void *func_param,
                               EngineFuncParamDeleter deleter,
                               ContextHandle ctx_handle,
                               NDArrayHandle *const_nds_handle, int num_const_nds,
                               NDArrayHandle *mutable_nds_handle,
                               int num_mutable_nds,
                               EngineFnPropertyHandle prop_handle, int priority,
                               const char *opr_name, _Bool wait);

/* mxnet::Context: { DeviceType dev_type (kCPU = 1); int32_t dev_id; } */
struct mx_context {
  int32_t dev_type;
  int32_t dev_id;
};
static const struct mx_context ctx = {1, 0};
static const int prop = 0; /* FnProperty::kNormal */
/* FnProperty::kAsync, for the round trip's op, whose body only hands its
 * completion over: the engine runs such an op on the pushing thread when it
 * is ready at its push, as depengine's per-device executor does with
 * Property::Async. */
static const int prop_async = 4;
/* FnProperty::kCPUPrioritized, for every op of a trace that has ops of
 * another priority than 0 (`priority`): MXNet serves priorities only in
 * the queue of its CPU priority workers (MXNET_CPU_PRIORITY_NTHREADS, set
 * to WORKERS by the calling script); its normal CPU queue is FIFO, where
 * the high-priority ops would wait behind every low one. */
static const int prop_prioritized = 3;

/* mxnet::engine::CallbackOnComplete: { callback_, engine_, param_ } */
struct mx_on_complete {
  void (*callback)(void *engine, void *param, const void *error);
  void *engine;
  void *param;
};

static void check(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "mxnet_engine: %s failed: %s\n", what, MXGetLastError());
    exit(1);
  }
}

static void sync_op(void *rctx, void *param) {
  (void)rctx;
  op_body((uint32_t)(uintptr_t)param);
}

static double run(int workers) {
  (void)workers;
  uint32_t shape[1] = {1};
  NDArrayHandle *h = malloc(sizeof(NDArrayHandle) * (T.nvars + 1));
  NDArrayHandle r[64], w[64], *rp, *wp;
  for (uint32_t v = 0; v < T.nvars; v++)
    check(MXNDArrayCreate(shape, 1, 1, 0, 1, &h[v]), "MXNDArrayCreate");
  check(MXNDArrayWaitAll(), "MXNDArrayWaitAll");
  const int *op_prop = T.nhigh > 0 ? &prop_prioritized : &prop;
  t0_ns = now_ns();
  for (uint32_t i = 0; i < T.nops; i++) {
    const uint32_t *ids = T.ids + T.off[i];
    int nr = T.nr[i], nw = T.nw[i];
    rp = nr <= 64 ? r : malloc(sizeof(NDArrayHandle) * (size_t)nr);
    wp = nw <= 64 ? w : malloc(sizeof(NDArrayHandle) * (size_t)nw);
    for (int k = 0; k < nr; k++) rp[k] = h[ids[k]];
    for (int k = 0; k < nw; k++) wp[k] = h[ids[nr + k]];
    op_pushed(i);
    check(MXEnginePushSyncND(sync_op, (void *)(uintptr_t)i, NULL, &ctx, rp, nr,
                             wp, nw, op_prop, T.prio[i], "bench"),
          "MXEnginePushSyncND");
    if (rp != r) free(rp);
    if (wp != w) free(wp);
  }
  check(MXNDArrayWaitAll(), "MXNDArrayWaitAll");
  double elapsed = now_ns() - t0_ns;
  for (uint32_t v = 0; v < T.nvars; v++) MXNDArrayFree(h[v]);
  free(h);
  return elapsed;
}

static void complete(void *token) {
  struct mx_on_complete *c = token;
  c->callback(c->engine, c->param, NULL);
  free(c);
}

static void async_op(void *rctx, void *on_complete, void *param) {
  (void)rctx;
  (void)param;
  struct mx_on_complete *c = malloc(sizeof *c);
  memcpy(c, on_complete, sizeof *c);
  rt_handoff(c);
}

static double roundtrip(int workers, long rounds, uint32_t body_ns) {
  (void)workers;
  uint32_t shape[1] = {1};
  NDArrayHandle x;
  check(MXNDArrayCreate(shape, 1, 1, 0, 1, &x), "MXNDArrayCreate");
  rt_start(complete, body_ns);
  double t0 = now_ns();
  for (long i = 0; i < rounds; i++) {
    check(MXEnginePushAsyncND(async_op, NULL, NULL, &ctx, NULL, 0, &x, 1, &prop_async,
                              0, "roundtrip", 0),
          "MXEnginePushAsyncND");
    check(MXNDArrayWaitToRead(x), "MXNDArrayWaitToRead");
  }
  double elapsed = now_ns() - t0;
  rt_join();
  MXNDArrayFree(x);
  return elapsed;
}

int main(int argc, char **argv) {
  const char *kind = getenv("MXNET_ENGINE_TYPE");
  char system[128];
  snprintf(system, sizeof system, "mxnet-%s", kind ? kind : "default");
  return driver_main(argc, argv, system, run, roundtrip);
}
