//! NVIDIA GPUs as the driver shows them, read from a proc root
//! (`/proc/driver/nvidia/gpus/<pci>/information`), the device nodes under a
//! `/dev` root, the driver's user-space libraries and, where `nvidia-smi` is
//! at hand, each GPU's compute capability (`sm_90`). Plain data, so fixtures
//! test it without a GPU.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NvidiaGpu {
    /// `Device Minor`: the `N` of `/dev/nvidiaN`.
    pub minor: u32,
    /// `GPU-…`, as CUDA_VISIBLE_DEVICES and nvidia-smi write it.
    pub uuid: String,
    pub model: String,
    /// PCI address (`Bus Location`).
    pub pci: String,
    /// `9.0`, from nvidia-smi; unknown without it.
    pub compute_cap: Option<String>,
    /// Firmware versions the driver shows: `vbios` (`Video BIOS`) and
    /// `gsp` (`GPU Firmware`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub firmware: BTreeMap<String, String>,
}

impl NvidiaGpu {
    /// `sm_90` for compute capability 9.0.
    pub fn target(&self) -> Option<String> {
        let (major, minor) = self.compute_cap.as_deref()?.split_once('.')?;
        Some(format!("sm_{major}{minor}"))
    }

    /// Whether this GPU runs code built for `target` (`sm_90`, `sm_90a`).
    pub fn runs(&self, target: &str) -> bool {
        let want = target.trim_end_matches('a');
        self.target().is_some_and(|t| t == want)
    }
}

/// The NVIDIA side of a host.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct NvidiaInventory {
    /// `/proc/driver/nvidia/version`'s first line, if the driver is loaded.
    pub driver: Option<String>,
    pub gpus: Vec<NvidiaGpu>,
    /// Control nodes present under the dev root: nvidiactl, nvidia-uvm, …
    pub control_nodes: Vec<String>,
    /// The driver's user-space libraries (host paths), by soname.
    pub libraries: Vec<PathBuf>,
    /// `nvidia-smi`, if found.
    pub smi: Option<PathBuf>,
}

/// Control nodes every CUDA process needs (those present are used).
const CONTROL_NODES: &[&str] = &[
    "nvidiactl",
    "nvidia-uvm",
    "nvidia-uvm-tools",
    "nvidia-modeset",
];

/// The driver libraries a CUDA program (and nvidia-smi) loads, by soname.
const LIBRARIES: &[&str] = &[
    "libcuda.so.1",
    "libnvidia-ml.so.1",
    "libnvidia-ptxjitcompiler.so.1",
    "libnvidia-nvvm.so.4",
    "libnvidia-gpucomp.so",
    "libcudadebugger.so.1",
];

/// Where the driver's libraries are looked for when `ldconfig -p` does not
/// know them (the GPU machine keeps them in /usr/local/nvidia/lib64).
pub const LIBRARY_DIRS: &[&str] = &[
    "/usr/local/nvidia/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
];

impl NvidiaInventory {
    /// Reads the GPUs under `proc_root`, the nodes under `dev_root`, the
    /// libraries in `lib_dirs`; `compute_caps` maps UUIDs to `9.0`.
    pub fn read(
        proc_root: &Path,
        dev_root: &Path,
        lib_dirs: &[PathBuf],
        compute_caps: &BTreeMap<String, String>,
    ) -> NvidiaInventory {
        let base = proc_root.join("driver/nvidia");
        let driver = std::fs::read_to_string(base.join("version"))
            .ok()
            .and_then(|t| t.lines().next().map(|l| l.trim().to_string()));
        let mut gpus = Vec::new();
        if let Ok(entries) = std::fs::read_dir(base.join("gpus")) {
            for e in entries.flatten() {
                let Ok(text) = std::fs::read_to_string(e.path().join("information")) else {
                    continue;
                };
                if let Some(mut g) = parse_information(&text) {
                    if g.pci.is_empty() {
                        g.pci = e.file_name().to_string_lossy().into_owned();
                    }
                    g.compute_cap = compute_caps.get(&g.uuid).cloned();
                    gpus.push(g);
                }
            }
        }
        gpus.sort_by_key(|g| g.minor);
        let control_nodes = CONTROL_NODES
            .iter()
            .filter(|n| dev_root.join(n).exists())
            .map(|n| n.to_string())
            .collect();
        let mut libraries = Vec::new();
        for soname in LIBRARIES {
            if let Some(p) = lib_dirs.iter().map(|d| d.join(soname)).find(|p| p.exists()) {
                libraries.push(p);
            }
        }
        NvidiaInventory {
            driver,
            gpus,
            control_nodes,
            libraries,
            smi: None,
        }
    }
}

