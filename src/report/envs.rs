//! Environment facts as the reports show them: per environment image its
//! base and the versions that matter (HIP runtime, LLVM/clang, ROCm
//! libraries, from `lock.json`), once, in the matrix's order; and per cell a
//! reference to its environment.

use std::collections::HashMap;

use serde::Serialize;

use crate::results::facts::EnvironmentFacts;
use crate::results::Results;

#[derive(Debug, Serialize)]
pub struct EnvView {
    pub environment: String,
    pub base: String,
    pub cells: String,
    /// `suite=bookworm`: the axis values its cells share; empty when none.
    pub values: String,
    /// `libamdhip64-6 6.4.3-5, libllvm21 1:21.1.8-14, …`.
    pub packages: String,
}

/// One environment per row, in the matrix's order: by the first of its
/// cells in the results (the plan's order), its cells in that order too.
pub fn views(results: &Results) -> Vec<EnvView> {
    let position = |id: &str| {
        results
            .cells
            .iter()
            .position(|c| c.id == id)
            .unwrap_or(usize::MAX)
    };
    let mut envs: Vec<&EnvironmentFacts> = results.environments.iter().collect();
    envs.sort_by_key(|e| {
        e.cells
            .iter()
            .map(|c| position(c))
            .min()
            .unwrap_or(usize::MAX)
    });
    envs.into_iter()
        .map(|e| {
            let mut cells: Vec<&String> = e.cells.iter().collect();
            cells.sort_by_key(|c| position(c));
            EnvView {
                environment: e.environment.clone(),
                base: e.base.clone(),
                cells: cells
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                values: if e.cells.len() > 1 {
                    results.environment_label(&e.cells, "")
                } else {
                    String::new()
                },
                packages: e.summary(),
            }
        })
        .collect()
}

/// Where some of the run's cells ran: one host (and its GPUs), in words.
#[derive(Debug, Serialize)]
pub struct HostView {
    /// `node-b, kernel 6.12.9-amd64, nvidia 550.54.15, GPU GPU-… (…)`.
    pub host: String,
    pub cells: String,
}

/// The hosts the cells ran on, each with its cells, in the cells' order;
/// empty when no cell recorded where it ran.
pub fn hosts(results: &Results) -> Vec<HostView> {
    let mut out: Vec<(String, Vec<&str>)> = Vec::new();
    for c in results.cells.iter().filter(|c| !c.host.is_empty()) {
        let line = c.host.line();
        match out.iter_mut().find(|(l, _)| *l == line) {
            Some((_, cells)) => cells.push(&c.id),
            None => out.push((line, vec![&c.id])),
        }
    }
    out.into_iter()
        .map(|(host, cells)| HostView {
            host,
            cells: cells.join(", "),
        })
        .collect()
}

/// A cell's environment, as its card refers to it.
#[derive(Debug, Clone, Default)]
pub struct CellEnv {
    /// The environment hash, short form: its row's anchor, `env-<hash>`.
    pub environment: String,
    /// The base image (`debian:sid`).
    pub base: String,
    /// `debian:sid: libamdhip64-6 6.4.3-5, …`, for the cell's own page.
    pub line: String,
}

/// Cell id → its environment.
pub fn by_cell(envs: &[EnvironmentFacts]) -> HashMap<&str, CellEnv> {
    let mut m = HashMap::new();
    for e in envs {
        let env = CellEnv {
            environment: e.environment.clone(),
            base: e.base.clone(),
            line: format!("{}: {}", e.base, e.summary()),
        };
        for c in &e.cells {
            m.insert(c.as_str(), env.clone());
        }
    }
    m
}
