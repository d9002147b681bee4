//! `depengine plan`: memory planning from the command line.

use clap::Args;

/// Arguments of `depengine plan`.
#[derive(Args, Debug)]
pub(crate) struct PlanArgs {
    /// Usage-records JSON, MiniMalloc CSV, or graph JSON file.
    file: std::path::PathBuf,
}

pub(crate) fn run(args: PlanArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err(format!("planning {} is not built yet", args.file.display()).into())
}
