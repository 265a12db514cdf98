//! `rocmatrix coverage PATH… --gfx gfx1031,gfx1100 --policy P`: library ×
//! gfx → exact, compatible (via which target and how) or missing.
//! Directories are walked; with a single directory argument (an image root)
//! paths are shown relative to it.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::PolicyArg;
use crate::bundle::{coverage, Check, CoverageRow, CoverageVerdict};
use crate::error::{Error, ExitCode};
use crate::gpu::compat::policy_name;
use crate::gpu::TargetId;
use crate::image::libraries::ScratchDir;
use crate::store::coverage::EnvironmentCoverage;

#[derive(Debug, Args)]
pub struct CoverageArgs {
    /// Files or directories (e.g. an unpacked image root); with --image,
    /// directories inside the image (default /usr/lib, /usr/local/lib and
    /// /opt/rocm).
    #[arg(required_unless_present = "image")]
    pub paths: Vec<PathBuf>,
    /// Read the shared libraries of this image (an environment image, say)
    /// through the engine instead of the local file system.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// gfx targets to check, comma-separated.
    #[arg(long, required = true, value_delimiter = ',', value_parser = parse_target)]
    pub gfx: Vec<TargetId>,
    #[arg(long, value_enum, default_value_t = PolicyArg::Exact)]
    pub policy: PolicyArg,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Also compare with this earlier file or directory (an image root of
    /// the previous release, say): per library, the gfx targets gained and
    /// lost; lost targets that --gfx names are marked as regressions.
    #[arg(long, value_name = "PATH")]
    pub against: Option<PathBuf>,
    /// Check compressed bundles whole (`bundles --verify`).
    #[arg(long)]
    pub verify: bool,
}

fn parse_target(s: &str) -> Result<TargetId, super::BadArg> {
    TargetId::parse(s.trim()).map_err(|e| super::BadArg(e.to_string()))
}

pub fn run(
    mut args: CoverageArgs,
    cx: &super::Context,
    out: &mut dyn Write,
) -> Result<ExitCode, Error> {
    let policy = args.policy.into();
    // An image: copy its shared libraries out into a scratch root first.
    let _scratch = match &args.image {
        Some(image) => {
            let dir =
                std::env::temp_dir().join(format!("rocmatrix-coverage-{}", std::process::id()));
            let scratch = ScratchDir::create(dir.clone()).map_err(|e| Error::io(&dir, e))?;
            let dirs = if args.paths.is_empty() {
                crate::image::libraries::DEFAULT_DIRS
                    .iter()
                    .map(PathBuf::from)
                    .collect()
            } else {
                std::mem::take(&mut args.paths)
            };
            copy_libraries(cx, image, &dirs, &scratch.0)?;
            args.paths = vec![scratch.0.clone()];
            Some(scratch)
        }
        None => None,
    };
    let mut rows: Vec<CoverageRow> = Vec::new();
    let mut code = ExitCode::Success;
    for p in &args.paths {
        let (reports, c) =
            super::bundles::scan(std::slice::from_ref(p), Check::verifying(args.verify));
        if c != ExitCode::Success {
            code = c;
        }
        // One directory is an image root: show paths inside it as absolute.
        let root = (args.paths.len() == 1 && p.is_dir()).then_some(p.as_path());
        rows.extend(coverage(&reports, &args.gfx, policy, root));
    }
    let changes = match &args.against {
        Some(old) => {
            let (reports, c) =
                super::bundles::scan(std::slice::from_ref(old), Check::verifying(args.verify));
            if c != ExitCode::Success {
                code = c;
            }
            let root = old.is_dir().then_some(old.as_path());
            let before = coverage(&reports, &args.gfx, policy, root);
            let name = |p: &std::path::Path| p.display().to_string();
            let new_name = args.paths.first().map(|p| name(p)).unwrap_or_default();
            crate::analysis::coverage_changes::between(
                &as_stored(&before, &args.gfx),
                &as_stored(&rows, &args.gfx),
                &name(old),
                &new_name,
            )
        }
        None => Vec::new(),
    };
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&serde_json::json!({
            "policy": policy_name(policy),
            "gfx": args.gfx,
            "libraries": rows,
            "changes": changes,
        }))
        .unwrap_or_default();
        s.push('\n');
        s
    } else {
        let mut s = table(&rows, &args.gfx);
        if let Some(old) = &args.against {
            if changes.is_empty() {
                s.push_str(&format!("changes against {}: none\n", old.display()));
            }
            for c in &changes {
                s.push_str(&format!("{}\n", c.line()));
            }
        }
        s
    };
    super::write_out(out, &text)?;
    Ok(code)
}

/// Rows as the run store keeps them, for comparing.
fn as_stored(rows: &[CoverageRow], gfx: &[TargetId]) -> EnvironmentCoverage {
    let gfx = gfx.iter().map(ToString::to_string).collect();
    EnvironmentCoverage {
        environment: String::new(),
        image: String::new(),
        cells: Vec::new(),
        policy: String::new(),
        gfx,
        dirs: Vec::new(),
        libraries: rows.iter().map(CoverageRow::stored).collect(),
        problems: Vec::new(),
        secs: 0.0,
    }
}

fn table(rows: &[CoverageRow], gfx: &[TargetId]) -> String {
    let cell = |v: &CoverageVerdict| v.to_string();
    let lib_w = rows
        .iter()
        .map(|r| r.library.display().to_string().len())
        .chain([7])
        .max()
        .unwrap_or(7);
    let widths: Vec<usize> = gfx
        .iter()
        .enumerate()
        .map(|(i, g)| {
            rows.iter()
                .map(|r| cell(&r.cells[i].verdict).len())
                .chain([g.to_string().len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = format!("{:<lib_w$}", "library");
    for (g, w) in gfx.iter().zip(&widths) {
        s.push_str(&format!("  {:<w$}", g.to_string()));
    }
    s = s.trim_end().to_string();
    s.push('\n');
    for r in rows {
        let mut line = format!("{:<lib_w$}", r.library.display().to_string());
        for (c, w) in r.cells.iter().zip(&widths) {
            line.push_str(&format!("  {:<w$}", cell(&c.verdict)));
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    if rows.is_empty() {
        s.push_str("(no file with device code)\n");
    }
    s
}

/// Copies the libraries under `dirs` of `image` into `root`.
fn copy_libraries(
    cx: &super::Context,
    image: &str,
    dirs: &[PathBuf],
    root: &std::path::Path,
) -> Result<(), Error> {
    cx.runtime.block_on(async {
        let engine = cx.engine().await?;
        let name = format!("rocmatrix-coverage-{}", std::process::id());
        crate::image::libraries::copy_libraries(&engine, image, dirs, root, &name)
            .await
            .map_err(|e| Error::Run(e.into()))?;
        Ok(())
    })
}
