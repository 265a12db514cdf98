//! Build stages at run time: a build's steps run once in a container of the
//! environment's image, with the sources uploaded, and the container is
//! committed as the snapshot its cells start from.
//!
//! The snapshot is named by a content hash (`rocmatrix/build:<hash>`) of the
//! build's plan hash (environment, steps, sources as rendered, `per` and
//! `build.*` values), the environment image's id and the sources' commits
//! and patches: a snapshot that exists is reused and nothing runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::engine::labels::owner_labels;
use crate::engine::{ContainerSpec, LABEL_KIND};
use crate::image::registry::Registries;
use crate::plan::build::BuildKind;
use crate::plan::{Build, SourceRef};
use crate::step::clock;
use crate::step::hang::HangAt;
use crate::step::judge::judge_exec;
use crate::step::log::{not_run_step, StepLog};
use crate::step::protocol::{step_command, step_slug};
use crate::step::setup::{fresh_dir, prepare_sources, upload_long_scripts};
use crate::step::{blocking, CellEnv, CellError};
use crate::store::journal::Event;
use crate::store::lock::LockedSource;
use crate::store::now_rfc3339;
use crate::store::record::{BuildRecord, RunStatus, StepRecord};

/// Label on a build snapshot naming its build key.
pub const LABEL_BUILD: &str = "rocmatrix.build";

/// What a build stage gave its cells: the snapshot to start from, or why
/// there is none.
#[derive(Debug, Clone)]
pub struct Built {
    pub record: BuildRecord,
}

impl Built {
    /// The snapshot, when the build passed (or was reused).
    pub fn snapshot(&self) -> Option<&str> {
        (self.record.status == RunStatus::Passed).then_some(self.record.snapshot.as_str())
    }

    /// Why the build's cells cannot run: "build `<key>` failed: …".
    pub fn failure(&self) -> String {
        format!(
            "build `{}` failed: {}",
            self.record.key,
            self.record
                .reason
                .as_deref()
                .unwrap_or("no reason recorded")
        )
    }
}

impl Built {
    /// A build that could not be judged (an engine error after retries).
    pub fn errored(
        build: &Build,
        env_image: &str,
        cells: Vec<String>,
        started: String,
        secs: f64,
        error: String,
    ) -> Built {
        Built {
            record: BuildRecord {
                key: build.key.clone(),
                kind: build.kind,
                hash: build.hash.clone(),
                environment_hash: build.environment_hash.clone(),
                environment_image: env_image.to_string(),
                snapshot: String::new(),
                snapshot_id: None,
                reused: false,
                pulled: false,
                registry: None,
                status: RunStatus::Error,
                reason: Some(error),
                started,
                finished: now_rfc3339(),
                duration_secs: secs,
                cells,
                steps: Vec::new(),
                sources: Vec::new(),
            },
        }
    }
}

/// The container name of a build stage.
pub fn container_name(run: &str, key: &str) -> String {
    let mut key = crate::matrix_file::cell_id::sanitize(key);
    key.truncate(100);
    format!("rocmatrix-{run}-build-{key}")
}

/// The registry a run shares its build snapshots through (`--registry`).
#[derive(Clone, Copy)]
pub struct Share<'a> {
    pub registries: &'a Registries,
    pub registry: &'a str,
}

