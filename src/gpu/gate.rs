//! The seam between cell execution and GPU inventory: before a cell that
//! needs a GPU starts, the gate grants devices or says why it cannot.
//! Every grant is CDI edits: [`KfdGate`] leases AMD GPUs from the KFD
//! topology, [`NvidiaGate`] NVIDIA GPUs by compute capability, [`CdiGate`]
//! the devices a matrix names; [`HostGate`] picks by the request.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex};

use crate::gpu::cdi::{generate, Edits, Registry};
use crate::gpu::inventory::Inventory;
use crate::gpu::lease::{LeaseRequest, Leaser, Outcome};
use crate::gpu::nvidia::NvidiaInventory;
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
    /// Bind mounts (`host:container[:ro]`): driver libraries, from CDI.
    pub binds: Vec<String>,
    /// Shell commands run in the container before any step, as the first
    /// part of its main process (CDI hooks rocmatrix stands in for:
    /// ldconfig, symlinks).
    pub after_start: Vec<String>,
    /// CDI edits that could not be applied, in words.
    pub notes: Vec<String>,
    /// The CDI devices granted, fully qualified.
    pub cdi: Vec<String>,
    /// Each leased GPU's identity, model and firmware (for the cell's
    /// record: where it ran); empty for devices named by CDI alone.
    pub gpus: Vec<crate::store::host::GpuFacts>,
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

    /// The facts of the host these GPUs are on (its name, kernel, GPU
    /// drivers), for each cell's record; none when the gate does not know.
    fn host(&self) -> crate::store::host::HostFacts {
        crate::store::host::HostFacts::default()
    }
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

/// Leases from the host's GPU inventory (KFD topology); what a lease gives
/// the container is the CDI edits of the AMD spec generated for the
/// inventory (or installed, for `amd.com/gpu`).
pub struct KfdGate {
    leaser: Leaser,
    kfd_present: bool,
    sysfs_root: std::path::PathBuf,
    /// KFD node → the index naming it in `amd.com/gpu`.
    index_of: BTreeMap<u32, usize>,
    cdi: Registry,
}

impl KfdGate {
    /// The gate for an inventory and the device nodes under `dev_root`
    /// (normally `/dev`); `installed` specs of kind `amd.com/gpu` replace the
    /// generated one.
    pub fn new(inventory: &Inventory, dev_root: &std::path::Path, installed: &Registry) -> KfdGate {
        let cdi = installed_or(
            installed,
            "amd.com/gpu",
            "(generated for the KFD topology)",
            || generate::amd(inventory, dev_root, &generate::host_gid),
        );
        KfdGate {
            leaser: Leaser::new(inventory, dev_root),
            kfd_present: inventory.kfd_present,
            sysfs_root: inventory.sysfs_root.clone(),
            index_of: inventory
                .gpus
                .iter()
                .enumerate()
                .map(|(i, g)| (g.node, i))
                .collect(),
            cdi,
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
            Outcome::Granted(lease) => {
                let names: Vec<String> = lease
                    .nodes()
                    .iter()
                    .filter_map(|n| self.index_of.get(n))
                    .map(|i| format!("amd.com/gpu={i}"))
                    .collect();
                let edits = self.cdi.resolve(&names).map_err(|e| e.to_string())?;
                let mut grant = GpuGrant::from_edits(edits);
                grant
                    .env
                    .extend(lease.env.iter().map(|(k, v)| format!("{k}={v}")));
                grant.per_gpu = lease
                    .visible
                    .iter()
                    .map(|v| {
                        // HIP enumerates only what ROCr shows: that one GPU is 0.
                        vec![
                            format!("ROCR_VISIBLE_DEVICES={v}"),
                            "HIP_VISIBLE_DEVICES=0".to_string(),
                        ]
                    })
                    .collect();
                grant.gpus = lease
                    .gpus
                    .iter()
                    .map(|l| {
                        let g = &l.gpu;
                        let model = if g.name.is_empty() || g.name == g.processor {
                            g.processor.clone()
                        } else {
                            format!("{} ({})", g.name, g.processor)
                        };
                        let id = g.uuid.as_deref().unwrap_or(&g.pci);
                        crate::host::identity::amd(id, &g.pci, model, &self.sysfs_root)
                    })
                    .collect();
                grant.release = Some(Box::new(move || lease.release()));
                Ok(grant)
            }
            Outcome::Skip(reason) => Err(Refusal(reason)),
            Outcome::Busy => Err("the GPUs are busy".into()),
        }
    }
}

