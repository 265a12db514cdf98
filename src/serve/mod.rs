//! `rocmatrix serve`: the matrix over time as pages a release manager opens
//! every morning, and the same data as JSON for scripts, read from a
//! history (SQLite or PostgreSQL) and the run stores beside it.
//!
//! - [`route`]: a request's path and query, parsed and bounded (a `?n=` is
//!   clamped) into the page it asks for;
//! - [`data`]: each page's data, asked per request of the history through
//!   `src/history/`'s own functions (the words `new`, `failing since`,
//!   `known since`, `flaky … only where …` are those of `history show`,
//!   `history flaky` and the reports), as JSON values;
//! - [`pages`]: the same values rendered by minijinja with HTML escaping on,
//!   the plots drawn as SVG on the server ([`svg`]);
//! - [`files`]: a run store's own files (its `report/index.html`), kept
//!   inside `runs/` (no `..`, no absolute path, no symlink out);
//! - [`http`]: hyper's HTTP/1 server: one task a connection, the history's
//!   work on blocking threads, a few at a time, one page worked out at a
//!   time;
//! - [`cache`]: pages kept until a run is recorded.
//!
//! Safe by construction: the history is opened read-only for every request
//! (SQLite `query_only` and read-only, PostgreSQL in read-only
//! transactions), so new runs appear without a restart and a history that
//! cannot be read is one page that says so; a PostgreSQL password is never
//! shown (`history::Location`'s display); the server listens on loopback
//! unless `--listen` names another address. docs/serve.md.

mod cache;
pub mod data;
pub mod files;
mod http;
pub mod pages;
pub mod route;
mod svg;

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::history::Location;

/// The address `serve` listens on by default: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// What `serve` serves.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    /// The history's location.
    pub history: Location,
    /// The parent of `runs/`: the run stores whose files are served.
    pub out: PathBuf,
}

/// Why `serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the history is off: `serve` has nothing to show (give --history)")]
    Off,
}

impl ServeError {
    /// Whether the command line asked for what cannot be: no history, or an
    /// address this host does not have or lets no one take. An address in
    /// use is the machine's state, not the command's.
    pub fn is_usage(&self) -> bool {
        match self {
            ServeError::Off => true,
            ServeError::Listen { source, .. } => source.kind() != std::io::ErrorKind::AddrInUse,
        }
    }
}

/// Listens on `opts.listen` and serves until the process is stopped;
/// `ready` is told the address once listening (a `:0` port resolved).
pub fn run(
    runtime: &tokio::runtime::Runtime,
    opts: Options,
    ready: &mut dyn FnMut(SocketAddr),
) -> Result<(), ServeError> {
    if opts.history == Location::Off {
        return Err(ServeError::Off);
    }
    let addr = opts.listen;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .map_err(|source| ServeError::Listen { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    ready(bound);
    runtime.block_on(http::serve(listener, std::sync::Arc::new(opts)));
    Ok(())
}
