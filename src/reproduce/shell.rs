//! `rocmatrix shell RUN CELL [--after STEP]`: a shell in a container of the
//! cell's environment — or of a snapshot committed after STEP — with the
//! cell's steps, variables and working directory.

use std::collections::HashMap;
use std::time::Duration;

use super::load_cell;
use crate::engine::{Engine, ExecOutcome, LABEL_KIND};
use crate::image::build::SNAPSHOT_REPO;
use crate::run::cell::container_spec;
use crate::run::{RunError, RunStore};
use crate::step::protocol::{scripts_tar, step_slug};

pub struct ShellRequest<'a> {
    pub store: &'a RunStore,
    pub cell: &'a str,
    /// Run the steps up to and including this one first (and keep the
    /// result as a snapshot image).
    pub after: Option<&'a str>,
    /// The command; default an interactive `bash`.
    pub command: Vec<String>,
    pub tty: bool,
    /// GPUs for cells that need them, as in the run.
    pub gpus: std::sync::Arc<dyn crate::gpu::gate::GpuGate>,
}

/// Runs the shell; returns its exit code.
pub async fn shell(engine: &Engine, req: ShellRequest<'_>) -> Result<i64, RunError> {
    let (store, wanted) = (req.store.clone(), req.cell.to_string());
    let (manifest, cell, record, lock) =
        crate::run::blocking("reading the run store", move || load_cell(&store, &wanted)).await??;
    let image = record
        .as_ref()
        .and_then(|r| r.image.clone())
        .or_else(|| {
            lock.as_ref()
                .and_then(|l| l.environments.get(&cell.environment_hash))
                .map(|e| e.image.tag.clone())
        })
        .ok_or_else(|| {
            RunError::Usage(format!(
                "cell {} never got an image in run {}",
                cell.id, manifest.run_id
            ))
        })?;
    if engine.image(&image).await?.is_none() {
        return Err(RunError::Usage(format!(
            "image {image} of cell {} is gone from the engine; `rocmatrix repro {} {}` makes it again",
            cell.id,
            req.store.dir.display(),
            cell.id
        )));
    }
    let holds_sources = cell
        .build(&manifest.builds)
        .is_some_and(|b| b.kind.is_matrix());
    let image = match req.after {
        Some(step) => {
            snapshot_after(engine, &manifest.run_id, &cell, &image, step, holds_sources).await?
        }
        None => image,
    };
    let owner = format!("{}-shell", manifest.run_id);
    let grant = gpu_grant(&req, &cell).await?;
    let id =
        start_cell_container(engine, &owner, &cell, &image, grant.as_ref(), holds_sources).await?;
    let result = async {
        if req.tty {
            let cmd = if req.command.is_empty() {
                vec!["bash".to_string()]
            } else {
                req.command.clone()
            };
            return Ok::<i64, RunError>(engine.exec_terminal(&id, &cmd, &[]).await?);
        }
        // Without a terminal: the given command, or the script piped in.
        let cmd = if req.command.is_empty() {
            let script = crate::run::blocking("reading standard input", || {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map(|_| text)
            })
            .await?
            .map_err(|e| RunError::io(std::path::Path::new("<stdin>"), e))?;
            engine
                .upload(
                    &id,
                    "/",
                    script_tar(&script).map_err(|e| RunError::io(&req.store.dir, e))?,
                )
                .await?;
            vec!["bash".to_string(), "/rocmatrix/shell-input.sh".to_string()]
        } else {
            req.command.clone()
        };
        let mut stdout = std::io::stdout();
        let outcome = engine
            .exec(
                &id,
                cmd,
                Vec::new(),
                &mut |b: &[u8]| {
                    use std::io::Write;
                    let _ = stdout.write_all(b);
                    let _ = stdout.flush();
                },
                None,
            )
            .await?;
        Ok(match outcome {
            ExecOutcome::Exited(code) => code,
            ExecOutcome::TimedOut => -1,
        })
    }
    .await;
    engine.remove_container(&id).await?;
    result
}

/// A GPU for the shell when the cell wants one; without one, a note and
/// none (the shell still starts).
async fn gpu_grant(
    req: &ShellRequest<'_>,
    cell: &crate::plan::Cell,
) -> Result<Option<crate::gpu::gate::GpuGrant>, RunError> {
    if !cell.wants_gpu() {
        return Ok(None);
    }
    let (gpus, id, request) = (req.gpus.clone(), cell.id.clone(), cell.gpu.clone());
    match crate::run::blocking("waiting for a GPU", move || gpus.grant(&id, &request)).await? {
        Ok(g) => Ok(Some(g)),
        Err(why) => {
            eprintln!("no GPU for this shell: {why}");
            Ok(None)
        }
    }
}

