//! The command line: clap's parsed arguments, one file per command.
//!
//! Each command module turns its raw arguments into validated options and
//! calls the library; `main.rs` only maps the result to an exit code.

mod bisect;
mod bundles;
mod coverage;
mod diff;
mod expect;
mod explain;
mod export;
mod gpus;
mod history;
mod images;
mod plan;
pub mod report;
mod repro;
mod run;
mod serve;
mod shell;
mod slurm_run;
mod triage;
mod try_patch;
mod validate;

use std::io::Write;

use std::collections::HashMap;

use clap::{Parser, Subcommand, ValueEnum};

use crate::engine::Engine;

use crate::error::{Error, ExitCode};

#[derive(Debug, Parser)]
#[command(
    name = "rocmatrix",
    version,
    about = "Reproducible test matrices for the AMD ROCm stack"
)]
pub struct Cli {
    /// More diagnostics on stderr (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Put this label on every image, container, network and volume
    /// rocmatrix creates (repeat, or comma-separate in ROCMATRIX_LABEL).
    #[arg(
        long = "label",
        global = true,
        value_name = "KEY=VALUE",
        env = "ROCMATRIX_LABEL",
        value_delimiter = ',',
        value_parser = parse_label
    )]
    pub labels: Vec<(String, String)>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Expand a matrix file and print its cells.
    Plan(plan::PlanArgs),
    /// Check matrix files without printing anything but errors.
    Validate(validate::ValidateArgs),
    /// Build each cell's environment and run its steps in containers.
    Run(Box<run::RunArgs>),
    /// Build reports: of a run, of merged shard runs, or of JUnit directories.
    Report(report::ReportArgs),
    /// Why cells fail: failure signatures and the axis values behind them.
    Explain(explain::ExplainArgs),
    /// What changed between two runs: outcomes, packages underneath, gfx coverage.
    Diff(diff::DiffArgs),
    /// Find the first point of an axis or a git range where a failure's signature appears (or goes).
    Bisect(bisect::BisectArgs),
    /// Where each new failure signature of a run started, and each gone one was fixed.
    Triage(triage::TriageArgs),
    /// Try a patch to a source on a run's failing cells: fixed, still failing, newly failing.
    Try(try_patch::TryArgs),
    /// Run one cell of a run again from its lock; say whether the outcome matches.
    Repro(repro::ReproArgs),
    /// A shell in a container of a cell's environment.
    Shell(shell::ShellArgs),
    /// Write a self-contained reproducer of one cell (needs only docker).
    Export(export::ExportArgs),
    /// List (or prune) the images rocmatrix made: environments, bases, snapshots.
    Images(images::ImagesArgs),
    /// List this host's GPUs (KFD topology) and check the setup.
    Gpus(gpus::GpusArgs),
    /// List the gfx targets each file's offload bundles carry.
    Bundles(bundles::BundlesArgs),
    /// Library x gfx table: exact, compatible (how) or missing code.
    Coverage(coverage::CoverageArgs),
    /// Runs across time: recorded runs, one test's history, flaky tests, import.
    History(history::HistoryArgs),
    /// Propose (or write) the matrix file's `expect:` and `flaky:` changes its history calls for.
    Expect(expect::ExpectArgs),
    /// A read-only web server over the history: matrices, tests, flaky tests, runs, hosts; JSON under /api.
    Serve(serve::ServeArgs),
}

/// What every command gets from `main`: the process's one tokio runtime and
/// the global options that reach the engine.
pub struct Context<'a> {
    pub runtime: &'a tokio::runtime::Runtime,
    labels: HashMap<String, String>,
}

impl Context<'_> {
    /// Connects to the engine; everything created through it carries `--label`.
    pub async fn engine(&self) -> Result<Engine, Error> {
        Ok(Engine::connect().await?.with_labels(self.labels.clone()))
    }
}