/// Runs `build` from `env_image` (tag and id) unless its snapshot exists
/// (in the engine or, with `share`, in the registry), for `cells`; writes
/// `builds/<key>/build.json`. A snapshot made or found locally is pushed.
pub async fn run_build(
    cx: &CellEnv<'_>,
    build: &Build,
    env_image: (&str, &str),
    cells: Vec<String>,
    binds: Vec<String>,
    share: Option<Share<'_>>,
) -> Result<Built, CellError> {
    let started = now_rfc3339();
    let t0 = Instant::now();
    let dir = crate::store::layout::build_dir(&cx.store.dir, &build.key);
    fresh_dir(&dir).await?;
    cx.events.emit(Event::BuildStarted {
        build: build.key.clone(),
        cells: cells.len(),
    });
    // A toolchain build's source is an LLVM tree, resolved here and
    // streamed into its container (never checked out whole in memory).
    let (prepared, locked) = if build.kind == BuildKind::LlvmDebug {
        (Vec::new(), resolve_trees(cx, &build.sources).await?)
    } else {
        let prepared = prepare_sources(cx, &build.sources).await?;
        let locked: Vec<LockedSource> = prepared.iter().map(|p| p.locked.clone()).collect();
        (prepared, locked)
    };
    let snapshot = snapshot_tag(build, env_image.1, &locked);
    let mut record = BuildRecord {
        key: build.key.clone(),
        kind: build.kind,
        hash: build.hash.clone(),
        environment_hash: build.environment_hash.clone(),
        environment_image: env_image.0.to_string(),
        snapshot: snapshot.clone(),
        snapshot_id: None,
        reused: false,
        pulled: false,
        registry: None,
        status: RunStatus::Passed,
        reason: None,
        started,
        finished: String::new(),
        duration_secs: 0.0,
        cells,
        steps: Vec::new(),
        sources: locked,
    };
    if let Some(existing) = cx.engine.image(&snapshot).await? {
        record.reused = true;
        record.snapshot_id = Some(existing.id);
    } else if let Some(pulled) = pull(cx, share, &snapshot).await? {
        record.pulled = true;
        record.registry = Some(pulled);
        record.snapshot_id = cx.engine.image(&snapshot).await?.map(|i| i.id);
    } else {
        build_in_container(cx, build, binds, &prepared, &dir, &mut record).await?;
    }
    if let (Some(sh), Some(_), None) = (share, &record.snapshot_id, &record.registry) {
        push(cx, sh, build, &mut record).await?;
    }
    record.finished = now_rfc3339();
    record.duration_secs = t0.elapsed().as_secs_f64();
    cx.events.emit(Event::BuildFinished {
        build: build.key.clone(),
        snapshot: snapshot.clone(),
        status: record.status,
        reused: record.reused,
        pulled: record.pulled,
        reason: record.reason.clone(),
        secs: record.duration_secs,
    });
    let (store, rec) = (cx.store.clone(), record.clone());
    blocking("writing build.json", move || {
        store.write_build(&rec).map_err(|e| {
            CellError::io(
                &crate::store::layout::build_record_in(&dir),
                std::io::Error::other(e),
            )
        })
    })
    .await??;
    Ok(Built { record })
}

/// Runs the build's steps in a container of its environment image (its
/// sources uploaded) and, when they pass, commits it as the snapshot; the
/// container is removed either way.
async fn build_in_container(
    cx: &CellEnv<'_>,
    build: &Build,
    binds: Vec<String>,
    prepared: &[std::sync::Arc<crate::source::Prepared>],
    dir: &Path,
    record: &mut BuildRecord,
) -> Result<(), CellError> {
    let spec = ContainerSpec {
        name: container_name(cx.run_id, &build.key),
        image: record.environment_image.clone(),
        labels: owner_labels(cx.run_id, &format!("build:{}", build.key)),
        env: build_env(build),
        binds,
        cap_add: crate::step::hang::ptrace_caps(&build.steps),
        ..Default::default()
    };
    let container = cx.engine.start_container(&spec).await?;
    let ran = async {
        for p in prepared {
            cx.engine.upload(&container, "/", p.tar.clone()).await?;
        }
        if build.kind == BuildKind::LlvmDebug {
            let clang = crate::plan::toolchain::needs_clang(build);
            for (src, locked) in build.sources.iter().zip(&record.sources) {
                upload_tree(cx, &container, src, locked, clang).await?;
            }
        }
        let (steps, verdict) = run_steps(cx, build, &container, dir).await?;
        record.steps = steps;
        if let Some((status, reason)) = verdict {
            record.status = status;
            record.reason = Some(reason);
        } else {
            let labels = HashMap::from([
                (
                    LABEL_KIND.to_string(),
                    build.kind.repository().1.to_string(),
                ),
                (LABEL_BUILD.to_string(), build.key.clone()),
            ]);
            let id = cx
                .engine
                .commit(&container, &record.snapshot, labels)
                .await?;
            record.snapshot_id = Some(id);
        }
        Ok::<(), CellError>(())
    }
    .await;
    if let Err(e) = cx.engine.remove_container(&container).await {
        tracing::warn!("{e}");
    }
    ran
}

