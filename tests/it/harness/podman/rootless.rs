//! The user a rootless Podman service runs as: made by the test (root
//! only) with `useradd`, which gives it subordinate uids and gids in
//! /etc/subuid and /etc/subgid, a runtime directory `/run/user/<uid>` it
//! owns (mode 0700: a missing or root-owned one breaks the rootless
//! network namespace), and the supplementary groups the test asks for.
//! Dropping it kills what still runs as that user and deletes the user,
//! its home, its subordinate ids and its runtime directory.
//!
//! What this machine needs for it (`.ci/install-podman.sh`): `uidmap`
//! (newuidmap, newgidmap), `slirp4netns` (the rootless network namespace
//! behind Podman's bridge) with `/dev/net/tun` open to every user, and
//! `crun` (the one runtime that keeps the user's groups, see
//! [`containers_conf`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Why this machine cannot run a rootless service, if it cannot.
pub fn can_run() -> Result<(), String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("making a user for rootless Podman needs root".into());
    }
    for (tool, package) in [
        ("/usr/bin/newuidmap", "uidmap"),
        ("/usr/bin/slirp4netns", "slirp4netns"),
        ("/usr/bin/crun", "crun"),
        ("/usr/sbin/useradd", "passwd"),
    ] {
        if !Path::new(tool).exists() {
            return Err(format!(
                "{tool} is missing (package {package}; run .ci/install-podman.sh as root)"
            ));
        }
    }
    use std::os::unix::fs::PermissionsExt;
    let tun = std::fs::metadata("/dev/net/tun").map(|m| m.permissions().mode() & 0o777);
    match tun {
        Ok(mode) if mode & 0o006 == 0o006 => Ok(()),
        Ok(mode) => Err(format!(
            "/dev/net/tun has mode {mode:04o}, so slirp4netns cannot open it for an \
             unprivileged user and rootless containers get no network (udev makes it \
             0666 on an ordinary host; run .ci/install-podman.sh as root)"
        )),
        Err(e) => Err(format!(
            "/dev/net/tun: {e} (no tun device: no rootless network)"
        )),
    }
}

/// The service's configuration.
///
/// * `annotations`: `run.oci.keep_original_groups=1` on every container is
///   Podman's `--group-add keep-groups`, the only way a rootless container
///   reaches device nodes through the user's own groups (render, video):
///   the groups a container is given are ids inside its user namespace,
///   not the host's. The Docker-compatible API has no way to ask for it
///   per container (a `GroupAdd` of `keep-groups` is looked up as a group
///   name and fails; `HostConfig.Annotations` is ignored by Podman 4.3), so
///   the service's own configuration sets it.
/// * `runtime = "crun"`: runc ignores that annotation.
/// * `cgroupfs`, file events: there is no systemd to ask.
pub fn containers_conf() -> String {
    "[containers]\nannotations = [\"run.oci.keep_original_groups=1\"]\n\
     [engine]\nruntime = \"crun\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n"
        .to_string()
}

pub struct TestUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    runtime_dir: PathBuf,
}

impl TestUser {
    /// Makes the user, in the supplementary `groups` (numeric gids).
    pub fn create(groups: &[u32]) -> TestUser {
        let name = format!("rmpod{}", std::process::id());
        let mut add = Command::new("useradd");
        add.args(["--create-home", "--shell", "/bin/sh", "--user-group"]);
        if !groups.is_empty() {
            let list: Vec<String> = groups.iter().map(u32::to_string).collect();
            add.arg("--groups").arg(list.join(","));
        }
        let o = add.arg(&name).output().unwrap();
        assert!(
            o.status.success(),
            "useradd {name}: {}",
            super::super::stderr(&o)
        );
        let id = |flag: &str| -> u32 {
            let o = Command::new("id").arg(flag).arg(&name).output().unwrap();
            super::super::stdout(&o).trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        let user = TestUser {
            runtime_dir: PathBuf::from(format!("/run/user/{uid}")),
            name,
            uid,
            gid,
        };
        // useradd gives a new user 65536 subordinate ids where login.defs
        // says so (Debian's does); without them there is no user namespace.
        for file in ["/etc/subuid", "/etc/subgid"] {
            let has = std::fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .any(|l| l.starts_with(&format!("{}:", user.name)));
            assert!(has, "useradd gave {} no range in {file}", user.name);
        }
        std::fs::create_dir_all(&user.runtime_dir).unwrap();
        user.owns(&user.runtime_dir);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&user.runtime_dir, std::fs::Permissions::from_mode(0o700))
            .unwrap();
        user
    }

