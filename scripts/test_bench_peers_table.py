#!/usr/bin/env python3
"""Checks of scripts/bench-peers-table.py on results files written here.

usage: python3 scripts/test_bench_peers_table.py   (run by .ci/run)
"""
import importlib.util
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("table", os.path.join(HERE, "bench-peers-table.py"))
table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(table)


def line(wl, sys, ns=None, lo=None, hi=None, status=None, workers=2, body=0, rnd=1, **extra):
    head = f"workload={wl} body_us={body} system={sys} workers={workers}"
    if status:
        return f"{head} {status} round={rnd}"
    more = "".join(f" {k}={v}" for k, v in extra.items())
    return f"{head} ops=10 runs=5 ns_per_op={ns} min={lo} max={hi}{more} round={rnd}"


def parse(lines):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("# 2 CPUs; RUNS=5 ROUNDS=3\n" + "\n".join(lines) + "\n")
    try:
        return table.parse(f.name)
    finally:
        os.unlink(f.name)


class Merge(unittest.TestCase):
    def test_one_round_is_kept_as_it_is(self):
        rows, systems = parse([line("chain", "depengine", 100.0, 90.0, 110.0)])
        f = rows[("chain", "0", 2)]["depengine"]
        self.assertEqual((f["ns_per_op"], f["min"], f["max"]), ("100.0", "90.0", "110.0"))
        self.assertEqual(systems, ["depengine"])

    def test_the_median_line_with_min_and_max_over_all_rounds(self):
        rows, _ = parse([
            line("chain", "depengine", 100.0, 90.0, 110.0, efficiency=0.5, rnd=1),
            line("chain", "depengine", 300.0, 250.0, 320.0, efficiency=0.2, rnd=2),
            line("chain", "depengine", 80.0, 70.0, 85.0, efficiency=0.6, rnd=3),
        ])
        f = rows[("chain", "0", 2)]["depengine"]
        self.assertEqual(float(f["ns_per_op"]), 100.0)
        # the other fields are the median line's own
        self.assertEqual(f["efficiency"], "0.5")
        self.assertEqual((float(f["min"]), float(f["max"])), (70.0, 320.0))

    def test_an_even_count_takes_the_lower_middle_line(self):
        rows, _ = parse([
            line("fan", "rayon", 70.0, 65.0, 75.0, rnd=1),
            line("fan", "rayon", 50.0, 40.0, 60.0, rnd=2),
        ])
        f = rows[("fan", "0", 2)]["rayon"]
        self.assertEqual(float(f["ns_per_op"]), 50.0)
        self.assertEqual((float(f["min"]), float(f["max"])), (40.0, 75.0))

    def test_failed_lines_beside_good_ones_are_left_out_and_counted(self):
        rows, _ = parse([
            line("chain", "rayon", 10.0, 9.0, 11.0, rnd=1),
            line("chain", "rayon", status="failed-or-timeout", rnd=2),
            line("chain", "rayon", 20.0, 19.0, 21.0, rnd=3),
        ])
        f = rows[("chain", "0", 2)]["rayon"]
        self.assertNotIn("status", f)
        self.assertEqual(float(f["ns_per_op"]), 10.0)
        self.assertEqual((f["failed"], f["lines"]), (1, 3))

    def test_a_cell_fails_only_when_every_line_does(self):
        rows, _ = parse([
            line("fan", "openmp-gomp", status="failed-or-timeout", rnd=1),
            line("fan", "openmp-gomp", status="failed-or-timeout", rnd=2),
            line("fan", "depengine-naive", status="unsupported", rnd=1),
        ])
        self.assertEqual(rows[("fan", "0", 2)]["openmp-gomp"]["status"], "fail")
        self.assertEqual(rows[("fan", "0", 2)]["depengine-naive"]["status"], "n/a")


class Tables(unittest.TestCase):
    def test_ratios_come_from_the_median_lines_and_partial_failures_are_listed(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("\n".join([
                line("chain", "depengine", 100.0, 90.0, 110.0, rnd=1),
                line("chain", "rayon", 10.0, 9.0, 11.0, rnd=1),
                line("chain", "depengine", 300.0, 250.0, 320.0, rnd=2),
                line("chain", "rayon", status="failed-or-timeout", rnd=2),
                line("chain", "depengine", 80.0, 70.0, 85.0, rnd=3),
                line("chain", "rayon", 20.0, 19.0, 21.0, rnd=3),
            ]) + "\n")
            path = f.name
        out = io.StringIO()
        try:
            argv, sys.argv = sys.argv, ["bench-peers-table.py", path]
            try:
                with redirect_stdout(out):
                    table.main()
            finally:
                sys.argv = argv
        finally:
            os.unlink(path)
        text = out.getvalue()
        self.assertIn("Up to 3 lines per system and row", text)
        self.assertIn("| chain | 0 | 2 | 100 (70–320) | 10 (9–21) |", text)
        self.assertIn("| chain | 0 | 2 | 0.10 |", text)
        self.assertIn("- rayon on chain (body 0 µs, 2 workers): 1 of 3", text)


if __name__ == "__main__":
    unittest.main()
