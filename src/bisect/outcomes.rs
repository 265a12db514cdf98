//! Probe outcomes kept by content, so that no bisection or triage runs a
//! probe whose outcome an earlier one already has: a probe's cell hash
//! (everything that decides the cell's outcome, its sources' refs among
//! it) and the hashes of the builds it starts from name what it showed —
//! status, reason, signatures, whether its build failed — and the run
//! store that showed it. Only cells whose every source is pinned to a full
//! commit id, without patches, are kept: a branch names other commits
//! tomorrow. The files live in `<out>/probe-outcomes/<key>.json`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::judge::{Observation, Shown};
use super::store::ProbeBuild;
use crate::plan::{Cell, Plan};
use crate::store::record::RunStatus;

/// The largest outcome file read.
const MAX_BYTES: u64 = 4 << 20;

/// One kept outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub signatures: Vec<Shown>,
    #[serde(default)]
    pub build_failed: bool,
    /// The run store that showed it (absolute).
    pub run: String,
    pub cell: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<ProbeBuild>,
    pub secs: f64,
}

impl Kept {
    pub fn observation(&self) -> Observation {
        Observation {
            status: self.status,
            reason: self.reason.clone(),
            signatures: self.signatures.clone(),
            build_failed: self.build_failed,
        }
    }
}

fn is_commit(r: &str) -> bool {
    r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The content key of `cell` of `plan`, when its outcome may be kept.
pub fn key(plan: &Plan, cell: &Cell) -> Option<String> {
    let pinned = |s: &crate::plan::SourceRef| is_commit(&s.reference) && s.patches.is_empty();
    if !cell.sources.iter().all(pinned) {
        return None;
    }
    let chain = cell.build_chain(&plan.builds);
    if !chain.iter().all(|b| b.sources.iter().all(pinned)) {
        return None;
    }
    let payload = serde_json::json!({
        "cell": cell.hash,
        "builds": chain.iter().map(|b| b.hash.as_str()).collect::<Vec<_>>(),
    });
    Some(crate::digest::sha256_hex(payload.to_string().as_bytes()))
}

fn path(out: &Path, key: &str) -> PathBuf {
    crate::store::layout::probe_outcomes_in(out).join(format!("{key}.json"))
}

/// The outcome kept under `key`, if any and if its run store is still there.
pub fn load(out: &Path, key: &str) -> Option<Kept> {
    let p = path(out, key);
    let bytes = crate::safe_read::read_bounded(&p, MAX_BYTES, "probe outcomes", "").ok()?;
    let k: Kept = serde_json::from_slice(&bytes).ok()?;
    (k.key == key && Path::new(&k.run).is_dir()).then_some(k)
}

/// Keeps an outcome (a failure to write it costs only a later probe).
pub fn save(out: &Path, k: &Kept) {
    let p = path(out, &k.key);
    let written = std::fs::create_dir_all(crate::store::layout::probe_outcomes_in(out))
        .map_err(|e| e.to_string())
        .and_then(|()| serde_json::to_vec_pretty(k).map_err(|e| e.to_string()))
        .and_then(|b| crate::store::write_atomic(&p, &b).map_err(|e| e.to_string()));
    if let Err(e) = written {
        tracing::warn!("{}: {e}", p.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(reference: &str) -> Plan {
        let text = format!(
            "matrix:\n  a: [x]\nsources:\n  - name: s\n    url: /r\n    ref: '{reference}'\nsteps:\n  - name: t\n    run: 'true'\n"
        );
        let s = crate::matrix_file::Spec::parse(Path::new("m.yaml"), &text).unwrap();
        Plan::build(&s, 16).unwrap()
    }

    #[test]
    fn only_cells_pinned_to_commits_are_kept_and_their_key_follows_the_commit() {
        let a = plan(&"a".repeat(40));
        let b = plan(&"b".repeat(40));
        let ka = key(&a, &a.cells[0]).unwrap();
        assert_ne!(Some(ka.clone()), key(&b, &b.cells[0]));
        assert_eq!(key(&a, &a.cells[0]), Some(ka.clone()));
        let branch = plan("main");
        assert_eq!(key(&branch, &branch.cells[0]), None);

        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        let k = Kept {
            key: ka.clone(),
            status: Some(RunStatus::Failed),
            reason: None,
            signatures: vec![Shown::plain("sum: FAILED")],
            build_failed: false,
            run: run.display().to_string(),
            cell: "x".into(),
            build: None,
            secs: 1.0,
        };
        save(dir.path(), &k);
        assert_eq!(load(dir.path(), &ka), Some(k));
        std::fs::remove_dir(&run).unwrap();
        assert_eq!(
            load(dir.path(), &ka),
            None,
            "a kept outcome whose run is gone"
        );
    }
}
