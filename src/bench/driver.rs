//! What the drivers under `peers/` that are written in Rust (the rayon
//! driver, the lean control) share: their flags and their result line,
//! which is the line of `depengine bench` so that the harness reads every
//! system alike.

use std::fmt::Display;
use std::str::FromStr;

use super::{OrderCheck, Summary, Workload};

/// The value after flag `name` in `args` (`--ops 1000`), parsed, or
/// `default` when the flag is not given.
///
/// # Errors
///
/// A message naming the flag and the value, and why it does not parse,
/// when it does not; or saying that the flag has no value.
///
/// # Examples
///
/// ```
/// use depengine::bench::flag_value;
/// let args: Vec<String> = ["driver", "--ops", "500"].map(String::from).into();
/// assert_eq!(flag_value(&args, "--ops", 1_000_000usize), Ok(500));
/// assert_eq!(flag_value(&args, "--runs", 5usize), Ok(5));
/// let bad: Vec<String> = ["driver", "--ops", "many"].map(String::from).into();
/// assert!(flag_value(&bad, "--ops", 1usize).unwrap_err().contains("`many` for --ops"));
/// ```
pub fn flag_value<T: FromStr>(args: &[String], name: &str, default: T) -> Result<T, String>
where
    T::Err: Display,
{
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => {
            let v = args
                .get(i + 1)
                .ok_or_else(|| format!("{name} needs a value"))?;
            v.parse()
                .map_err(|e| format!("bad value `{v}` for {name}: {e}"))
        }
    }
}

/// [`flag_value`] for a driver's `main`: on an error, prints it and exits
/// with status 2, as a command-line tool refuses bad usage.
pub fn flag_or_exit<T: FromStr>(args: &[String], name: &str, default: T) -> T
where
    T::Err: Display,
{
    flag_value(args, name, default).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    })
}

/// One run's result as a driver prints it.
pub struct DriverResult<'a> {
    /// The workload run.
    pub workload: Workload,
    /// `--body-us` as given (the line repeats it as written).
    pub body_label: &'a str,
    /// The system's name in the line (`rayon`, `lean`).
    pub system: &'a str,
    /// Worker threads.
    pub workers: usize,
    /// Ops per run.
    pub ops: usize,
    /// ns per op of each timed run.
    pub ns_per_op: &'a [f64],
    /// Efficiency of each timed run (ignored when the bodies are empty).
    pub efficiency: &'a [f64],
    /// Total body time of the trace, ns (0: empty bodies, no efficiency).
    pub body_total_ns: f64,
}

impl DriverResult<'_> {
    /// The line of `depengine bench`: workload, system, workers, ops,
    /// runs, the median ns per op with min and max, and the median
    /// efficiency when the bodies are busy.
    pub fn line(&self) -> String {
        let s = Summary::of(self.ns_per_op);
        let mut line = format!(
            "workload={} body_us={} system={} workers={} ops={} runs={} ns_per_op={:.1} min={:.1} max={:.1}",
            self.workload,
            self.body_label,
            self.system,
            self.workers,
            self.ops,
            self.ns_per_op.len(),
            s.median,
            s.min,
            s.max
        );
        if self.body_total_ns > 0.0 {
            line += &format!(" efficiency={:.3}", Summary::of(self.efficiency).median);
        }
        line
    }
}

/// Prints `line`, with `order_violations=N` added when a check ran;
/// returns false when the check counted any (the driver then exits with
/// status 1).
pub fn print_checked(mut line: String, check: Option<&OrderCheck>) -> bool {
    let violations = check.map_or(0, OrderCheck::violations);
    if check.is_some() {
        line += &format!(" order_violations={violations}");
    }
    println!("{line}");
    violations == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_reads_as_depengine_bench_writes_it() {
        let r = DriverResult {
            workload: Workload::Fan,
            body_label: "1",
            system: "lean",
            workers: 2,
            ops: 202_000,
            ns_per_op: &[700.0, 650.0, 800.0],
            efficiency: &[0.70, 0.77, 0.62],
            body_total_ns: 1e6,
        };
        assert_eq!(
            r.line(),
            "workload=fan body_us=1 system=lean workers=2 ops=202000 runs=3 \
             ns_per_op=700.0 min=650.0 max=800.0 efficiency=0.700"
        );
        let empty = DriverResult {
            body_total_ns: 0.0,
            ..r
        };
        assert!(!empty.line().contains("efficiency"));
    }

    #[test]
    fn a_bad_value_says_why_it_does_not_parse() {
        let args: Vec<String> = ["driver", "--workload", "nope"].map(String::from).into();
        let e = flag_value(&args, "--workload", Workload::Indep).unwrap_err();
        assert!(e.starts_with("bad value `nope` for --workload: "), "{e}");
        assert!(e.contains("expected one of"), "{e}");
    }

    #[test]
    fn a_flag_without_its_value_is_an_error() {
        let args: Vec<String> = ["driver", "--ops"].map(String::from).into();
        assert_eq!(
            flag_value(&args, "--ops", 1usize),
            Err("--ops needs a value".to_string())
        );
    }
}
