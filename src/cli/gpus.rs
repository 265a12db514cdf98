//! `rocmatrix gpus [--json] [--cdi] [--sysfs-root DIR] [--matrix FILE]`: the
//! GPUs of both vendors — AMD from the KFD topology, NVIDIA from the driver's
//! files — the checks real setups fail, and with `--cdi` the CDI specs
//! rocmatrix generates for them. Exits 3 (infrastructure) when no GPU is
//! usable and a check failed. Where the engine is a rootless Podman, also
//! what its user needs for GPU cells (`rootless_checks`); no engine, no
//! such checks.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::PolicyArg;
use crate::error::{Error, ExitCode};
use crate::gpu::cdi::generate;
use crate::gpu::checks::{
    rootless_checks, run_checks, Account, CheckStatus, Identity, RootlessEngine,
};
use crate::gpu::nvidia::NvidiaInventory;
use crate::gpu::{Inventory, TargetId};
use crate::matrix_file::{GpuUse, Spec, DEFAULT_MAX_CELLS};
use crate::plan::Plan;

#[derive(Debug, Args)]
pub struct GpusArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Print the CDI specs generated for this host's GPUs (YAML; JSON with --json).
    #[arg(long)]
    pub cdi: bool,
    #[command(flatten)]
    pub gpus: super::GpuSource,
    /// Also check that this host has GPUs for the gfx targets this matrix needs.
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// Policy for matching --matrix targets (default: the matrix's own).
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
}

