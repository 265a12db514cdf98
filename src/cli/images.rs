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

use std::io::Write;

use clap::Args;

use crate::error::{Error, ExitCode};
use crate::image::inventory;
use crate::matrix_file::parse_duration;

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

pub fn run(args: ImagesArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let older_than = match &args.older_than {
        Some(d) => Some(parse_duration(d).map_err(|e| Error::Usage(format!("--older-than: {e}")))?),
        None => None,
    };
    let users = inventory::users(&args.out);
    cx.runtime.block_on(async {
        let engine = cx.engine().await?;
        let mut rows = inventory::rows(&engine, &users).await?;
        if args.caches {
            rows.extend(inventory::cache_rows(&engine).await?);
        }
        let text = if args.prune {
            let what = inventory::PruneWhat {
                snapshots: args.snapshots,
                bases: args.bases,
                caches: args.caches,
            };
            inventory::prune(&engine, &rows, what, older_than).await
        } else if args.json {
            inventory::json(&rows)
        } else {
            inventory::table(&rows)
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
                inventory::mb(bytes as i64)
            ),
        )?;
    }
    Ok(ExitCode::Success)
}
