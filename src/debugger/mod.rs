//! The debugger's view of a failure: a step's failing command (or a
//! crashing test) run again under `gdb -batch`, bounded in time and output,
//! and gdb's backtrace read into frames.
//!
//! [`capture`] writes the shell that a step with `backtrace:` runs first: an
//! `ERR` trap that, when a command fails as the step asked (`on: error`, or
//! `on: crash` for a signal), runs that command again, with the step
//! shell's variables and directory, under gdb with the breakpoints.
//! [`gdb`] is gdb's command file and invocation; [`gdb_output`] parses what
//! gdb printed into a [`crate::store::record::Backtrace`]. [`attach`] is
//! the view of a hang: gdb attached to a timed-out step's processes before
//! the kill.

pub mod attach;
pub mod capture;
pub mod gdb;
pub mod gdb_output;

/// Where the step shell leaves its backtrace files in the container.
pub const DIR: &str = "/rocmatrix/backtrace";
/// At most this much of gdb's output is kept.
pub const MAX_OUTPUT: usize = 256 * 1024;
