//! `depengine bench`: empty-op micro-benchmarks of the engine.

use clap::Args;

/// Arguments of `depengine bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Workload: indep, chain or readers.
    #[arg(long, default_value = "indep")]
    workload: String,
}

pub(crate) fn run(args: BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err(format!("workload {} is not built yet", args.workload).into())
}
