//! Plans as Kubernetes Indexed Jobs (`plan --format k8s`): one Job per
//! kind of GPU request, `completionMode: Indexed` with one index per
//! [`Job`](super::jobs::Job) of the plan (a shard, or a shard of a
//! `--group-by` group), each index running its `rocmatrix run … [--shard
//! K/N]` in a container of `ci.k8s.image` that talks to the node's
//! container engine through its socket (a hostPath), writing its run store
//! to `/results/shards/<index>` (`ci.k8s.claim`, a shared volume claim, or
//! else the pod's own `emptyDir`).
//!
//! GPUs are the device plugins' resources: `amd.com/gpu` for gfx targets,
//! `nvidia.com/gpu` for `sm_` ones. AMD's node labeller labels nodes with
//! the GPU's family and device id (`amd.com/gpu.family`,
//! `amd.com/gpu.device-id`), never with a gfx name, so the matrix file maps
//! each processor to the node selector that finds it (`ci.k8s.nodes`).

use std::collections::BTreeMap;

use super::jobs::{CiLimits, Job};
use super::slurm::processor;
use super::Plan;
use crate::matrix_file::GpuUse;

/// An Indexed Job's `completions` is at most 100000; a generated file
/// keeps to the limit of the other formats.
pub const K8S: CiLimits = CiLimits {
    name: "Kubernetes (one Indexed Job per GPU kind)",
    max_jobs: 1000,
};

/// `ci.k8s`: the image, the engine socket, the results volume, the node
/// selectors per gfx/sm processor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct K8sSettings {
    /// An image with rocmatrix and the matrix file's directory in it.
    pub image: Option<String>,
    pub namespace: Option<String>,
    /// A PersistentVolumeClaim (ReadWriteMany) for the run stores.
    pub claim: Option<String>,
    /// processor → node labels (`amd.com/gpu.family: AI`).
    pub nodes: BTreeMap<String, BTreeMap<String, String>>,
}

/// The image used when `ci.k8s.image` is not set: a placeholder that
/// names what belongs there.
pub const DEFAULT_IMAGE: &str = "rocmatrix:latest";
/// The container engine socket the pods mount from their node.
pub const ENGINE_SOCKET: &str = "/var/run/docker.sock";
/// Where each pod writes its shard's run store.
pub const RESULTS: &str = "/results";

/// What one index asks its node for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    /// `amd.com/gpu` or `nvidia.com/gpu`, and how many.
    pub gpus: Option<(String, u32)>,
    pub selector: BTreeMap<String, String>,
}

/// Why a plan makes no Job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum K8sError {
    #[error("cells {a} and {b} share Job index {index} but need different GPUs or nodes ({ra} and {rb}): use --group-by with the axis of the GPU target (e.g. --group-by gfx)")]
    Mixed {
        index: usize,
        a: String,
        ra: String,
        b: String,
        rb: String,
    },
}

fn describe(r: &Request) -> String {
    let gpus = r
        .gpus
        .as_ref()
        .map(|(k, n)| format!("{k}: {n}"))
        .unwrap_or_else(|| "no GPU".into());
    if r.selector.is_empty() {
        gpus
    } else {
        let sel: Vec<String> = r.selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{gpus} on {}", sel.join(","))
    }
}

fn cell_request(cell: &super::Cell, s: &K8sSettings) -> Request {
    if !cell.wants_gpu() {
        return Request {
            gpus: None,
            selector: BTreeMap::new(),
        };
    }
    let count = if cell.gpu.need == GpuUse::None {
        1
    } else {
        cell.gpu.count.at_least().max(1)
    };
    let target = cell.gpu.target.as_deref().map(processor);
    let resource = if target.is_some_and(|t| t.starts_with("sm_")) {
        "nvidia.com/gpu"
    } else {
        "amd.com/gpu"
    };
    Request {
        gpus: Some((resource.to_string(), count)),
        selector: target
            .and_then(|t| s.nodes.get(t))
            .cloned()
            .unwrap_or_default(),
    }
}

/// Each job's request, in job order (index 0 first).
pub fn requests(plan: &Plan, jobs: &[Job], s: &K8sSettings) -> Result<Vec<Request>, K8sError> {
    let by_id: BTreeMap<&str, &super::Cell> =
        plan.cells.iter().map(|c| (c.id.as_str(), c)).collect();
    let mut out = Vec::with_capacity(jobs.len());
    for (index, job) in jobs.iter().enumerate() {
        let mut req: Option<(Request, &str)> = None;
        for id in &job.cell_ids {
            let Some(cell) = by_id.get(id.as_str()) else {
                continue;
            };
            let r = cell_request(cell, s);
            if r.gpus.is_none() {
                continue;
            }
            req = match req {
                None => Some((r, id)),
                Some((have, first))
                    if have.selector != r.selector
                        || have.gpus.as_ref().map(|g| &g.0) != r.gpus.as_ref().map(|g| &g.0) =>
                {
                    return Err(K8sError::Mixed {
                        index,
                        a: first.to_string(),
                        ra: describe(&have),
                        b: id.clone(),
                        rb: describe(&r),
                    })
                }
                Some((mut have, first)) => {
                    if let (Some(h), Some(n)) = (&mut have.gpus, &r.gpus) {
                        h.1 = h.1.max(n.1);
                    }
                    Some((have, first))
                }
            };
        }
        out.push(req.map(|(r, _)| r).unwrap_or(Request {
            gpus: None,
            selector: BTreeMap::new(),
        }));
    }
    Ok(out)
}