/// The commits of a toolchain build's LLVM trees (each its pinned one, or
/// its ref resolved now).
async fn resolve_trees(
    cx: &CellEnv<'_>,
    trees: &[SourceRef],
) -> Result<Vec<LockedSource>, CellError> {
    let mut locked = Vec::with_capacity(trees.len());
    for src in trees {
        let (sources, src) = (cx.sources.clone(), src.clone());
        locked.push(
            blocking("resolving the LLVM tree", move || {
                sources.resolve_tree(&src)
            })
            .await??,
        );
    }
    Ok(locked)
}

/// The wanted paths of an LLVM tree at its locked commit, read from git by
/// a blocking thread and streamed into the container as they are read.
async fn upload_tree(
    cx: &CellEnv<'_>,
    container: &str,
    src: &SourceRef,
    locked: &LockedSource,
    clang: bool,
) -> Result<(), CellError> {
    use crate::source::llvm_tree::{Chunk, ChunkWriter};
    let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(4);
    let (sources, src, locked, failed) =
        (cx.sources.clone(), src.clone(), locked.clone(), tx.clone());
    let write = blocking("streaming the LLVM tree", move || {
        let written = sources.write_tree(&src, &locked, clang, ChunkWriter::new(tx));
        if let Err(e) = &written {
            // The upload ends with the error instead of a short archive.
            let _ = failed.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
        written
    });
    let chunks =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    let (written, uploaded) = tokio::join!(write, cx.engine.upload_stream(container, "/", chunks));
    written??;
    Ok(uploaded?)
}

/// Puts the snapshot into the registry (unless it is there already); its
/// reference goes into the record.
async fn push(
    cx: &CellEnv<'_>,
    sh: Share<'_>,
    build: &Build,
    record: &mut BuildRecord,
) -> Result<(), CellError> {
    let shared = sh
        .registries
        .share_snapshot(cx.engine, sh.registry, &record.snapshot)
        .await
        .map_err(registry_error)?;
    if let Some((reference, pushed)) = cx.events.fetched(shared) {
        if pushed {
            cx.events.emit(Event::BuildPushed {
                build: build.key.clone(),
                reference: reference.clone(),
            });
        }
        record.registry = Some(reference);
    }
    Ok(())
}

/// The snapshot from the registry, if it has it: `<registry>/build@sha256:…`.
async fn pull(
    cx: &CellEnv<'_>,
    share: Option<Share<'_>>,
    snapshot: &str,
) -> Result<Option<String>, CellError> {
    let Some(sh) = share else { return Ok(None) };
    let got = sh
        .registries
        .pull_snapshot(cx.engine, sh.registry, snapshot)
        .await
        .map_err(registry_error)?;
    Ok(cx.events.fetched(got))
}

fn registry_error(e: crate::image::ImageError) -> CellError {
    match e {
        crate::image::ImageError::Engine(e) => CellError::Engine(e),
        e => CellError::Engine(crate::engine::EngineError::failed(
            "sharing a build snapshot",
            e.to_string(),
        )),
    }
}

/// `rocmatrix/build:<hash>` of the build's hash, the environment image's id
/// and the sources' commits and patches.
fn snapshot_tag(build: &Build, env_image_id: &str, sources: &[LockedSource]) -> String {
    let payload = serde_json::json!({
        "build": build.hash,
        "environment_image": env_image_id,
        "sources": sources,
    });
    // 32 hex digits, as environment images are named.
    let hash = crate::digest::sha256_hex(payload.to_string().as_bytes());
    format!("{}:{}", build.kind.repository().0, &hash[..32])
}

/// `ROCMATRIX_BUILD` and the `per` values, as cells get their values.
fn build_env(build: &Build) -> Vec<String> {
    let mut env = vec![format!("ROCMATRIX_BUILD={}", build.key)];
    if build.kind == crate::plan::build::BuildKind::LlvmDebug {
        // Committed into the snapshot's config: its tools come first.
        env.push(format!("PATH={}", crate::plan::toolchain::PATH));
    }
    for (k, v) in &build.values {
        env.push(format!(
            "ROCMATRIX_{}={v}",
            crate::step::protocol::env_key(k)
        ));
    }
    env
}

/// Runs the build's steps in order; the first that fails (unless it may)
/// stops the build. Returns the step records and, when the build failed,
/// its status and reason.
async fn run_steps(
    cx: &CellEnv<'_>,
    build: &Build,
    container: &str,
    dir: &Path,
) -> Result<(Vec<StepRecord>, Option<(RunStatus, String)>), CellError> {
    let steps = crate::step::backtrace::instrument_steps(&build.steps);
    upload_long_scripts(cx, container, &steps).await?;
    let mut records = Vec::with_capacity(steps.len());
    let mut verdict: Option<(RunStatus, String)> = None;
    let mut ooms_seen = 0;
    for (i, step) in steps.iter().enumerate() {
        let slug = step_slug(i, &step.name);
        let log_rel = format!("logs/{slug}.log");
        if let Some((_, why)) = &verdict {
            let (dir, name, why) = (dir.to_path_buf(), step.name.clone(), why.clone());
            records.push(
                blocking("writing a step log", move || {
                    not_run_step(&dir, i, &name, why)
                })
                .await??,
            );
            continue;
        }
        let t = Instant::now();
        let path: PathBuf = dir.join(&log_rel);
        let create = path.clone();
        let mut log = blocking("creating a step log", move || StepLog::create(&create))
            .await?
            .map_err(|e| CellError::io(&path, e))?;
        let cmd = clock::clocked(&slug, &step.name, step_command(&slug, &step.run));
        let outcome = cx
            .engine
            .exec(
                container,
                cmd,
                Vec::new(),
                &mut |b: &[u8]| log.write(b),
                Some(step.timeout),
            )
            .await?;
        let outcome = clock::settle(cx.engine, container, &slug, step, outcome, &mut log).await;
        let (status, exit_code, reason) = judge_exec(
            cx.engine,
            container,
            outcome,
            step,
            &mut log,
            &mut ooms_seen,
            Some(HangAt {
                index: i,
                cell_dir: dir,
            }),
        )
        .await?;
        let tail = blocking("closing a step log", move || log.finish())
            .await?
            .map_err(|e| CellError::io(&dir.join(&log_rel), e))?;
        let secs = t.elapsed().as_secs_f64();
        cx.events.emit(Event::BuildStepFinished {
            build: build.key.clone(),
            step: step.name.clone(),
            status,
            exit_code,
            secs,
        });
        if let Some(stop) = stops_the_build(step, status, reason.as_deref()) {
            verdict = Some(stop);
        }
        records.push(StepRecord {
            name: step.name.clone(),
            status,
            exit_code,
            duration_secs: secs,
            log: log_rel,
            reason,
            log_tail: tail,
            backtrace: None,
            package: None,
        });
    }
    if verdict.is_some() {
        collect_backtraces(cx, build, &steps, container, dir, &mut records).await?;
    }
    Ok((records, verdict))
}

/// The build's status and reason when a step that ended with `status`
/// stops it: any ending but a pass, except a failure the step may have.
fn stops_the_build(
    step: &crate::plan::Step,
    status: RunStatus,
    reason: Option<&str>,
) -> Option<(RunStatus, String)> {
    if status == RunStatus::Passed || (status == RunStatus::Failed && step.continue_on_error) {
        return None;
    }
    // Exit 77 means nothing to a build: it did not make what cells need.
    let status = match status {
        RunStatus::Skipped => RunStatus::Failed,
        s => s,
    };
    let why = format!("step `{}`: {}", step.name, reason.unwrap_or_default());
    Some((status, why))
}

/// The backtraces of a failed build's steps (`backtrace:`, as a cell's
/// steps get them) into their records; what cannot be read is a warning.
async fn collect_backtraces(
    cx: &CellEnv<'_>,
    build: &Build,
    steps: &[crate::plan::Step],
    container: &str,
    dir: &Path,
    records: &mut [StepRecord],
) -> Result<(), CellError> {
    let mut messages = Vec::new();
    crate::step::backtrace::collect(cx, steps, container, dir, records, &mut messages).await?;
    for m in messages {
        tracing::warn!("build `{}`: {m}", build.key);
    }
    Ok(())
}

/// A build step's backtrace in a cell whose build failed: its gdb output
/// linked into the cell's directory as `backtraces/build-<file>`, where the
/// record then points.
fn linked_backtrace(
    build_dir: &Path,
    cell_dir: &Path,
    s: &StepRecord,
) -> Result<Option<crate::store::record::Backtrace>, CellError> {
    let Some(bt) = &s.backtrace else {
        return Ok(None);
    };
    let from = build_dir.join(&bt.artifact);
    let Some(file) = Path::new(&bt.artifact).file_name() else {
        return Ok(Some(bt.clone()));
    };
    let artifact = crate::store::layout::backtrace_of(&format!(
        "build-{}",
        file.to_string_lossy().trim_end_matches(".txt")
    ));
    let to = cell_dir.join(&artifact);
    if from.is_file() {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| CellError::io(parent, e))?;
        }
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).map_err(|e| CellError::io(&to, e))?;
        }
    }
    Ok(Some(crate::store::record::Backtrace {
        artifact,
        ..bt.clone()
    }))
}

