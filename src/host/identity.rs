//! Each granted GPU as the history keeps it (`crate::store::host::GpuFacts`):
//! what names the card for good, its PCI address, model and firmware. For
//! an AMD GPU the firmware is read from its amdgpu device's sysfs files
//! (`vbios_version`, `fw_version/*`); an NVIDIA GPU's comes with the
//! driver's `information` file (`src/gpu/nvidia.rs`). Read bounded and
//! never fatal: what cannot be read is absent. Takes plain values, so that
//! the GPU room, which calls it, is not imported here.

use std::collections::BTreeMap;
use std::path::Path;

use crate::safe_read::fact;
use crate::store::host::GpuFacts;

/// At most this many firmware files of one card are kept.
const MAX_FIRMWARE: usize = 48;

/// An AMD GPU: `id` names it for good (the KFD node's `unique_id` as
/// `GPU-…`, else its PCI address), `model` its name and processor; its
/// firmware from the PCI device's directory under `sysfs_root`.
pub fn amd(id: &str, pci: &str, model: String, sysfs_root: &Path) -> GpuFacts {
    let device = sysfs_root.join("bus/pci/devices").join(pci);
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
    GpuFacts {
        id: id.to_string(),
        pci: pci.to_string(),
        model,
        firmware,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amd_cards_firmware_files_are_read_and_a_missing_device_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let pci = "0000:c3:00.0";
        let device = dir.path().join("bus/pci/devices").join(pci);
        std::fs::create_dir_all(device.join("fw_version")).unwrap();
        std::fs::write(device.join("vbios_version"), "113-D67301-063\n").unwrap();
        std::fs::write(device.join("fw_version/mec_fw_version"), "0x0000004e\n").unwrap();
        let g = amd("GPU-9e8f", pci, "gfx90a".into(), dir.path());
        assert_eq!((g.id.as_str(), g.pci.as_str()), ("GPU-9e8f", pci));
        assert_eq!(g.firmware["vbios"], "113-D67301-063");
        assert_eq!(g.firmware["mec"], "0x0000004e");
        assert!(amd("x", pci, String::new(), &dir.path().join("none"))
            .firmware
            .is_empty());
    }
}
