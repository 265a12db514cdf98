//! Leases: a cell asks for N GPUs of a gfx target under a policy and gets
//! exclusive GPUs, or a skip reason that names what the host has.
//!
//! A [`Lease`] is plain data a container needs: the device nodes to pass
//! (`/dev/kfd` and only the leased render nodes), the numeric group ids that
//! own them on the host (read with `stat`), and the environment
//! (`ROCR_VISIBLE_DEVICES`, `HSA_OVERRIDE_GFX_VERSION` when the override policy
//! was needed). It is released when dropped. The [`Leaser`] is shared between
//! cells running in parallel (`Arc<Mutex>` + `Condvar` inside, `Clone`).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use serde::Serialize;

use super::compat::{policy_name, runs_on, How};
use super::inventory::{Gpu, Inventory};
use super::target::TargetId;
use super::GpuError;
use crate::matrix_file::{GpuCount, GpuPolicy};

/// What a cell asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    /// The gfx target the cell's code is built for.
    pub target: TargetId,
    /// A number, or every GPU that runs the target (at least one).
    pub count: GpuCount,
    pub policy: GpuPolicy,
}

/// A device node: where it is on the host and where the container sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceMapping {
    pub host: PathBuf,
    pub container: PathBuf,
}

/// One leased GPU and how the cell's code runs on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeasedGpu {
    pub gpu: Gpu,
    pub how: How,
}

/// Exclusive use of some GPUs until dropped or [`Lease::release`]d.
#[derive(Debug)]
pub struct Lease {
    pub gpus: Vec<LeasedGpu>,
    /// `/dev/kfd` first, then the leased render nodes.
    pub devices: Vec<DeviceMapping>,
    /// Numeric ids of the groups owning those device nodes (sorted, unique).
    pub group_ids: Vec<u32>,
    /// `ROCR_VISIBLE_DEVICES`, and `HSA_OVERRIDE_GFX_VERSION` if needed.
    pub env: BTreeMap<String, String>,
    /// Per leased GPU, in order: its `ROCR_VISIBLE_DEVICES` entry, which
    /// makes a process in the container see that GPU alone.
    pub visible: Vec<String>,
    state: Arc<LeaseTable>,
    released: bool,
}

impl Lease {
    /// KFD node numbers of the leased GPUs.
    pub fn nodes(&self) -> Vec<u32> {
        self.gpus.iter().map(|g| g.gpu.node).collect()
    }

    /// Gives the GPUs back (also done on drop).
    pub fn release(mut self) {
        self.give_back();
    }

    fn give_back(&mut self) {
        if self.released {
            return;
        }
        self.released = true;
        let mut busy = self.state.lock();
        for g in &self.gpus {
            busy.remove(&g.gpu.node);
        }
        drop(busy);
        self.state.freed.notify_all();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// The answer to a request.
#[derive(Debug)]
pub enum Outcome {
    Granted(Lease),
    /// The host cannot ever satisfy the request: the cell is skipped.
    Skip(String),
    /// Enough GPUs exist but some are leased to other cells now.
    Busy,
}

#[derive(Debug)]
struct LeaseTable {
    busy: Mutex<BTreeSet<u32>>,
    freed: Condvar,
}

impl LeaseTable {
    /// The busy set; a poisoned lock still holds a valid set of node ids.
    fn lock(&self) -> MutexGuard<'_, BTreeSet<u32>> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Hands out GPUs of one inventory. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct Leaser {
    gpus: Arc<Vec<Gpu>>,
    dev_root: PathBuf,
    state: Arc<LeaseTable>,
}

impl std::fmt::Debug for Leaser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leaser")
            .field("gpus", &self.gpus.len())
            .field("dev_root", &self.dev_root)
            .finish()
    }
}

impl Leaser {
    /// `dev_root` is the host's `/dev` (a temp dir in tests): device nodes are
    /// stat'ed there to find their owning groups.
    pub fn new(inventory: &Inventory, dev_root: impl Into<PathBuf>) -> Leaser {
        Leaser {
            gpus: Arc::new(inventory.gpus.clone()),
            dev_root: dev_root.into(),
            state: Arc::new(LeaseTable {
                busy: Mutex::new(BTreeSet::new()),
                freed: Condvar::new(),
            }),
        }
    }

