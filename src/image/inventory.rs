//! The images and cache volumes rocmatrix made, as `rocmatrix images`
//! lists and prunes them: each by kind and tag with its size, last use and
//! who still needs it (a running run's hold, or a run's `lock.json` under
//! any run root of this machine), and the pruning that keeps those.

use std::collections::BTreeMap;

use crate::engine::{Engine, EngineError, LABEL_KIND};

/// One image or cache volume.
pub struct Row {
    pub kind: String,
    pub tag: String,
    pub id: String,
    pub size: i64,
    pub created: i64,
    pub last_use: Option<String>,
    /// A cache volume, not an image: `tag` and `id` are its name.
    pub volume: bool,
    /// Who still needs it: the first lock naming it, or a running run.
    pub user: Option<String>,
}

/// What `--prune` removes besides environment and build-stage images.
#[derive(Debug, Clone, Copy, Default)]
pub struct PruneWhat {
    /// Snapshots and debug LLVM built from source.
    pub snapshots: bool,
    pub bases: bool,
    /// Cache volumes.
    pub caches: bool,
}

/// The images rocmatrix made that carry this invocation's `--label`s, by
/// kind and tag, with their last use.
pub async fn rows(
    engine: &Engine,
    users: &BTreeMap<String, String>,
) -> Result<Vec<Row>, EngineError> {
    let uses = crate::store::usage::load();
    let mut rows: Vec<Row> = engine
        .images_with_label(LABEL_KIND)
        .await?
        .into_iter()
        .filter(|i| {
            engine
                .extra_labels()
                .iter()
                .all(|(k, v)| i.labels.get(k) == Some(v))
        })
        .map(|i| {
            let tags: Vec<String> = i
                .tags
                .iter()
                .filter(|t| *t != "<none>:<none>")
                .cloned()
                .collect();
            // Its own name (`rocmatrix/env:…`) before the names it was
            // pushed to a registry under (`host/…/env:…`).
            let tag = tags
                .iter()
                .find(|t| t.starts_with("rocmatrix/") || t.starts_with("debian:"))
                .or(tags.first())
                .cloned()
                .unwrap_or_else(|| i.id.clone());
            Row {
                kind: i.labels.get(LABEL_KIND).cloned().unwrap_or_default(),
                last_use: uses.get(&tag).cloned(),
                user: tags.iter().find_map(|t| users.get(t)).cloned(),
                tag,
                id: i.id,
                size: i.size,
                created: i.created,
                volume: false,
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.kind, &a.tag).cmp(&(&b.kind, &b.tag)));
    Ok(rows)
}

/// The cache volumes that carry this invocation's `--label`s, by name.
pub async fn cache_rows(engine: &Engine) -> Result<Vec<Row>, EngineError> {
    let mut rows: Vec<Row> = engine
        .volumes_with_label(&format!("{LABEL_KIND}=cache"))
        .await?
        .into_iter()
        .filter(|v| {
            engine
                .extra_labels()
                .iter()
                .all(|(k, val)| v.labels.get(k) == Some(val))
        })
        .map(|v| Row {
            kind: "cache".into(),
            tag: v.name.clone(),
            id: v.name,
            size: -1,
            created: v
                .created
                .as_deref()
                .and_then(|t| humantime::parse_rfc3339_weak(t.get(..19).unwrap_or(t)).ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs() as i64),
            last_use: None,
            volume: true,
            user: None,
        })
        .collect();
    rows.sort_by(|a, b| a.tag.cmp(&b.tag));
    Ok(rows)
}

/// Removes the environment images among `rows` (snapshots and bases when
/// asked), idle for `older_than` if given, that no lock names.
pub async fn prune(
    engine: &Engine,
    rows: &[Row],
    what: PruneWhat,
    older_than: Option<std::time::Duration>,
) -> String {
    let now = std::time::SystemTime::now();
    // First the containers of dead runs and builds: they hold images.
    let mut removed = match crate::stop::sweep::sweep_orphans(engine).await {
        Ok(lines) => lines,
        Err(e) => {
            eprintln!("could not sweep containers of dead runs: {e}");
            Vec::new()
        }
    };
    let swept = removed.len();
    let mut pending: Vec<&Row> = Vec::new();
    for r in rows {
        if let Some(user) = &r.user {
            eprintln!("kept {} {}: {user}", r.kind, r.tag);
            continue;
        }
        let wanted = match r.kind.as_str() {
            "env" | "build" => true,
            // An LLVM built from source took most of an hour: kept like
            // a snapshot.
            "snapshot" | "llvm-debug" => what.snapshots,
            "base" => what.bases,
            "cache" => what.caches,
            _ => false,
        };
        if wanted && idle_for(r, now, older_than) {
            pending.push(r);
        }
    }
    // The engine refuses to remove an image that another is built on
    // (a base under its environments, an environment under its snapshots
    // and debug LLVM toolchains): whatever it refused is tried again once
    // something else went, until a pass removes nothing.
    let mut refused: Vec<(&Row, EngineError)> = Vec::new();
    loop {
        let before = removed.len();
        for r in pending.drain(..) {
            match remove(engine, r).await {
                Ok(line) => removed.push(line),
                Err(e) => refused.push((r, e)),
            }
        }
        if refused.is_empty() || removed.len() == before {
            break;
        }
        pending = refused.drain(..).map(|(r, _)| r).collect();
    }
    for (r, e) in refused {
        let why = match (
            e.to_string().contains("dependent child images"),
            what.snapshots,
        ) {
            (false, _) => "",
            (true, true) => " (an image built on it is kept)",
            (true, false) => {
                " (an image built on it is kept: a snapshot or a debug LLVM, which \
                 `--snapshots` removes too)"
            }
        };
        eprintln!("kept {} {}: {e}{why}", r.kind, r.tag);
    }
    let kept = rows.len() - (removed.len() - swept);
    let mut text = removed.join("\n");
    text.push_str(&format!("\n{} removed, {kept} kept\n", removed.len()));
    text.trim_start().to_string()
}

/// Removes `r` (an image by id, or a cache volume), and says so.
async fn remove(engine: &Engine, r: &Row) -> Result<String, EngineError> {
    if r.volume {
        engine.remove_volume(&r.id).await?;
        return Ok(format!("removed cache {}", r.tag));
    }
    // By id: an image pushed to a registry also has the registry's name,
    // and removing one name would only untag it.
    engine.remove_image(&r.id).await?;
    Ok(format!("removed {} {} ({})", r.kind, r.tag, mb(r.size)))
}

/// Whether `r` was last used (or, never used, created) at least `limit` ago.
fn idle_for(r: &Row, now: std::time::SystemTime, limit: Option<std::time::Duration>) -> bool {
    limit.is_none_or(|limit| {
        let last = r
            .last_use
            .as_deref()
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .unwrap_or(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(r.created.max(0) as u64),
            );
        now.duration_since(last).is_ok_and(|idle| idle >= limit)
    })
}

/// The rows as `images --json` prints them.
pub fn json(rows: &[Row]) -> String {
    let v: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "kind": r.kind, "tag": r.tag, "id": r.id, "size": r.size,
                "created": r.created, "last_use": r.last_use, "used_by": r.user,
            })
        })
        .collect();
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// The rows as `images` prints them.
pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<9} {:<62} {:>9}  {:<20}  {}\n",
        "kind", "image", "size", "last use", "used by"
    );
    for r in rows {
        s.push_str(&format!(
            "{:<9} {:<62} {:>9}  {:<20}  {}\n",
            r.kind,
            r.tag,
            mb(r.size),
            r.last_use.as_deref().unwrap_or("-"),
            r.user.as_deref().unwrap_or("-")
        ));
    }
    s
}

