//! Where a cell ran, as `cell.json` and the history keep it: the host's
//! name, its kernel, its GPU driver and each leased GPU's identity, model
//! and firmware. These are what changes underneath a GPU test that the
//! matrix does not control (a driver update on the CI hosts, one bad card
//! in a farm), so the history can say a test broke "where the kernel moved"
//! or is flaky "only on host node-b". Read by `src/host/`; every fact is
//! optional: one that could not be read is absent, never an error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The facts of the host (and the GPUs) a cell ran on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostFacts {
    /// The host name (`/proc/sys/kernel/hostname`: its UTS namespace's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// The kernel release (`uname -r`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel: String,
    /// The GPU drivers loaded: `amdgpu 6.10.5`, `amdgpu (in-tree)`,
    /// `nvidia 550.54.15`; joined by `, ` when there are several.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub driver: String,
    /// The GPUs leased to the cell, in lease order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuFacts>,
}

/// One leased GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpuFacts {
    /// What names this card for good: the NVIDIA UUID (`GPU-…`), the KFD
    /// node's `unique_id` (`GPU-<hex>`), else its PCI address.
    pub id: String,
    /// PCI address, `0000:c3:00.0`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pci: String,
    /// `NVIDIA H200`, `gfx1100` …
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// Firmware versions the driver shows (`vbios`, `mec`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub firmware: BTreeMap<String, String>,
}

impl HostFacts {
    pub fn is_empty(&self) -> bool {
        *self == HostFacts::default()
    }

    /// The facts as `(key, value)` pairs that tell units apart when the
    /// history looks for where a test fails: `host`, `kernel`, `driver`
    /// and `gpu` (the leased cards' ids, joined).
    pub fn features(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (k, v) in [
            ("host", &self.host),
            ("kernel", &self.kernel),
            ("driver", &self.driver),
        ] {
            if !v.is_empty() {
                out.push((k, v.clone()));
            }
        }
        if !self.gpus.is_empty() {
            out.push(("gpu", self.gpu_ids()));
        }
        out
    }

    /// The leased cards' ids, joined by `,`.
    pub fn gpu_ids(&self) -> String {
        self.gpus
            .iter()
            .map(|g| g.id.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// What moved from `before` to `self`, in words (`kernel 6.1.0-26 →
    /// 6.12.9`); a fact absent on either side is not a move.
    pub fn changes_since(&self, before: &HostFacts) -> Vec<String> {
        let mut out = Vec::new();
        for (what, was, now) in [
            ("host", &before.host, &self.host),
            ("kernel", &before.kernel, &self.kernel),
            ("driver", &before.driver, &self.driver),
        ] {
            if !was.is_empty() && !now.is_empty() && was != now {
                out.push(format!("{what} {was} → {now}"));
            }
        }
        let (was, now) = (before.gpu_ids(), self.gpu_ids());
        if !was.is_empty() && !now.is_empty() && was != now {
            out.push(format!("GPU {was} → {now}"));
        } else if was == now {
            for (b, a) in before.gpus.iter().zip(&self.gpus) {
                for (part, version) in &a.firmware {
                    match b.firmware.get(part) {
                        Some(old) if old != version => {
                            out.push(format!("{} firmware {part} {old} → {version}", a.id));
                        }
                        _ => {}
                    }
                }
            }
        }
        out
    }

    /// One line for people: `node-b, kernel 6.12.9, nvidia 550.54.15, GPU
    /// GPU-… (NVIDIA H200, 0000:c3:00.0)`.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        if !self.host.is_empty() {
            parts.push(self.host.clone());
        }
        if !self.kernel.is_empty() {
            parts.push(format!("kernel {}", self.kernel));
        }
        if !self.driver.is_empty() {
            parts.push(self.driver.clone());
        }
        for g in &self.gpus {
            let mut about: Vec<&str> = Vec::new();
            for s in [&g.model, &g.pci] {
                if !s.is_empty() && *s != g.id {
                    about.push(s);
                }
            }
            if about.is_empty() {
                parts.push(format!("GPU {}", g.id));
            } else {
                parts.push(format!("GPU {} ({})", g.id, about.join(", ")));
            }
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(host: &str, kernel: &str, gpu: &str) -> HostFacts {
        HostFacts {
            host: host.into(),
            kernel: kernel.into(),
            driver: "nvidia 550.54.15".into(),
            gpus: vec![GpuFacts {
                id: gpu.into(),
                pci: "0000:c3:00.0".into(),
                model: "NVIDIA H200".into(),
                firmware: BTreeMap::from([("vbios".into(), "96.00.AF".into())]),
            }],
        }
    }

    #[test]
    fn moves_are_named_and_absent_facts_are_not_moves() {
        let a = facts("node-a", "6.1.0-26-amd64", "GPU-1");
        let mut b = facts("node-a", "6.12.9-amd64", "GPU-1");
        assert_eq!(
            b.changes_since(&a),
            ["kernel 6.1.0-26-amd64 → 6.12.9-amd64"]
        );
        b.gpus[0].firmware.insert("vbios".into(), "96.00.B0".into());
        assert_eq!(
            b.changes_since(&a)[1],
            "GPU-1 firmware vbios 96.00.AF → 96.00.B0"
        );
        assert!(HostFacts::default().changes_since(&a).is_empty());
        assert_eq!(
            a.line(),
            "node-a, kernel 6.1.0-26-amd64, nvidia 550.54.15, GPU GPU-1 (NVIDIA H200, 0000:c3:00.0)"
        );
        let keys: Vec<&str> = a.features().iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["host", "kernel", "driver", "gpu"]);
    }

    #[test]
    fn a_record_without_facts_reads_and_writes_nothing() {
        let f: HostFacts = serde_json::from_str("{}").unwrap();
        assert!(f.is_empty());
        assert_eq!(serde_json::to_string(&f).unwrap(), "{}");
    }
}
