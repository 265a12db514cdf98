//! CDI specs for this host's GPUs where no vendor tool wrote one, the way
//! `nvidia-ctk cdi generate` and AMD's container toolkit do:
//!
//! - `amd.com/gpu`: `/dev/kfd` for every device, and each GPU's render node,
//!   named by index (KFD node order) and by UUID where it has one;
//! - `nvidia.com/gpu`: `/dev/nvidiactl` and the other control nodes, the
//!   driver's user-space libraries mounted read-only (with `LD_LIBRARY_PATH`
//!   and an `update-ldcache` hook for images that have ldconfig) and
//!   `nvidia-smi`, for every device; each GPU's `/dev/nvidiaN`, named by
//!   index and by UUID.

use std::path::Path;

use super::spec::{ContainerEdits, Device, DeviceNode, Hook, Mount, Spec, WRITE_VERSION};
use crate::gpu::nvidia::NvidiaInventory;
use crate::gpu::Inventory;

/// The AMD spec for a KFD inventory whose device nodes are under `dev_root`
/// on the host (`/dev`; stand-ins in tests); `gid` gives the group owning a
/// host node (None where unknown), for `additionalGids`.
pub fn amd(inv: &Inventory, dev_root: &Path, gid: &dyn Fn(&Path) -> Option<u32>) -> Spec {
    let host =
        |container: &Path| dev_root.join(container.strip_prefix("/dev").unwrap_or(container));
    let at = |container: &Path| {
        let h = host(container);
        let mut n = node(&container.display().to_string());
        if h != container {
            n.host_path = Some(h.display().to_string());
        }
        n
    };
    let kfd = Path::new("/dev/kfd");
    let mut common = ContainerEdits {
        device_nodes: vec![at(kfd)],
        ..Default::default()
    };
    common.additional_gids.extend(gid(&host(kfd)));
    let mut devices = Vec::new();
    for (i, g) in inv.gpus.iter().enumerate() {
        let Some(render) = &g.render_node else {
            continue;
        };
        let mut edits = ContainerEdits {
            device_nodes: vec![at(render)],
            ..Default::default()
        };
        if let Some(id) = gid(&host(render)) {
            if !common.additional_gids.contains(&id) {
                edits.additional_gids.push(id);
            }
        }
        devices.push(Device {
            name: i.to_string(),
            annotations: [("gfx".to_string(), g.processor.clone())].into(),
            container_edits: edits.clone(),
        });
        if let Some(uuid) = &g.uuid {
            devices.push(Device {
                name: uuid.clone(),
                annotations: Default::default(),
                container_edits: edits,
            });
        }
    }
    Spec {
        version: WRITE_VERSION.into(),
        kind: "amd.com/gpu".into(),
        annotations: Default::default(),
        devices,
        container_edits: common,
    }
}

/// The NVIDIA spec for an inventory.
pub fn nvidia(inv: &NvidiaInventory) -> Spec {
    let mut common = ContainerEdits::default();
    for n in &inv.control_nodes {
        common.device_nodes.push(node(&format!("/dev/{n}")));
    }
    let mut lib_dirs: Vec<String> = Vec::new();
    for lib in &inv.libraries {
        let path = lib.display().to_string();
        common.mounts.push(read_only(&path));
        if let Some(dir) = lib.parent().map(|d| d.display().to_string()) {
            if !lib_dirs.contains(&dir) {
                lib_dirs.push(dir);
            }
        }
    }
    // nvidia-smi goes where every image's PATH finds it.
    if let Some(smi) = &inv.smi {
        let mut m = read_only(&smi.display().to_string());
        m.container_path = "/usr/bin/nvidia-smi".into();
        common.mounts.push(m);
    }
    if !lib_dirs.is_empty() {
        common
            .env
            .push(format!("LD_LIBRARY_PATH={}", lib_dirs.join(":")));
        let mut args = vec!["nvidia-cdi-hook".to_string(), "update-ldcache".into()];
        for d in &lib_dirs {
            args.push("--folder".into());
            args.push(d.clone());
        }
        common.hooks.push(Hook {
            hook_name: "createContainer".into(),
            path: "/usr/bin/nvidia-cdi-hook".into(),
            args,
            env: Vec::new(),
            timeout: None,
        });
    }
    let mut devices = Vec::new();
    for (i, g) in inv.gpus.iter().enumerate() {
        let edits = ContainerEdits {
            device_nodes: vec![node(&format!("/dev/nvidia{}", g.minor))],
            ..Default::default()
        };
        let mut annotations = std::collections::BTreeMap::new();
        annotations.insert("model".to_string(), g.model.clone());
        if let Some(t) = g.target() {
            annotations.insert("target".to_string(), t);
        }
        devices.push(Device {
            name: i.to_string(),
            annotations,
            container_edits: edits.clone(),
        });
        devices.push(Device {
            name: g.uuid.clone(),
            annotations: Default::default(),
            container_edits: edits,
        });
    }
    Spec {
        version: WRITE_VERSION.into(),
        kind: "nvidia.com/gpu".into(),
        annotations: Default::default(),
        devices,
        container_edits: common,
    }
}

/// The group owning a host device node, for `additionalGids` (None where
/// it cannot be read).
pub fn host_gid(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.gid())
}

fn node(path: &str) -> DeviceNode {
    DeviceNode {
        path: path.to_string(),
        host_path: None,
        kind: None,
        major: None,
        minor: None,
        file_mode: None,
        permissions: None,
        uid: None,
        gid: None,
    }
}

fn read_only(path: &str) -> Mount {
    Mount {
        host_path: path.to_string(),
        container_path: path.to_string(),
        options: vec!["ro".into(), "nosuid".into(), "nodev".into(), "bind".into()],
        kind: None,
    }
}
