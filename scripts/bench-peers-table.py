#!/usr/bin/env python3
"""Turns the result lines of scripts/bench-peers.sh into markdown tables.

usage: scripts/bench-peers-table.py RESULTS_FILE

Tables: ns per op, median (min-max) per system; the ratio peer / depengine
of the medians (above 1: depengine is faster); efficiency of the busy
bodies, beside the `ideal` lines (the zero-overhead schedule, `depengine
bench --ideal`) when present; p50/p99 push-to-start latency and makespan
of `priority`.
"""
import sys


def parse(path):
    rows, systems = {}, []
    for line in open(path):
        if not line.startswith("workload="):
            continue
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if "unsupported" in line:
            f["status"] = "n/a"
        elif "failed-or-timeout" in line:
            f["status"] = "fail"
        key = (f["workload"], f["body_us"], int(f["workers"]))
        rows.setdefault(key, {})[f["system"]] = f
        if f["system"] not in systems:
            systems.append(f["system"])
    return rows, systems


def cell(f, what="ns"):
    if f is None:
        return ""
    if "status" in f:
        return f["status"]
    if what == "ns":
        return f"{float(f['ns_per_op']):.0f} ({float(f['min']):.0f}–{float(f['max']):.0f})"
    return f.get(what, "")


def ratios(rows, base, peers):
    if not peers:
        return
    print(f"\nratio peer / {base} of the medians (above 1: {base} is faster):\n")
    print("| workload | body µs | workers | " + " | ".join(peers) + " |")
    print("|---|---:|---:|" + "---:|" * len(peers))
    for (wl, body, w), r in rows.items():
        b = r.get(base)
        out = []
        for s in peers:
            p = r.get(s)
            if not b or not p or "status" in b or "status" in p:
                out.append("")
            else:
                out.append(f"{float(p['ns_per_op']) / float(b['ns_per_op']):.2f}")
        print(f"| {wl} | {body} | {w} | " + " | ".join(out) + " |")


def main():
    rows, systems = parse(sys.argv[1])
    base = "depengine" if "depengine" in systems else systems[0]
    # `ideal` (a scheduler that costs nothing) is the yardstick of the
    # efficiency table, not a peer.
    peers = [s for s in systems if s not in (base, "ideal")]
    head = "| workload | body µs | workers | " + " | ".join(systems) + " |"
    sep = "|---|---:|---:|" + "---:|" * len(systems)
    print("ns per op, median (min–max):\n")
    print(head)
    print(sep)
    for (wl, body, w), r in rows.items():
        print(f"| {wl} | {body} | {w} | " + " | ".join(cell(r.get(s)) for s in systems) + " |")
    ratios(rows, base, peers)
    # The helping configurations (the pusher is one of the W threads, as
    # the peers' is) get their own ratios against the peers.
    for helping in ("depengine-helping", "depengine-pushing"):
        if helping in systems and base != helping:
            ratios(rows, helping, [s for s in peers if not s.startswith("depengine")])
    busy = [(k, r) for k, r in rows.items() if k[1] != "0" and not k[0].startswith(("priority", "roundtrip"))]
    if busy:
        print("\nefficiency = ops × body / (workers × time), median run:\n")
        print(head)
        print(sep)
        for (wl, body, w), r in busy:
            print(f"| {wl} | {body} | {w} | " + " | ".join(cell(r.get(s), "efficiency") for s in systems) + " |")
    prio = [(k, r) for k, r in rows.items() if k[0] == "priority"]
    if prio:
        print("\npriority: p50 / p99 push-to-start latency of the high-priority ops (µs), makespan (ms):\n")
        print(head)
        print(sep)
        for (wl, body, w), r in prio:
            cells = []
            for s in systems:
                f = r.get(s)
                if f is None or "status" in f or "p50_us" not in f:
                    cells.append(cell(f) if f and "status" in f else "")
                else:
                    cells.append(f"{f['p50_us']} / {f['p99_us']} / {f['makespan_ms']}")
            print(f"| {wl} | {body} | {w} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