/// One `information` file: `Key: value` lines.
pub fn parse_information(text: &str) -> Option<NvidiaGpu> {
    let fields: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    Some(NvidiaGpu {
        minor: fields.get("Device Minor")?.parse().ok()?,
        uuid: fields.get("GPU UUID")?.to_string(),
        model: fields.get("Model").unwrap_or(&"").to_string(),
        pci: fields.get("Bus Location").unwrap_or(&"").to_string(),
        compute_cap: None,
        firmware: [("vbios", "Video BIOS"), ("gsp", "GPU Firmware")]
            .iter()
            .filter_map(|(k, field)| Some((k.to_string(), fields.get(field)?.to_string())))
            .filter(|(_, v)| !v.is_empty() && v != "N/A")
            .collect(),
    })
}

/// `nvidia-smi --query-gpu=uuid,compute_cap --format=csv,noheader` output
/// → UUID → `9.0`.
pub fn parse_compute_caps(csv: &str) -> BTreeMap<String, String> {
    csv.lines()
        .filter_map(|l| l.split_once(','))
        .map(|(u, c)| (u.trim().to_string(), c.trim().to_string()))
        .filter(|(u, c)| u.starts_with("GPU-") && c.contains('.'))
        .collect()
}

/// Library directories known to `ldconfig -p` for the driver's sonames,
/// then [`LIBRARY_DIRS`].
pub fn library_dirs(ldconfig_p: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for line in ldconfig_p.lines() {
        let Some((name, path)) = line.trim().split_once(" => ") else {
            continue;
        };
        let soname = name.split_whitespace().next().unwrap_or("");
        if LIBRARIES.contains(&soname) {
            if let Some(dir) = Path::new(path.trim()).parent() {
                if !dirs.iter().any(|d| d == dir) {
                    dirs.push(dir.to_path_buf());
                }
            }
        }
    }
    for d in LIBRARY_DIRS {
        let d = PathBuf::from(d);
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn information_and_caps() {
        let text = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 35\nGPU UUID: \t GPU-8c5c6e4a-2f3e-0b1d-9a55-0c2b6e1f7a10\nBus Location: \t 0000:00:05.0\nDevice Minor: \t 0\nGPU Excluded:\t No\n";
        let mut g = parse_information(text).unwrap();
        assert_eq!((g.minor, g.model.as_str()), (0, "NVIDIA H100 80GB HBM3"));
        let caps = parse_compute_caps("GPU-8c5c6e4a-2f3e-0b1d-9a55-0c2b6e1f7a10, 9.0\n");
        g.compute_cap = caps.get(&g.uuid).cloned();
        assert_eq!(g.target().as_deref(), Some("sm_90"));
        assert!(g.runs("sm_90") && g.runs("sm_90a") && !g.runs("sm_80"));
        assert!(g.firmware.is_empty(), "none shown: none kept");
        // The driver's own file, as the lent H100 machine gave it.
        let real = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/nvidia/h100/proc/driver/nvidia/gpus/0000:00:06.0/information"
        ))
        .unwrap();
        let h = parse_information(&real).unwrap();
        assert_eq!(h.firmware["vbios"], "96.00.cf.00.01");
        assert_eq!(h.firmware["gsp"], "580.159.04");
    }
}
