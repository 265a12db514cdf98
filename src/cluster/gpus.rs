//! Inside a Slurm job the node's GPUs are Slurm's to give: a `rocmatrix
//! run` started by an array task leases only the GPUs its job was given,
//! never the others on the node (another job's). Slurm names them in
//! `SLURM_JOB_GPUS` (the gres indices, in gres.conf's order), and sets
//! `ROCR_VISIBLE_DEVICES` and `CUDA_VISIBLE_DEVICES` to the same indices
//! (or, where a site's prolog rewrites them, to `GPU-<uuid>` names).
//!
//! An index is taken as the position of the GPU in the KFD topology's node
//! order, which is the order ROCm enumerates them in and the order
//! `AutoDetect=rsmi` writes gres.conf in; a site whose gres.conf lists the
//! render nodes in another order should list them in that one. A job
//! given no GPU (no `--gres=gpu`) leases none. NVIDIA GPUs alike: by their
//! position in device-minor order (`/dev/nvidiaN`, the order gres.conf's
//! `File=/dev/nvidia[0-7]` and `AutoDetect=nvml` give), or by `GPU-…` uuid.

use crate::gpu::inventory::Inventory;
use crate::gpu::nvidia::NvidiaInventory;

/// What the job was given, if this process runs in a Slurm job: the
/// entries of `SLURM_JOB_GPUS`, else of `ROCR_VISIBLE_DEVICES` (indices or
/// `GPU-…` names); empty for a job without GPUs.
pub fn given(env: &dyn Fn(&str) -> Option<String>) -> Option<Vec<String>> {
    env("SLURM_JOB_ID").filter(|v| !v.trim().is_empty())?;
    let list = env("SLURM_JOB_GPUS")
        .or_else(|| env("ROCR_VISIBLE_DEVICES"))
        .unwrap_or_default();
    Some(
        list.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// The GPUs of `inv` that `given` names, by position or by uuid.
pub fn restrict(mut inv: Inventory, given: &[String]) -> Inventory {
    let mut index = 0usize;
    inv.gpus.retain(|g| {
        let keep = given.iter().any(|e| {
            e.parse::<usize>().is_ok_and(|i| i == index) || g.uuid.as_deref() == Some(e.as_str())
        });
        index += 1;
        keep
    });
    inv
}

/// The NVIDIA GPUs of `inv` that `given` names, by position (minor order)
/// or by uuid.
pub fn restrict_nvidia(mut inv: NvidiaInventory, given: &[String]) -> NvidiaInventory {
    let mut index = 0usize;
    inv.gpus.retain(|g| {
        let keep = given
            .iter()
            .any(|e| e.parse::<usize>().is_ok_and(|i| i == index) || g.uuid == *e);
        index += 1;
        keep
    });
    inv
}

/// [`slurm_share`] for the NVIDIA inventory.
pub fn slurm_share_nvidia(inv: NvidiaInventory) -> NvidiaInventory {
    let Some(given) = given(&|k| std::env::var(k).ok()) else {
        return inv;
    };
    let before = inv.gpus.len();
    let inv = restrict_nvidia(inv, &given);
    say_share("NVIDIA", before, inv.gpus.len(), &given);
    inv
}

/// The log's line of what a Slurm job leases of the node's GPUs of one
/// kind; none for a kind the node has none of (an NVIDIA node has no KFD
/// GPUs: "leasing 0 of the node's 0" said nothing true of its job).
fn say_share(kind: &str, before: usize, kept: usize, given: &[String]) {
    if before == 0 {
        return;
    }
    tracing::info!(
        "in Slurm job {}: leasing {kept} of the node's {before} {kind} GPUs (SLURM_JOB_GPUS={})",
        std::env::var("SLURM_JOB_ID").unwrap_or_default(),
        given.join(",")
    );
}

/// `inv` as this process may lease it: inside a Slurm job, only the GPUs
/// the job was given (and a line in the log that says which).
pub fn slurm_share(inv: Inventory) -> Inventory {
    let Some(given) = given(&|k| std::env::var(k).ok()) else {
        return inv;
    };
    let before = inv.gpus.len();
    let inv = restrict(inv, &given);
    say_share("AMD", before, inv.gpus.len(), &given);
    inv
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture() -> Inventory {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kfd/apu-dgpu");
        Inventory::read(&root).unwrap()
    }

    #[test]
    fn a_job_leases_only_what_slurm_gave_it() {
        let inv = fixture();
        assert_eq!(inv.gpus.len(), 2);
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(given(&env(&[("SLURM_JOB_GPUS", "1")])), None);
        let g = given(&env(&[("SLURM_JOB_ID", "7"), ("SLURM_JOB_GPUS", "1")])).unwrap();
        let kept = restrict(inv.clone(), &g);
        assert_eq!(kept.gpus.len(), 1);
        assert_eq!(kept.gpus[0].processor, "gfx1102");
        // No GPU given: none leased.
        let g = given(&env(&[("SLURM_JOB_ID", "7")])).unwrap();
        assert!(restrict(inv.clone(), &g).gpus.is_empty());
        // By uuid, as a prolog may name them.
        let uuid = inv.gpus[1].uuid.clone().unwrap();
        assert_eq!(restrict(inv, &[uuid]).gpus.len(), 1);
    }

    #[test]
    fn nvidia_gpus_by_minor_order_or_uuid() {
        let gpu = |minor: u32| crate::gpu::nvidia::NvidiaGpu {
            minor,
            uuid: format!("GPU-{minor}"),
            model: "H100".into(),
            pci: String::new(),
            compute_cap: Some("9.0".into()),
            firmware: Default::default(),
        };
        let inv = NvidiaInventory {
            gpus: vec![gpu(0), gpu(1), gpu(2)],
            ..Default::default()
        };
        let kept = restrict_nvidia(inv.clone(), &["1".into(), "GPU-2".into()]);
        let minors: Vec<u32> = kept.gpus.iter().map(|g| g.minor).collect();
        assert_eq!(minors, [1, 2]);
        assert!(restrict_nvidia(inv, &[]).gpus.is_empty());
    }
}
