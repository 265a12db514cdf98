//! Container Device Interface: device specs read from the standard
//! directories (`/etc/cdi`, `/var/run/cdi`) and any given, device names
//! (`vendor.com/class=name`, `=all`) resolved into the edits a container
//! needs — device nodes, read-only mounts, environment, groups, and the
//! hooks rocmatrix can stand in for — and applied through the engine API by
//! the cell runner, so that engines without CDI support (Docker 20.10, Podman
//! 4.3) get them too. [`generate`] writes specs for the GPUs of this host
//! where no vendor tool did.

pub mod generate;
pub mod spec;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use spec::Spec;

/// Where CDI specs live, in increasing priority (a device defined again in a
/// later directory replaces the earlier one, as the CDI spec says).
pub const DEFAULT_DIRS: &[&str] = &["/etc/cdi", "/var/run/cdi"];

/// Largest spec file read.
const MAX_SPEC_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CdiError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a CDI spec: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
    #[error("CDI device `{name}`: {message}")]
    Unknown { name: String, message: String },
    #[error("CDI devices {a} and {b} conflict: {message}")]
    Conflict {
        a: String,
        b: String,
        message: String,
    },
}

/// A spec and the file it came from.
#[derive(Debug, Clone)]
struct Loaded {
    file: PathBuf,
    spec: Spec,
}

/// Every spec found, by kind, with later directories taking precedence.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    specs: Vec<Loaded>,
    /// `vendor/class=name` → (spec index, device index).
    devices: BTreeMap<String, (usize, usize)>,
}

/// A device node for the container: host path, container path, cgroup permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEdit {
    pub host: String,
    pub container: String,
    pub permissions: String,
}

/// A bind mount: host path, container path, read-only or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEdit {
    pub host: String,
    pub container: String,
    pub read_only: bool,
}

/// What a set of CDI devices asks of a container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edits {
    /// The devices these edits are for, fully qualified.
    pub names: Vec<String>,
    pub nodes: Vec<NodeEdit>,
    pub mounts: Vec<MountEdit>,
    /// `KEY=value`.
    pub env: Vec<String>,
    pub gids: Vec<u32>,
    /// Shell commands run in the container before any step: rocmatrix's
    /// stand-ins for the hooks it knows (`update-ldcache`, `create-symlinks`).
    pub after_start: Vec<String>,
    /// Edits that could not be applied, in words (other hooks, net devices).
    pub unsupported: Vec<String>,
}

/// Splits `vendor.com/class=name`.
pub fn parse_name(name: &str) -> Option<(&str, &str)> {
    let (kind, dev) = name.split_once('=')?;
    (valid_kind(kind) && valid_device(dev)).then_some((kind, dev))
}

fn valid_kind(kind: &str) -> bool {
    let Some((vendor, class)) = kind.split_once('/') else {
        return false;
    };
    let ok = |s: &str, extra: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    ok(vendor, ".-") && ok(class, "_.-")
}

