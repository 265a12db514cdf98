//! The commands a user runs after a run, on one of its cells: `shell` (a
//! container of the cell's image with its steps at hand), `export` (a
//! self-contained reproducer) and `repro` (the cell run again, checked
//! against the run's lock). They read the run store; they share the run's
//! step primitives (`src/run/cell.rs`) and never run a scheduler.

pub mod export;
mod load;
pub mod repro;
pub mod shell;

pub use load::load_cell;
