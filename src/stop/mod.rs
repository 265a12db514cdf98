//! Stopping a run early and cleaning up after runs that were stopped hard:
//! Ctrl-C and SIGTERM ([`signals`]), the engine's watchdog that stops a run
//! whose engine went away or froze ([`watchdog`]), and the sweep of
//! containers that killed runs left ([`sweep`]). Used by `run`, `bisect`,
//! `triage` and `repro`; imports only the engine and image rooms.

pub mod signals;
pub mod sweep;
pub mod watchdog;