fn valid_device(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

impl Registry {
    /// Reads every `*.json`, `*.yaml`, `*.yml` of `dirs` (missing ones are
    /// skipped), in order.
    pub fn load(dirs: &[PathBuf]) -> Result<Registry, CdiError> {
        let mut files = Vec::new();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut here: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    matches!(
                        p.extension().and_then(|e| e.to_str()),
                        Some("json" | "yaml" | "yml")
                    )
                })
                .collect();
            here.sort();
            files.push(here);
        }
        let mut specs = Vec::new();
        for (dir_index, dir_files) in files.into_iter().enumerate() {
            for file in dir_files {
                specs.push((dir_index, read_spec(&file)?, file));
            }
        }
        Registry::from_specs(specs)
    }

    /// A registry of specs (directory index, spec, file), validated.
    pub fn from_specs(specs: Vec<(usize, Spec, PathBuf)>) -> Result<Registry, CdiError> {
        let mut reg = Registry::default();
        let mut dir_of: BTreeMap<String, usize> = BTreeMap::new();
        for (dir, spec, file) in specs {
            validate(&spec, &file)?;
            let si = reg.specs.len();
            for (di, d) in spec.devices.iter().enumerate() {
                let q = format!("{}={}", spec.kind, d.name);
                if let (Some(&(osi, _)), Some(&odir)) = (reg.devices.get(&q), dir_of.get(&q)) {
                    if odir == dir {
                        return Err(CdiError::Conflict {
                            a: format!("{q} ({})", reg.specs[osi].file.display()),
                            b: format!("{q} ({})", file.display()),
                            message: "the same device is defined twice in one directory".into(),
                        });
                    }
                }
                reg.devices.insert(q.clone(), (si, di));
                dir_of.insert(q, dir);
            }
            reg.specs.push(Loaded { file, spec });
        }
        Ok(reg)
    }

    /// Every device's qualified name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.devices.keys().cloned().collect()
    }

    /// The edits for `names` (each `vendor/class=name`, or `=all` for every
    /// device of a kind), merged; conflicting edits are an error.
    pub fn resolve(&self, names: &[String]) -> Result<Edits, CdiError> {
        let mut wanted: Vec<(String, usize, usize)> = Vec::new();
        for name in names {
            let (kind, dev) = parse_name(name).ok_or_else(|| CdiError::Unknown {
                name: name.clone(),
                message: "a CDI device name is vendor.com/class=name (or =all)".into(),
            })?;
            let of_kind: Vec<(&String, &(usize, usize))> = self
                .devices
                .iter()
                .filter(|(q, _)| q.split_once('=').map(|(k, _)| k) == Some(kind))
                .collect();
            if of_kind.is_empty() {
                return Err(CdiError::Unknown {
                    name: name.clone(),
                    message: format!("no spec of kind {kind} (have: {})", self.kinds()),
                });
            }
            let picked: Vec<_> = if dev == "all" {
                of_kind
            } else {
                let one: Vec<_> = of_kind
                    .iter()
                    .copied()
                    .filter(|(q, _)| *q == name)
                    .collect();
                if one.is_empty() {
                    let known: Vec<&str> = of_kind.iter().map(|(q, _)| q.as_str()).collect();
                    let file = &self.specs[of_kind[0].1 .0].file;
                    return Err(CdiError::Unknown {
                        name: name.clone(),
                        message: format!(
                            "no such device in {} (it has: {})",
                            file.display(),
                            known.join(", ")
                        ),
                    });
                }
                one
            };
            for (q, &(si, di)) in picked {
                if !wanted.iter().any(|(w, _, _)| w == q) {
                    wanted.push((q.clone(), si, di));
                }
            }
        }
        let mut merge = Merge::default();
        let mut specs_done = Vec::new();
        for (q, si, di) in &wanted {
            let l = &self.specs[*si];
            if !specs_done.contains(si) {
                specs_done.push(*si);
                let from = format!("{} ({})", l.spec.kind, l.file.display());
                merge.add(&l.spec.container_edits, &from, &l.file)?;
            }
            let from = format!("{q} ({})", l.file.display());
            merge.add(&l.spec.devices[*di].container_edits, &from, &l.file)?;
            merge.edits.names.push(q.clone());
        }
        Ok(merge.edits)
    }

    fn kinds(&self) -> String {
        let mut kinds: Vec<&str> = self.specs.iter().map(|l| l.spec.kind.as_str()).collect();
        kinds.sort();
        kinds.dedup();
        if kinds.is_empty() {
            "no CDI specs at all".into()
        } else {
            kinds.join(", ")
        }
    }
}

