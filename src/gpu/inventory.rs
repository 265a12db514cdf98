//! The GPU inventory, read from the KFD topology under a sysfs root
//! (`<root>/class/kfd/kfd/topology/nodes/<n>/{properties,gpu_id,name}` and
//! `mem_banks/<m>/properties`). CPU nodes (`gfx_target_version 0`) are skipped.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::target::{processor_from_version, TargetId};
use super::GpuError;

/// Where the topology lives under a sysfs root.
pub const TOPOLOGY: &str = "class/kfd/kfd/topology/nodes";

/// One GPU agent as the KFD reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gpu {
    /// The KFD node number (directory name).
    pub node: u32,
    /// The KFD `gpu_id` file.
    pub gpu_id: u32,
    /// `gfx90a`, `gfx1030`, … decoded from `gfx_target_version`.
    pub processor: String,
    pub gfx_target_version: u32,
    /// The node's `name` file (ASIC name on older kernels, may be empty).
    pub name: String,
    pub vendor_id: u32,
    pub device_id: u32,
    /// PCI address `dddd:bb:dd.f`, from `domain` and `location_id`.
    pub pci: String,
    pub render_minor: Option<u32>,
    /// `/dev/dri/renderD<minor>` (path inside any container too).
    pub render_node: Option<PathBuf>,
    /// `GPU-<16 hex>` for `ROCR_VISIBLE_DEVICES`, from `unique_id`.
    pub uuid: Option<String>,
    /// Bytes of local memory (frame buffer; system memory for an APU).
    pub memory_bytes: u64,
    pub compute_units: u32,
    pub simd_count: u32,
    pub wave_front_size: u32,
    /// CPU cores in the same node (older APUs such as Carrizo report their
    /// CPU and GPU as one node; newer ones split them).
    pub cpu_cores: u32,
}

impl Gpu {
    /// The agent's ISA: its processor; xnack/sramecc are decided per process
    /// at run time, so they are left open.
    pub fn isa(&self) -> TargetId {
        TargetId::processor_only(&self.processor)
    }
}

/// All GPUs under one sysfs root.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Inventory {
    pub sysfs_root: PathBuf,
    /// Whether the KFD topology directory exists at all.
    pub kfd_present: bool,
    pub gpus: Vec<Gpu>,
}

/// The largest sysfs file read: KFD's files are a page (4 KiB) at most.
const MAX_SYSFS_FILE: u64 = 64 << 10;

/// A KFD `properties` file: one `key value` pair a line.
pub fn parse_properties(path: &Path, text: &str) -> Result<BTreeMap<String, u64>, GpuError> {
    Ok(parse_properties_lines(path, text)?
        .into_iter()
        .map(|(k, (v, _))| (k, v))
        .collect())
}

/// [`parse_properties`], keeping the line of each key for later errors.
pub fn parse_properties_lines(
    path: &Path,
    text: &str,
) -> Result<BTreeMap<String, (u64, usize)>, GpuError> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |message: &str| GpuError::Property {
            path: path.to_path_buf(),
            line: i + 1,
            message: message.to_string(),
        };
        let (key, value) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| bad("expected `key value`"))?;
        let value: u64 = value
            .trim()
            .parse()
            .map_err(|_| bad(&format!("`{key}` is not an unsigned integer")))?;
        map.insert(key.to_string(), (value, i + 1));
    }
    Ok(map)
}

/// A sysfs file: regular (a FIFO planted in a fake root must not hang us),
/// at most [`MAX_SYSFS_FILE`] bytes.
fn read_sysfs(path: &Path) -> io::Result<String> {
    crate::safe_read::read_bounded_string(path, MAX_SYSFS_FILE, "sysfs files", "")
}

