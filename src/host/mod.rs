//! This host's facts that a cell's outcome may hang on and the matrix does
//! not control: its name (the UTS namespace's, as `uname -n` gives it),
//! its kernel release and the GPU drivers loaded — amdgpu's version from
//! `/sys/module/amdgpu/version` (a DKMS build) or the kernel's for the
//! in-tree one, NVIDIA's from `/proc/driver/nvidia/version`. Read once per
//! run, bounded and never fatal: a fact that cannot be read is absent. The
//! leased GPUs' own facts come with their grant, read by [`identity`].

pub mod identity;

use std::path::Path;

use crate::safe_read::fact;
use crate::store::host::HostFacts;

/// The facts of this host, with sysfs and procfs under `sysfs_root` and
/// `proc_root` (`/sys`, `/proc`; fixtures in tests) for the drivers.
pub fn read(sysfs_root: &Path, proc_root: &Path) -> HostFacts {
    let (host, kernel) = uname();
    let driver = drivers(sysfs_root, proc_root, &kernel);
    HostFacts {
        host,
        kernel,
        driver,
        gpus: Vec::new(),
    }
}

/// The node name and kernel release, from uname(2).
fn uname() -> (String, String) {
    // SAFETY: uname fills the zeroed struct it is given, NUL-terminating
    // each field; nothing else holds it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return (String::new(), String::new());
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (field(&u.nodename), field(&u.release))
}

/// The GPU drivers loaded, in words: `amdgpu 6.10.5`, `amdgpu 6.12.9-amd64
/// (in-tree)`, `nvidia 550.54.15`, joined by `, `.
fn drivers(sysfs_root: &Path, proc_root: &Path, kernel: &str) -> String {
    let mut out = Vec::new();
    let amdgpu = sysfs_root.join("module/amdgpu");
    if let Some(v) = fact(&amdgpu.join("version")) {
        out.push(format!("amdgpu {v}"));
    } else if amdgpu.is_dir() {
        out.push(format!("amdgpu {kernel} (in-tree)"));
    }
    if let Some(line) = fact(&proc_root.join("driver/nvidia/version")) {
        match nvidia_version(&line) {
            Some(v) => out.push(format!("nvidia {v}")),
            None => out.push("nvidia".to_string()),
        }
    }
    out.join(", ")
}

/// The version in `/proc/driver/nvidia/version`'s first line: `NVRM
/// version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar …` (or
/// `… Open Kernel Module for x86_64  570.86.15  Release Build …`).
pub fn nvidia_version(text: &str) -> Option<&str> {
    let line = text.lines().next()?;
    let after = line.split_once("Module").map_or(line, |(_, a)| a);
    after.split_whitespace().find(|w| {
        w.contains('.')
            && w.split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_are_read_from_their_files_and_the_in_tree_amdgpu_is_the_kernels() {
        let dir = tempfile::tempdir().unwrap();
        let (sys, proc) = (dir.path().join("sys"), dir.path().join("proc"));
        assert_eq!(drivers(&sys, &proc, "6.12.9"), "");
        std::fs::create_dir_all(sys.join("module/amdgpu")).unwrap();
        assert_eq!(drivers(&sys, &proc, "6.12.9"), "amdgpu 6.12.9 (in-tree)");
        std::fs::write(sys.join("module/amdgpu/version"), "6.10.5\n").unwrap();
        std::fs::create_dir_all(proc.join("driver/nvidia")).unwrap();
        std::fs::write(
            proc.join("driver/nvidia/version"),
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 20:38:39 UTC 2025\nGCC version:  gcc version 12.2.0\n",
        )
        .unwrap();
        assert_eq!(
            drivers(&sys, &proc, "6.12.9"),
            "amdgpu 6.10.5, nvidia 570.86.15"
        );
        assert_eq!(
            nvidia_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024"),
            Some("550.54.15")
        );
        let facts = read(&sys, &proc);
        assert!(
            !facts.host.is_empty() && !facts.kernel.is_empty(),
            "{facts:?}"
        );
    }
}
