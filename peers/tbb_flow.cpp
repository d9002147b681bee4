/*
 * oneTBB flow graph on the benchmark traces, given the graph that depengine
 * infers (explicit edges): one continue_node per op, an edge from each op
 * it must follow (the last writer of each var it reads; for each var it
 * writes, the readers since the last write, or else the last writer), less
 * the edges that another of the op's predecessors already follows
 * directly (as `prune_implied` in src/engine/replay/graph.rs). The
 * nodes and edges are built before the timed region; timing starts at the
 * first try_put to the ops that follow nothing (in trace order) and ends
 * when graph::wait_for_all returns. This shows the cost of running a graph
 * without inferring it. High-priority ops get node priority 1 (push time =
 * the start of the run, when the whole graph is handed over). WORKERS
 * threads in all (global_control max_allowed_parallelism); the main thread
 * is one of them while it waits.
 *
 * roundtrip: an async_node whose body hands its gateway to another thread,
 * which puts the result and releases the wait; graph::wait_for_all.
 */
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "common.h"

namespace flow = oneapi::tbb::flow;

static std::vector<std::vector<uint32_t>> preds;

static void infer_edges() {
  const uint32_t none = UINT32_MAX;
  std::vector<uint32_t> last_writer(T.nvars + 1, none);
  std::vector<std::vector<uint32_t>> readers(T.nvars + 1);
  preds.assign(T.nops, {});
  for (uint32_t i = 0; i < T.nops; i++) {
    const uint32_t *r = T.ids + T.off[i];
    const uint32_t *w = r + T.nr[i];
    std::vector<uint32_t> &p = preds[i];
    for (int k = 0; k < T.nr[i]; k++)
      if (last_writer[r[k]] != none) p.push_back(last_writer[r[k]]);
    for (int k = 0; k < T.nw[i]; k++) {
      if (readers[w[k]].empty()) {
        if (last_writer[w[k]] != none) p.push_back(last_writer[w[k]]);
      } else {
        p.insert(p.end(), readers[w[k]].begin(), readers[w[k]].end());
      }
    }
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    for (int k = 0; k < T.nr[i]; k++) readers[r[k]].push_back(i);
    for (int k = 0; k < T.nw[i]; k++) {
      readers[w[k]].clear();
      last_writer[w[k]] = i;
    }
  }
}

/* Drops from each op's predecessors each one that another of them lists
 * among its own (the same rule and budget as depengine's prune_implied:
 * the last op first, so the lists read are still whole). */
static void prune_implied() {
  const size_t budget = 4096;
  std::vector<uint64_t> state(preds.size(), 0);
  for (size_t n = preds.size(); n-- > 0;) {
    std::vector<uint32_t> &p = preds[n];
    if (p.size() < 2) continue;
    const uint64_t direct = 2 * ((uint64_t)n + 1);
    for (uint32_t x : p) state[x] = direct;
    size_t read = 0;
    bool any = false;
    for (uint32_t y : p) {
      read += preds[y].size();
      if (read > budget) break;
      for (uint32_t x : preds[y]) {
        bool hit = state[x] == direct;
        state[x] |= (uint64_t)hit;
        any |= hit;
      }
    }
    if (any)
      p.erase(std::remove_if(p.begin(), p.end(),
                             [&](uint32_t x) { return state[x] != direct; }),
              p.end());
  }
}

static double run(int workers) {
  oneapi::tbb::global_control gc(
      oneapi::tbb::global_control::max_allowed_parallelism, (size_t)workers);
  flow::graph g;
  using node_t = flow::continue_node<flow::continue_msg>;
  std::vector<std::unique_ptr<node_t>> nodes;
  nodes.reserve(T.nops);
  for (uint32_t i = 0; i < T.nops; i++)
    nodes.emplace_back(new node_t(
        g, [i](const flow::continue_msg &) { op_body(i); },
        T.prio[i] > 0 ? flow::node_priority_t(1) : flow::no_priority));
  for (uint32_t i = 0; i < T.nops; i++)
    for (uint32_t p : preds[i]) flow::make_edge(*nodes[p], *nodes[i]);
  t0_ns = now_ns();
  for (uint32_t i = 0; i < T.nops; i++) op_pushed(i);
  for (uint32_t i = 0; i < T.nops; i++)
    if (preds[i].empty()) nodes[i]->try_put(flow::continue_msg());
  g.wait_for_all();
  return now_ns() - t0_ns;
}

using async_t = flow::async_node<flow::continue_msg, flow::continue_msg>;

static void complete(void *token) {
  auto *gw = static_cast<async_t::gateway_type *>(token);
  gw->try_put(flow::continue_msg());
  gw->release_wait();
}

static double roundtrip(int workers, long rounds, uint32_t body_ns) {
  oneapi::tbb::global_control gc(
      oneapi::tbb::global_control::max_allowed_parallelism, (size_t)workers);
  flow::graph g;
  async_t node(g, flow::serial,
               [](const flow::continue_msg &, async_t::gateway_type &gw) {
                 gw.reserve_wait();
                 rt_handoff(&gw);
               });
  rt_start(complete, body_ns);
  double t0 = now_ns();
  for (long i = 0; i < rounds; i++) {
    node.try_put(flow::continue_msg());
    g.wait_for_all();
  }
  double elapsed = now_ns() - t0;
  rt_join();
  return elapsed;
}

int main(int argc, char **argv) {
  if (argc > 5 && strcmp(argv[1], "roundtrip") != 0) {
    load_trace(argv[5]);
    infer_edges();
    prune_implied();
  }
  return driver_main(argc, argv, "tbb-flow", run, roundtrip);
}
