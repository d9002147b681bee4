//! `depengine bench` end to end: the zero-overhead yardstick (`--ideal`) and
//! the errors for arguments that name no run.

use std::process::{Command, Output};

fn depengine(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_depengine"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run depengine")
}

/// What a refused run printed on stderr (the run must have failed).
fn refused(args: &[&str]) -> String {
    let out = depengine(args);
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The one result line of a successful run.
fn result_line(args: &[&str]) -> String {
    let out = depengine(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let line = lines.next().expect("one line").to_string();
    assert_eq!(lines.next(), None, "one line only");
    line
}

/// The result line of one run of an `n` × `n` wavefront on 2 workers with
/// `option value` added.
fn small_wavefront_with(n: &str, option: &str, value: &str) -> String {
    result_line(&[
        "--workload",
        "wavefront",
        "--n",
        n,
        "--workers",
        "2",
        "--runs",
        "1",
        option,
        value,
    ])
}

/// The result line of 500 `random` ops with 1 µs bodies on 2 workers,
/// one run, pushed the way `mode` (a flag of `depengine bench`) says.
fn busy_random_on_two_workers(mode: &str) -> String {
    result_line(&[
        "--workload",
        "random",
        "--ops",
        "500",
        "--body-us",
        "1",
        "--workers",
        "2",
        "--runs",
        "1",
        mode,
    ])
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

#[test]
fn ideal_prints_the_zero_overhead_schedule_as_a_result_line() {
    // rwmix on 16 workers: each writer alone, then its 63 readers in
    // ceil(63 / 16) = 4 rounds, so 64 ops take 5 rounds of 16 slots.
    let line = result_line(&[
        "--workload",
        "rwmix",
        "--ops",
        "6400",
        "--body-us",
        "10",
        "--workers",
        "16",
        "--ideal",
    ]);
    let line = line.as_str();
    assert_eq!(field(line, "system"), "ideal");
    assert_eq!(field(line, "workers"), "16");
    assert_eq!(field(line, "ops"), "6400");
    let eff: f64 = field(line, "efficiency").parse().unwrap();
    assert!((eff - 64.0 / (16.0 * 5.0)).abs() < 1e-3, "{line}");
    // 100 groups × 5 rounds × 10 µs over 6,400 ops.
    let ns: f64 = field(line, "ns_per_op").parse().unwrap();
    assert!((ns - 100.0 * 5.0 * 10_000.0 / 6400.0).abs() < 0.1, "{line}");
    let cp: f64 = field(line, "critical_path_us").parse().unwrap();
    assert!((cp - 100.0 * 2.0 * 10.0).abs() < 0.1, "{line}");
}

#[test]
fn ideal_of_roundtrip_is_an_error_not_a_line() {
    let out = depengine(&["--workload", "roundtrip", "--ideal"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("roundtrip"), "{err}");
}

#[test]
fn ideal_with_help_wait_is_refused() {
    assert!(refused(&["--ideal", "--help-wait", "--ops", "10"]).contains("--help-wait"));
}

#[test]
fn the_naive_executor_reports_its_one_thread() {
    let line = result_line(&[
        "--engine",
        "naive",
        "--workload",
        "chain",
        "--ops",
        "100",
        "--runs",
        "1",
    ]);
    let line = line.as_str();
    assert_eq!(field(line, "system"), "depengine-naive");
    // The pushing thread runs every op: one thread, not zero.
    assert_eq!(field(line, "workers"), "1");
    assert_eq!(field(line, "ops"), "100");
}

#[test]
fn a_run_reports_the_pushing_threads_share_within_its_time() {
    // A chain of 10 µs bodies on one worker: the pusher is done long before
    // the ops are, so its share is a small part of the time per op.
    let line = result_line(&[
        "--workload",
        "chain",
        "--ops",
        "2000",
        "--body-us",
        "10",
        "--workers",
        "1",
        "--runs",
        "3",
    ]);
    let line = line.as_str();
    let total: f64 = field(line, "ns_per_op").parse().unwrap();
    let push: f64 = field(line, "push_ns_per_op").parse().unwrap();
    assert!(push > 0.0 && push <= total, "{line}");
    // Every op's body takes 10 µs, so the time per op is at least that,
    // whatever the machine's load.
    assert!(total >= 10_000.0, "{line}");
}

#[test]
fn batch_runs_name_their_batch_and_roundtrip_refuses_one() {
    let line = small_wavefront_with("30", "--batch", "64");
    assert_eq!(field(&line, "system"), "depengine-per-device-batch64");
    assert_eq!(field(&line, "ops"), "900");
    let err = refused(&["--workload", "roundtrip", "--batch", "4"]);
    assert!(
        err.contains("--batch") && err.contains("roundtrip"),
        "{err}"
    );
}

#[test]
fn several_pushers_only_for_independent_ops() {
    let line = result_line(&[
        "--workload",
        "indep-novars",
        "--ops",
        "3000",
        "--workers",
        "2",
        "--runs",
        "1",
        "--pushers",
        "3",
    ]);
    assert_eq!(field(&line, "system"), "depengine-per-device-pushers3");
    let err = refused(&["--workload", "wavefront", "--pushers", "2"]);
    assert!(
        err.contains("--pushers") && err.contains("wavefront"),
        "{err}"
    );
    refused(&["--workload", "indep", "--pushers", "0"]);
}

#[test]
fn helping_pushes_name_their_system_and_need_a_helping_wait() {
    let line = result_line(&[
        "--workload",
        "random",
        "--ops",
        "3000",
        "--workers",
        "1",
        "--runs",
        "1",
        "--help-wait",
        "--help-push",
    ]);
    assert_eq!(
        field(&line, "system"),
        "depengine-per-device-helping-pushing"
    );
    assert_eq!(
        field(&line, "workers"),
        "2",
        "the pusher counts as a thread"
    );
    assert_eq!(field(&line, "ops"), "3000");
    let err = refused(&["--ops", "10", "--help-push"]);
    assert!(err.contains("--help-wait"), "{err}");
}

#[test]
fn pool_and_lead_limits_name_their_system() {
    // 64 op blocks kept at most while 4,900 ops are pushed: most blocks of
    // completed ops are freed (`tests/engine_basic.rs` checks the ops'
    // effects under such limits, and under queue buffer limits); a lead
    // of 64 ops makes the pusher wait on a 4,900-op wavefront.
    for (n, option, value, suffix, ops) in [
        ("70", "--pooled-op-blocks", "64", "-pool64", "4900"),
        ("30", "--pooled-queue-entries", "0", "-qpool0", "900"),
        ("70", "--max-lead", "64", "-lead64", "4900"),
    ] {
        let line = small_wavefront_with(n, option, value);
        let system = format!("depengine-per-device{suffix}");
        assert_eq!(field(&line, "system"), system);
        assert_eq!(field(&line, "ops"), ops);
        refused(&["--workload", "indep", option, "-1"]);
        refused(&["--workload", "indep", option, "8", "--ideal"]);
    }
}

#[test]
fn search_settings_name_their_system_and_bad_ones_are_refused() {
    for (option, value, suffix) in [
        ("--max-searching", "1", "-search1"),
        ("--linger-us", "0", "-linger0"),
        ("--linger-us", "400", "-linger400"),
    ] {
        let line = small_wavefront_with("30", option, value);
        assert_eq!(
            field(&line, "system"),
            format!("depengine-per-device{suffix}")
        );
        assert_eq!(field(&line, "ops"), "900");
    }
    let line = result_line(&[
        "--workload",
        "indep",
        "--ops",
        "2000",
        "--workers",
        "2",
        "--runs",
        "1",
        "--max-searching",
        "2",
        "--linger-through-pushes",
        "--keep-one-searching",
        "--pusher-queues-up-to",
        "4",
        "--deal-pushes",
    ]);
    assert_eq!(
        field(&line, "system"),
        "depengine-per-device-search2-lingerpush-keepsearch-pq4-deal"
    );
    assert_eq!(field(&line, "ops"), "2000");
    refused(&["--workload", "indep", "--deal-pushes", "--ideal"]);
    let err = refused(&["--workload", "indep", "--ops", "10", "--max-searching", "0"]);
    assert!(err.contains("max_searching"), "{err}");
    let err = refused(&[
        "--workload",
        "indep",
        "--ops",
        "10",
        "--linger-us",
        "2000000",
    ]);
    assert!(err.contains("linger"), "{err}");
    refused(&["--workload", "indep", "--linger-us", "50", "--ideal"]);
    refused(&["--workload", "indep", "--keep-one-searching", "--ideal"]);
    // The sleep fence: whole (never refused), split (where the system has
    // the barrier, else refused naming the setting), nothing else.
    fn fence(value: Option<&'static str>) -> Vec<&'static str> {
        let mut args = vec!["--workload", "indep", "--ops", "2000", "--workers", "2"];
        args.extend(["--runs", "1", "--asymmetric-fence"]);
        args.extend(value);
        args
    }
    let line = result_line(&fence(Some("off")));
    assert_eq!(field(&line, "system"), "depengine-per-device-fullfence");
    for value in [None, Some("on")] {
        let out = depengine(&fence(value));
        if out.status.success() {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains("system=depengine-per-device-afence "),
                "{stdout}"
            );
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("asymmetric_wake_fence"), "{err}");
        }
    }
    let err = refused(&fence(Some("maybe")));
    assert!(err.contains("expected on or off"), "{err}");
}

#[test]
fn warm_up_runs_name_their_system_and_are_the_same_on_both_sides_of_a_pair() {
    let run = |extra: &[&str]| {
        let base = ["--workload", "wavefront", "--n", "20", "--workers", "2"];
        result_line(&[&base[..], &["--runs", "1", "--replay"], extra].concat())
    };
    assert_eq!(field(&run(&[]), "system"), "depengine-per-device-replay");
    assert_eq!(
        field(&run(&["--warm-up", "1"]), "system"),
        "depengine-per-device-replay"
    );
    for n in ["0", "40"] {
        let line = run(&["--warm-up", n]);
        assert_eq!(
            field(&line, "system"),
            format!("depengine-per-device-replay-warm{n}")
        );
        assert_eq!(field(&line, "ops"), "400");
    }
    let err = refused(&[
        "--workload",
        "indep",
        "--ops",
        "10",
        "--versus",
        "--warm-up 3",
    ]);
    assert!(err.contains("changes --warm-up"), "{err}");
    refused(&["--workload", "indep", "--warm-up", "3", "--ideal"]);
    refused(&["--workload", "indep", "--warm-up", "-1"]);
}

#[test]
fn replay_runs_name_their_system_and_refuse_priority_and_roundtrip() {
    let line = result_line(&[
        "--workload",
        "wavefront",
        "--n",
        "30",
        "--workers",
        "2",
        "--runs",
        "1",
        "--replay",
    ]);
    assert_eq!(field(&line, "system"), "depengine-per-device-replay");
    assert_eq!(field(&line, "ops"), "900");
    // The capture's time per node: a positive number of nanoseconds, on
    // replay lines only.
    let capture: f64 = field(&line, "capture_ns_per_op").parse().unwrap();
    assert!(capture > 0.0 && capture.is_finite(), "{line}");
    let pushed = result_line(&["--workload", "wavefront", "--n", "30", "--runs", "1"]);
    assert!(!pushed.contains("capture_ns_per_op"), "{pushed}");
    for workload in ["priority", "roundtrip"] {
        let err = refused(&["--workload", workload, "--replay"]);
        assert!(err.contains("--replay") && err.contains(workload), "{err}");
    }
    let err = refused(&["--replay", "--batch", "8"]);
    assert!(err.contains("--batch"), "{err}");
}

#[test]
fn replay_helpers_name_the_system_and_need_a_replay() {
    for (how, suffix) in [
        ("adaptive", ""),
        ("all", "-helpers-all"),
        ("one", "-helpers-one"),
    ] {
        let line = result_line(&[
            "--workload",
            "wavefront",
            "--n",
            "20",
            "--workers",
            "2",
            "--runs",
            "3",
            "--replay",
            "--replay-helpers",
            how,
        ]);
        assert_eq!(
            field(&line, "system"),
            format!("depengine-per-device-replay{suffix}")
        );
        assert_eq!(field(&line, "ops"), "400");
    }
    let err = refused(&["--replay", "--replay-helpers", "some"]);
    assert!(
        err.contains("`some`") && err.contains("adaptive, all or one"),
        "{err}"
    );
    let err = refused(&["--workload", "chain", "--replay-helpers", "one"]);
    assert!(err.contains("--replay"), "{err}");
}

#[test]
fn serial_runs_report_one_thread_and_refuse_roundtrip() {
    // On a 2-worker engine the serial scope still runs every op on the
    // pushing thread: one thread, and a busy body's time per op is its
    // body's at least.
    let line = busy_random_on_two_workers("--serial");
    let line = line.as_str();
    assert_eq!(field(line, "system"), "depengine-per-device-serial");
    assert_eq!(field(line, "workers"), "1");
    let ns: f64 = field(line, "ns_per_op").parse().unwrap();
    assert!(ns >= 1_000.0, "{line}");
    let err = refused(&["--workload", "roundtrip", "--serial"]);
    assert!(
        err.contains("--serial") && err.contains("roundtrip"),
        "{err}"
    );
    let err = refused(&["--workload", "chain", "--serial", "--replay"]);
    assert!(
        err.contains("--serial") || err.contains("--replay"),
        "{err}"
    );
}

#[test]
fn stream_runs_report_their_system_and_refuse_priority_and_roundtrip() {
    // A busy body's time per op on 2 workers is half its body's at
    // least: the ops ran, on the workers.
    let line = busy_random_on_two_workers("--stream");
    let line = line.as_str();
    assert_eq!(field(line, "system"), "depengine-per-device-stream");
    assert_eq!(field(line, "workers"), "2");
    assert_eq!(field(line, "ops"), "500");
    let ns: f64 = field(line, "ns_per_op").parse().unwrap();
    assert!(ns >= 500.0, "{line}");
    for workload in ["priority", "roundtrip"] {
        let err = refused(&["--workload", workload, "--stream"]);
        assert!(err.contains("--stream") && err.contains(workload), "{err}");
    }
    let err = refused(&["--workload", "chain", "--stream", "--batch", "8"]);
    assert!(err.contains("--stream") || err.contains("--batch"), "{err}");
}

/// 2,000 ops of 10 µs on one var at 2 workers, two runs, with
/// `--cpu-time`: 20 ms of bodies on the pool's workers.
const CHAIN_CPU_TIME: [&str; 11] = [
    "--workload",
    "chain",
    "--ops",
    "2000",
    "--body-us",
    "10",
    "--workers",
    "2",
    "--runs",
    "2",
    "--cpu-time",
];

#[test]
fn cpu_time_reports_the_threads_shares_and_refuses_roundtrip() {
    let line = result_line(&CHAIN_CPU_TIME);
    let share = |key| -> f64 { field(&line, key).parse().unwrap() };
    // The 20 ms of bodies ran on the pool's workers, so they were found
    // and had CPU time; a share is of the run's time × those workers, and
    // the counters are read just outside the timed region, so no share
    // can pass 1 by more than the reads' few microseconds.
    for key in ["worker_cpu", "pusher_cpu"] {
        let s = share(key);
        assert!(s > 0.0 && s <= 1.05, "{key} in {line}");
    }
    let queued = share("run_queue");
    assert!((0.0..=1.05).contains(&queued), "{line}");
    // Sleeps per op: counts over ops, never negative.
    for key in ["worker_sleeps", "pusher_sleeps", "pusher_wakes"] {
        let s = share(key);
        assert!(s.is_finite() && s >= 0.0, "{key} in {line}");
    }
    let err = refused(&["--workload", "roundtrip", "--cpu-time"]);
    assert!(
        err.contains("--cpu-time") && err.contains("roundtrip"),
        "{err}"
    );
    // Without the flag the line has none of the fields.
    let plain = small_wavefront_with("20", "--body-us", "0");
    assert!(!plain.contains("worker_cpu"), "{plain}");
}

#[test]
fn line_probe_reports_the_round_trip_beside_each_kind_of_run() {
    for args in [
        &["--workload", "wavefront", "--n", "20", "--workers", "2"][..],
        &["--workload", "roundtrip", "--ops", "200"][..],
    ] {
        let line = result_line(&[args, &["--runs", "3", "--line-probe"]].concat());
        let ns = |key| -> f64 { field(&line, key).parse().unwrap() };
        let (median, min, max) = (ns("line_rtt_ns"), ns("line_rtt_min"), ns("line_rtt_max"));
        // A mean of 20,000 trips over two threads' writes: above a
        // nanosecond, below a millisecond even where both share a CPU
        // and each trip is two context switches; the median of three
        // lies between the least and the most.
        assert!(min > 1.0 && max < 1e6, "{line}");
        assert!(min <= median && median <= max, "{line}");
    }
    let plain = small_wavefront_with("20", "--body-us", "0");
    assert!(!plain.contains("line_rtt"), "{plain}");
    for other in ["--ideal", "--dump-trace=/dev/null"] {
        let err = refused(&["--workload", "chain", "--line-probe", other]);
        assert!(err.contains("--line-probe"), "{other}: {err}");
    }
}

/// The three lines of a run of `args` (words split at spaces) with
/// `--versus FLAGS`: the first side's, the second's and the `paired` line.
fn versus_lines(args: &str, flags: &str) -> [String; 3] {
    let mut argv: Vec<&str> = args.split_whitespace().collect();
    argv.extend(["--versus", flags]);
    let out = depengine(&argv);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.try_into().expect("three lines")
}

fn number(line: &str, key: &str) -> f64 {
    field(line, key)
        .parse()
        .unwrap_or_else(|e| panic!("{key} in {line:?}: {e}"))
}

#[test]
fn versus_runs_a_second_engine_with_its_flags_and_pairs_the_rounds() {
    let [a, b, pair] = versus_lines(
        "--workload random --ops 400 --workers 2 --runs 4 --max-lead 100",
        "--max-lead 200 --serial",
    );
    assert_eq!(field(&a, "system"), "depengine-per-device-lead100");
    assert_eq!(field(&a, "workers"), "2");
    // A flag given again takes its last value; one given only to the
    // second side is its alone.
    assert_eq!(field(&b, "system"), "depengine-per-device-serial-lead200");
    assert_eq!(field(&b, "workers"), "1");
    for line in [&a, &b] {
        assert_eq!(field(line, "workload"), "random");
        assert_eq!(field(line, "ops"), "400");
        assert_eq!(field(line, "runs"), "4");
    }
    assert!(pair.starts_with("paired "), "{pair}");
    assert_eq!(field(&pair, "a"), "depengine-per-device-lead100");
    assert_eq!(field(&pair, "b"), "depengine-per-device-serial-lead200");
    assert_eq!(field(&pair, "a_workers"), "2");
    assert_eq!(field(&pair, "b_workers"), "1");
    assert_eq!(field(&pair, "rounds"), "4");
    let (min, q1, ratio, q3, max) = (
        number(&pair, "min"),
        number(&pair, "q1"),
        number(&pair, "ratio"),
        number(&pair, "q3"),
        number(&pair, "max"),
    );
    assert!(
        0.0 < min && min <= q1 && q1 <= ratio && ratio <= q3 && q3 <= max,
        "{pair}"
    );
    assert!(number(&pair, "b_faster") <= 4.0, "{pair}");
    // Four rounds can never make a sign test sure: at best 2 / 16.
    let sign_p = number(&pair, "sign_p");
    assert!((0.125..=1.0).contains(&sign_p), "{pair}");
    // Every round's ratio is one of b's runs over one of a's, so none lies
    // outside the spread of the two sides' lines (give or take the
    // rounding of the printed figures).
    let lowest = number(&b, "min") / number(&a, "max");
    let highest = number(&b, "max") / number(&a, "min");
    assert!(
        lowest * 0.999 - 0.001 <= min && max <= highest * 1.001 + 0.001,
        "{a}\n{b}\n{pair}"
    );
}

#[test]
fn versus_with_the_same_flags_names_the_second_side_apart() {
    let [a, b, pair] = versus_lines("--workload roundtrip --ops 200 --workers 1 --runs 2", "");
    assert_eq!(field(&a, "system"), "depengine-per-device");
    assert_eq!(field(&b, "system"), "depengine-per-device-b");
    assert_eq!(field(&pair, "b"), "depengine-per-device-b");
    assert_eq!(field(&pair, "rounds"), "2");
}

#[test]
fn versus_refuses_a_second_side_that_runs_something_else() {
    let small = ["--workload", "indep", "--ops", "100", "--runs", "1"];
    for (flags, names) in [
        ("--workload chain", "--workload"),
        ("--ops 50", "--ops"),
        ("--runs 3", "--runs"),
        ("--body-us 1", "--body-us"),
        ("--vars 7", "--vars"),
    ] {
        let err = refused(&[&small[..], &["--versus", flags]].concat());
        assert!(
            err.contains(&format!("changes {names}")) && err.contains(flags),
            "{flags}: {err}"
        );
    }
    let err = refused(&[&small[..], &["--versus", "--no-such-flag"]].concat());
    assert!(
        err.contains("--versus") && err.contains("--no-such-flag"),
        "{err}"
    );
    let err = refused(&[&small[..], &["--versus", "--help"]].concat());
    assert!(err.contains("depengine bench --help"), "{err}");
    // Each side is checked as a run of its own.
    let err = refused(&[
        "--workload",
        "priority",
        "--ops",
        "100",
        "--versus",
        "--stream",
    ]);
    assert!(
        err.contains("--versus") && err.contains("--stream does not apply to priority"),
        "{err}"
    );
    let err = refused(&[&small[..], &["--versus", "--cpu-time"]].concat());
    assert!(
        err.contains("--cpu-time is for both sides of a pair; give it outside --versus"),
        "{err}"
    );
    for (flags, flag) in [
        ("--ideal", "--ideal"),
        ("--dump-trace /dev/null", "--dump-trace"),
        ("--stream --dump-trace=/dev/null", "--dump-trace"),
    ] {
        let err = refused(&[&small[..], &["--versus", flags]].concat());
        assert!(
            err.contains(&format!("{flag} is not for one side of a pair")),
            "{flags}: {err}"
        );
    }
    refused(&[&small[..], &["--ideal", "--versus", "--stream"]].concat());
}

#[test]
fn cpu_time_with_versus_reports_each_sides_threads() {
    let out = depengine(&[&CHAIN_CPU_TIME[..], &["--versus", "--workers 1"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("workload="))
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for (line, workers) in lines.iter().zip(["2", "1"]) {
        assert_eq!(field(line, "workers"), workers, "{line}");
        // Each side's bodies ran on its own workers, which were found
        // and had CPU time; no share passes 1 by more than the reads'.
        for key in ["worker_cpu", "pusher_cpu", "run_queue"] {
            let s: f64 = field(line, key).parse().unwrap();
            assert!((0.0..=1.05).contains(&s), "{key} in {line}");
        }
        let busy: f64 = field(line, "worker_cpu").parse().unwrap();
        assert!(busy > 0.0, "{line}");
    }
    assert!(stdout.contains("\npaired "), "{stdout}");
}

#[test]
fn a_workload_past_a_traces_32_bit_ids_is_refused_at_once() {
    // 70,000^2 ops would take the build minutes and some 150 GB before
    // its ids wrapped around: refused before anything is built, whatever
    // the run would have been.
    for extra in [&[][..], &["--ideal"], &["--dump-trace", "/dev/null"]] {
        let err = refused(&[&["--workload", "wavefront", "--n", "70000"][..], extra].concat());
        assert!(
            err.contains("4900000000 ops") && err.contains("smaller grid (--n)"),
            "{extra:?}: {err}"
        );
    }
    let err = refused(&["--workload", "indep", "--ops", "5000000000"]);
    assert!(
        err.contains("5000000000 ops") && err.contains("fewer ops (--ops)"),
        "{err}"
    );
}
