/*
 * StarPU on the benchmark traces: each var is a `void` data handle
 * (dependencies only, no data), each op a task with STARPU_R on the vars it
 * reads and STARPU_W on the vars it writes, submitted in trace order:
 * StarPU infers the graph from those accesses in submission order, as
 * depengine does. Priorities are the tasks' priority field (honoured by
 * priority-aware schedulers: the calling script sets STARPU_SCHED=prio for
 * the priority workload). WORKERS CPU workers (STARPU_NCPU), no GPU; the
 * submitting thread is the main thread, not a worker. Wait for all:
 * starpu_task_wait_for_all.
 *
 * roundtrip: the task on x is given one end dependency
 * (starpu_task_end_dep_add), and its body hands the task to the completing
 * thread, which releases that dependency (starpu_task_end_dep_release): the
 * task terminates then, from that thread, as an op completed from outside
 * does. Then starpu_data_acquire(x, R) waits for x. With PEER_CHECK=1 each
 * round checks that the acquire returned only after the release.
 */
#include <starpu.h>

#include "common.h"

static void cpu_fn(void *buffers[], void *arg) {
  (void)buffers;
  op_body((uint32_t)(uintptr_t)arg);
}

static struct starpu_codelet cl = {
    .where = STARPU_CPU,
    .cpu_funcs = {cpu_fn},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "bench",
};

static void check_rc(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "starpu: %s failed (%d)\n", what, rc);
    exit(1);
  }
}

static double run(int workers) {
  (void)workers;
  starpu_data_handle_t *h =
      (starpu_data_handle_t *)malloc(sizeof(*h) * (T.nvars + 1));
  for (uint32_t v = 0; v < T.nvars; v++) starpu_void_data_register(&h[v]);
  starpu_task_wait_for_all();
  t0_ns = now_ns();
  for (uint32_t i = 0; i < T.nops; i++) {
    const uint32_t *ids = T.ids + T.off[i];
    int nr = T.nr[i], n = nr + T.nw[i];
    struct starpu_task *task = starpu_task_create();
    task->cl = &cl;
    task->cl_arg = (void *)(uintptr_t)i;
    task->nbuffers = n;
    task->priority = T.prio[i];
    if (n > STARPU_NMAXBUFS) {
      /* freed by StarPU with the task */
      task->dyn_handles = malloc(sizeof(starpu_data_handle_t) * (size_t)n);
      task->dyn_modes = malloc(sizeof(enum starpu_data_access_mode) * (size_t)n);
      for (int k = 0; k < n; k++) {
        task->dyn_handles[k] = h[ids[k]];
        task->dyn_modes[k] = k < nr ? STARPU_R : STARPU_W;
      }
    } else {
      for (int k = 0; k < n; k++) {
        task->handles[k] = h[ids[k]];
        task->modes[k] = k < nr ? STARPU_R : STARPU_W;
      }
    }
    op_pushed(i);
    check_rc(starpu_task_submit(task), "starpu_task_submit");
  }
  starpu_task_wait_for_all();
  double elapsed = now_ns() - t0_ns;
  for (uint32_t v = 0; v < T.nvars; v++) starpu_data_unregister_no_coherency(h[v]);
  free(h);
  return elapsed;
}

/* Round trips whose end dependency was released (PEER_CHECK=1). */
static unsigned long rt_released;

static void release_end(void *token) {
  __atomic_fetch_add(&rt_released, 1, __ATOMIC_SEQ_CST);
  starpu_task_end_dep_release((struct starpu_task *)token);
}

static void rt_fn(void *buffers[], void *arg) {
  (void)buffers;
  (void)arg;
  rt_handoff(starpu_task_get_current());
}

static struct starpu_codelet rt_cl = {
    .where = STARPU_CPU,
    .cpu_funcs = {rt_fn},
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .name = "roundtrip",
};

static double roundtrip(int workers, long rounds, uint32_t body_ns) {
  (void)workers;
  starpu_data_handle_t x;
  starpu_void_data_register(&x);
  const char *c = getenv("PEER_CHECK");
  check_on = c && *c == '1';
  unsigned long released_before = __atomic_load_n(&rt_released, __ATOMIC_SEQ_CST);
  rt_start(release_end, body_ns);
  double t0 = now_ns();
  for (long i = 0; i < rounds; i++) {
    struct starpu_task *task = starpu_task_create();
    task->cl = &rt_cl;
    task->handles[0] = x;
    starpu_task_end_dep_add(task, 1);
    check_rc(starpu_task_submit(task), "starpu_task_submit");
    check_rc(starpu_data_acquire(x, STARPU_R), "starpu_data_acquire");
    if (check_on &&
        __atomic_load_n(&rt_released, __ATOMIC_SEQ_CST) - released_before != (unsigned long)i + 1)
      violations++;
    starpu_data_release(x);
  }
  double elapsed = now_ns() - t0;
  rt_join();
  starpu_data_unregister_no_coherency(x);
  return elapsed;
}

int main(int argc, char **argv) {
  if (argc < 6) return driver_main(argc, argv, "starpu", run, roundtrip);
  struct starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncpus = atoi(argv[3]);
  conf.ncuda = 0;
  conf.nopencl = 0;
  check_rc(starpu_init(&conf), "starpu_init");
  int rc = driver_main(argc, argv, "starpu", run, roundtrip);
  starpu_shutdown();
  return rc;
}
