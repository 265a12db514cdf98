//! A Docker engine of the test's own, to freeze, kill and fill without
//! touching the machine's engine: its own `--data-root`, `--exec-root`,
//! socket and pidfile under a temporary directory, and its own bridge,
//! created here with a name and a subnet of its own and deleted again.
//! (Never `--bridge=none` in the machine's network namespace: that deletes
//! the host's `docker0` and breaks every bridge container of the shared
//! engine.) It is stopped by its pid, never by name.
//!
//! `PrivateEngine::start` loads `debian:sid` from the shared engine
//! ([`super::bases::ensure`]) with `docker save | docker load`, so cells
//! need no network and no bootstrap.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A started private engine; stopped (and its bridge deleted) on drop.
pub struct PrivateEngine {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub bridge: String,
    daemon: Option<Child>,
}

static SERIAL: AtomicU32 = AtomicU32::new(0);

impl PrivateEngine {
    /// Starts one, or says why not (no dockerd, not root, no bridge).
    pub fn start() -> Result<PrivateEngine, String> {
        if !Path::new("/usr/sbin/dockerd").exists() && which("dockerd").is_none() {
            return Err("no dockerd".into());
        }
        if unsafe { libc::geteuid() } != 0 {
            return Err("a private engine needs root".into());
        }
        let n = SERIAL.fetch_add(1, Ordering::SeqCst);
        // Bridge names are at most 15 bytes.
        let bridge = format!("rmf{}x{n}", std::process::id() % 100_000);
        let subnet = 200 + (std::process::id() % 40) as u8 + n as u8;
        let dir = tempfile::Builder::new()
            .prefix("rocmatrix-engine-")
            .tempdir_in("/var/tmp")
            .map_err(|e| e.to_string())?;
        let ip = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| e.to_string())
                .and_then(|o| {
                    o.status
                        .success()
                        .then_some(())
                        .ok_or_else(|| String::from_utf8_lossy(&o.stderr).into_owned())
                })
        };
        ip(&["link", "add", "name", &bridge, "type", "bridge"])?;
        let mut engine = PrivateEngine {
            socket: dir.path().join("docker.sock"),
            dir,
            bridge: bridge.clone(),
            daemon: None,
        };
        ip(&[
            "addr",
            "add",
            &format!("10.{subnet}.77.1/24"),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        let root = engine.dir.path();
        let config = root.join("daemon.json");
        std::fs::write(&config, r#"{"storage-driver": "fuse-overlayfs"}"#).unwrap();
        let daemon = engine.spawn_daemon().map_err(|e| format!("dockerd: {e}"))?;
        engine.daemon = Some(daemon);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if engine.docker(&["version"]).status.success() {
                return Ok(engine);
            }
            if let Some(Ok(Some(status))) = engine.daemon.as_mut().map(|d| d.try_wait()) {
                return Err(format!("dockerd exited ({status}): {}", engine.log_tail()));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!(
            "dockerd did not answer in 60 s: {}",
            engine.log_tail()
        ))
    }

    /// `DOCKER_HOST` for this engine.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The daemon's pid.
    pub fn pid(&self) -> i32 {
        self.daemon.as_ref().map(|d| d.id() as i32).unwrap_or(0)
    }

    /// `docker ARGS…` against this engine.
    pub fn docker(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .env("DOCKER_HOST", self.host())
            .args(args)
            .output()
            .expect("docker CLI")
    }

    /// Copies `reference` from the shared engine into this one.
    pub fn load_from_shared(&self, reference: &str) {
        let mut save = Command::new("docker")
            .env_remove("DOCKER_HOST")
            .args(["save", reference])
            .stdout(Stdio::piped())
            .spawn()
            .expect("docker save");
        let load = Command::new("docker")
            .env("DOCKER_HOST", self.host())
            .args(["load", "-q"])
            .stdin(save.stdout.take().unwrap())
            .output()
            .expect("docker load");
        let saved = save.wait().expect("docker save");
        assert!(saved.success(), "docker save {reference}: {saved}");
        assert!(
            load.status.success(),
            "docker load into the private engine: {}",
            String::from_utf8_lossy(&load.stderr)
        );
    }

    /// Sends `signal` to the daemon.
    pub fn signal(&self, signal: i32) {
        unsafe {
            libc::kill(self.pid(), signal);
        }
    }

    /// Starts a daemon again on the same roots (after a SIGKILL).
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop_daemon();
        // The containerd the killed daemon started outlives it and holds its
        // socket: the new daemon starts its own.
        if let Some(pid) = self.containerd_pid() {
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(15)
                && Path::new(&format!("/proc/{pid}")).exists()
            {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let fresh = Self::relaunch(self)?;
        self.daemon = Some(fresh);
        Ok(())
    }

    /// Starts dockerd on this engine's config, roots, socket and bridge,
    /// its output appended to `dockerd.log`.
    fn spawn_daemon(&self) -> std::io::Result<Child> {
        let root = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join("dockerd.log"))?;
        Command::new("dockerd")
            .arg("--config-file")
            .arg(root.join("daemon.json"))
            .arg("--data-root")
            .arg(root.join("data"))
            .arg("--exec-root")
            .arg(root.join("exec"))
            .arg("--pidfile")
            .arg(root.join("docker.pid"))
            .arg("-H")
            .arg(format!("unix://{}", self.socket.display()))
            .arg(format!("--bridge={}", self.bridge))
            .args(["--iptables=false", "--ip-masq=false"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
    }

    fn relaunch(&self) -> Result<Child, String> {
        let child = self.spawn_daemon().map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if self.docker(&["version"]).status.success() {
                return Ok(child);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!("dockerd did not come back: {}", self.log_tail()))
    }

    /// The containerd this engine's daemon started, while it runs.
    fn containerd_pid(&self) -> Option<i32> {
        let pidfile = self.dir.path().join("exec/containerd/containerd.pid");
        std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
            .filter(|p| Path::new(&format!("/proc/{p}")).exists())
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("dockerd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    fn stop_daemon(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let pid = d.id() as i32;
            unsafe {
                libc::kill(pid, libc::SIGCONT);
                libc::kill(pid, libc::SIGTERM);
            }
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(20) {
                if let Ok(Some(_)) = d.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

impl Drop for PrivateEngine {
    fn drop(&mut self) {
        // Containers first, so that no shim outlives the daemon.
        if self.daemon.is_some() {
            let ids = self.docker(&["ps", "-aq"]);
            let ids = String::from_utf8_lossy(&ids.stdout).into_owned();
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if !ids.is_empty() {
                let mut args = vec!["rm", "-f"];
                args.extend(ids);
                let _ = self.docker(&args);
            }
        }
        self.stop_daemon();
        // The containerd this daemon started, if it outlived it (a SIGKILL).
        if let Some(pid) = self.containerd_pid() {
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        // What the daemon left mounted under its roots (its data root's
        // bind mount, network namespaces, a killed daemon's layers), deepest
        // first, so that the directory can be removed.
        let root = self.dir.path().to_string_lossy().into_owned();
        let mut mounts: Vec<String> = std::fs::read_to_string("/proc/mounts")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(1))
            .filter(|m| m.starts_with(&root))
            .map(str::to_string)
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = Command::new("umount").args(["-l", &m]).output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|f| f.is_file())
    })
}
