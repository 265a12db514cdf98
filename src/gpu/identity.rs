//! Each granted GPU as the history keeps it (`crate::store::host::GpuFacts`):
//! what names the card for good, its PCI address, model and firmware — the
//! KFD node's `unique_id` and the amdgpu device's `vbios_version` and
//! `fw_version/*` files; NVIDIA's UUID, model, `Video BIOS` and `GPU
//! Firmware`. Read bounded and never fatal: what cannot be read is absent.

use std::collections::BTreeMap;
use std::path::Path;

use crate::gpu::inventory::Gpu;
use crate::gpu::nvidia::NvidiaGpu;
use crate::safe_read::fact;
use crate::store::host::GpuFacts;

/// At most this many firmware files of one card are kept.
const MAX_FIRMWARE: usize = 48;

/// An AMD GPU from its KFD node, its firmware from the PCI device's sysfs
/// directory under `sysfs_root`.
pub fn kfd(gpu: &Gpu, sysfs_root: &Path) -> GpuFacts {
    let device = sysfs_root.join("bus/pci/devices").join(&gpu.pci);
    let mut firmware = BTreeMap::new();
    if let Some(v) = fact(&device.join("vbios_version")) {
        firmware.insert("vbios".to_string(), v);
    }
    if let Ok(entries) = std::fs::read_dir(device.join("fw_version")) {
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names.into_iter().take(MAX_FIRMWARE) {
            if let Some(v) = fact(&device.join("fw_version").join(&name)) {
                let part = name.trim_end_matches("_fw_version").to_string();
                firmware.insert(part, v);
            }
        }
    }
    let model = if gpu.name.is_empty() || gpu.name == gpu.processor {
        gpu.processor.clone()
    } else {
        format!("{} ({})", gpu.name, gpu.processor)
    };
    GpuFacts {
        id: gpu.uuid.clone().unwrap_or_else(|| gpu.pci.clone()),
        pci: gpu.pci.clone(),
        model,
        firmware,
    }
}

/// An NVIDIA GPU as the driver's `information` file gives it.
pub fn nvidia(gpu: &NvidiaGpu) -> GpuFacts {
    GpuFacts {
        id: gpu.uuid.clone(),
        pci: gpu.pci.clone(),
        model: gpu.model.clone(),
        firmware: gpu.firmware.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(rel)
    }

    #[test]
    fn an_nvidia_card_is_named_by_its_uuid_with_its_firmware() {
        let inv = crate::gpu::nvidia::NvidiaInventory::read(
            &fixture("nvidia/h100/proc"),
            &fixture("nvidia/h100/dev"),
            &[],
            &BTreeMap::new(),
        );
        let g = nvidia(&inv.gpus[0]);
        assert_eq!(g.id, "GPU-6735cc68-9588-6eac-0f54-a6d75575f72b");
        assert_eq!(g.pci, "0000:00:06.0");
        assert_eq!(g.model, "NVIDIA H100 80GB HBM3");
        assert_eq!(g.firmware["vbios"], "96.00.cf.00.01");
        assert_eq!(g.firmware["gsp"], "580.159.04");
    }

    #[test]
    fn an_amd_card_is_named_by_its_unique_id_and_its_firmware_files_are_read() {
        let root = fixture("kfd/gfx90a");
        let inv = crate::gpu::inventory::Inventory::read(&root).unwrap();
        let gpu = &inv.gpus[0];
        let dir = tempfile::tempdir().unwrap();
        let device = dir.path().join("bus/pci/devices").join(&gpu.pci);
        std::fs::create_dir_all(device.join("fw_version")).unwrap();
        std::fs::write(device.join("vbios_version"), "113-D67301-063\n").unwrap();
        std::fs::write(device.join("fw_version/mec_fw_version"), "0x0000004e\n").unwrap();
        let g = kfd(gpu, dir.path());
        assert_eq!(Some(&g.id), gpu.uuid.as_ref().or(Some(&gpu.pci)));
        assert_eq!(g.firmware["vbios"], "113-D67301-063");
        assert_eq!(g.firmware["mec"], "0x0000004e");
        assert!(g.model.contains("gfx90a"), "{g:?}");
        assert!(kfd(gpu, &dir.path().join("none")).firmware.is_empty());
    }
}