    /// Hands `path` (and everything under it) to this user.
    pub fn owns(&self, path: &Path) {
        let o = Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", self.uid, self.gid))
            .arg(path)
            .output()
            .unwrap();
        assert!(o.status.success(), "chown: {}", super::super::stderr(&o));
    }

    /// `program` run as this user, with its groups and a clean environment
    /// of its own (home, runtime directory).
    fn run_as(&self, program: &str) -> Command {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg("--init-groups")
            .args(["env", "-i"])
            .arg(format!("HOME=/home/{}", self.name))
            .arg(format!("USER={}", self.name))
            .arg(format!("LOGNAME={}", self.name))
            .arg("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .arg(format!("XDG_RUNTIME_DIR={}", self.runtime_dir.display()));
        c.arg(program);
        c
    }

    /// Writes the user's own `~/.config/containers/containers.conf`, where
    /// a user configures rootless Podman (and where `rocmatrix gpus` looks).
    pub fn configure(&self, conf: &str) {
        let dir = PathBuf::from(format!("/home/{}/.config/containers", self.name));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("containers.conf"), conf).unwrap();
        self.owns(&PathBuf::from(format!("/home/{}/.config", self.name)));
    }

    /// `podman` as this user, with its storage under `dir`: native overlay
    /// (unprivileged overlay mounts in a user namespace, Linux 5.11 and
    /// later), no fuse-overlayfs.
    pub fn podman(&self, dir: &Path) -> Command {
        let mut c = self.run_as("podman");
        c.arg("--root")
            .arg(dir.join("root"))
            .arg("--runroot")
            .arg(dir.join("run"))
            .args(["--storage-driver", "overlay"]);
        c
    }

    /// The command that starts the service (`system service …` still to be
    /// added).
    ///
    /// crun refuses to start any container on a host with both cgroup
    /// versions mounted where the v2 hierarchy has a controller ("cgroups
    /// in hybrid mode not supported, drop all controllers from cgroupv2"),
    /// as these test machines have (hugetlb on v2, the rest on v1). There
    /// the service runs in a mount namespace of its own without
    /// /sys/fs/cgroup/unified: to crun a cgroup v1 host, where a rootless
    /// container goes without a cgroup of its own anyway. Hosts with cgroup
    /// v2 alone (what rootless Podman is meant for) need nothing of this.
    pub fn service_command(&self, dir: &Path) -> Command {
        let podman = self.podman(dir);
        let hybrid = std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers")
            .is_ok_and(|c| !c.trim().is_empty());
        if !hybrid {
            return podman;
        }
        let mut c = Command::new("unshare");
        c.args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg("umount /sys/fs/cgroup/unified && exec \"$@\"")
            .arg("sh")
            .arg(podman.get_program())
            .args(podman.get_args());
        c
    }

    /// Kills every process running as this user, until none is left.
    pub fn kill_processes(&self) {
        let t0 = Instant::now();
        loop {
            let pids = processes_of(self.uid);
            if pids.is_empty() || t0.elapsed() > Duration::from_secs(10) {
                return;
            }
            for pid in pids {
                // SAFETY: a plain signal to a process of the test's own user.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        self.kill_processes();
        // userdel also removes the user's ranges from /etc/subuid and
        // /etc/subgid (shadow 4.13 does).
        let o = Command::new("userdel")
            .args(["--remove", "--force"])
            .arg(&self.name)
            .output();
        if !o.as_ref().is_ok_and(|o| o.status.success()) {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "userdel {}: {o:?}", self.name);
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

/// The ids of the processes whose real uid is `uid`.
fn processes_of(uid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    let line = s.lines().find(|l| l.starts_with("Uid:"))?;
                    line.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(uid)
        })
        .collect()
}
