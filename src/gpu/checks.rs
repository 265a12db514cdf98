//! Host checks behind `rocmatrix gpus`: the failures real setups hit before a
//! single test runs — no amdgpu module, `/dev/kfd` missing or not read-write
//! for this user, the user outside the group owning the render nodes, and
//! GPUs that do not match the gfx targets a matrix expects. With a rootless
//! Podman engine, also what its user needs ([`rootless_checks`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::Serialize;

use super::compat::{best_for, policy_name};
use super::inventory::Inventory;
use super::target::TargetId;
use crate::engine::rootless::{KeepGroups, KEEP_GROUPS};
use crate::matrix_file::GpuPolicy;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Ok,
    Warn,
    Fail,
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: CheckStatus,
    pub message: String,
}

impl Check {
    fn new(name: &'static str, status: CheckStatus, message: impl Into<String>) -> Check {
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

/// A user of this host, from the password and group databases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub home: std::path::PathBuf,
    /// Its uid, primary gid and supplementary groups.
    pub identity: Identity,
}

impl Account {
    /// The account of `uid`, or `None` when the databases do not know it.
    pub fn of_uid(uid: u32) -> Option<Account> {
        // SAFETY: getpwuid_r writes into `pw` and `buf` (of the length
        // given) and sets `result` to `pw` or null; the strings it points
        // at live in `buf`, copied out before it goes. getgrouplist writes
        // at most `n` ids and says how many it needs when that is too few.
        unsafe {
            let mut pw: libc::passwd = std::mem::zeroed();
            let mut buf = vec![0 as libc::c_char; 16384];
            let mut result: *mut libc::passwd = std::ptr::null_mut();
            let rc = libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut result);
            if rc != 0 || result.is_null() {
                return None;
            }
            let name = std::ffi::CStr::from_ptr(pw.pw_name);
            let home = std::ffi::CStr::from_ptr(pw.pw_dir);
            let mut n: libc::c_int = 64;
            let mut groups: Vec<libc::gid_t> = vec![0; n as usize];
            while libc::getgrouplist(name.as_ptr(), pw.pw_gid, groups.as_mut_ptr(), &mut n) < 0 {
                groups = vec![0; n as usize];
            }
            groups.truncate(n as usize);
            Some(Account {
                name: name.to_string_lossy().into_owned(),
                home: std::path::PathBuf::from(std::ffi::OsStr::from_bytes(home.to_bytes())),
                identity: Identity { uid, groups },
            })
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
        Check::new(
            "amdgpu-module",
            CheckStatus::Ok,
            "amdgpu kernel module loaded",
        )
    } else {
        Check::new(
            "amdgpu-module",
            CheckStatus::Fail,
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
            CheckStatus::Fail,
            format!(
                "{} missing: no ROCm compute (tests exit 77 = skipped)",
                kfd.display()
            ),
        )
    } else if !read_write(&kfd) {
        Check::new(
            "kfd",
            CheckStatus::Fail,
            format!("{} is not read-write for uid {}", kfd.display(), who.uid),
        )
    } else {
        Check::new(
            "kfd",
            CheckStatus::Ok,
            format!("{} is read-write", kfd.display()),
        )
    }
}

/// Whether KFD's topology lists any GPU.
fn topology_check(inventory: &Inventory) -> Check {
    if !inventory.kfd_present {
        Check::new(
            "topology",
            CheckStatus::Fail,
            format!(
                "no KFD topology under {}",
                inventory
                    .sysfs_root
                    .join(super::inventory::TOPOLOGY)
                    .display()
            ),
        )
    } else if inventory.gpus.is_empty() {
        Check::new("topology", CheckStatus::Fail, "KFD lists no GPU node")
    } else {
        Check::new(
            "topology",
            CheckStatus::Ok,
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
            CheckStatus::Ok,
            format!("{target}: runs on {} ({how})", agent.processor()),
        ),
        None => Check::new(
            "matrix-target",
            CheckStatus::Fail,
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
            CheckStatus::Ok,
            format!("{seen} render node(s) accessible{how}"),
        )
    } else {
        Check::new("render-group", CheckStatus::Fail, problems.join("; "))
    }
}

/// A rootless Podman engine, as `gpus` found it.
#[derive(Debug, Clone)]
pub struct RootlessEngine {
    /// The user its service runs as.
    pub user: Account,
    /// Its default OCI runtime, where the engine said.
    pub runtime: Option<String>,
    /// What that user's `containers.conf` files say about keeping groups.
    pub keep_groups: KeepGroups,
}

/// What a rootless Podman engine needs for GPU cells: its user in the
/// groups owning `/dev/kfd` and every render node (in a user namespace a
/// group added to the container is not the host's, so only the user's own
/// groups open them), and those groups kept in its containers (crun's
/// `run.oci.keep_original_groups`, Podman's keep-groups).
pub fn rootless_checks(
    inventory: &Inventory,
    dev_root: &Path,
    engine: &RootlessEngine,
) -> Vec<Check> {
    vec![
        rootless_groups_check(inventory, dev_root, &engine.user),
        keep_groups_check(engine),
    ]
}

fn rootless_groups_check(inventory: &Inventory, dev_root: &Path, user: &Account) -> Check {
    let who = &user.identity;
    let mut nodes = vec![dev_root.join("kfd")];
    nodes.extend(inventory.gpus.iter().filter_map(|g| {
        let node = g.render_node.as_ref()?;
        Some(dev_root.join(node.strip_prefix("/dev").unwrap_or(node)))
    }));
    let mut problems = Vec::new();
    let mut seen = 0;
    for node in &nodes {
        let Ok(meta) = std::fs::metadata(node) else {
            // Missing nodes are the kfd and render-group checks' to report.
            continue;
        };
        seen += 1;
        if meta.uid() == who.uid || who.groups.contains(&meta.gid()) {
            continue;
        }
        problems.push(format!(
            "{} belongs to group {} and the rootless Podman user {} (uid {}) is not in it",
            node.display(),
            meta.gid(),
            user.name,
            who.uid
        ));
    }
    if problems.is_empty() {
        Check::new(
            "rootless-groups",
            CheckStatus::Ok,
            format!(
                "the rootless Podman user {} (uid {}) is in the groups of {seen} GPU device node(s)",
                user.name, who.uid
            ),
        )
    } else {
        Check::new(
            "rootless-groups",
            CheckStatus::Fail,
            format!(
                "{} (add the user to the group, e.g. usermod -aG, and restart its Podman service)",
                problems.join("; ")
            ),
        )
    }
}

fn keep_groups_check(engine: &RootlessEngine) -> Check {
    let setting = format!("annotations = [\"{KEEP_GROUPS}\"] in [containers] of containers.conf");
    if let Some(runtime) = engine.runtime.as_deref().filter(|r| *r != "crun") {
        return Check::new(
            "keep-groups",
            CheckStatus::Fail,
            format!(
                "rootless Podman runs containers with {runtime}, which sets the container's groups \
                 and drops the user's: keep-groups is crun's (runtime = \"crun\" in [engine] of \
                 containers.conf, with {setting})"
            ),
        );
    }
    match &engine.keep_groups {
        KeepGroups::Unreadable(why) => Check::new(
            "keep-groups",
            CheckStatus::Fail,
            format!("rootless Podman's containers.conf: {why}"),
        ),
        KeepGroups::Set(file) => Check::new(
            "keep-groups",
            CheckStatus::Ok,
            format!(
                "containers keep the user's groups ({KEEP_GROUPS} in {})",
                file.display()
            ),
        ),
        KeepGroups::NotSet { read } => {
            Check::new(
                "keep-groups",
                CheckStatus::Warn,
                format!(
                "the user's groups may not reach its containers: no containers.conf of {} sets \
                 {setting} (what `podman run --group-add keep-groups` does; the Docker API cannot \
                 ask for it per container); read: {}; a CONTAINERS_CONF of the service is not \
                 visible from here",
                engine.user.name,
                if read.is_empty() {
                    "none".to_string()
                } else {
                    read.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                }
            ),
            )
        }
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
            .filter(|c| c.status == CheckStatus::Fail)
            .map(|c| c.name)
            .collect();
        assert_eq!(
            failed,
            ["amdgpu-module", "kfd", "topology", "matrix-target"]
        );
        assert!(checks[4].message.contains("have none"), "{:?}", checks[4]);
    }

    #[test]
    fn root_is_an_account() {
        let root = Account::of_uid(0).unwrap();
        assert_eq!(root.name, "root");
        assert!(root.identity.groups.contains(&0));
    }

    #[test]
    fn identity_is_read() {
        let me = Identity::current();
        assert!(!me.groups.is_empty());
    }
}