    /// GPUs that can run the request's code, best first, with how.
    fn candidates(&self, req: &LeaseRequest) -> Vec<(&Gpu, How)> {
        let mut c: Vec<(&Gpu, How)> = self
            .gpus
            .iter()
            .filter(|g| g.render_minor.is_some())
            .filter_map(|g| runs_on(&req.target, &g.isa(), req.policy).map(|h| (g, h)))
            .collect();
        c.sort_by_key(|(g, h)| (h.rank(), g.node));
        c
    }

    fn skip_reason(&self, req: &LeaseRequest, found: usize) -> String {
        let have: Vec<&str> = {
            let mut v: Vec<&str> = self.gpus.iter().map(|g| g.processor.as_str()).collect();
            v.sort();
            v.dedup();
            v
        };
        let have = if have.is_empty() {
            "no AMD GPU".to_string()
        } else {
            format!("have {}", have.join(", "))
        };
        let target = req.target.to_string();
        let policy = match req.policy {
            GpuPolicy::Exact => String::new(),
            p => format!(" (policy {})", policy_name(p)),
        };
        if found == 0 {
            format!("no {target} GPU on this host{policy}; {have}")
        } else {
            format!(
                "needs {} {target} GPUs{policy}, this host has {found}; {have}",
                req.count.at_least()
            )
        }
    }

    /// Leases now, or says why not (skip) or that the GPUs are in use (busy).
    pub fn try_lease(&self, req: &LeaseRequest) -> Result<Outcome, GpuError> {
        let candidates = self.candidates(req);
        // HSA_OVERRIDE_GFX_VERSION is per process: all leased GPUs must agree.
        let mut groups: BTreeMap<Option<String>, Vec<(&Gpu, How)>> = BTreeMap::new();
        for (g, h) in candidates {
            let key = match &h {
                How::Override { value } => Some(value.clone()),
                _ => None,
            };
            groups.entry(key).or_default().push((g, h));
        }
        let largest = groups.values().map(Vec::len).max().unwrap_or(0);
        let count = match req.count {
            GpuCount::N(n) => n.max(1) as usize,
            GpuCount::All => largest.max(1),
        };
        if largest < count {
            return Ok(Outcome::Skip(self.skip_reason(req, largest)));
        }
        let mut busy = self.state.lock();
        // Groups without an override first, then by best rank.
        let chosen = groups.values().find_map(|group| {
            let free: Vec<&(&Gpu, How)> = group
                .iter()
                .filter(|(g, _)| !busy.contains(&g.node))
                .collect();
            (free.len() >= count).then(|| free[..count].to_vec())
        });
        let Some(chosen) = chosen else {
            return Ok(Outcome::Busy);
        };
        let mut gpus: Vec<LeasedGpu> = chosen
            .into_iter()
            .map(|(g, h)| LeasedGpu {
                gpu: (*g).clone(),
                how: h.clone(),
            })
            .collect();
        // In the container ROCr enumerates only the GPUs it can open, in node
        // order: an index in ROCR_VISIBLE_DEVICES is a position in this list.
        gpus.sort_by_key(|g| g.gpu.node);
        let (devices, group_ids) = self.devices_for(&gpus)?;
        for g in &gpus {
            busy.insert(g.gpu.node);
        }
        drop(busy);
        let mut env = BTreeMap::new();
        // UUIDs when every GPU has one (they survive re-enumeration), else
        // indices into the container's view; never a mix.
        let visible: Vec<String> = match gpus.iter().map(|g| g.gpu.uuid.clone()).collect() {
            Some(uuids) => uuids,
            None => (0..gpus.len()).map(|i| i.to_string()).collect(),
        };
        env.insert("ROCR_VISIBLE_DEVICES".to_string(), visible.join(","));
        if let Some(How::Override { value }) = gpus.first().map(|g| &g.how) {
            env.insert("HSA_OVERRIDE_GFX_VERSION".to_string(), value.clone());
        }
        Ok(Outcome::Granted(Lease {
            gpus,
            devices,
            group_ids,
            env,
            visible,
            state: self.state.clone(),
            released: false,
        }))
    }