fn read(path: &Path) -> Result<String, GpuError> {
    read_sysfs(path).map_err(|source| GpuError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn read_optional(path: &Path) -> Result<Option<String>, GpuError> {
    match read_sysfs(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(GpuError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// `domain` and `location_id` (bus << 8 | device << 3 | function) as a PCI address.
pub fn pci_address(domain: u64, location_id: u64) -> String {
    format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        domain,
        (location_id >> 8) & 0xff,
        (location_id >> 3) & 0x1f,
        location_id & 0x7
    )
}

/// Numbered subdirectories of `dir`, sorted numerically; empty if `dir` is absent.
fn numbered_dirs(dir: &Path) -> Result<Vec<(u32, PathBuf)>, GpuError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(GpuError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| GpuError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        if let Some(n) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            out.push((n, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

impl Inventory {
    /// Reads the topology under `sysfs_root` (normally `/sys`). A missing
    /// topology is an empty inventory with `kfd_present == false`.
    pub fn read(sysfs_root: &Path) -> Result<Inventory, GpuError> {
        let nodes_dir = sysfs_root.join(TOPOLOGY);
        let kfd_present = nodes_dir.is_dir();
        let mut gpus = Vec::new();
        for (node, dir) in numbered_dirs(&nodes_dir)? {
            if let Some(gpu) = read_node(node, &dir)? {
                gpus.push(gpu);
            }
        }
        Ok(Inventory {
            sysfs_root: sysfs_root.to_path_buf(),
            kfd_present,
            gpus,
        })
    }

    /// Distinct processors, in node order.
    pub fn processors(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for g in &self.gpus {
            if !out.contains(&g.processor.as_str()) {
                out.push(&g.processor);
            }
        }
        out
    }
}

fn read_node(node: u32, dir: &Path) -> Result<Option<Gpu>, GpuError> {
    let path = dir.join("properties");
    let props = parse_properties_lines(&path, &read(&path)?)?;
    let get = |k: &str| props.get(k).map_or(0, |(v, _)| *v);
    // Errors about a key point at its line (the file's first when it is missing).
    let line = |k: &str| props.get(k).map_or(1, |(_, l)| *l);
    let version = get("gfx_target_version");
    if version == 0 || get("simd_count") == 0 {
        return Ok(None);
    }
    let small = |k: &str| -> Result<u32, GpuError> {
        u32::try_from(get(k)).map_err(|_| GpuError::Property {
            path: path.clone(),
            line: line(k),
            message: format!("`{k}` {} does not fit 32 bits", get(k)),
        })
    };
    let gfx_target_version = small("gfx_target_version")?;
    let processor =
        processor_from_version(gfx_target_version).ok_or_else(|| GpuError::Property {
            path: path.clone(),
            line: line("gfx_target_version"),
            message: format!("gfx_target_version {version} does not name a processor"),
        })?;
    let gpu_id_path = dir.join("gpu_id");
    let gpu_id = match read_optional(&gpu_id_path)? {
        Some(s) => s.trim().parse().map_err(|_| GpuError::Property {
            path: gpu_id_path.clone(),
            line: 1,
            message: "not an unsigned integer".into(),
        })?,
        None => 0,
    };
    let name = read_optional(&dir.join("name"))?
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    // Newer kernels report local_mem_size 0 and put sizes in the memory banks.
    let mut memory_bytes = 0u64;
    for (_, bank) in numbered_dirs(&dir.join("mem_banks"))? {
        let p = bank.join("properties");
        if let Some(text) = read_optional(&p)? {
            let bank = parse_properties(&p, &text)?;
            memory_bytes =
                memory_bytes.saturating_add(bank.get("size_in_bytes").copied().unwrap_or(0));
        }
    }
    if memory_bytes == 0 {
        memory_bytes = get("local_mem_size");
    }
    let simd_count = small("simd_count")?;
    let simd_per_cu = small("simd_per_cu")?;
    // Checked, not cast: 2^32 + 128 must not become renderD128.
    let render_minor = match get("drm_render_minor") {
        0 => None,
        _ => Some(small("drm_render_minor")?),
    };
    Ok(Some(Gpu {
        node,
        gpu_id,
        processor,
        gfx_target_version,
        name,
        vendor_id: small("vendor_id")?,
        device_id: small("device_id")?,
        pci: pci_address(get("domain"), get("location_id")),
        render_minor,
        render_node: render_minor.map(|m| PathBuf::from(format!("/dev/dri/renderD{m}"))),
        uuid: props
            .get("unique_id")
            .map(|(u, _)| u)
            .filter(|u| **u != 0)
            .map(|u| format!("GPU-{u:016x}")),
        memory_bytes,
        compute_units: simd_count.checked_div(simd_per_cu).unwrap_or(0),
        simd_count,
        wave_front_size: small("wave_front_size")?,
        cpu_cores: small("cpu_cores_count")?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_parse_and_reject_garbage() {
        let p = Path::new("p");
        let m = parse_properties(p, "simd_count 256\nunique_id 11420932837461522459\n\n").unwrap();
        assert_eq!(m["simd_count"], 256);
        assert_eq!(m["unique_id"], 11420932837461522459);
        let e = parse_properties(p, "simd_count 2\nbroken\n").unwrap_err();
        assert!(e.to_string().contains("p:2"), "{e}");
        assert!(parse_properties(p, "x -1").is_err());
    }

    #[test]
    fn pci_addresses_decode() {
        assert_eq!(pci_address(0, 768), "0000:03:00.0");
        assert_eq!(pci_address(0, 0x050b), "0000:05:01.3");
        assert_eq!(pci_address(1, 0x7500), "0001:75:00.0");
    }

    #[test]
    fn missing_topology_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let inv = Inventory::read(dir.path()).unwrap();
        assert!(!inv.kfd_present);
        assert!(inv.gpus.is_empty());
    }
}
