//! rocmatrix — a reproducible test-matrix orchestrator for the AMD ROCm stack.
//!
//! The library is organised along the data flow described in `docs/architecture.md`:
//! [`spec`] reads and validates matrix files and expands them into cells,
//! [`plan`] renders every cell (environment, steps) and shards the plan.
//! The binary (`src/main.rs`) is a thin layer over [`cli`].

pub mod affected;
pub mod analysis;
pub mod autopkgtest;
pub mod bisect;
pub mod budget;
pub mod build_stage;
pub mod bundle;
pub mod cli;
pub mod cluster;
pub mod debugger;
pub mod digest;
pub mod dirs;
pub mod engine;
pub mod error;
pub mod expect;
pub mod finish;
pub mod gpu;
pub mod history;
pub mod host;
pub mod image;
pub mod junit;
pub mod matrix_file;
pub mod merged_junit;
pub mod outcome;
pub mod plan;
pub mod prepare;
pub mod report;
pub mod reproduce;
pub mod results;
pub mod run;
pub mod safe_read;
pub mod serve;
pub mod source;
pub mod step;
pub mod stop;
pub mod store;
pub mod test_suite;
pub mod timeline;
pub mod triage;
pub mod trial;
pub mod yaml;

pub use error::{Error, ExitCode};
