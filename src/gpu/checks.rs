//! Host checks behind `rocmatrix gpus`: the failures real setups hit before a
//! single test runs — no amdgpu module, `/dev/kfd` missing or not read-write
//! for this user, the user outside the group owning the render nodes, and
//! GPUs that do not match the gfx targets a matrix expects.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::Serialize;

use super::compat::{best_for, policy_name};
use super::inventory::Inventory;
use super::target::TargetId;
use crate::spec::GpuPolicy;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub message: String,
}

impl Check {
    fn new(name: &'static str, status: Status, message: impl Into<String>) -> Check {
        Check {
            name,
            status,
            message: message.into(),
        }
    }
}

/// Who is asking: effective uid and all group ids of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub groups: Vec<u32>,
}

impl Identity {
    /// The calling process's effective uid, effective gid and supplementary groups.
    pub fn current() -> Identity {
        // SAFETY: geteuid/getegid cannot fail; getgroups writes at most `n`
        // entries into a buffer of that length and returns how many it wrote.
        unsafe {
            let uid = libc::geteuid();
            let mut groups = vec![libc::getegid()];
            let n = libc::getgroups(0, std::ptr::null_mut());
            if n > 0 {
                let mut buf = vec![0 as libc::gid_t; n as usize];
                let got = libc::getgroups(n, buf.as_mut_ptr());
                if got > 0 {
                    buf.truncate(got as usize);
                    groups.extend(buf);
                }
            }
            Identity { uid, groups }
        }
    }
}

/// `access(path, R_OK | W_OK)` for the calling process.
fn read_write(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) == 0 }
}

/// Runs every check. `expected` are the gfx targets a matrix needs GPUs for.
pub fn run_checks(
    inventory: &Inventory,
    dev_root: &Path,
    who: &Identity,
    expected: &[TargetId],
    policy: GpuPolicy,
) -> Vec<Check> {
    let mut out = vec![
        module_check(inventory),
        kfd_check(dev_root, who),
        render_group_check(inventory, dev_root, who),
        topology_check(inventory),
    ];
    out.extend(expected.iter().map(|t| target_check(inventory, t, policy)));
    out
}

/// Whether the amdgpu kernel module is loaded.
fn module_check(inventory: &Inventory) -> Check {
    let module = inventory.sysfs_root.join("module/amdgpu");
    if module.is_dir() {
        Check::new("amdgpu-module", Status::Ok, "amdgpu kernel module loaded")
    } else {
        Check::new(
            "amdgpu-module",
            Status::Fail,
            format!(
                "amdgpu kernel module not loaded ({} missing)",
                module.display()
            ),
        )
    }
}

/// Whether `/dev/kfd` exists and this user can read and write it.
fn kfd_check(dev_root: &Path, who: &Identity) -> Check {
    let kfd = dev_root.join("kfd");
    if !kfd.exists() {
        Check::new(
            "kfd",
            Status::Fail,
            format!(
                "{} missing: no ROCm compute (tests exit 77 = skipped)",
                kfd.display()
            ),
        )
    } else if !read_write(&kfd) {
        Check::new(
            "kfd",
            Status::Fail,
            format!("{} is not read-write for uid {}", kfd.display(), who.uid),
        )
    } else {
        Check::new(
            "kfd",
            Status::Ok,
            format!("{} is read-write", kfd.display()),
        )
    }
}

/// Whether KFD's topology lists any GPU.
fn topology_check(inventory: &Inventory) -> Check {
    if !inventory.kfd_present {
        Check::new(
            "topology",
            Status::Fail,
            format!(
                "no KFD topology under {}",
                inventory
                    .sysfs_root
                    .join(super::inventory::TOPOLOGY)
                    .display()
            ),
        )
    } else if inventory.gpus.is_empty() {
        Check::new("topology", Status::Fail, "KFD lists no GPU node")
    } else {
        Check::new(
            "topology",
            Status::Ok,
            format!(
                "{} GPU(s): {}",
                inventory.gpus.len(),
                inventory.processors().join(", ")
            ),
        )
    }
}

/// Whether some GPU of this host runs code for `target` under `policy`.
fn target_check(inventory: &Inventory, target: &TargetId, policy: GpuPolicy) -> Check {
    let agents: Vec<TargetId> = inventory.gpus.iter().map(|g| g.isa()).collect();
    let runs = agents
        .iter()
        .find_map(|a| best_for(std::iter::once(target), a, policy).map(|(_, h)| (a, h)));
    match runs {
        Some((agent, how)) => Check::new(
            "matrix-target",
            Status::Ok,
            format!("{target}: runs on {} ({how})", agent.processor()),
        ),
        None => Check::new(
            "matrix-target",
            Status::Fail,
            format!(
                "{target}: no GPU on this host runs it under policy {}; have {}",
                policy_name(policy),
                if inventory.gpus.is_empty() {
                    "none".to_string()
                } else {
                    inventory.processors().join(", ")
                }
            ),
        ),
    }
}

/// Whether this user may open every GPU's render node (owner, group or root).
fn render_group_check(inventory: &Inventory, dev_root: &Path, who: &Identity) -> Check {
    let mut problems = Vec::new();
    let mut seen = 0;
    for gpu in &inventory.gpus {
        let Some(node) = &gpu.render_node else {
            continue;
        };
        let host = dev_root.join(node.strip_prefix("/dev").unwrap_or(node));
        let meta = match std::fs::metadata(&host) {
            Ok(m) => m,
            Err(_) => {
                problems.push(format!("{} missing", host.display()));
                continue;
            }
        };
        seen += 1;
        if who.uid == 0 || meta.uid() == who.uid || who.groups.contains(&meta.gid()) {
            continue;
        }
        problems.push(format!(
            "{} belongs to group {} and this user (uid {}) is not in it",
            host.display(),
            meta.gid(),
            who.uid
        ));
    }
    if problems.is_empty() {
        let how = if who.uid == 0 { " (root)" } else { "" };
        Check::new(
            "render-group",
            Status::Ok,
            format!("{seen} render node(s) accessible{how}"),
        )
    } else {
        Check::new("render-group", Status::Fail, problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_everything_fails_every_check() {
        let root = tempfile::tempdir().unwrap();
        let inv = Inventory::read(root.path()).unwrap();
        let who = Identity {
            uid: 1000,
            groups: vec![1000],
        };
        let t = TargetId::parse("gfx1030").unwrap();
        let checks = run_checks(&inv, &root.path().join("dev"), &who, &[t], GpuPolicy::Exact);
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.name)
            .collect();
        assert_eq!(
            failed,
            ["amdgpu-module", "kfd", "topology", "matrix-target"]
        );
        assert!(checks[4].message.contains("have none"), "{:?}", checks[4]);
    }

    #[test]
    fn identity_is_read() {
        let me = Identity::current();
        assert!(!me.groups.is_empty());
    }
}