/// The image of `cell` after running its steps up to `step`, committed as a
/// snapshot the first time and reused after.
async fn snapshot_after(
    engine: &Engine,
    run_id: &str,
    cell: &crate::plan::Cell,
    image: &str,
    step: &str,
    holds_sources: bool,
) -> Result<String, RunError> {
    let idx = cell
        .steps
        .iter()
        .position(|s| s.name == step)
        .ok_or_else(|| {
            let names: Vec<&str> = cell.steps.iter().map(|s| s.name.as_str()).collect();
            RunError::Usage(format!(
                "cell {} has no step `{step}` (steps: {})",
                cell.id,
                names.join(", ")
            ))
        })?;
    let tag = format!(
        "{SNAPSHOT_REPO}:{}-after-{}-{}",
        crate::matrix_file::cell_id::sanitize(&cell.id)
            .to_ascii_lowercase()
            .trim_matches(['.', '-']),
        crate::matrix_file::cell_id::sanitize(step).to_ascii_lowercase(),
        &cell.hash[..12]
    );
    if engine.image(&tag).await?.is_some() {
        eprintln!("using snapshot {tag}");
        return Ok(tag);
    }
    let id = start_cell_container(
        engine,
        &format!("{run_id}-snapshot"),
        cell,
        image,
        None,
        holds_sources,
    )
    .await?;
    let made = async {
        for (i, s) in cell.steps.iter().enumerate().take(idx + 1) {
            eprintln!("=== {} (for the snapshot)", step_slug(i, &s.name));
            let outcome = engine
                .exec(
                    &id,
                    vec![
                        "bash".into(),
                        "-eo".into(),
                        "pipefail".into(),
                        format!("/rocmatrix/steps/{}.sh", step_slug(i, &s.name)),
                    ],
                    vec![format!("ROCMATRIX_STEP={}", s.name)],
                    &mut |b: &[u8]| {
                        use std::io::Write;
                        let _ = std::io::stderr().write_all(b);
                    },
                    Some(s.timeout.max(Duration::from_secs(1))),
                )
                .await?;
            match outcome {
                ExecOutcome::Exited(0) => {}
                ExecOutcome::Exited(code) if s.continue_on_error => {
                    eprintln!("=== {} exited {code}; going on", s.name)
                }
                ExecOutcome::Exited(code) => {
                    eprintln!("=== {} exited {code}; the snapshot is taken here", s.name)
                }
                ExecOutcome::TimedOut => {
                    eprintln!("=== {} timed out; the snapshot is taken here", s.name)
                }
            }
            if !matches!(outcome, ExecOutcome::Exited(0)) && !s.continue_on_error {
                break;
            }
        }
        let labels = HashMap::from([
            (LABEL_KIND.to_string(), "snapshot".to_string()),
            ("rocmatrix.cell".to_string(), cell.id.clone()),
            ("rocmatrix.snapshot.after".to_string(), step.to_string()),
        ]);
        engine.commit(&id, &tag, labels).await?;
        Ok::<(), RunError>(())
    }
    .await;
    engine.remove_container(&id).await?;
    made?;
    eprintln!("snapshot {tag} made");
    Ok(tag)
}

fn script_tar(script: &str) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(script.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, "rocmatrix/shell-input.sh", script.as_bytes())?;
    b.into_inner()
}

/// A running container of `cell` from `image`, with the cell's sources at
/// `/src` and its step scripts at `/rocmatrix/steps`, owned by `owner`.
async fn start_cell_container(
    engine: &Engine,
    owner: &str,
    cell: &crate::plan::Cell,
    image: &str,
    grant: Option<&crate::gpu::gate::GpuGrant>,
    holds_sources: bool,
) -> Result<String, RunError> {
    let name = format!(
        "rocmatrix-{owner}-{}-{}",
        crate::matrix_file::cell_id::sanitize(&cell.id),
        std::process::id()
    );
    let spec = container_spec(owner, cell, image, grant, name);
    // A matrix build's snapshot holds the sources as the build left them.
    let sources = if holds_sources {
        Vec::new()
    } else {
        prepare_sources(cell).await?
    };
    let scripts =
        scripts_tar(&cell.steps).map_err(|e| RunError::io(std::path::Path::new("<steps>"), e))?;
    let id = engine.start_container(&spec).await?;
    for tar in sources.into_iter().chain([scripts]) {
        if let Err(e) = engine.upload(&id, "/", tar).await {
            let _ = engine.remove_container(&id).await;
            return Err(e.into());
        }
    }
    Ok(id)
}

/// The cell's sources as tar archives, checked out as the run did.
async fn prepare_sources(cell: &crate::plan::Cell) -> Result<Vec<Vec<u8>>, RunError> {
    let wanted = cell.sources.clone();
    crate::run::blocking("checking out sources", move || {
        let sources = crate::source::Sources::new(&crate::dirs::cache_dir());
        wanted
            .iter()
            .map(|s| {
                sources
                    .prepare(s)
                    .map(|p| p.tar.clone())
                    .map_err(|e| RunError::Usage(e.to_string()))
            })
            .collect()
    })
    .await?
}
