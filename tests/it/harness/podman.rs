//! A Podman API service for a test: `podman system service` on a socket in
//! a temporary directory, with its own storage (`--root`, `--runroot`) and
//! its own `containers.conf` there, so that it shares no images or
//! containers with the Docker engine or any other Podman (the host's CNI
//! bridge `cni-podman0` a rootful one does share, see [`containers_conf`]).
//! Dropping it stops the service and removes everything it stored
//! (`podman system reset`).
//!
//! Rootful ([`PodmanService::start_or_skip`]) or rootless
//! ([`PodmanService::start_rootless_or_skip`]: run by a user the test makes,
//! see [`rootless`], and deletes afterwards).
//!
//! Point rocmatrix at it with [`PodmanService::docker_host`] (`DOCKER_HOST`).
//! Installed by `.ci/install-podman.sh`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod rootless;

pub struct PodmanService {
    child: Child,
    socket: PathBuf,
    dir: tempfile::TempDir,
    /// The rootless service's user; deleted after the service is gone.
    user: Option<rootless::TestUser>,
    /// Held until the service is gone (fields drop after `Drop::drop`).
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// One service at a time in this process. Services with separate storage
/// still share the host's CNI network `podman` (its bridge, its host-local
/// address leases in /var/lib/cni): with two at once, one's teardown left
/// the other's container's network namespace and CNI rules behind.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl PodmanService {
    /// Starts the service, or `None` (after the gate said so) when this
    /// machine has no podman.
    #[track_caller]
    pub fn start_or_skip(test: &str) -> Option<PodmanService> {
        podman_or_skip(test).then(|| Self::start(None, None))
    }

    /// A rootful service that reaches the plain-HTTP registry at `addr`
    /// (`host:port`): marked `insecure` in a `registries.conf` of its own
    /// (`CONTAINERS_REGISTRIES_CONF`), as a Podman user must for a registry
    /// without TLS. `None` as [`Self::start_or_skip`].
    #[track_caller]
    pub fn start_trusting_registry_or_skip(test: &str, addr: &str) -> Option<PodmanService> {
        podman_or_skip(test).then(|| Self::start(None, Some(addr)))
    }

    /// Starts a rootless service, run by a user made for it (in the
    /// `groups` given, e.g. the one owning stand-in render nodes), or
    /// `None` (after the gate said why) where this machine cannot.
    #[track_caller]
    pub fn start_rootless_or_skip(test: &str, groups: &[u32]) -> Option<PodmanService> {
        if let Err(why) = rootless::can_run() {
            super::unavailable(test, &why);
            return None;
        }
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let user = rootless::TestUser::create(groups);
        Some(Self::start_locked(turn, Some(user), None))
    }

    fn start(user: Option<rootless::TestUser>, registry: Option<&str>) -> PodmanService {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        Self::start_locked(turn, user, registry)
    }

    fn start_locked(
        turn: std::sync::MutexGuard<'static, ()>,
        user: Option<rootless::TestUser>,
        insecure_registry: Option<&str>,
    ) -> PodmanService {
        let dir = tempfile::Builder::new()
            .prefix("rocmatrix-podman-")
            .tempdir()
            .unwrap();
        match &user {
            None => std::fs::write(dir.path().join("containers.conf"), containers_conf()).unwrap(),
            Some(u) => {
                u.configure(&rootless::containers_conf());
                u.owns(dir.path());
            }
        }
        let socket = dir.path().join("podman.sock");
        let log = std::fs::File::create(dir.path().join("service.log")).unwrap();
        let mut command = match &user {
            None => podman(dir.path()),
            Some(u) => u.service_command(dir.path()),
        };
        if let Some(addr) = insecure_registry {
            let conf = dir.path().join("registries.conf");
            std::fs::write(
                &conf,
                format!("[[registry]]\nlocation = \"{addr}\"\ninsecure = true\n"),
            )
            .unwrap();
            command.env("CONTAINERS_REGISTRIES_CONF", conf);
        }
        let child = command
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("podman (.ci/install-podman.sh)");
        let service = PodmanService {
            child,
            socket,
            dir,
            user,
            _turn: turn,
        };
        service.wait_ready();
        service
    }

    /// The uid of the rootless service's user (`None` when rootful).
    pub fn user_uid(&self) -> Option<u32> {
        self.user.as_ref().map(|u| u.uid)
    }

    fn wait_ready(&self) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if self.socket.exists()
                && self
                    .cli()
                    .arg("version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "podman system service did not answer on {} within 30 s:\n{}",
            self.socket.display(),
            self.log()
        );
    }

    /// `unix://…/podman.sock`, for `DOCKER_HOST`.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The podman CLI as a client of this service (`--remote`).
    pub fn cli(&self) -> Command {
        let mut c = Command::new("podman");
        c.arg("--remote").arg("--url").arg(self.docker_host());
        c
    }

    /// The service's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("service.log")).unwrap_or_default()
    }

    /// `podman --remote ARGS…` run to the end: its standard output, or a
    /// panic with its standard error.
    #[track_caller]
    pub fn run(&self, args: &[&str]) -> String {
        let o = self.cli().args(args).output().unwrap();
        assert!(o.status.success(), "podman {args:?}: {}", super::stderr(&o));
        super::stdout(&o)
    }
}

