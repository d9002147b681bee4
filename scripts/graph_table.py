#!/usr/bin/env python3
"""Markdown tables for BENCHMARKS.md from scripts/graph_bench.sh output.

usage: graph_table.py BENCH.jsonl GRAPHS_DIR RECORDS_DIR
"""
import json
import os
import statistics
import sys

bench, graphs_dir, records_dir = sys.argv[1:4]
rows = [json.loads(l) for l in open(bench) if l.strip()]
MB = float(1 << 20)


def work_and_span(model):
    """Total busy time and critical path (ms) under the busy body's cost model."""
    g = json.load(open(os.path.join(graphs_dir, model + ".json")))
    size = {t["id"]: t["size"] for t in g["tensors"]}
    producer, finish, work, span = {}, [], 0.0, 0.0
    for k, op in enumerate(g["ops"]):
        cost = 0.01 + sum(size[t] for t in op["inputs"] + op["outputs"]) / 1e6
        start = max((finish[producer[t]] for t in op["inputs"] if t in producer), default=0.0)
        finish.append(start + cost)
        for t in op["outputs"]:
            producer[t] = k
        work += cost
        span = max(span, finish[-1])
    return work, span


def graph_bytes(model):
    g = json.load(open(os.path.join(graphs_dir, model + ".json")))
    naive = sum(t["size"] for t in g["tensors"] if t["kind"] in ("intermediate", "output"))
    inputs = sum(t["size"] for t in g["tensors"] if t["kind"] == "input")
    return naive, inputs


models = sorted({r["model"] for r in rows})
print("| model | ops | naive MB | lower bound MB | in-place, auto: MB (range) | no in-place, auto: MB | in-place, range 16: MB | (in-place + inputs) / bound | (no in-place + inputs) / bound |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for m in models:
    naive, inputs = graph_bytes(m)
    lb = json.load(open(os.path.join(records_dir, m + ".json")))["lower_bound_bytes"]
    plan = {r["flags"]: r for r in rows if r["model"] == m and r["kind"] == "plan"}
    a, n, f = plan[""], plan["--no-inplace"], plan["--match-range 16"]
    print(
        f"| {m} | {a['ops']} | {naive / MB:.2f} | {lb / MB:.2f} | {a['planned_bytes'] / MB:.2f} ({a['match_range']}) "
        f"| {n['planned_bytes'] / MB:.2f} | {f['planned_bytes'] / MB:.2f} "
        f"| {(a['planned_bytes'] + inputs) / lb:.3f} | {(n['planned_bytes'] + inputs) / lb:.3f} |"
    )
print()
print("| model | work / critical path | planned MB k=1 / 2 / 4 | groups k=2 / 4 | makespan ms k=1 / 2 / 4 | parallelism k=1 / 2 / 4 | dynamic: peak in use MB, makespan ms, parallelism |")
print("|---|---:|---|---|---|---|---|")
for m in models:
    cells = {}
    for k in (1, 2, 4):
        runs = sorted((r for r in rows if r["model"] == m and r["kind"] == "exec" and r["colors"] == k),
                      key=lambda r: r["makespan_ms"])
        mid = runs[len(runs) // 2]
        cells[k] = mid
    p = " / ".join(f"{cells[k]['planned_bytes'] / MB:.2f}" for k in (1, 2, 4))
    gr = " / ".join(str(cells[k]["groups"]) for k in (2, 4))
    ms = " / ".join(f"{cells[k]['makespan_ms']:.0f}" for k in (1, 2, 4))
    par = " / ".join(f"{cells[k]['parallelism']:.2f}" for k in (1, 2, 4))
    work, span = work_and_span(m)
    dyn = sorted((r for r in rows if r["model"] == m and r["kind"] == "dynamic"),
                 key=lambda r: r["makespan_ms"])
    d = dyn[len(dyn) // 2] if dyn else None
    dcell = (f"{d['peak_in_use_bytes'] / MB:.2f}, {d['makespan_ms']:.0f}, {d['parallelism']:.2f}"
             if d else "-")
    print(f"| {m} | {work / span:.2f} | {p} | {gr} | {ms} | {par} | {dcell} |")
