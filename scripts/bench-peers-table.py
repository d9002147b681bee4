#!/usr/bin/env python3
"""Turns the result lines of scripts/bench-peers.sh into markdown tables.

usage: scripts/bench-peers-table.py RESULTS_FILE [RESULTS_FILE...]

Several files are read as one: a run cut short and finished by another
(the same settings for the rows left), or busy bodies added to a scaling
run, or the `ideal` lines computed elsewhere. Lines of the same system and
row from several files count as rounds (below).

First the machine line of each file (`# machine:`, written by
scripts/bench-peers.sh: CPU model, L3, kernel, and the commit of the tree
the run was made from), each once; then, where lines carry
`depengine bench --line-probe`'s fields, a line on the cache line's round
trip they saw before their runs (on virtual machines whose CPUs move on
the host it has levels several times apart, and the empty rows follow
it). Tables: ns per op, median (min-max)
per system; the ratio peer / depengine of the medians (above 1:
depengine is faster), and the same against each
of depengine's other configurations present (helping, pushing, stream, replay,
and the one-thread naive executor and serial scope on the rows they ran),
each followed by how many rows each peer leads, in all and, where the rows
span several worker counts, at each; efficiency of the busy
bodies, beside the `ideal` lines (the zero-overhead schedule, `depengine
bench --ideal`) when present; p50/p99 push-to-start latency and makespan
of `priority`; and, when the busy rows have more than one body, the
minimum effective task granularity (below).

Minimum effective task granularity, per workload, worker count and system:
the smallest measured body from which the efficiency stays at or above
0.5 for every larger measured body, written as the interval it lies in
("1–10 µs": 10 µs qualifies and 1 µs does not; "≤ 1 µs": the smallest
body qualifies; "> 100 µs": the largest does not). Bodies whose line
failed or has no efficiency are left out of that system's interval.

A results file of several rounds (ROUNDS > 1) has several lines per system
and row. Each cell then comes from the line with the median of their
medians (the lower middle one for an even count), with the min and max
taken over all of them; a cell is `fail`, `timeout`, `n/a` or `skip`
only when every line is, and lines that failed or timed out beside others
that did not are counted under the tables. `skip`: a line that a deadline kept from starting
(DEADLINE in scripts/bench-peers.sh); a file of such lines and the file
of a later run of the same settings read together give the whole table.
"""
import statistics
import sys


def merge(lines):
    """One system's lines of one row, as one line (see the module docs)."""
    # a line a deadline skipped was never run: it neither fails nor counts
    ran = [f for f in lines if f.get("status") != "skip"]
    ok = [f for f in ran if "status" not in f]
    if not ok:
        return (ran or lines)[0]
    mid = statistics.median_low(float(f["ns_per_op"]) for f in ok)
    f = dict(next(f for f in ok if float(f["ns_per_op"]) == mid))
    f["min"] = str(min(float(f["min"]) for f in ok))
    f["max"] = str(max(float(f["max"]) for f in ok))
    f["lines"] = len(ran)
    f["failed"] = len(ran) - len(ok)
    return f


def read_text(paths):
    """The lines of every file in `paths`, in their order."""
    text = []
    for path in paths:
        with open(path, encoding="utf-8") as results:
            text += results.read().splitlines()
    return text


def fields(line):
    """A result line's `key=value` words as a dict."""
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def parse(*paths):
    """Rows keyed by (workload, body, workers): system -> its merged line,
    over the lines of every file in `paths`, in their order; the systems in
    the order first met; and the files' `# machine:` lines, each once."""
    lines, systems, machines = {}, [], []
    for line in read_text(paths):
        if line.startswith("# machine: ") and line[2:] not in machines:
            machines.append(line[2:])
        if not line.startswith("workload="):
            continue
        f = fields(line)
        words = line.split()
        if "unsupported" in words:
            f["status"] = "n/a"
        elif "timeout" in words:
            f["status"] = "timeout"
        # `failed-or-timeout`: results files written before the two were told apart
        elif "failed" in words or "failed-or-timeout" in words:
            f["status"] = "fail"
        elif "skipped-deadline" in words:
            f["status"] = "skip"
        key = (f["workload"], f["body_us"], int(f["workers"]))
        lines.setdefault(key, {}).setdefault(f["system"], []).append(f)
        if f["system"] not in systems:
            systems.append(f["system"])
    rows = {k: {s: merge(ls) for s, ls in r.items()} for k, r in lines.items()}
    return rows, systems, machines