/// The record of a cell whose build failed: the build's steps (their logs
/// linked into the cell's directory), the cell's own steps not run, and
/// "build `<key>` failed: …" as the reason.
pub fn failed_cell_record(
    store_dir: &Path,
    cell: &crate::plan::Cell,
    built: &Built,
) -> Result<crate::store::record::CellRecord, CellError> {
    let b = &built.record;
    let cell_dir = store_dir.join("cells").join(&cell.id);
    let _ = std::fs::remove_dir_all(&cell_dir);
    let logs = cell_dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| CellError::io(&logs, e))?;
    let build_dir = crate::store::layout::build_dir(store_dir, &b.key);
    let reason = built.failure();
    let mut steps = Vec::new();
    for s in &b.steps {
        let name = format!("build-{}", s.log.trim_start_matches("logs/"));
        let to = logs.join(&name);
        let from = build_dir.join(&s.log);
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).map_err(|e| CellError::io(&to, e))?;
        }
        steps.push(StepRecord {
            name: format!("build: {}", s.name),
            log: format!("logs/{name}"),
            backtrace: linked_backtrace(&build_dir, &cell_dir, s)?,
            ..s.clone()
        });
    }
    for (i, s) in cell.steps.iter().enumerate() {
        steps.push(not_run_step(&cell_dir, i, &s.name, reason.clone())?);
    }
    let status = match b.status {
        RunStatus::Passed | RunStatus::Skipped => RunStatus::Failed,
        other => other,
    };
    Ok(crate::store::record::CellRecord {
        id: cell.id.clone(),
        values: cell.values.iter().cloned().collect(),
        hash: cell.hash.clone(),
        environment_hash: cell.environment_hash.clone(),
        image: Some(b.environment_image.clone()),
        status,
        reason: Some(reason),
        started: b.started.clone(),
        finished: now_rfc3339(),
        duration_secs: 0.0,
        attempts: 1,
        steps,
        junit: Vec::new(),
        messages: Vec::new(),
        sources: b.sources.clone(),
        devices: Vec::new(),
        build: Some(b.key.clone()),
        host: Default::default(),
    })
}
