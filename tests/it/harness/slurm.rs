//! A real one-node Slurm cluster of the test's own, from Debian's packages
//! (`.ci/install-slurm.sh`): `munged`, `slurmctld` and `slurmd` started in
//! the foreground as this process's children, with a configuration
//! directory, state and spool directories, a munge socket and key, and
//! ports of their own (nothing under /etc, /run or /var is used, and the
//! packages' services, if an init system started them, are not touched).
//! The node has two fake GPUs (`Gres=gpu:fake:2`, one device file each), so
//! `--gres=gpu:1` jobs get `CUDA_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`
//! and `SLURM_JOB_GPUS` as on a real GPU node. Accounting is off (no
//! slurmdbd): `scontrol show job` and the jobcomp file tell how jobs ended.
//!
//! Dropping the cluster cancels its jobs and ends the three daemons by pid.
//! Client commands find the cluster through `SLURM_CONF`
//! ([`Slurm::env`]); jobs inherit it (sbatch exports the environment).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::unavailable;

/// The partition of the one node.
pub const PARTITION: &str = "rm";
/// The gres type of the fake GPUs.
pub const GPU_TYPE: &str = "fake";
/// How many fake GPUs the node has.
pub const GPUS: usize = 2;

pub struct Slurm {
    dir: tempfile::TempDir,
    daemons: Vec<(&'static str, Child)>,
}

/// The one node's name (`slurmd -N`): the cluster does not depend on the
/// machine's hostname.
const NODE: &str = "rmnode";

impl Slurm {
    /// Starts the cluster and waits until its node is idle, or `None`
    /// (after the gate said why) when Slurm or MUNGE is not installed.
    pub fn start(test: &str) -> Option<Slurm> {
        for bin in ["munged", "mungekey", "slurmctld", "slurmd", "sbatch"] {
            if which(bin).is_none() {
                unavailable(
                    test,
                    &format!(
                        "`{bin}` is not installed (.ci/install-slurm.sh installs Slurm and MUNGE)"
                    ),
                );
                return None;
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("rocmatrix-slurm-")
            .tempdir()
            .unwrap();
        let d = dir.path().to_path_buf();
        let d = d.as_path();
        for sub in ["munge", "state", "spool", "log"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let mut slurm = Slurm {
            dir,
            daemons: Vec::new(),
        };
        let key = d.join("munge/munge.key");
        let made = Command::new(which("mungekey").unwrap())
            .arg("-c")
            .arg("-k")
            .arg(&key)
            .output()
            .unwrap();
        assert!(made.status.success(), "mungekey: {made:?}");
        std::fs::write(d.join("slurm.conf"), config(d)).unwrap();
        std::fs::write(
            d.join("gres.conf"),
            format!("Name=gpu Type={GPU_TYPE} File=/dev/null,/dev/zero\n"),
        )
        .unwrap();
        slurm.spawn(
            "munged",
            Command::new(which("munged").unwrap())
                .args(["--force", "--foreground"])
                .arg(format!("--socket={}", slurm.munge_socket().display()))
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--pid-file={}", d.join("munge/pid").display()))
                .arg(format!("--log-file={}", d.join("munge/log").display()))
                .arg(format!("--seed-file={}", d.join("munge/seed").display())),
        );
        wait_for("munged's socket", Duration::from_secs(20), || {
            slurm.munge_socket().exists()
        });
        let conf = d.join("slurm.conf");
        slurm.spawn(
            "slurmctld",
            Command::new(which("slurmctld").unwrap())
                .arg("-D")
                .arg("-f")
                .arg(&conf),
        );
        slurm.spawn(
            "slurmd",
            Command::new(which("slurmd").unwrap())
                .args(["-D", "-N", NODE])
                .arg("-f")
                .arg(&conf),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = slurm.client("sinfo").args(["-h", "-o", "%t"]).output();
            let last = match out {
                Ok(o) => format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => e.to_string(),
            };
            if last.trim() == "idle" {
                return Some(slurm);
            }
            if Instant::now() > deadline {
                panic!(
                    "the one-node Slurm cluster did not come up in 60 s: sinfo says {last:?}\n{}",
                    slurm.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn spawn(&mut self, name: &'static str, cmd: &mut Command) {
        let log = std::fs::File::create(self.dir.path().join(format!("log/{name}.out"))).unwrap();
        let child = cmd
            .env("SLURM_CONF", self.conf())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        self.daemons.push((name, child));
    }

    /// The cluster's directory (configuration, state, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `slurm.conf`, for `SLURM_CONF`.
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    fn munge_socket(&self) -> PathBuf {
        self.dir.path().join("munge/socket")
    }

    /// The environment client commands (and rocmatrix) need to reach this
    /// cluster.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("SLURM_CONF".into(), self.conf().display().to_string())]
    }

    /// A client command (`sbatch`, `squeue`, `scontrol` …) of this cluster.
    pub fn client(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", self.conf());
        c
    }

    /// The daemons' logs and the jobcomp file, for a failure message.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        for name in [
            "log/munged.out",
            "log/slurmctld.out",
            "log/slurmd.out",
            "log/slurmctld.log",
            "log/slurmd.log",
            "log/jobcomp.txt",
        ] {
            let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            s.push_str(&format!("--- {name}\n"));
            for l in tail.into_iter().rev() {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }

    /// Job ids the cluster still knows of (pending, running, or finished
    /// within `MinJobAge`), as `scontrol` lists them, with their states.
    pub fn job_states(&self) -> Vec<(String, String)> {
        let out = self
            .client("squeue")
            .args(["-h", "-r", "-o", "%i %T"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (a, b) = l.split_once(' ')?;
                Some((a.to_string(), b.to_string()))
            })
            .collect()
    }

    /// `scontrol show job ID` as `Key=Value` pairs (the first of each key).
    pub fn show_job(&self, id: &str) -> std::collections::BTreeMap<String, String> {
        let out = self
            .client("scontrol")
            .args(["-o", "show", "job", id])
            .output()
            .unwrap();
        let mut m = std::collections::BTreeMap::new();
        for word in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            if let Some((k, v)) = word.split_once('=') {
                m.entry(k.to_string()).or_insert_with(|| v.to_string());
            }
        }
        m
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // The jobs first (their steps are slurmd's grandchildren), then
        // the daemons, by pid, in the reverse of their start.
        let _ = self.client("scancel").args(["--user", "root"]).output();
        for (_, child) in self.daemons.iter_mut().rev() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
    }
}

/// `slurm.conf` of the one-node cluster under `d`: its own ports, state,
/// spool, pid and log files, its own munge socket; fake GPUs as gres.
fn config(d: &Path) -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let (ctld, slurmd) = (free_port(), free_port());
    let p = |s: &str| d.join(s).display().to_string();
    format!(
        "ClusterName=rocmatrix-test
SlurmctldHost=localhost
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge}
CredType=cred/munge
StateSaveLocation={state}
SlurmdSpoolDir={spool}
SlurmctldPidFile={ctld_pid}
SlurmdPidFile={slurmd_pid}
SlurmctldLogFile={ctld_log}
SlurmdLogFile={slurmd_log}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={jobcomp}
GresTypes=gpu
NodeName={NODE} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={cpus} Gres=gpu:{GPU_TYPE}:{GPUS} State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
",
        munge = p("munge/socket"),
        state = p("state"),
        spool = p("spool"),
        ctld_pid = p("slurmctld.pid"),
        slurmd_pid = p("slurmd.pid"),
        ctld_log = p("log/slurmctld.log"),
        slurmd_log = p("log/slurmd.log"),
        jobcomp = p("log/jobcomp.txt"),
    )
}

fn free_port() -> u16 {
    super::registry::free_port()
}

fn which(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

fn wait_for(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "{what} did not appear in {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
