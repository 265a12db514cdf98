//! Environment facts as the reports show them: per environment image its
//! base and the versions that matter (HIP runtime, LLVM/clang, ROCm
//! libraries, from `lock.json`), and per cell the line of its environment.

use std::collections::HashMap;

use serde::Serialize;

use crate::results::facts::EnvironmentFacts;

#[derive(Debug, Serialize)]
pub struct EnvView {
    pub environment: String,
    pub base: String,
    pub cells: String,
    /// `libamdhip64-6 6.4.3-5, libllvm21 1:21.1.8-14, …`.
    pub packages: String,
}

pub fn views(envs: &[EnvironmentFacts]) -> Vec<EnvView> {
    envs.iter()
        .map(|e| EnvView {
            environment: e.environment.clone(),
            base: e.base.clone(),
            cells: e.cells.join(", "),
            packages: e.summary(),
        })
        .collect()
}

/// Cell id → `debian:sid: libamdhip64-6 6.4.3-5, …`.
pub fn by_cell(envs: &[EnvironmentFacts]) -> HashMap<&str, String> {
    let mut m = HashMap::new();
    for e in envs {
        let line = format!("{}: {}", e.base, e.summary());
        for c in &e.cells {
            m.insert(c.as_str(), line.clone());
        }
    }
    m
}