/// The Indexed Jobs as one YAML stream (`---` between documents).
pub fn manifests(plan: &Plan, jobs: &[Job], s: &K8sSettings) -> Result<String, K8sError> {
    let reqs = requests(plan, jobs, s)?;
    let mut groups: Vec<(Request, Vec<usize>)> = Vec::new();
    for (i, r) in reqs.into_iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == r) {
            Some((_, v)) => v.push(i),
            None => groups.push((r, vec![i])),
        }
    }
    let base = dns_label(&format!("rocmatrix-{}", plan.name));
    let mut out = format!(
        "# Generated by `rocmatrix plan --format k8s` for {} ({} cells in {} indices, {} Job{}).\n",
        plan.name,
        plan.cells.len(),
        jobs.len(),
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    for (n, (req, members)) in groups.iter().enumerate() {
        let name = if groups.len() == 1 {
            base.clone()
        } else {
            dns_label(&format!("{base}-{}", n + 1))
        };
        let picked: Vec<&Job> = members.iter().map(|&i| &jobs[i]).collect();
        let doc = job_manifest(&name, req, &picked, s);
        out.push_str("---\n");
        out.push_str(&crate::yaml::to_string(&doc).unwrap_or_default());
    }
    Ok(out)
}

fn job_manifest(name: &str, req: &Request, jobs: &[&Job], s: &K8sSettings) -> serde_json::Value {
    let mut script = String::from("set -eu\ncase \"$JOB_COMPLETION_INDEX\" in\n");
    for (i, j) in jobs.iter().enumerate() {
        let cmd = j.command.strip_prefix("rocmatrix ").unwrap_or(&j.command);
        script.push_str(&format!("  {i}) set -- {cmd} ;;\n"));
    }
    script.push_str(&format!(
        "  *) echo \"rocmatrix: no index $JOB_COMPLETION_INDEX in this Job\" >&2; exit 2 ;;\nesac\n\
         exec rocmatrix \"$@\" --out {RESULTS}/shards/{name}-$JOB_COMPLETION_INDEX --history off --progress plain\n"
    ));
    let mut container = serde_json::json!({
        "name": "rocmatrix",
        "image": s.image.as_deref().unwrap_or(DEFAULT_IMAGE),
        "command": ["/bin/bash", "-c", script],
        "volumeMounts": [
            {"name": "engine", "mountPath": ENGINE_SOCKET},
            {"name": "results", "mountPath": RESULTS},
        ],
    });
    if let Some((resource, n)) = &req.gpus {
        container["resources"] =
            serde_json::json!({ "limits": { resource.as_str(): n.to_string() } });
    }
    let results = match &s.claim {
        Some(c) => {
            serde_json::json!({"name": "results", "persistentVolumeClaim": {"claimName": c}})
        }
        None => serde_json::json!({"name": "results", "emptyDir": {}}),
    };
    let mut pod = serde_json::json!({
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [
            {"name": "engine", "hostPath": {"path": ENGINE_SOCKET, "type": "Socket"}},
            results,
        ],
    });
    if !req.selector.is_empty() {
        pod["nodeSelector"] = serde_json::json!(req.selector);
    }
    let mut metadata = serde_json::json!({
        "name": name,
        "labels": {"app.kubernetes.io/name": "rocmatrix", "app.kubernetes.io/component": "matrix"},
    });
    if let Some(ns) = &s.namespace {
        metadata["namespace"] = serde_json::json!(ns);
    }
    serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "completionMode": "Indexed",
            "completions": jobs.len(),
            "parallelism": jobs.len(),
            "backoffLimit": 0,
            "template": { "spec": pod },
        },
    })
}

/// A DNS-1123 label (lower case, digits, `-`; at most 63; no `-` at the
/// ends), as a Job's name must be.
pub fn dns_label(s: &str) -> String {
    let mut out: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    out.truncate(52); // room for the pods' `-<index>-<hash>` suffix
    let t = out.trim_matches('-').to_string();
    if t.is_empty() {
        "rocmatrix".into()
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix_file::Spec;
    use crate::plan::jobs::{jobs, JobRequest, Runners};
    use std::path::Path;

    #[test]
    fn one_job_per_kind_with_gpu_limits_and_node_selectors() {
        let m = "name: My Matrix
matrix:
  gfx: [gfx90a, sm_80]
gpu: {need: required, target: '{{ matrix.gfx }}'}
steps:
  - {name: s, run: 'true'}
";
        let spec = Spec::parse(Path::new("m.yaml"), m).unwrap();
        let plan = Plan::build(&spec, 100).unwrap();
        let req = JobRequest {
            only: Vec::new(),
            group_by: vec!["gfx".into()],
            shards: None,
        };
        let jobs = jobs(&spec, &plan, Path::new("m.yaml"), &req, K8S, Runners::None).unwrap();
        let mut s = K8sSettings::default();
        s.nodes.insert(
            "gfx90a".into(),
            [("amd.com/gpu.family".to_string(), "AI".to_string())].into(),
        );
        let text = manifests(&plan, &jobs, &s).unwrap();
        assert_eq!(text.matches("kind: Job").count(), 2, "{text}");
        assert!(text.contains("name: rocmatrix-my-matrix-1"), "{text}");
        assert!(text.contains("amd.com/gpu: \"1\""), "{text}");
        assert!(text.contains("nvidia.com/gpu: \"1\""), "{text}");
        assert!(text.contains("amd.com/gpu.family: AI"), "{text}");
        assert!(text.contains("completionMode: Indexed"), "{text}");
    }

    #[test]
    fn dns_labels() {
        assert_eq!(
            dns_label("rocmatrix-ROCm 6.2 smoke!"),
            "rocmatrix-rocm-6-2-smoke"
        );
        assert!(dns_label(&"x".repeat(100)).len() <= 52);
    }
}
