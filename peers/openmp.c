/*
 * OpenMP tasks on the benchmark traces: one task per op, pushed in trace
 * order from a `single` region, with depend(in:) on the vars it reads and
 * depend(out:) on the vars it writes (the runtime infers the graph from
 * those, as depengine does); priority() from the trace (the calling script
 * sets OMP_MAX_TASK_PRIORITY). Built twice: with gcc (libgomp) and with
 * clang (libomp). The pushing thread is one of the WORKERS threads of the
 * team and runs tasks too.
 *
 * roundtrip: a task with detach(event) on x hands its event to another
 * thread, which fulfils it; then taskwait.
 */
#include <omp.h>

#include "common.h"

#ifndef SYSTEM
#define SYSTEM "openmp"
#endif

static char *deps;

static double run(int workers) {
  double elapsed = 0;
#pragma omp parallel num_threads(workers)
#pragma omp single
  {
    t0_ns = now_ns();
    for (uint32_t i = 0; i < T.nops; i++) {
      const uint32_t *r = T.ids + T.off[i];
      const uint32_t *w = r + T.nr[i];
      int nr = T.nr[i], nw = T.nw[i];
      (void)nr;
      (void)nw;
      op_pushed(i);
#pragma omp task firstprivate(i) priority(T.prio[i])                      \
    depend(iterator(k = 0 : nr), in : deps[r[k]])                           \
    depend(iterator(k = 0 : nw), out : deps[w[k]])
      op_body(i);
    }
#pragma omp taskwait
    elapsed = now_ns() - t0_ns;
  }
  return elapsed;
}

static void fulfil(void *token) {
  omp_event_handle_t ev;
  memcpy(&ev, &token, sizeof ev < sizeof token ? sizeof ev : sizeof token);
  omp_fulfill_event(ev);
}

static double roundtrip(int workers, long rounds, uint32_t body_ns) {
  static char x;
  (void)x;
  double elapsed = 0;
  rt_start(fulfil, body_ns);
#pragma omp parallel num_threads(workers)
#pragma omp single
  {
    double t0 = now_ns();
    for (long i = 0; i < rounds; i++) {
      omp_event_handle_t ev;
#pragma omp task detach(ev) depend(inout : x)
      {
        void *token = NULL;
        memcpy(&token, &ev, sizeof ev < sizeof token ? sizeof ev : sizeof token);
        rt_handoff(token);
      }
#pragma omp taskwait
    }
    elapsed = now_ns() - t0;
  }
  rt_join();
  return elapsed;
}

int main(int argc, char **argv) {
  if (argc > 5 && strcmp(argv[1], "roundtrip") != 0) {
    load_trace(argv[5]);
    deps = (char *)calloc(T.nvars + 1, 1);
  }
  return driver_main(argc, argv, SYSTEM, run, roundtrip);
}