impl Cli {
    /// Runs the command on `runtime`, writing its normal output to `out`.
    pub fn run(
        self,
        runtime: &tokio::runtime::Runtime,
        out: &mut dyn Write,
    ) -> Result<ExitCode, Error> {
        let cx = Context {
            runtime,
            labels: self.labels.into_iter().collect(),
        };
        match self.command {
            Command::Bisect(a) => bisect::run(a, &cx, out),
            Command::Triage(a) => triage::run(a, &cx, out),
            Command::Try(a) => try_patch::run(a, &cx, out),
            Command::Export(a) => export::run(a, out),
            Command::Images(a) => images::run(a, &cx, out),
            Command::Plan(a) => plan::run(a, out),
            Command::Repro(a) => repro::run(a, &cx, out),
            Command::Run(a) => run::run(*a, &cx, out),
            Command::Shell(a) => shell::run(a, &cx, out),
            Command::Validate(a) => validate::run(a, out),
            Command::Gpus(a) => gpus::run(a, &cx, out),
            Command::Bundles(a) => bundles::run(a, out),
            Command::Coverage(a) => coverage::run(a, &cx, out),
            Command::Report(a) => report::run(a, out),
            Command::Explain(a) => explain::run(a, out),
            Command::Diff(a) => diff::run(a, out),
            Command::History(a) => history::run(a, out),
            Command::Expect(a) => expect::run(a, out),
            Command::Serve(a) => serve::run(a, &cx, out),
        }
    }
}

/// `--policy` values: how strictly a GPU's ISA must match a gfx target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    Exact,
    Compatible,
    Override,
    Extended,
}

impl From<PolicyArg> for crate::matrix_file::GpuPolicy {
    fn from(p: PolicyArg) -> Self {
        use crate::matrix_file::GpuPolicy as P;
        match p {
            PolicyArg::Exact => P::Exact,
            PolicyArg::Compatible => P::Compatible,
            PolicyArg::Override => P::Override,
            PolicyArg::Extended => P::Extended,
        }
    }
}

/// Where GPUs come from: the KFD topology under `sysfs_root` and the device
/// nodes under `dev_root` (fixtures and stand-in devices in tests).
#[derive(Debug, Clone, clap::Args)]
pub struct GpuSource {
    /// Root of the sysfs tree holding class/kfd/kfd/topology.
    #[arg(long, default_value = "/sys", value_name = "DIR")]
    pub sysfs_root: std::path::PathBuf,
    /// Root of the device tree holding kfd, dri/renderD* and nvidia*.
    #[arg(long, default_value = "/dev", value_name = "DIR")]
    pub dev_root: std::path::PathBuf,
    /// Root of procfs holding driver/nvidia/gpus (NVIDIA GPUs).
    #[arg(long, default_value = "/proc", value_name = "DIR")]
    pub proc_root: std::path::PathBuf,
    /// A directory of CDI specs, besides /etc/cdi and /var/run/cdi (repeatable;
    /// later ones take precedence).
    #[arg(long = "cdi-spec-dir", value_name = "DIR")]
    pub cdi_spec_dirs: Vec<std::path::PathBuf>,
}

impl GpuSource {
    /// The CDI specs of the standard directories and `--cdi-spec-dir`.
    pub fn cdi(&self) -> Result<crate::gpu::cdi::Registry, crate::gpu::cdi::CdiError> {
        let mut dirs: Vec<std::path::PathBuf> = crate::gpu::cdi::DEFAULT_DIRS
            .iter()
            .map(std::path::PathBuf::from)
            .collect();
        dirs.extend(self.cdi_spec_dirs.iter().cloned());
        crate::gpu::cdi::Registry::load(&dirs)
    }