/// Bytes in MB, `-` when unknown.
pub fn mb(bytes: i64) -> String {
    if bytes < 0 {
        return "-".into();
    }
    format!("{:.0} MB", bytes as f64 / 1e6)
}

/// Who needs each image still: a running run's hold (`running run, pid
/// N`), else the first lock naming it (`named by PATH`), of a run under
/// `out` or under any run root this machine recorded.
pub fn users(out: &std::path::Path) -> BTreeMap<String, String> {
    let mut users = BTreeMap::new();
    for hold in crate::store::roots::live_holds() {
        let root = hold
            .out
            .as_deref()
            .map(|o| format!(" writing to {}", o.display()))
            .unwrap_or_default();
        for tag in hold.images {
            users
                .entry(tag)
                .or_insert_with(|| format!("held by a running run (pid {}){root}", hold.pid));
        }
    }
    let here = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
    let here = here.canonicalize().unwrap_or(here);
    let mut roots = vec![here.clone()];
    roots.extend(
        crate::store::roots::roots()
            .into_iter()
            .filter(|r| *r != here),
    );
    for root in roots {
        for (tag, lock) in images_named_by_locks(&root.join("runs")) {
            users
                .entry(tag)
                .or_insert_with(|| format!("named by {}", lock.display()));
        }
    }
    users
}

/// Image tags (environments and bases) that a `lock.json` of a run under
/// `runs` names, with the first lock naming each. Unreadable locks are
/// skipped with a warning: they protect nothing, and pruning goes on.
fn images_named_by_locks(runs: &std::path::Path) -> BTreeMap<String, std::path::PathBuf> {
    let mut named = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(runs) else {
        return named;
    };
    let mut locks: Vec<_> = rd
        .filter_map(|e| e.ok().map(|e| crate::store::layout::lock_of(&e.path())))
        .filter(|p| p.is_file())
        .collect();
    locks.sort();
    for path in locks {
        match crate::store::lock::Lock::load(&path) {
            Ok(lock) => {
                for env in lock.environments.values() {
                    for tag in [&env.image.tag, &env.base.reference] {
                        named.entry(tag.clone()).or_insert_with(|| path.clone());
                    }
                }
                for build in lock.builds.values() {
                    named
                        .entry(build.snapshot.clone())
                        .or_insert_with(|| path.clone());
                }
            }
            Err(e) => tracing::warn!("{e}: it protects no image from pruning"),
        }
    }
    named
}