/// The gfx targets of cells that need or may use a GPU, and the matrix policy.
fn matrix_targets(
    file: &Path,
) -> Result<(Vec<TargetId>, Option<crate::matrix_file::GpuPolicy>), Error> {
    let spec = Spec::load(file)?;
    let plan = Plan::build(&spec, DEFAULT_MAX_CELLS)?;
    let mut targets: Vec<TargetId> = Vec::new();
    let mut policy = None;
    for cell in &plan.cells {
        if cell.gpu.need == GpuUse::None {
            continue;
        }
        policy.get_or_insert(cell.gpu.policy);
        if let Some(t) = cell.gpu.target.as_ref().filter(|t| !t.starts_with("sm_")) {
            let t = TargetId::parse(t)
                .map_err(|e| Error::Usage(format!("{}: cell {}: {e}", file.display(), cell.id)))?;
            if !targets.contains(&t) {
                targets.push(t);
            }
        }
    }
    Ok((targets, policy))
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// The generated specs, as YAML (or JSON).
fn cdi_text(
    inventory: &Inventory,
    nvidia: &NvidiaInventory,
    dev_root: &Path,
    json: bool,
) -> String {
    let mut specs = Vec::new();
    if !inventory.gpus.is_empty() {
        specs.push(generate::amd(inventory, dev_root, &generate::host_gid));
    }
    if !nvidia.gpus.is_empty() {
        specs.push(generate::nvidia(nvidia));
    }
    if json {
        let mut s = serde_json::to_string_pretty(&specs).unwrap_or_default();
        s.push('\n');
        return s;
    }
    specs
        .iter()
        .map(|s| format!("---\n{}", crate::yaml::to_string(s).unwrap_or_default()))
        .collect()
}

/// The NVIDIA GPUs as a table.
fn nvidia_table(nvidia: &NvidiaInventory) -> String {
    let mut s = format!(
        "\nNVIDIA ({}):\n",
        nvidia.driver.as_deref().unwrap_or("driver version unknown")
    );
    s.push_str(&format!(
        "{:<5} {:<6} {:<8} {:<42} {:<14} {}\n",
        "index", "minor", "target", "uuid", "pci", "model"
    ));
    for (i, g) in nvidia.gpus.iter().enumerate() {
        s.push_str(&format!(
            "{:<5} {:<6} {:<8} {:<42} {:<14} {}\n",
            i,
            g.minor,
            g.target().unwrap_or_else(|| "?".into()),
            g.uuid,
            g.pci,
            g.model
        ));
    }
    s
}

/// The engine, if it answers within a few seconds and is a rootless Podman
/// whose user this host knows.
fn rootless_engine(cx: &super::Context) -> Option<RootlessEngine> {
    cx.runtime.block_on(async {
        let connect = tokio::time::timeout(std::time::Duration::from_secs(5), cx.engine()).await;
        let Ok(Ok(engine)) = connect else {
            return None;
        };
        let user = engine.rootless_user().and_then(Account::of_uid)?;
        let keep_groups =
            crate::engine::rootless::keep_groups_configured(Path::new("/"), &user.home);
        Some(RootlessEngine {
            runtime: engine.default_runtime().await,
            keep_groups,
            user,
        })
    })
}

pub fn run(args: GpusArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let inventory = Inventory::read(&args.gpus.sysfs_root)?;
    let nvidia = args.gpus.nvidia();
    if args.cdi {
        super::write_out(
            out,
            &cdi_text(&inventory, &nvidia, &args.gpus.dev_root, args.json),
        )?;
        return Ok(ExitCode::Success);
    }
    let (expected, matrix_policy) = match &args.matrix {
        Some(f) => matrix_targets(f)?,
        None => (Vec::new(), None),
    };
    let policy = args
        .policy
        .map(Into::into)
        .or(matrix_policy)
        .unwrap_or_default();
    let mut checks = run_checks(
        &inventory,
        &args.gpus.dev_root,
        &Identity::current(),
        &expected,
        policy,
    );
    if let Some(engine) = rootless_engine(cx) {
        checks.extend(rootless_checks(&inventory, &args.gpus.dev_root, &engine));
    }
    // AMD's checks fail on a host whose GPUs are NVIDIA's: that host is fine.
    let failed = checks.iter().any(|c| c.status == CheckStatus::Fail) && nvidia.gpus.is_empty();
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&json!({
            "sysfs_root": inventory.sysfs_root,
            "kfd_present": inventory.kfd_present,
            "gpus": inventory.gpus,
            "nvidia": nvidia,
            "checks": checks,
        }))
        .unwrap_or_default();
        s.push('\n');
        s
    } else {
        let mut s = String::new();
        if inventory.gpus.is_empty() {
            s.push_str("no GPU in the KFD topology\n");
            if !nvidia.gpus.is_empty() {
                s.push_str(&nvidia_table(&nvidia));
            }
        } else {
            s.push_str(&format!(
                "{:<5} {:<8} {:<13} {:<20} {:<21} {:>4} {:>10}  {}\n",
                "node", "gfx", "pci", "render", "uuid", "CUs", "memory", "device"
            ));
            for g in &inventory.gpus {
                s.push_str(&format!(
                    "{:<5} {:<8} {:<13} {:<20} {:<21} {:>4} {:>10}  {:04x}:{:04x} {}\n",
                    g.node,
                    g.processor,
                    g.pci,
                    g.render_node
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "-".into()),
                    g.uuid.as_deref().unwrap_or("-"),
                    g.compute_units,
                    gib(g.memory_bytes),
                    g.vendor_id,
                    g.device_id,
                    g.name
                ));
            }
        }
        if !inventory.gpus.is_empty() && !nvidia.gpus.is_empty() {
            s.push_str(&nvidia_table(&nvidia));
        }
        s.push_str("\nchecks (AMD):\n");
        for c in &checks {
            let status = match c.status {
                CheckStatus::Ok => "ok",
                CheckStatus::Warn => "warn",
                CheckStatus::Fail => "FAIL",
            };
            s.push_str(&format!("  {status:<5} {:<14} {}\n", c.name, c.message));
        }
        s
    };
    super::write_out(out, &text)?;
    Ok(if failed {
        ExitCode::Infrastructure
    } else {
        ExitCode::Success
    })
}
