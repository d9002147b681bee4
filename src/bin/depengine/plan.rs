//! `depengine plan`: memory planning from the command line.
//!
//! Reads a usage-records JSON, a MiniMalloc CSV or a graph JSON, runs one
//! strategy or all of them, checks every result with `validate`, and prints
//! a table (or JSON lines); `--svg` draws the smallest arena found.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use depengine::plan::{lower_bound, plan, render_svg, PlanOptions, Records, Strategy};

/// Arguments of `depengine plan`.
#[derive(Args, Debug)]
pub(crate) struct PlanArgs {
    /// Usage-records JSON, MiniMalloc CSV (`.csv`), or graph JSON file.
    file: PathBuf,
    /// A strategy name, or `all`.
    #[arg(long, default_value = "all")]
    strategy: String,
    /// Exact mode: the arena size to fit into (answers fits / does not fit / unknown).
    #[arg(long)]
    capacity: Option<u64>,
    /// Time limit of each strategy that can stop early, in seconds: improve and
    /// exact search until it; min-cost flow and greedy by size with distance
    /// priority (also within best_objects) finish their plan another way once
    /// it is up.
    #[arg(long, default_value_t = 1.0)]
    time_limit: f64,
    /// Offsets are multiples of this many bytes.
    #[arg(long, default_value_t = 1)]
    alignment: u64,
    /// One JSON object per line per strategy instead of a table.
    #[arg(long)]
    json: bool,
    /// Draw the smallest arena found to this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
}

/// Writes a line to `out`; a closed pipe (`depengine plan ... | head`) ends
/// the command quietly instead of failing.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {
        match writeln!($out, $($arg)*) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(format!("cannot write the results: {e}").into()),
        }
    };
}

pub(crate) fn run(args: PlanArgs) -> Result<(), Box<dyn std::error::Error>> {
    let strategies: Vec<Strategy> = if args.strategy == "all" {
        Strategy::ALL.to_vec()
    } else {
        let s = Strategy::from_name(&args.strategy).ok_or_else(|| {
            let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
            format!(
                "unknown strategy {:?}; choose one of: all, {}",
                args.strategy,
                names.join(", ")
            )
        })?;
        vec![s]
    };
    let time_limit = Duration::try_from_secs_f64(args.time_limit).map_err(|_| {
        format!(
            "--time-limit {} is not a non-negative number of seconds",
            args.time_limit
        )
    })?;
    let records = Records::load(&args.file)?;
    let mut stdout = std::io::stdout().lock();
    let lb = lower_bound(&records.records);
    let options = PlanOptions {
        conflicts: None,
        alignment: args.alignment.max(1),
        capacity: args.capacity,
        time_limit: Some(time_limit),
    };
    if !args.json {
        say!(
            stdout,
            "{}: {} tensors, {} ops, lower bound {} bytes, naive {} bytes",
            records.model,
            records.records.len(),
            records.ops,
            lb,
            records.naive_bytes()
        );
        say!(
            stdout,
            "{:<26} {:<8} {:>14} {:>9} {:>12}{}",
            "strategy",
            "kind",
            "total bytes",
            "ratio",
            "time",
            if args.capacity.is_some() {
                "  fits"
            } else {
                ""
            }
        );
    }
    let mut smallest: Option<(u64, Strategy, depengine::plan::OffsetsAssignment)> = None;
    for s in strategies {
        let start = Instant::now();
        let out = plan(&records.records, s, &options);
        let micros = start.elapsed().as_micros();
        out.plan
            .validate(&records.records, None, options.alignment)
            .map_err(|e| format!("strategy {} produced an invalid plan: {e}", s.name()))?;
        let total = out.plan.total();
        let ratio = if lb == 0 {
            1.0
        } else {
            total as f64 / lb as f64
        };
        let fits = out.fits.map(|f| f.as_option());
        if args.json {
            let mut line = serde_json::json!({
                "model": records.model,
                "strategy": s.name(),
                "kind": out.plan.kind(),
                "total_bytes": total,
                "lower_bound_bytes": lb,
                "ratio": ratio,
                "micros": micros,
                "tensors": records.records.len(),
            });
            if let Some(f) = fits {
                line["fits"] = serde_json::json!(f);
            }
            say!(stdout, "{line}");
        } else {
            let fits_col = match fits {
                Some(Some(true)) => "  yes",
                Some(Some(false)) => "  no",
                Some(None) => "  unknown",
                None => "",
            };
            say!(
                stdout,
                "{:<26} {:<8} {:>14} {:>9.4} {:>12}{fits_col}",
                s.name(),
                out.plan.kind(),
                total,
                ratio,
                format_micros(micros)
            );
        }
        if smallest.as_ref().is_none_or(|(t, _, _)| total < *t) {
            smallest = Some((total, s, out.plan.to_offsets()));
        }
    }
    if let (Some(path), Some((_, s, offsets))) = (&args.svg, &smallest) {
        let title = format!("{} / {}", records.model, s.name());
        let svg = render_svg(&records.records, offsets, lb, &title);
        std::fs::write(path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

fn format_micros(us: u128) -> String {
    if us >= 1_000_000 {
        format!("{:.2} s", us as f64 / 1e6)
    } else if us >= 1_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{us} us")
    }
}