impl GpuGrant {
    /// What CDI edits give a container.
    pub fn from_edits(e: Edits) -> GpuGrant {
        GpuGrant {
            devices: e
                .nodes
                .iter()
                .map(|n| (n.host.clone(), n.container.clone()))
                .collect(),
            groups: e.gids.iter().map(|g| g.to_string()).collect(),
            env: e.env,
            binds: e
                .mounts
                .iter()
                .map(|m| {
                    let ro = if m.read_only { ":ro" } else { "" };
                    format!("{}:{}{ro}", m.host, m.container)
                })
                .collect(),
            after_start: e.after_start,
            notes: e.unsupported,
            cdi: e.names,
            gpus: Vec::new(),
            per_gpu: Vec::new(),
            release: None,
        }
    }
}

/// Exclusive use of named devices, waiting while they are taken.
#[derive(Default)]
pub struct Exclusive {
    busy: Mutex<BTreeSet<String>>,
    freed: Condvar,
}

impl Exclusive {
    /// Takes `count` of `candidates` (all of them for `None`), waiting until
    /// that many are free; returns them and the release to call.
    pub fn take(
        self: &Arc<Self>,
        candidates: &[String],
        count: Option<usize>,
    ) -> (Vec<String>, Box<dyn FnOnce() + Send>) {
        let want = count.unwrap_or(candidates.len()).min(candidates.len());
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let free: Vec<String> = candidates
                .iter()
                .filter(|c| !busy.contains(*c))
                .take(want)
                .cloned()
                .collect();
            if free.len() == want {
                busy.extend(free.iter().cloned());
                let me = self.clone();
                let taken = free.clone();
                let release = Box::new(move || {
                    let mut b = me.busy.lock().unwrap_or_else(|p| p.into_inner());
                    for t in &taken {
                        b.remove(t);
                    }
                    me.freed.notify_all();
                });
                return (free, release);
            }
            busy = self
                .freed
                .wait_timeout(busy, std::time::Duration::from_millis(500))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

/// Leases NVIDIA GPUs by compute capability (`gpu.target: sm_90`); what a
/// lease gives the container is the CDI edits of `nvidia.com/gpu`, installed
/// (`nvidia-ctk cdi generate`) or generated from the driver's files.
pub struct NvidiaGate {
    inventory: NvidiaInventory,
    cdi: Registry,
    leases: Arc<Exclusive>,
}

impl NvidiaGate {
    pub fn new(inventory: NvidiaInventory, installed: &Registry) -> NvidiaGate {
        let cdi = installed_or(
            installed,
            "nvidia.com/gpu",
            "(generated from /proc/driver/nvidia)",
            || generate::nvidia(&inventory),
        );
        NvidiaGate {
            inventory,
            cdi,
            leases: Arc::default(),
        }
    }

    fn grant(&self, request: &GpuRequest, target: &str) -> Result<GpuGrant, Refusal> {
        if self.inventory.gpus.is_empty() {
            return Err(Refusal(format!(
                "no {target} GPU: no NVIDIA GPU on this host (no /proc/driver/nvidia/gpus)"
            )));
        }
        let have: Vec<String> = self
            .inventory
            .gpus
            .iter()
            .map(|g| {
                g.target()
                    .unwrap_or_else(|| "sm_? (nvidia-smi not found)".into())
            })
            .collect();
        let candidates: Vec<String> = self
            .inventory
            .gpus
            .iter()
            .filter(|g| g.runs(target))
            .map(|g| g.uuid.clone())
            .collect();
        let count = match request.count {
            crate::matrix_file::GpuCount::N(n) => n.max(1) as usize,
            crate::matrix_file::GpuCount::All => candidates.len().max(1),
        };
        if candidates.len() < count {
            return Err(Refusal(format!(
                "needs {count} {target} GPU(s), this host has {}; have {}",
                candidates.len(),
                have.join(", ")
            )));
        }
        let (uuids, release) = self.leases.take(&candidates, Some(count));
        let names: Vec<String> = uuids
            .iter()
            .map(|u| format!("nvidia.com/gpu={u}"))
            .collect();
        let mut grant = leased_grant(&self.cdi, &names, release)?;
        grant
            .env
            .push(format!("CUDA_VISIBLE_DEVICES={}", uuids.join(",")));
        grant.per_gpu = uuids
            .iter()
            .map(|u| vec![format!("CUDA_VISIBLE_DEVICES={u}")])
            .collect();
        grant.gpus = uuids
            .iter()
            .filter_map(|u| self.inventory.gpus.iter().find(|g| &g.uuid == u))
            .map(|g| crate::store::host::GpuFacts {
                id: g.uuid.clone(),
                pci: g.pci.clone(),
                model: g.model.clone(),
                firmware: g.firmware.clone(),
            })
            .collect();
        Ok(grant)
    }
}

/// Devices a matrix names itself (`gpu.cdi`), from the CDI specs installed
/// or given with `--cdi-spec-dir`; each device leased to one cell at a time.
pub struct CdiGate {
    cdi: Registry,
    leases: Arc<Exclusive>,
}

impl CdiGate {
    pub fn new(cdi: Registry) -> CdiGate {
        CdiGate {
            cdi,
            leases: Arc::default(),
        }
    }

    /// Checks that every name resolves, before any cell runs.
    pub fn check(&self, names: &[String]) -> Result<(), crate::gpu::cdi::CdiError> {
        self.cdi.resolve(names).map(|_| ())
    }

    fn grant(&self, request: &GpuRequest) -> Result<GpuGrant, Refusal> {
        let resolved = self.cdi.resolve(&request.cdi).map_err(|e| e.to_string())?;
        let (names, release) = self.leases.take(&resolved.names, None);
        leased_grant(&self.cdi, &names, release)
    }
}

/// The grant for devices just leased: their CDI edits, released with the
/// grant, or at once when they do not resolve.
fn leased_grant(
    cdi: &Registry,
    names: &[String],
    release: Box<dyn FnOnce() + Send>,
) -> Result<GpuGrant, Refusal> {
    match cdi.resolve(names) {
        Ok(edits) => {
            let mut grant = GpuGrant::from_edits(edits);
            grant.release = Some(release);
            Ok(grant)
        }
        Err(e) => {
            release();
            Err(Refusal(e.to_string()))
        }
    }
}

/// The installed specs when one of them is of `kind`, else a registry of
/// the spec `generate` makes (named `label` in messages).
fn installed_or(
    installed: &Registry,
    kind: &str,
    label: &str,
    generate: impl FnOnce() -> crate::gpu::cdi::Spec,
) -> Registry {
    let prefix = format!("{kind}=");
    if installed.names().iter().any(|n| n.starts_with(&prefix)) {
        return installed.clone();
    }
    Registry::from_specs(vec![(0, generate(), label.into())]).unwrap_or_default()
}

/// This host's GPUs of every kind: named CDI devices, NVIDIA GPUs for `sm_`
/// targets, AMD GPUs (KFD) for the rest.
pub struct HostGate {
    pub kfd: Option<KfdGate>,
    pub nvidia: NvidiaGate,
    pub cdi: CdiGate,
    /// The host's facts, read when the gate was made (`crate::host::read`).
    pub host: crate::store::host::HostFacts,
}

impl GpuGate for HostGate {
    fn host(&self) -> crate::store::host::HostFacts {
        self.host.clone()
    }

    fn grant(&self, cell: &str, request: &GpuRequest) -> Result<GpuGrant, Refusal> {
        if !request.cdi.is_empty() {
            return self.cdi.grant(request);
        }
        match request.target.as_deref() {
            Some(t) if t.starts_with("sm_") => self.nvidia.grant(request, t),
            _ => match &self.kfd {
                Some(k) => k.grant(cell, request),
                None => NoInventory.grant(cell, request),
            },
        }
    }
}