def line_probes(*paths):
    """The `--line-probe` fields of every result line in `paths` that has
    them, as (min, median, max) round trips in ns, in file order."""
    probes = []
    for line in read_text(paths):
        f = fields(line) if line.startswith("workload=") else {}
        if "line_rtt_ns" in f:
            probes.append(tuple(float(f[k]) for k in ("line_rtt_min", "line_rtt_ns", "line_rtt_max")))
    return probes


def probe_summary(probes):
    """One sentence on the round trips of `line_probes`, or None."""
    if not probes:
        return None
    medians = sorted(m for _, m, _ in probes)
    mid = medians[(len(medians) - 1) // 2]
    spread = sum(1 for lo, _, hi in probes if hi > 2 * lo)
    return (f"Cache line round trip before the runs (`--line-probe`, {len(probes)} lines): "
            f"median of the lines' medians {mid:.0f} ns, least {min(lo for lo, _, _ in probes):.0f}, "
            f"most {max(hi for _, _, hi in probes):.0f}; "
            f"{spread} line(s) whose probes differed by more than 2×.")


def cell(f, what="ns"):
    if f is None:
        return ""
    if "status" in f:
        return f["status"]
    if what == "ns":
        return f"{float(f['ns_per_op']):.0f} ({float(f['min']):.0f}–{float(f['max']):.0f})"
    return f.get(what, "")


def ratios(rows, base, peers, only_ran=False):
    """The table of peer / `base` medians and the count of rows each peer
    leads. `only_ran`: leave out the rows where `base` has no line or only
    a failed or unsupported one (a system that runs at one worker count
    only)."""
    if not peers:
        return
    print(f"\nratio peer / {base} of the medians (above 1: {base} is faster):\n")
    print("| workload | body µs | workers | " + " | ".join(peers) + " |")
    print("|---|---:|---:|" + "---:|" * len(peers))
    # (worker count, peer) -> [rows the peer leads, rows both ran]
    by_workers = {}
    for (wl, body, w), r in rows.items():
        b = r.get(base)
        if only_ran and (not b or "status" in b):
            continue
        out = []
        for s in peers:
            p = r.get(s)
            if not b or not p or "status" in b or "status" in p:
                out.append("")
            else:
                ratio = float(p["ns_per_op"]) / float(b["ns_per_op"])
                out.append(f"{ratio:.2f}")
                at = by_workers.setdefault(w, {}).setdefault(s, [0, 0])
                at[1] += 1
                at[0] += ratio < 1
        print(f"| {wl} | {body} | {w} | " + " | ".join(out) + " |")
    # Counted on the unrounded ratios: a row printed as 1.00 may be a lead
    # either way.
    print(f"\nrows where the peer's median is below {base}'s, of the rows both ran:")
    totals = [
        [sum(c[s][i] for c in by_workers.values() if s in c) for i in (0, 1)]
        for s in peers
    ]
    print("; ".join(f"{s} {n} of {m}" for s, (n, m) in zip(peers, totals)) + ".")
    # The same count at each worker count, which the summaries quote:
    # only where the rows span more than one.
    if len(by_workers) > 1:
        print("\nthe same, by worker count:")
        for w in sorted(by_workers):
            counts = by_workers[w]
            label = "1 worker" if w == 1 else f"{w} workers"
            print(f"- {label}: " + "; ".join(
                f"{s} {counts[s][0]} of {counts[s][1]}" for s in peers if s in counts) + ".")


# Efficiency at or above this counts as effective (the 50%).
EFFECTIVE = 0.5


def granularity_cell(points):
    """The interval of the minimum effective granularity (see the module
    docs) from `(body µs as written, efficiency)` pairs; "" when empty."""
    points = sorted(points, key=lambda p: float(p[0]))
    if not points:
        return ""
    i = len(points)
    while i > 0 and points[i - 1][1] >= EFFECTIVE:
        i -= 1
    if i == len(points):
        return f"> {points[-1][0]} µs"
    if i == 0:
        return f"≤ {points[0][0]} µs"
    return f"{points[i - 1][0]}–{points[i][0]} µs"


def granularity(busy, systems):
    """Rows (workload, workers) of the granularity table, in first-seen
    order, each a list of cells per system; empty when no row has more
    than one busy body."""
    groups = {}
    for (wl, body, w), r in busy:
        groups.setdefault((wl, w), []).append((body, r))
    if all(len(g) < 2 for g in groups.values()):
        return {}
    table = {}
    for key, g in groups.items():
        cells = []
        for s in systems:
            points = []
            for body, r in g:
                f = r.get(s)
                if f is None or "status" in f or "efficiency" not in f:
                    continue
                points.append((body, float(f["efficiency"])))
            cells.append(granularity_cell(points))
        table[key] = cells
    return table


def busy_rows(rows):
    """The rows with a busy body that efficiency applies to (not `priority`
    or `roundtrip`), as `(key, row)` pairs."""
    return [(k, r) for k, r in rows.items() if k[1] != "0" and not k[0].startswith(("priority", "roundtrip"))]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: scripts/bench-peers-table.py RESULTS_FILE [RESULTS_FILE...]")
    rows, systems, machines = parse(*sys.argv[1:])
    # Where the lines ran, first: files from several machines read as one
    # are named as such.
    for m in machines:
        print(m[0].upper() + m[1:])
    probed = probe_summary(line_probes(*sys.argv[1:]))
    if probed:
        print(probed)
    if machines or probed:
        print()
    base = "depengine" if "depengine" in systems else systems[0]
    # `ideal` (a scheduler that costs nothing) is the yardstick of the
    # efficiency table, not a peer.
    peers = [s for s in systems if s not in (base, "ideal")]
    head = "| workload | body µs | workers | " + " | ".join(systems) + " |"
    sep = "|---|---:|---:|" + "---:|" * len(systems)
    most = max((f.get("lines", 1) for r in rows.values() for f in r.values()), default=1)
    if most > 1:
        print(f"Up to {most} lines per system and row (rounds): each cell is the line with")
        print("the median of their medians, with the min and max over all of them.\n")
    print("ns per op, median (min–max):\n")
    print(head)
    print(sep)
    for (wl, body, w), r in rows.items():
        print(f"| {wl} | {body} | {w} | " + " | ".join(cell(r.get(s)) for s in systems) + " |")
    ratios(rows, base, peers)
    # The helping configurations (the pusher is one of the W threads, as
    # the peers' is), the stream (`Engine::push_all`), the replay (the graph handed over, as oneTBB and
    # rayon get it), the naive executor and the serial scope (one thread
    # in all, as a one-thread OpenMP team, where the default engine at "1
    # worker" is a pusher and a worker; only on the rows they ran) get
    # their own ratios against the peers.
    one_thread = ("depengine-naive", "depengine-serial")
    for own in ("depengine-helping", "depengine-pushing", "depengine-stream", "depengine-replay") + one_thread:
        if own in systems and base != own:
            others = [s for s in peers if not s.startswith("depengine")]
            ratios(rows, own, others, only_ran=own in one_thread)
    busy = busy_rows(rows)
    if busy:
        print("\nefficiency = ops × body / (workers × time), median run:\n")
        print(head)
        print(sep)
        for (wl, body, w), r in busy:
            print(f"| {wl} | {body} | {w} | " + " | ".join(cell(r.get(s), "efficiency") for s in systems) + " |")
        gran = granularity(busy, systems)
        if gran:
            print("\nminimum effective task granularity: the smallest body from which the")
            print(f"efficiency stays at or above {EFFECTIVE} (see the script's docs):\n")
            print("| workload | workers | " + " | ".join(systems) + " |")
            print("|---|---:|" + "---:|" * len(systems))
            for (wl, w), cells in gran.items():
                print(f"| {wl} | {w} | " + " | ".join(cells) + " |")
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
    partial = [
        f"{s} on {wl} (body {body} µs, {w} workers): {f['failed']} of {f['lines']}"
        for (wl, body, w), r in rows.items()
        for s, f in r.items()
        if f.get("failed")
    ]
    if partial:
        print("\nLines that failed or timed out beside lines that did not (left out of the cells):\n")
        for p in partial:
            print(f"- {p}")


if __name__ == "__main__":
    main()