/// Reads one spec file: JSON or YAML, bounded.
pub fn read_spec(file: &Path) -> Result<Spec, CdiError> {
    let io = |source| CdiError::Io {
        path: file.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(file).map_err(io)?;
    if !meta.is_file() || meta.len() > MAX_SPEC_BYTES {
        return Err(CdiError::Malformed {
            path: file.to_path_buf(),
            message: format!("not a regular file of at most {MAX_SPEC_BYTES} bytes"),
        });
    }
    let text = std::fs::read_to_string(file).map_err(io)?;
    let malformed = |message: String| CdiError::Malformed {
        path: file.to_path_buf(),
        message,
    };
    if file.extension().and_then(|e| e.to_str()) == Some("json") {
        serde_json::from_str(&text).map_err(|e| malformed(e.to_string()))
    } else {
        crate::yaml::from_str(&text).map_err(|e| malformed(e.located()))
    }
}

fn validate(spec: &Spec, file: &Path) -> Result<(), CdiError> {
    let bad = |message: String| CdiError::Malformed {
        path: file.to_path_buf(),
        message,
    };
    if !spec::KNOWN_VERSIONS.contains(&spec.version.as_str()) {
        return Err(bad(format!(
            "cdiVersion {} is not one this reader knows ({})",
            spec.version,
            spec::KNOWN_VERSIONS.join(", ")
        )));
    }
    if !valid_kind(&spec.kind) {
        return Err(bad(format!("kind `{}` is not vendor.com/class", spec.kind)));
    }
    let mut seen = Vec::new();
    for d in &spec.devices {
        if !valid_device(&d.name) {
            return Err(bad(format!("device name `{}` is not valid", d.name)));
        }
        if seen.contains(&&d.name) {
            return Err(bad(format!("device `{}` is defined twice", d.name)));
        }
        seen.push(&d.name);
    }
    for e in std::iter::once(&spec.container_edits)
        .chain(spec.devices.iter().map(|d| &d.container_edits))
    {
        for n in &e.device_nodes {
            if !n.path.starts_with('/') {
                return Err(bad(format!(
                    "device node path `{}` is not absolute",
                    n.path
                )));
            }
        }
        for m in &e.mounts {
            if !m.container_path.starts_with('/') || !m.host_path.starts_with('/') {
                return Err(bad(format!(
                    "mount {} → {} needs absolute paths",
                    m.host_path, m.container_path
                )));
            }
        }
        for v in &e.env {
            if !v.contains('=') {
                return Err(bad(format!("env entry `{v}` is not KEY=value")));
            }
        }
    }
    Ok(())
}

/// Merges edits, remembering where each came from to name conflicts.
#[derive(Default)]
struct Merge {
    edits: Edits,
    /// container path or env key → (what it is, where it came from).
    owners: BTreeMap<String, (String, String)>,
}

impl Merge {
    fn claim(&mut self, key: String, value: String, from: &str) -> Result<bool, CdiError> {
        match self.owners.get(&key) {
            Some((v, _)) if *v == value => Ok(false),
            Some((v, owner)) => Err(CdiError::Conflict {
                a: owner.clone(),
                b: from.to_string(),
                message: format!("{key}: `{v}` against `{value}`"),
            }),
            None => {
                self.owners.insert(key, (value, from.to_string()));
                Ok(true)
            }
        }
    }

    fn add(&mut self, e: &spec::ContainerEdits, from: &str, file: &Path) -> Result<(), CdiError> {
        for n in &e.device_nodes {
            let host = n.host_path.clone().unwrap_or_else(|| n.path.clone());
            if self.claim(format!("device {}", n.path), host.clone(), from)? {
                self.edits.nodes.push(NodeEdit {
                    host,
                    container: n.path.clone(),
                    permissions: n.permissions.clone().unwrap_or_else(|| "rwm".into()),
                });
            }
        }
        for m in &e.mounts {
            if self.claim(
                format!("mount {}", m.container_path),
                m.host_path.clone(),
                from,
            )? {
                self.edits.mounts.push(MountEdit {
                    host: m.host_path.clone(),
                    container: m.container_path.clone(),
                    read_only: m.options.iter().any(|o| o == "ro"),
                });
            }
        }
        for v in &e.env {
            let (k, val) = v.split_once('=').unwrap_or((v, ""));
            if self.claim(format!("env {k}"), val.to_string(), from)? {
                self.edits.env.push(v.clone());
            }
        }
        for g in &e.additional_gids {
            if !self.edits.gids.contains(g) {
                self.edits.gids.push(*g);
            }
        }
        for h in &e.hooks {
            match hook_stand_in(h) {
                Some(cmd) => {
                    if !self.edits.after_start.contains(&cmd) {
                        self.edits.after_start.push(cmd);
                    }
                }
                None => self.edits.unsupported.push(format!(
                    "{}: hook `{} {}` ({}) is not applied: rocmatrix applies CDI edits through the engine API, which runs no OCI hooks; it stands in for update-ldcache and create-symlinks only",
                    file.display(),
                    h.path,
                    h.args.join(" "),
                    h.hook_name
                )),
            }
        }
        if e.net_devices.is_some() || e.intel_rdt.is_some() {
            self.edits.unsupported.push(format!(
                "{}: netDevices and intelRdt edits are not applied",
                file.display()
            ));
        }
        Ok(())
    }
}

/// The shell command that does in the container what a known hook does:
/// `update-ldcache --folder DIR…` → `ldconfig DIR…` (where the image has
/// ldconfig), `create-symlinks --link TARGET::LINK…` → `ln -sf`.
fn hook_stand_in(h: &spec::Hook) -> Option<String> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let args: Vec<&str> = h.args.iter().map(String::as_str).collect();
    let values = |flag: &str| -> Vec<&str> {
        args.windows(2)
            .filter(|w| w[0] == flag)
            .map(|w| w[1])
            .chain(
                args.iter()
                    .filter_map(|a| a.strip_prefix(&format!("{flag}="))),
            )
            .collect()
    };
    if args.contains(&"update-ldcache") {
        let dirs: Vec<String> = values("--folder").into_iter().map(quote).collect();
        return Some(format!(
            "if command -v ldconfig >/dev/null 2>&1; then ldconfig {}; fi",
            dirs.join(" ")
        ));
    }
    if args.contains(&"create-symlinks") {
        let mut cmds = Vec::new();
        for link in values("--link") {
            let (target, path) = link.split_once("::")?;
            cmds.push(format!(
                "mkdir -p \"$(dirname {p})\" && ln -sf {t} {p}",
                p = quote(path),
                t = quote(target)
            ));
        }
        return Some(cmds.join(" && "));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> Spec {
        crate::yaml::from_str(yaml).unwrap()
    }

    const GPU: &str = "cdiVersion: 0.6.0\nkind: example.com/gpu\ncontainerEdits:\n  deviceNodes: [{path: /dev/ctl}]\n  env: [SHARED=1]\ndevices:\n  - name: \"0\"\n    containerEdits:\n      deviceNodes: [{path: /dev/g0, hostPath: /dev/zero}]\n      env: [WHICH=0]\n  - name: \"1\"\n    containerEdits:\n      deviceNodes: [{path: /dev/g1}]\n      mounts: [{hostPath: /opt/lib, containerPath: /usr/lib/x, options: [ro, nosuid]}]\n      hooks: [{hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x]}]\n";

    #[test]
    fn resolves_names_and_all_and_merges_spec_edits_once() {
        let reg = Registry::from_specs(vec![(0, spec(GPU), "/etc/cdi/g.yaml".into())]).unwrap();
        let e = reg.resolve(&["example.com/gpu=0".into()]).unwrap();
        assert_eq!(e.nodes.len(), 2);
        assert_eq!(e.nodes[1].host, "/dev/zero");
        assert_eq!(e.env, ["SHARED=1", "WHICH=0"]);
        let all = reg.resolve(&["example.com/gpu=all".into()]).unwrap();
        assert_eq!(all.names, ["example.com/gpu=0", "example.com/gpu=1"]);
        assert_eq!(all.nodes.len(), 3);
        assert!(all.mounts[0].read_only);
        assert_eq!(
            all.after_start,
            ["if command -v ldconfig >/dev/null 2>&1; then ldconfig '/usr/lib/x'; fi"]
        );
    }

    #[test]
    fn unknown_names_and_conflicts_name_the_spec_file() {
        let reg = Registry::from_specs(vec![(0, spec(GPU), "/etc/cdi/g.yaml".into())]).unwrap();
        let e = reg
            .resolve(&["example.com/gpu=7".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/etc/cdi/g.yaml") && e.contains("example.com/gpu=0"),
            "{e}"
        );
        let e = reg
            .resolve(&["other.com/x=1".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no spec of kind other.com/x (have: example.com/gpu)"),
            "{e}"
        );
        let other = spec("cdiVersion: 1.0.0\nkind: example.com/nic\ndevices:\n  - name: a\n    containerEdits:\n      env: [WHICH=1]\n");
        let reg = Registry::from_specs(vec![
            (0, spec(GPU), "/etc/cdi/g.yaml".into()),
            (0, other, "/etc/cdi/n.yaml".into()),
        ])
        .unwrap();
        let e = reg
            .resolve(&["example.com/gpu=0".into(), "example.com/nic=a".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("WHICH") && e.contains("/etc/cdi/n.yaml") && e.contains("/etc/cdi/g.yaml"),
            "{e}"
        );
    }

    #[test]
    fn malformed_specs_are_refused() {
        let bad = spec("cdiVersion: 9.9.9\nkind: example.com/gpu\ndevices: []\n");
        let e = Registry::from_specs(vec![(0, bad, "/x.yaml".into())])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/x.yaml") && e.contains("cdiVersion 9.9.9"),
            "{e}"
        );
        let bad = spec("cdiVersion: 0.6.0\nkind: gpu\ndevices: []\n");
        assert!(Registry::from_specs(vec![(0, bad, "/x.yaml".into())]).is_err());
        assert!(crate::yaml::from_str::<Spec>(
            "cdiVersion: 0.6.0\nkind: a.b/c\ndevices: []\nextra: 1\n"
        )
        .is_err());
    }
}
