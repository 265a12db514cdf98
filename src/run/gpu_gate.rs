//! The seam between cell execution and GPU inventory: before a cell that
//! needs a GPU starts, the gate grants devices or says why it cannot.
//! [`KfdGate`] grants leases from the host's KFD topology.

use crate::gpu::inventory::Inventory;
use crate::gpu::lease::{LeaseRequest, Leaser, Outcome};
use crate::gpu::target::TargetId;
use crate::plan::GpuRequest;

/// What a container gets for its GPUs. Dropping it releases the lease.
#[derive(Default)]
pub struct GpuGrant {
    /// Device nodes (host path, container path): `/dev/kfd`, `/dev/dri/renderD128` …
    pub devices: Vec<(String, String)>,
    /// Numeric group ids owning those devices on the host.
    pub groups: Vec<String>,
    /// `KEY=value` (ROCR_VISIBLE_DEVICES, HSA_OVERRIDE_GFX_VERSION).
    pub env: Vec<String>,
    /// Per granted GPU: the `KEY=value` entries that make a process see that
    /// GPU alone (a test shard's process gets one of these).
    pub per_gpu: Vec<Vec<String>>,
    /// Called once when the grant is dropped.
    pub release: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for GpuGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuGrant")
            .field("devices", &self.devices)
            .field("groups", &self.groups)
            .field("env", &self.env)
            .finish()
    }
}

impl Drop for GpuGrant {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            r();
        }
    }
}

/// Grants GPUs to cells.
pub trait GpuGate: Send + Sync {
    /// GPUs for `request` of cell `cell`, or the reason there are none.
    fn grant(&self, cell: &str, request: &GpuRequest) -> Result<GpuGrant, Refusal>;
}

/// Why a cell gets no GPU, in words; the cell or step is skipped with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl From<&str> for Refusal {
    fn from(s: &str) -> Self {
        Refusal(s.to_string())
    }
}

impl From<String> for Refusal {
    fn from(s: String) -> Self {
        Refusal(s)
    }
}

/// A host without GPU inventory: every request is refused with that reason.
pub struct NoInventory;

impl GpuGate for NoInventory {
    fn grant(&self, _cell: &str, _request: &GpuRequest) -> Result<GpuGrant, Refusal> {
        Err("no GPU inventory on this host".into())
    }
}

/// Leases from the host's GPU inventory (KFD topology).
pub struct KfdGate {
    leaser: Leaser,
    kfd_present: bool,
    sysfs_root: std::path::PathBuf,
}

impl KfdGate {
    /// The gate for an inventory and the device nodes under `dev_root`
    /// (normally `/dev`).
    pub fn new(inventory: &Inventory, dev_root: &std::path::Path) -> KfdGate {
        KfdGate {
            leaser: Leaser::new(inventory, dev_root),
            kfd_present: inventory.kfd_present,
            sysfs_root: inventory.sysfs_root.clone(),
        }
    }
}

impl GpuGate for KfdGate {
    fn grant(&self, _cell: &str, request: &GpuRequest) -> Result<GpuGrant, Refusal> {
        if !self.kfd_present {
            return Err(Refusal(format!(
                "no GPU inventory: {} has no KFD topology (is the amdgpu driver loaded?)",
                self.sysfs_root.join("class/kfd/kfd/topology").display()
            )));
        }
        let target = request
            .target
            .as_deref()
            .ok_or("the cell names no gfx target (set gpu.target)")?;
        let target = TargetId::parse(target).map_err(|e| format!("gpu.target `{target}`: {e}"))?;
        let req = LeaseRequest {
            target,
            count: request.count,
            policy: request.policy,
        };
        match self.leaser.lease(&req).map_err(|e| e.to_string())? {
            Outcome::Granted(lease) => Ok(GpuGrant {
                devices: lease
                    .devices
                    .iter()
                    .map(|d| {
                        (
                            d.host.display().to_string(),
                            d.container.display().to_string(),
                        )
                    })
                    .collect(),
                groups: lease.group_ids.iter().map(|g| g.to_string()).collect(),
                env: lease.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                per_gpu: lease
                    .visible
                    .iter()
                    .map(|v| {
                        // HIP enumerates only what ROCr shows: that one GPU is 0.
                        vec![
                            format!("ROCR_VISIBLE_DEVICES={v}"),
                            "HIP_VISIBLE_DEVICES=0".to_string(),
                        ]
                    })
                    .collect(),
                release: Some(Box::new(move || lease.release())),
            }),
            Outcome::Skip(reason) => Err(Refusal(reason)),
            Outcome::Busy => Err("the GPUs are busy".into()),
        }
    }
}