    /// Like [`Leaser::try_lease`] but waits while the GPUs are busy.
    pub fn lease(&self, req: &LeaseRequest) -> Result<Outcome, GpuError> {
        loop {
            match self.try_lease(req)? {
                Outcome::Busy => {}
                other => return Ok(other),
            }
            let busy = self.state.lock();
            // Re-check under the lock; wait for a release, with a timeout as a
            // guard against a release racing between the two checks.
            let _ = self
                .state
                .freed
                .wait_timeout(busy, std::time::Duration::from_millis(200));
        }
    }

    /// Device mappings and the groups owning them.
    fn devices_for(&self, gpus: &[LeasedGpu]) -> Result<(Vec<DeviceMapping>, Vec<u32>), GpuError> {
        let mut devices = vec![self.mapping(Path::new("/dev/kfd"))];
        for g in gpus {
            if let Some(node) = &g.gpu.render_node {
                devices.push(self.mapping(node));
            }
        }
        let mut gids = BTreeSet::new();
        for d in &devices {
            let meta = std::fs::metadata(&d.host).map_err(|source| GpuError::Io {
                path: d.host.clone(),
                source,
            })?;
            gids.insert(meta.gid());
        }
        Ok((devices, gids.into_iter().collect()))
    }

    fn mapping(&self, container: &Path) -> DeviceMapping {
        let rel = container.strip_prefix("/dev").unwrap_or(container);
        DeviceMapping {
            host: self.dev_root.join(rel),
            container: container.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(node: u32, processor: &str) -> Gpu {
        Gpu {
            node,
            gpu_id: node * 1000,
            processor: processor.into(),
            gfx_target_version: 0,
            name: String::new(),
            vendor_id: 4098,
            device_id: 0,
            pci: String::new(),
            render_minor: Some(127 + node),
            render_node: Some(format!("/dev/dri/renderD{}", 127 + node).into()),
            uuid: Some(format!("GPU-{node:016x}")),
            memory_bytes: 0,
            compute_units: 0,
            simd_count: 0,
            wave_front_size: 64,
            cpu_cores: 0,
        }
    }

    fn setup(procs: &[&str]) -> (tempfile::TempDir, Leaser) {
        let dev = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dev.path().join("dri")).unwrap();
        std::fs::write(dev.path().join("kfd"), "").unwrap();
        let gpus: Vec<Gpu> = procs
            .iter()
            .enumerate()
            .map(|(i, p)| gpu(i as u32 + 1, p))
            .collect();
        for g in &gpus {
            let minor = g.render_minor.unwrap();
            std::fs::write(dev.path().join(format!("dri/renderD{minor}")), "").unwrap();
        }
        let inv = Inventory {
            gpus,
            ..Default::default()
        };
        let leaser = Leaser::new(&inv, dev.path());
        (dev, leaser)
    }

    fn req(t: &str, count: u32, policy: GpuPolicy) -> LeaseRequest {
        req_count(t, GpuCount::N(count), policy)
    }

    fn req_count(t: &str, count: GpuCount, policy: GpuPolicy) -> LeaseRequest {
        LeaseRequest {
            target: TargetId::parse(t).unwrap(),
            count,
            policy,
        }
    }

    #[test]
    fn leases_are_exclusive_and_released_on_drop() {
        let (dev, leaser) = setup(&["gfx1100", "gfx1030"]);
        let Outcome::Granted(a) = leaser
            .try_lease(&req("gfx1030", 1, GpuPolicy::Exact))
            .unwrap()
        else {
            panic!("not granted")
        };
        assert_eq!(a.nodes(), vec![2]);
        assert_eq!(a.devices[0].container, Path::new("/dev/kfd"));
        assert_eq!(a.devices[0].host, dev.path().join("kfd"));
        assert_eq!(a.devices[1].container, Path::new("/dev/dri/renderD129"));
        assert_eq!(a.devices.len(), 2);
        let own_gid = std::fs::metadata(dev.path().join("kfd")).unwrap().gid();
        assert_eq!(a.group_ids, vec![own_gid]);
        assert_eq!(a.env["ROCR_VISIBLE_DEVICES"], "GPU-0000000000000002");
        assert!(!a.env.contains_key("HSA_OVERRIDE_GFX_VERSION"));
        assert!(matches!(
            leaser
                .try_lease(&req("gfx1030", 1, GpuPolicy::Exact))
                .unwrap(),
            Outcome::Busy
        ));
        drop(a);
        assert!(matches!(
            leaser
                .try_lease(&req("gfx1030", 1, GpuPolicy::Exact))
                .unwrap(),
            Outcome::Granted(_)
        ));
    }

    #[test]
    fn all_leases_every_gpu_of_the_target() {
        let (_dev, leaser) = setup(&["gfx90a", "gfx1100", "gfx90a"]);
        let Outcome::Granted(a) = leaser
            .try_lease(&req_count("gfx90a", GpuCount::All, GpuPolicy::Exact))
            .unwrap()
        else {
            panic!("not granted")
        };
        assert_eq!(a.nodes(), vec![1, 3]);
        assert_eq!(a.visible.len(), 2);
        assert_eq!(a.env["ROCR_VISIBLE_DEVICES"], a.visible.join(","));
        let (_dev, none) = setup(&["gfx1100"]);
        assert!(matches!(
            none.try_lease(&req_count("gfx90a", GpuCount::All, GpuPolicy::Exact))
                .unwrap(),
            Outcome::Skip(_)
        ));
    }

    #[test]
    fn skip_reasons_name_what_exists() {
        let (_dev, leaser) = setup(&["gfx1100"]);
        match leaser
            .try_lease(&req("gfx1030", 1, GpuPolicy::Exact))
            .unwrap()
        {
            Outcome::Skip(r) => assert_eq!(r, "no gfx1030 GPU on this host; have gfx1100"),
            o => panic!("{o:?}"),
        }
        match leaser
            .try_lease(&req("gfx1100", 2, GpuPolicy::Exact))
            .unwrap()
        {
            Outcome::Skip(r) => {
                assert_eq!(r, "needs 2 gfx1100 GPUs, this host has 1; have gfx1100")
            }
            o => panic!("{o:?}"),
        }
        let (_dev, empty) = setup(&[]);
        match empty
            .try_lease(&req("gfx90a", 1, GpuPolicy::Compatible))
            .unwrap()
        {
            Outcome::Skip(r) => {
                assert_eq!(
                    r,
                    "no gfx90a GPU on this host (policy compatible); no AMD GPU"
                )
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn override_policy_sets_the_variable() {
        let (_dev, leaser) = setup(&["gfx1031"]);
        assert!(matches!(
            leaser
                .try_lease(&req("gfx1030", 1, GpuPolicy::Compatible))
                .unwrap(),
            Outcome::Skip(_)
        ));
        let Outcome::Granted(l) = leaser
            .try_lease(&req("gfx1030", 1, GpuPolicy::Override))
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(l.env["HSA_OVERRIDE_GFX_VERSION"], "10.3.0");
        l.release();
        // Extended runs it too, but without the variable.
        let Outcome::Granted(l) = leaser
            .try_lease(&req("gfx1030", 1, GpuPolicy::Extended))
            .unwrap()
        else {
            panic!()
        };
        assert!(!l.env.contains_key("HSA_OVERRIDE_GFX_VERSION"));
        assert_eq!(l.gpus[0].how, How::DistroExtended);
    }

    #[test]
    fn multi_gpu_leases_prefer_exact_and_wait_in_parallel() {
        let (_dev, leaser) = setup(&["gfx90a", "gfx90a", "gfx90a"]);
        let Outcome::Granted(two) = leaser
            .try_lease(&req("gfx90a", 2, GpuPolicy::Exact))
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(two.nodes(), vec![1, 2]);
        assert_eq!(two.devices.len(), 3);
        assert_eq!(
            two.env["ROCR_VISIBLE_DEVICES"],
            "GPU-0000000000000001,GPU-0000000000000002"
        );
        // Eight threads contend for three GPUs; no GPU is ever held twice.
        drop(two);
        let held = Arc::new(Mutex::new(BTreeSet::new()));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let leaser = leaser.clone();
                let held = held.clone();
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        let Outcome::Granted(l) =
                            leaser.lease(&req("gfx90a", 1, GpuPolicy::Exact)).unwrap()
                        else {
                            panic!()
                        };
                        let node = l.nodes()[0];
                        assert!(held.lock().unwrap().insert(node), "GPU {node} leased twice");
                        std::thread::yield_now();
                        assert!(held.lock().unwrap().remove(&node));
                        drop(l);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