    /// This host's NVIDIA GPUs (compute capabilities from nvidia-smi when it
    /// is on the PATH).
    pub fn nvidia(&self) -> crate::gpu::nvidia::NvidiaInventory {
        use crate::gpu::nvidia;
        let run = |cmd: &str, args: &[&str]| {
            std::process::Command::new(cmd)
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let caps = run(
            "nvidia-smi",
            &["--query-gpu=uuid,compute_cap", "--format=csv,noheader"],
        )
        .map(|t| nvidia::parse_compute_caps(&t))
        .unwrap_or_default();
        let dirs = nvidia::library_dirs(&run("ldconfig", &["-p"]).unwrap_or_default());
        let mut inv = nvidia::NvidiaInventory::read(&self.proc_root, &self.dev_root, &dirs, &caps);
        inv.smi = run("sh", &["-c", "command -v nvidia-smi"])
            .map(|p| std::path::PathBuf::from(p.trim()))
            .filter(|p| p.is_absolute());
        inv
    }

    /// The gate that leases this host's GPUs to cells: named CDI devices,
    /// NVIDIA GPUs for `sm_` targets, AMD GPUs from the KFD topology.
    pub fn gate(
        &self,
    ) -> Result<std::sync::Arc<crate::gpu::gate::HostGate>, crate::gpu::cdi::CdiError> {
        use crate::gpu::gate::{CdiGate, HostGate, KfdGate, NvidiaGate};
        let installed = self.cdi()?;
        let kfd = match crate::gpu::inventory::Inventory::read(&self.sysfs_root) {
            // Inside a Slurm job: only the GPUs the job was given.
            Ok(inv) => Some(KfdGate::new(
                &crate::cluster::gpus::slurm_share(inv),
                &self.dev_root,
                &installed,
            )),
            Err(e) => {
                tracing::warn!("KFD inventory unreadable, no cell gets an AMD GPU: {e}");
                None
            }
        };
        Ok(std::sync::Arc::new(HostGate {
            kfd,
            nvidia: NvidiaGate::new(
                crate::cluster::gpus::slurm_share_nvidia(self.nvidia()),
                &installed,
            ),
            cdi: CdiGate::new(installed),
            host: crate::host::read(&self.sysfs_root, &self.proc_root),
        }))
    }
}

/// A bisection probe's reports, written into its run store and not
/// recorded: a probe is no run of the matrix (bisect and triage are given
/// this: they stand beside `src/finish/`).
pub(crate) fn probe_reports(dir: &std::path::Path) {
    if let Err(e) = crate::finish::run_store(dir, &crate::finish::Finish::reports_only()) {
        tracing::warn!("{}: the probe's reports: {e}", dir.display());
    }
}

/// A command-line value clap's parsers reject, in words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadArg(pub String);

/// Splits `NAME=VALUE` (a non-empty name, trimmed; the value as given).
fn split_pair(s: &str) -> Option<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Some((k.trim().to_string(), v.to_string())),
        _ => None,
    }
}

/// Parses `AXIS=VALUE`.
pub(crate) fn parse_pair(s: &str) -> Result<(String, String), BadArg> {
    split_pair(s).ok_or_else(|| BadArg(format!("`{s}` is not AXIS=VALUE")))
}

/// Parses `KEY=VALUE` for `--label`.
fn parse_label(s: &str) -> Result<(String, String), BadArg> {
    split_pair(s).ok_or_else(|| BadArg(format!("label `{s}` is not KEY=VALUE")))
}

/// Run options for cells planned before (a repro, a bisection's or a
/// triage's probes, a try): one cell at a time, one retry after an
/// infrastructure error, no lock, no coverage scan, no registry.
pub(crate) fn replanned_options(
    network: crate::image::network::NetworkChoice,
) -> crate::run::RunOptions {
    crate::run::RunOptions {
        jobs: 1,
        build_jobs: crate::run::default_build_jobs(),
        fail_fast: false,
        retries: 1,
        network,
        work_dir: crate::dirs::cache_dir().join("bootstrap"),
        locked: None,
        coverage: false,
        registry: None,
    }
}

/// The plan of `spec`, each LLVM tree of its environments resolved to a
/// commit now (the one `lock` names for its URL and ref, under a lock), so
/// that a bad URL, ref or tree is the matrix's error at its line.
pub(crate) fn plan_of(
    spec: &crate::matrix_file::Spec,
    max_cells: usize,
    lock: Option<&crate::store::lock::Lock>,
) -> Result<crate::plan::Plan, crate::matrix_file::SpecError> {
    let sources = crate::source::Sources::new(&crate::dirs::cache_dir());
    let resolve = |url: &str, r: &str| {
        sources
            .tree_commit(url, r, lock)
            .map_err(crate::plan::TreeError::from)
    };
    crate::plan::Plan::build_with(spec, max_cells, Some(&resolve))
}

/// Writes to stdout, treating a closed pipe (`| head`) as success.
pub(crate) fn write_out(out: &mut dyn Write, text: &str) -> Result<(), Error> {
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("<stdout>", e)),
    }
}
