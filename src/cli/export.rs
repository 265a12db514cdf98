//! `rocmatrix export RUN CELL DIR`: a self-contained reproducer of one cell.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, ExitCode};
use crate::store::RunStore;
use crate::store::DEFAULT_OUT;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The run (its directory, or its id under --out).
    pub run: PathBuf,
    /// The cell id.
    pub cell: String,
    /// Where to write the reproducer (created).
    pub dir: PathBuf,
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
}

pub fn run(args: ExportArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let store = RunStore::open(&args.run, &args.out)?;
    let e = crate::run::export::export(&store, &args.cell, &args.dir)?;
    let mut text = format!(
        "wrote a reproducer for {} to {}:\n",
        args.cell,
        e.dir.display()
    );
    for f in &e.files {
        text.push_str(&format!("  {f}\n"));
    }
    if !e.pinned {
        text.push_str(
            "note: the run has no lock for this environment; package versions are not pinned\n",
        );
    }
    text.push_str(&format!("run it with: {}/run.sh\n", e.dir.display()));
    super::write_out(out, &text)?;
    Ok(ExitCode::Success)
}
