//! `depengine simulate`: the training-memory simulator from the command line.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use depengine::sim::{
    from_graph, policy, simulate, svg, AllocModel, Mode, Profile, SimConfig, SimResult,
    DEFAULT_BANDWIDTH,
};
use depengine::storage::rounding::Rounding;

/// Arguments of `depengine simulate`.
#[derive(Args, Debug)]
pub(crate) struct SimulateArgs {
    /// A profile folder (io_info.json, resize_info.json, tensor_size.json,
    /// cost_info.json) or a training graph JSON file (*_train_*).
    path: PathBuf,
    /// Memory budget in bytes (suffixes KiB, MiB, GiB, KB, MB, GB accepted);
    /// the swap modes choose maps to swap to stay under it.
    #[arg(long, value_parser = parse_bytes)]
    budget: Option<u64>,
    /// Run one model only (default: all four).
    #[arg(long, value_parser = parse_mode)]
    mode: Option<Mode>,
    /// Disk bandwidth in bytes per second (default: 104094472 bytes / 4.452 s).
    #[arg(long, value_parser = parse_bandwidth)]
    bandwidth: Option<f64>,
    /// Print one JSON object per mode instead of a table (with "swap": the
    /// ids of the feature maps the policy chose).
    #[arg(long)]
    json: bool,
    /// Sweep budgets and draw the trade-off curve (budget across, time up)
    /// to this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Number of budgets in the sweep.
    #[arg(long, default_value_t = 12)]
    points: usize,
    /// Memory measure of the swap modes.
    #[arg(long, value_enum, default_value_t = AllocArg::Pool)]
    alloc: AllocArg,
    /// The pool's rounding rule.
    #[arg(long, value_enum, default_value_t = RoundingArg::Round)]
    rounding: RoundingArg,
    /// Index of the first backward op (default: the graph's forward_ops, or
    /// the first profile op whose name contains "backward").
    #[arg(long)]
    forward_ops: Option<usize>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum AllocArg {
    Oracle,
    Pool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum RoundingArg {
    /// Powers of two up to 16 MiB, then multiples of 16 MiB.
    Round,
    /// Pages of 4 KiB up to 2 MiB, then multiples of 2 MiB.
    Exact,
    /// No rounding.
    None,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    let t: String = s.chars().filter(|c| *c != '_' && *c != ',').collect();
    let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &t[digits.len()..];
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => {
            return Err(format!(
                "unknown unit \"{unit}\" in \"{s}\"; use bytes, KiB, MiB or GiB"
            ))
        }
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("\"{s}\" is not a number of bytes"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("\"{s}\" is too large"))
}

fn parse_bandwidth(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(b) if b.is_finite() && b > 0.0 => Ok(b),
        _ => Err(format!(
            "\"{s}\" is not a positive number of bytes per second"
        )),
    }
}

fn load(args: &SimulateArgs) -> Result<Profile, Box<dyn std::error::Error>> {
    if args.path.is_dir() {
        Ok(Profile::load_dir(&args.path, args.forward_ops)?)
    } else {
        Ok(from_graph::load(
            &args.path,
            &Default::default(),
            args.forward_ops,
        )?)
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

pub(crate) fn run(args: SimulateArgs) -> Result<(), Box<dyn std::error::Error>> {
    let profile = load(&args)?;
    let config = SimConfig {
        alloc: match args.alloc {
            AllocArg::Oracle => AllocModel::Oracle,
            AllocArg::Pool => AllocModel::Pool,
        },
        rounding: match args.rounding {
            RoundingArg::Round => Rounding::round_default(),
            RoundingArg::Exact => Rounding::exact_default(),
            RoundingArg::None => Rounding::None,
        },
        bandwidth: args.bandwidth.unwrap_or(DEFAULT_BANDWIDTH),
    };
    let modes: Vec<Mode> = match args.mode {
        Some(m) => vec![m],
        None => Mode::ALL.to_vec(),
    };
    let results: Vec<(SimResult, Vec<usize>)> = modes
        .iter()
        .map(|&m| match args.budget {
            Some(b) => {
                let plan = policy::choose(&profile, m, &config, b);
                (plan.result, plan.swap)
            }
            None => (simulate(&profile, m, &config, &[]), Vec::new()),
        })
        .collect();
    if args.json {
        for (r, swap) in &results {
            let mut v = serde_json::to_value(r)?;
            if let Some(o) = v.as_object_mut() {
                o.insert("model".into(), profile.name.clone().into());
                let keys: Vec<String> = swap
                    .iter()
                    .map(|&t| profile.tensors[t].key.to_string())
                    .collect();
                o.insert("swap".into(), keys.into());
            }
            println!("{v}");
        }
    } else {
        println!(
            "{}: {} ops ({} forward), {} feature maps, compute {:.3} ms",
            profile.name,
            profile.ops.len(),
            profile.forward_ops,
            profile.feature_maps().len(),
            profile.compute_ms()
        );
        println!(
            "{:<10} {:<7} {:>16} {:>10} {:>12} {:>12} {:>16} {:>6} {:>5}",
            "mode",
            "alloc",
            "peak_bytes",
            "peak_MiB",
            "total_ms",
            "stall_ms",
            "swapped_bytes",
            "maps",
            "fits"
        );
        for (r, _) in &results {
            println!(
                "{:<10} {:<7} {:>16} {:>10.2} {:>12.3} {:>12.3} {:>16} {:>6} {:>5}",
                r.mode.name(),
                match r.alloc {
                    AllocModel::Oracle => "oracle",
                    AllocModel::Pool => "pool",
                },
                r.peak_bytes,
                mib(r.peak_bytes),
                r.total_ms,
                r.stall_ms,
                r.swapped_bytes,
                r.swapped_maps,
                r.fits.map_or("-", |f| if f { "yes" } else { "no" })
            );
        }
    }
    if let Some(out) = &args.svg {
        let sweep_modes: Vec<Mode> = match args.mode {
            Some(m) if m.swaps() => vec![m],
            _ => Mode::SWAP.to_vec(),
        };
        let curves = policy::sweep(&profile, &sweep_modes, &config, args.points);
        let title = format!("{}: time against memory budget", profile.name);
        std::fs::write(out, svg::render(&title, &curves, profile.compute_ms()))
            .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_parse() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("3MiB"), Ok(3 << 20));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("1_000"), Ok(1000));
        assert!(parse_bytes("12XB").is_err());
        assert!(parse_bytes("abc").is_err());
        assert!(parse_bandwidth("0").is_err());
    }
}
