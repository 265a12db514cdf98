//! `rocmatrix serve`: arguments → `crate::serve` (docs/serve.md).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, ExitCode};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Parent of `runs/`: the run stores served, and the default history.sqlite.
    #[arg(long, default_value = crate::store::DEFAULT_OUT, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub history: super::history::HistoryOption,
    /// The address to listen on; only loopback unless another address is given.
    #[arg(long, default_value = crate::serve::DEFAULT_LISTEN, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
}

pub fn run(args: ServeArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let history = args.history.location(&args.out);
    let opts = crate::serve::Options {
        listen: args.listen,
        history: history.clone(),
        out: args.out,
    };
    let mut ready = |addr: SocketAddr| {
        let _ = super::write_out(
            out,
            &format!("serving http://{addr}/ (history {history})\n"),
        );
    };
    crate::serve::run(cx.runtime, opts, &mut ready)?;
    Ok(ExitCode::Success)
}
