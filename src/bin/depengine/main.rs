//! The `depengine` command line: one subcommand per job, each in its own file.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod plan;
mod run;
mod simulate;

/// depengine: a dependency engine, its memory planners and its benchmarks.
#[derive(Parser, Debug)]
#[command(name = "depengine", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Benchmark the engine on a workload (empty or busy bodies), or write its trace for the peer drivers.
    Bench(bench::BenchArgs),
    /// Plan tensor memory from a usage-records, MiniMalloc CSV or graph file.
    Plan(plan::PlanArgs),
    /// Simulate training memory (oracle, pool, semi-sync and async swapping).
    Simulate(simulate::SimulateArgs),
    /// Plan a graph's memory and run it on the engine (default: a bundled
    /// ResNet-18).
    Run(run::RunArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Run(args) => run::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
