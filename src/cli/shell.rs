//! `rocmatrix shell RUN CELL [--after STEP] [-- COMMAND…]`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, ExitCode};
use crate::reproduce::shell::{shell, ShellRequest};
use crate::store::RunStore;
use crate::store::DEFAULT_OUT;

#[derive(Debug, Args)]
pub struct ShellArgs {
    /// The run (its directory, or its id under --out).
    pub run: PathBuf,
    /// The cell id.
    pub cell: String,
    /// Start from a snapshot taken after this step (made on first use).
    #[arg(long, value_name = "STEP")]
    pub after: Option<String>,
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    #[command(flatten)]
    pub gpus: super::GpuSource,
    /// A command to run instead of an interactive bash.
    #[arg(last = true)]
    pub command: Vec<String>,
}

pub fn run(args: ShellArgs, cx: &super::Context, _out: &mut dyn Write) -> Result<ExitCode, Error> {
    let store = RunStore::open(&args.run, &args.out)?;
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let code = cx.runtime.block_on(async {
        let engine = cx.engine().await?;
        shell(
            &engine,
            ShellRequest {
                store: &store,
                cell: &args.cell,
                after: args.after.as_deref(),
                command: args.command.clone(),
                tty,
                gpus: args.gpus.gate()?,
            },
        )
        .await
        .map_err(Error::from)
    });
    let code = code?;
    std::process::exit(code.clamp(0, 255) as i32);
}
