//! `rocmatrix try RUN --patch NAME=FILE`: a candidate fix tried across the
//! matrix. The cells RUN failed (or every cell, `--all`) run again from
//! RUN's plan with the patch applied to the `sources:` entry NAME, in a run
//! store of their own whose report compares against RUN; each cell is then
//! told fixed, still failing (with the same or other signatures), newly
//! failing or unchanged.
//!
//! (The room is `trial`: `try` is a Rust keyword.)
//!
//! * [`patch`]: a patch file read with a bound, refused when binary or not
//!   a patch, kept by its content under the cache — the path the plan
//!   names, so the same patch makes the same build snapshot on the next
//!   try and a patched snapshot never replaces the unpatched one;
//! * [`select`]: which of RUN's cells are tried;
//! * [`apply`]: RUN's plan with the patches added to those cells' and
//!   their builds' sources, and each patch applied once before anything
//!   is built;
//! * [`compare`]: each cell before and after, its table and `try.json`.

pub mod apply;
pub mod compare;
pub mod patch;
pub mod select;

/// A try that cannot start: bad input, named with what was expected.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TrialError(pub String);
