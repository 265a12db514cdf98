//! `rocmatrix images [--prune] [--caches]`: the images rocmatrix made (by
//! label) — environments, build stages, base images, snapshots — with sizes
//! and last use; with `--caches` also the cache volumes (`cache:`).
//!
//! `--label KEY=VALUE` (the global option that labels what rocmatrix makes)
//! limits both the list and the pruning to images carrying those labels, so
//! a CI job or a test run removes only what it made. Pruning never removes
//! an image that a `lock.json` of a run names — a run under `--out` or
//! under any other run root of this machine (another checkout, another CI
//! job on the same runner, [`crate::store::roots`]): those are the images
//! `repro`, `shell` and `export` of a kept run start from; nor one that a
//! running run holds. It says what it keeps and why, and the list shows
//! which run roots (or running runs) use each image.
//! `--prune --downloads` also empties the package download cache.
//! `--prune` first removes the containers that dead runs and interrupted
//! image builds of this host left (the sweep a run does when it starts).

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;

use crate::engine::LABEL_KIND;
use crate::error::{Error, ExitCode};
use crate::spec::parse_duration;

#[derive(Debug, Args)]
pub struct ImagesArgs {
    /// Remove environment and build-stage images (snapshots and base
    /// images are kept).
    #[arg(long)]
    pub prune: bool,
    /// With --prune: remove snapshots too (cells committed after a step,
    /// debug LLVM built from source), unless a lock names them.
    #[arg(long, requires = "prune")]
    pub snapshots: bool,
    /// With --prune: remove base images too.
    #[arg(long, requires = "prune")]
    pub bases: bool,
    /// List the cache volumes (`cache:`) too; with --prune, remove them
    /// (the engine keeps a volume a container still uses).
    #[arg(long)]
    pub caches: bool,
    /// With --prune: empty the package download cache too (the `.deb` files
    /// image builds and debootstrap share, `<cache>/downloads`).
    #[arg(long, requires = "prune")]
    pub downloads: bool,
    /// With --prune: only images not used for this long (e.g. 7d).
    #[arg(long, requires = "prune", value_name = "DURATION")]
    pub older_than: Option<String>,
    #[arg(long)]
    pub json: bool,
    /// Parent of `runs/`: images named by a lock.json of a run there are
    /// kept (as are those of every other run root this machine recorded).
    #[arg(long, default_value = crate::store::DEFAULT_OUT, value_name = "DIR")]
    pub out: std::path::PathBuf,
}

struct Row {
    kind: String,
    tag: String,
    id: String,
    size: i64,
    created: i64,
    last_use: Option<String>,
    /// A cache volume, not an image: `tag` and `id` are its name.
    volume: bool,
    /// Who still needs it: the first lock naming it, or a running run.
    user: Option<String>,
}

pub fn run(args: ImagesArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let older_than = match &args.older_than {
        Some(d) => Some(parse_duration(d).map_err(|e| Error::Usage(format!("--older-than: {e}")))?),
        None => None,
    };
    let users = users(&args.out);
    cx.runtime.block_on(async {
        let engine = cx.engine().await?;
        let mut rows = rows(&engine, &users).await?;
        if args.caches {
            rows.extend(cache_rows(&engine).await?);
        }
        let text = if args.prune {
            prune(&engine, &rows, &args, older_than).await
        } else if args.json {
            json(&rows)
        } else {
            table(&rows)
        };
        super::write_out(out, &text)?;
        Ok::<_, Error>(())
    })?;
    if args.prune && args.downloads {
        let dir = crate::image::aptcache::dir();
        let (files, bytes) = crate::image::aptcache::clear(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        super::write_out(
            out,
            &format!(
                "emptied the package download cache {} ({files} files, {})\n",
                dir.display(),
                mb(bytes as i64)
            ),
        )?;
    }
    Ok(ExitCode::Success)
}

/// The images rocmatrix made that carry this invocation's `--label`s, by
/// kind and tag, with their last use.
async fn rows(
    engine: &crate::engine::Engine,
    users: &BTreeMap<String, String>,
) -> Result<Vec<Row>, Error> {
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
async fn cache_rows(engine: &crate::engine::Engine) -> Result<Vec<Row>, Error> {
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
async fn prune(
    engine: &crate::engine::Engine,
    rows: &[Row],
    args: &ImagesArgs,
    older_than: Option<std::time::Duration>,
) -> String {
    let now = std::time::SystemTime::now();
    // First the containers of dead runs and builds: they hold images.
    let mut removed = match crate::run::sweep::sweep_orphans(engine).await {
        Ok(lines) => lines,
        Err(e) => {
            eprintln!("could not sweep containers of dead runs: {e}");
            Vec::new()
        }
    };
    let swept = removed.len();
    for r in rows {
        if let Some(user) = &r.user {
            eprintln!("kept {} {}: {user}", r.kind, r.tag);
            continue;
        }
        let wanted = match r.kind.as_str() {
            "env" | "build" => true,
            // An LLVM built from source took most of an hour: kept like
            // a snapshot.
            "snapshot" | "llvm-debug" => args.snapshots,
            "base" => args.bases,
            "cache" => args.caches,
            _ => false,
        };
        if wanted && r.volume && idle_for(r, now, older_than) {
            match engine.remove_volume(&r.id).await {
                Ok(()) => removed.push(format!("removed cache {}", r.tag)),
                Err(e) => eprintln!("kept cache {}: {e}", r.tag),
            }
        } else if wanted && idle_for(r, now, older_than) {
            // By id: an image pushed to a registry also has the registry's
            // name, and removing one name would only untag it.
            match engine.remove_image(&r.id).await {
                Ok(()) => removed.push(format!("removed {} {} ({})", r.kind, r.tag, mb(r.size))),
                Err(e) => eprintln!("kept {} {}: {e}", r.kind, r.tag),
            }
        }
    }
    let kept = rows.len() - (removed.len() - swept);
    let mut text = removed.join("\n");
    text.push_str(&format!("\n{} removed, {kept} kept\n", removed.len()));
    text.trim_start().to_string()
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

fn json(rows: &[Row]) -> String {
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

fn table(rows: &[Row]) -> String {
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

fn mb(bytes: i64) -> String {
    if bytes < 0 {
        return "-".into();
    }
    format!("{:.0} MB", bytes as f64 / 1e6)
}

/// Who needs each image still: a running run's hold (`running run, pid
/// N`), else the first lock naming it (`named by PATH`), of a run under
/// `out` or under any run root this machine recorded.
fn users(out: &std::path::Path) -> BTreeMap<String, String> {
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
