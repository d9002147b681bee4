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
from contextlib import contextmanager, redirect_stdout

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


@contextmanager
def results_file(lines, head=("# 2 CPUs; RUNS=5 ROUNDS=3",)):
    """A results file holding the header lines `head`, then `lines`,
    removed afterwards; yields its path."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join([*head, *lines]) + "\n")
    try:
        yield f.name
    finally:
        os.unlink(f.name)


def parse(lines):
    with results_file(lines) as path:
        rows, systems, _ = table.parse(path)
        return rows, systems


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

    def test_a_timeout_and_a_failure_are_told_apart(self):
        rows, _ = parse([
            line("randsum", "openmp-gomp", status="timeout limit_s=120", workers=1),
            line("randsum", "openmp-libomp", status="failed rc=134", workers=1),
            # results files written before the two were told apart
            line("randsum", "rayon", status="failed-or-timeout", workers=1),
            line("randsum", "tbb-flow", 5.0, 4.0, 6.0, workers=1, rnd=1),
            line("randsum", "tbb-flow", status="timeout limit_s=120", workers=1, rnd=2),
        ])
        r = rows[("randsum", "0", 1)]
        self.assertEqual(r["openmp-gomp"]["status"], "timeout")
        self.assertEqual(r["openmp-libomp"]["status"], "fail")
        self.assertEqual(r["rayon"]["status"], "fail")
        self.assertEqual((r["tbb-flow"]["failed"], r["tbb-flow"]["lines"]), (1, 2))

    def test_lines_a_deadline_skipped_neither_fail_nor_count(self):
        rows, _ = parse([
            line("wavefront-447", "starpu", status="skipped-deadline", rnd=1),
            line("wavefront-447", "starpu", 30.0, 29.0, 31.0, rnd=2),
            line("random", "rayon", status="skipped-deadline", rnd=1),
            line("random", "rayon", status="skipped-deadline", rnd=2),
            line("random", "tbb-flow", status="skipped-deadline", rnd=1),
            line("random", "tbb-flow", status="failed-or-timeout", rnd=2),
        ])
        f = rows[("wavefront-447", "0", 2)]["starpu"]
        self.assertNotIn("status", f)
        self.assertEqual((float(f["ns_per_op"]), f["failed"], f["lines"]), (30.0, 0, 1))
        self.assertEqual(rows[("random", "0", 2)]["rayon"]["status"], "skip")
        # a line that ran and failed says more than one that never ran
        self.assertEqual(rows[("random", "0", 2)]["tbb-flow"]["status"], "fail")


class Granularity(unittest.TestCase):
    def test_intervals_below_between_and_above_the_measured_bodies(self):
        cell = table.granularity_cell
        self.assertEqual(cell([("1", 0.6), ("10", 0.7), ("100", 0.9)]), "≤ 1 µs")
        self.assertEqual(cell([("100", 0.9), ("1", 0.3), ("10", 0.6)]), "1–10 µs")
        self.assertEqual(cell([("1", 0.1), ("10", 0.2), ("100", 0.4)]), "> 100 µs")
        # exactly 0.5 counts as effective
        self.assertEqual(cell([("1", 0.49), ("10", 0.5)]), "1–10 µs")
        self.assertEqual(cell([]), "")

    def test_the_efficiency_must_stay_effective_for_every_larger_body(self):
        # effective at 1 µs, not at 10: the granularity lies above 10
        self.assertEqual(table.granularity_cell([("1", 0.6), ("10", 0.4), ("100", 0.9)]), "10–100 µs")

    def test_failed_bodies_are_left_out_and_one_body_per_row_prints_nothing(self):
        rows, systems = parse([
            line("fan", "depengine", 1300.0, 1200.0, 1400.0, body=1, efficiency=0.38),
            line("fan", "depengine", status="failed-or-timeout", body=10),
            line("fan", "depengine", 10300.0, 10200.0, 10400.0, body=100, efficiency=0.97),
            line("fan", "rayon", 1100.0, 1000.0, 1200.0, body=1, efficiency=0.45),
            line("fan", "rayon", 5200.0, 5100.0, 5300.0, body=10, efficiency=0.96),
        ])
        busy = table.busy_rows(rows)
        self.assertEqual(table.granularity(busy, systems), {("fan", 2): ["1–100 µs", "1–10 µs"]})
        one = [(k, r) for k, r in busy if k[1] == "1"]
        self.assertEqual(table.granularity(one, systems), {})


class Tables(unittest.TestCase):
    def test_ratios_come_from_the_median_lines_and_partial_failures_are_listed(self):
        text = self.render([
            line("chain", "depengine", 100.0, 90.0, 110.0, rnd=1),
            line("chain", "rayon", 10.0, 9.0, 11.0, rnd=1),
            line("chain", "depengine", 300.0, 250.0, 320.0, rnd=2),
            line("chain", "rayon", status="failed-or-timeout", rnd=2),
            line("chain", "depengine", 80.0, 70.0, 85.0, rnd=3),
            line("chain", "rayon", 20.0, 19.0, 21.0, rnd=3),
        ])
        self.assertIn("Up to 3 lines per system and row", text)
        self.assertIn("| chain | 0 | 2 | 100 (70–320) | 10 (9–21) |", text)
        self.assertIn("| chain | 0 | 2 | 0.10 |", text)
        self.assertIn("rows where the peer's median is below depengine's, of the rows both ran:\nrayon 1 of 1.", text)
        self.assertIn("- rayon on chain (body 0 µs, 2 workers): 1 of 3", text)
        self.assertNotIn("granularity", text, "no busy rows, no granularity table")

    def test_leads_are_counted_on_unrounded_ratios_over_the_rows_both_ran(self):
        text = self.render([
            line("indep", "depengine", 100.0, 90.0, 110.0),
            line("indep", "tbb-flow", 99.9, 90.0, 110.0),
            line("chain", "depengine", 100.0, 90.0, 110.0),
            line("chain", "tbb-flow", 100.0, 90.0, 110.0),
            line("fan", "depengine", 100.0, 90.0, 110.0),
            line("fan", "tbb-flow", status="failed-or-timeout"),
        ])
        # indep prints as 1.00 but leads; chain ties and does not; fan failed
        self.assertIn("| indep | 0 | 2 | 1.00 |", text)
        self.assertIn("tbb-flow 1 of 2.", text)

    def test_leads_are_also_counted_by_worker_count_when_the_rows_span_several(self):
        text = self.render([
            line("indep", "depengine", 100.0, 90.0, 110.0, workers=1),
            line("indep", "rayon", 90.0, 80.0, 95.0, workers=1),
            line("chain", "depengine", 100.0, 90.0, 110.0, workers=1),
            line("chain", "rayon", 120.0, 110.0, 130.0, workers=1),
            line("indep", "depengine", 100.0, 90.0, 110.0, workers=2),
            line("indep", "rayon", 101.0, 90.0, 110.0, workers=2),
            line("indep", "tbb-flow", 99.0, 90.0, 110.0, workers=2),
        ])
        self.assertIn("rayon 1 of 3; tbb-flow 1 of 1.", text)
        self.assertIn(
            "the same, by worker count:\n"
            "- 1 worker: rayon 1 of 2.\n"
            "- 2 workers: rayon 0 of 1; tbb-flow 1 of 1.",
            text,
        )
        # one worker count: the total says it all
        one = self.render([
            line("indep", "depengine", 100.0, 90.0, 110.0),
            line("indep", "rayon", 90.0, 80.0, 95.0),
        ])
        self.assertNotIn("by worker count", one)

    def test_the_granularity_table_follows_the_efficiency_table(self):
        text = self.render([
            line("indep", "depengine", 1300.0, 1200.0, 1400.0, body=1, efficiency=0.38),
            line("indep", "depengine", 5200.0, 5100.0, 5300.0, body=10, efficiency=0.96),
            line("indep", "ideal", 500.0, 500.0, 500.0, body=1, efficiency=1.00),
            line("indep", "ideal", 5000.0, 5000.0, 5000.0, body=10, efficiency=1.00),
        ])
        self.assertLess(text.index("efficiency = ops"), text.index("minimum effective task granularity"))
        self.assertIn("| workload | workers | depengine | ideal |", text)
        self.assertIn("| indep | 2 | 1–10 µs | ≤ 1 µs |", text)

    def test_the_replay_and_the_stream_get_their_own_ratios_against_the_peers_alone(self):
        for own in ("depengine-replay", "depengine-stream"):
            text = self.render([
                line("chain", "depengine", 100.0, 90.0, 110.0),
                line("chain", own, 8.0, 7.0, 9.0),
                line("chain", "tbb-flow", 24.0, 23.0, 25.0),
                line("chain", "rayon", 4.0, 4.0, 5.0),
            ])
            mine = text[text.index(f"ratio peer / {own} of the medians"):]
            self.assertIn("| workload | body µs | workers | tbb-flow | rayon |", mine)
            self.assertIn("| chain | 0 | 2 | 3.00 | 0.50 |", mine)
            self.assertIn("tbb-flow 0 of 1; rayon 1 of 1.", mine)

    def test_the_one_thread_configurations_get_ratios_on_the_rows_they_ran_alone(self):
        for own in ("depengine-naive", "depengine-serial"):
            text = self.render([
                line("random", "depengine", 300.0, 290.0, 310.0, workers=1),
                line("random", own, 250.0, 240.0, 260.0, workers=1),
                line("random", "openmp-libomp", 125.0, 120.0, 130.0, workers=1),
                line("random", "depengine", 330.0, 320.0, 340.0, workers=2),
                line("random", own, status="unsupported", workers=2),
                line("random", "openmp-libomp", 990.0, 980.0, 999.0, workers=2),
            ])
            mine = text[text.index(f"ratio peer / {own} of the medians"):]
            self.assertIn("| workload | body µs | workers | openmp-libomp |", mine)
            self.assertIn("| random | 0 | 1 | 0.50 |", mine)
            self.assertNotIn("| random | 0 | 2 |", mine)
            self.assertIn("openmp-libomp 1 of 1.", mine)
            # The default engine's table keeps every row.
            self.assertIn("| random | 0 | 2 |  | 3.00 |", text)

    def test_several_files_are_read_as_one(self):
        first = [
            line("indep", "depengine", 1300.0, 1200.0, 1400.0, body=1, efficiency=0.38),
            line("indep", "depengine", 100.0, 90.0, 110.0, rnd=1),
        ]
        second = [
            line("indep", "depengine", 5200.0, 5100.0, 5300.0, body=10, efficiency=0.96),
            line("indep", "depengine", 300.0, 250.0, 320.0, rnd=2),
            line("indep", "depengine", 80.0, 70.0, 85.0, rnd=3),
        ]
        with results_file(first) as a, results_file(second) as b:
            rows, _, _ = table.parse(a, b)
            text = self.render_files([a, b])
        # the bodies of both files make one granularity interval
        self.assertIn("| indep | 2 | 1–10 µs |", text)
        # lines of one row in both files are rounds: median line, min and max over all
        f = rows[("indep", "0", 2)]["depengine"]
        self.assertEqual((float(f["ns_per_op"]), float(f["min"]), float(f["max"])), (100.0, 70.0, 320.0))

    def test_each_files_machine_line_is_printed_once_above_the_tables(self):
        lines = [line("indep", "depengine", 100.0, 90.0, 110.0)]
        xeon = "# machine: Intel(R) Xeon(R) Processor, L3 480 MiB; Linux 6.1; tree at 273fe1b"
        epyc = "# machine: AMD EPYC 9B14, L3 32 MiB; Linux 6.1; tree at 273fe1b"
        with results_file(lines, head=("# 2 CPUs", xeon)) as a, \
                results_file(lines, head=("# 2 CPUs", epyc)) as b, \
                results_file(lines, head=("# 2 CPUs", xeon)) as c:
            _, _, machines = table.parse(a, b, c)
            text = self.render_files([a, b, c])
        self.assertEqual(machines, [xeon[2:], epyc[2:]])
        head = text.split("ns per op")[0]
        self.assertEqual(head.splitlines()[:2], ["Machine: " + xeon[11:], "Machine: " + epyc[11:]])
        self.assertEqual(text.count("Machine: "), 2)
        # a file without one (written before the line was) starts with the table
        self.assertTrue(self.render(lines).startswith("ns per op"))

    def test_line_probes_are_summed_up_above_the_tables(self):
        lines = [
            line("indep", "depengine", 100.0, 90.0, 110.0,
                 line_rtt_ns=80, line_rtt_min=75, line_rtt_max=90),
            line("chain", "depengine", 200.0, 190.0, 400.0,
                 line_rtt_ns=450, line_rtt_min=80, line_rtt_max=480),
            line("fan", "depengine", 300.0, 290.0, 310.0,
                 line_rtt_ns=470, line_rtt_min=460, line_rtt_max=490),
            line("indep", "rayon", 50.0, 40.0, 60.0),
        ]
        with results_file(lines) as path:
            self.assertEqual(table.line_probes(path), [(75, 80, 90), (80, 450, 480), (460, 470, 490)])
        text = self.render(lines)
        head = text.split("ns per op")[0]
        self.assertIn("3 lines", head)
        self.assertIn("median of the lines' medians 450 ns, least 75, most 490", head)
        self.assertIn("1 line(s) whose probes differed by more than 2×", head)
        # without the fields, no sentence
        self.assertNotIn("round trip", self.render(lines[3:]))

    def test_no_file_is_a_usage_error(self):
        argv, sys.argv = sys.argv, ["bench-peers-table.py"]
        try:
            with self.assertRaises(SystemExit) as e:
                table.main()
        finally:
            sys.argv = argv
        self.assertIn("usage", str(e.exception.code))

    def render(self, lines):
        with results_file(lines) as path:
            return self.render_files([path])

    def render_files(self, paths):
        out = io.StringIO()
        argv, sys.argv = sys.argv, ["bench-peers-table.py", *paths]
        try:
            with redirect_stdout(out):
                table.main()
        finally:
            sys.argv = argv
        return out.getvalue()

if __name__ == "__main__":
    unittest.main()