impl Drop for PodmanService {
    fn drop(&mut self) {
        // Through the service first: removing a container tears down its
        // network namespace and CNI rules, which killing it would leave.
        let _ = self.cli().args(["rm", "--all", "--force"]).output();
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A container that stopped has its network torn down by a
        // `podman container cleanup` that its conmon starts: let those end
        // (killed, they leave a network namespace and CNI rules behind).
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20)
            && processes_mentioning(self.dir.path())
                .iter()
                .any(|(_, cmdline)| cmdline.contains("\0container\0cleanup\0"))
        {
            std::thread::sleep(Duration::from_millis(200));
        }
        // Podman keeps a conmon per exec session for five minutes after it
        // ended (exit_command_delay), to answer inspects: the service's, so
        // they go with it. Found by this service's own storage path.
        for (pid, _) in processes_mentioning(self.dir.path()) {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
        }
        // Containers, images and their fuse-overlayfs mounts: the storage
        // must be empty and unmounted before the directory can go.
        let o = match &self.user {
            None => podman(self.dir.path()),
            Some(u) => u.podman(self.dir.path()),
        }
        .args(["system", "reset", "--force"])
        .output();
        if !o.as_ref().is_ok_and(|o| o.status.success()) {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "podman system reset in {}: {o:?}",
                self.dir.path().display()
            );
        }
        // The rootless user's own processes (its user namespace's pause
        // process, slirp4netns), then the user itself (`TestUser::drop`).
        if let Some(u) = self.user.take() {
            u.kill_processes();
        }
    }
}

/// Whether podman runs here; if not, the gate is told for `test`.
#[track_caller]
fn podman_or_skip(test: &str) -> bool {
    let runs = Command::new("podman")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        super::unavailable(
            test,
            "`podman` is not available (run .ci/install-podman.sh as root)",
        );
    }
    runs
}

/// The processes whose command line names `dir`: their ids and command
/// lines (arguments separated by NUL).
fn processes_mentioning(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter_map(|pid| {
            let c = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let c = String::from_utf8_lossy(&c).into_owned();
            c.contains(&needle).then_some((pid, c))
        })
        .collect()
}

/// `podman` with the storage and configuration under `dir`.
fn podman(dir: &Path) -> Command {
    let mut c = Command::new("podman");
    storage_args(&mut c, dir);
    c
}

/// The configuration and storage under `dir`, as arguments of `c`.
fn storage_args(c: &mut Command, dir: &Path) {
    c.env("CONTAINERS_CONF", dir.join("containers.conf"))
        .arg("--root")
        .arg(dir.join("root"))
        .arg("--runroot")
        .arg(dir.join("run"));
    if Path::new("/usr/bin/fuse-overlayfs").exists() {
        // As the Docker engine here: the machines the tests run on have no
        // overlay mounts nested in their file system.
        c.args([
            "--storage-driver",
            "overlay",
            "--storage-opt",
            "overlay.mount_program=/usr/bin/fuse-overlayfs",
        ]);
    }
}

/// The service's configuration.
///
/// * `default_ulimits`: rootful Podman asks for 1048576 open files and
///   processes per container where nothing says otherwise; where root lacks
///   CAP_SYS_RESOURCE (these machines are themselves containers) runc
///   cannot raise the limits that far and every container fails to start
///   ("error setting rlimit type 7"). So the limits are this process's own
///   hard limits, processes capped at the 32768 Podman itself runs with.
/// * `cgroupfs`, file events: there is no systemd to ask.
/// * `runtime = "runc"`: Podman prefers crun where both are installed
///   (the rootless tests need it), and crun refuses every container on
///   these machines, which mount both cgroup versions with a controller on
///   v2 ("cgroups in hybrid mode not supported"); runc does not mind.
///
/// The network stays Podman's default, its CNI bridge `cni-podman0`
/// (10.88.0.0/16, nf_tables rules in CNI-* chains): containers made through
/// the Docker-compatible API get the bridge whatever `containers.conf` says
/// (`netns = "host"` is not applied to them). Docker here keeps its own
/// rules in iptables-legacy and its bridge works beside Podman's.
fn containers_conf() -> String {
    let nofile = hard_limit("Max open files").unwrap_or(1024);
    let nproc = hard_limit("Max processes").unwrap_or(4096).min(32768);
    format!(
        "[containers]\ndefault_ulimits = [\"nofile={nofile}:{nofile}\", \"nproc={nproc}:{nproc}\"]\n\
         [engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n"
    )
}

/// A hard limit of this process, from /proc/self/limits.
fn hard_limit(name: &str) -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with(name))?;
    match *line[name.len()..]
        .split_whitespace()
        .collect::<Vec<_>>()
        .get(1)?
    {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    }
}
