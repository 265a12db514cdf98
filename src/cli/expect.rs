//! `rocmatrix expect MATRIX --propose|--write`: the changes the history
//! calls for in a matrix file's `expect:` and `flaky:` lists, as a unified
//! diff on stdout (with a summary on stderr), or written into the file.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::history::HistoryOption;
use crate::error::{Error, ExitCode};
use crate::expect::{self, ExpectError};
use crate::matrix_file::SpecError;

#[derive(Debug, Args)]
pub struct ExpectArgs {
    /// The matrix file.
    pub matrix: PathBuf,
    /// Print the proposed changes as a unified diff (the default).
    #[arg(long, conflicts_with = "write")]
    pub propose: bool,
    /// Make the proposed changes in the file (and print them).
    #[arg(long)]
    pub write: bool,
    /// Drop an entry (or a test of one) that passed in each of the
    /// matrix's last N recorded runs.
    #[arg(long, default_value_t = 5, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub drop_after: u32,
    /// Parent of `runs/`, where the default history.sqlite is.
    #[arg(long, default_value = crate::store::DEFAULT_OUT, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub history: HistoryOption,
}

pub fn run(args: ExpectArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let path = &args.matrix;
    let text = crate::safe_read::read_bounded_string(
        path,
        crate::matrix_file::MAX_MATRIX_BYTES,
        "matrix files",
        "",
    )
    .map_err(|e| ExpectError::Spec(SpecError::new(path, None, format!("cannot read: {e}"))))?;
    let mut history = expect::open(&args.history.location(&args.out))?;
    let proposal = expect::propose(path, &text, &mut history, args.drop_after as usize)?;
    super::write_out(out, &proposal.diff)?;
    eprintln!("{}", proposal.summary);
    if args.write && !proposal.diff.is_empty() {
        let mode = std::fs::metadata(path).map(|m| m.permissions()).ok();
        crate::store::write_atomic(path, proposal.text.as_bytes())?;
        if let Some(mode) = mode {
            std::fs::set_permissions(path, mode).map_err(|e| Error::io(path, e))?;
        }
        eprintln!("expect: wrote {}", path.display());
    }
    Ok(ExitCode::Success)
}
