//! `rocmatrix validate FILE…`: parse, expand and render without printing a plan.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, ExitCode};
use crate::matrix_file::{Spec, DEFAULT_MAX_CELLS};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Matrix files to check.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Refuse matrices with more cells than this.
    #[arg(long, default_value_t = DEFAULT_MAX_CELLS)]
    pub max_cells: usize,
}

pub fn run(args: ValidateArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let mut failed = 0;
    for file in &args.files {
        let result = Spec::load(file).and_then(|spec| super::plan_of(&spec, args.max_cells, None));
        match result {
            Ok(plan) => super::write_out(
                out,
                &format!("{}: ok, {} cells\n", file.display(), plan.cells.len()),
            )?,
            Err(e) => {
                eprintln!("error: {e}");
                failed += 1;
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::Success
    } else {
        ExitCode::Usage
    })
}
