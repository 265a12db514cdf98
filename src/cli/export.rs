//! `rocmatrix export RUN CELL DIR`: a self-contained reproducer of one cell.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, ExitCode};
use crate::reproduce::export::BasePin;
use crate::store::RunStore;
use crate::store::DEFAULT_OUT;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The run (its directory, or its id under --out).
    pub run: PathBuf,
    /// The cell id.
    pub cell: String,
    /// Where to write the reproducer (created).
    pub dir: PathBuf,
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
}

pub fn run(args: ExportArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let store = RunStore::open(&args.run, &args.out)?;
    let e = crate::reproduce::export::export(&store, &args.cell, &args.dir, &registry_digests)?;
    let mut text = format!(
        "wrote a reproducer for {} to {}:\n",
        args.cell,
        e.dir.display()
    );
    for f in &e.files {
        text.push_str(&format!("  {f}\n"));
    }
    if !e.pinned {
        text.push_str(
            "note: the run has no lock for this environment; package versions are not pinned\n",
        );
    }
    text.push_str(&match &e.base {
        BasePin::Unpinned { reference } => {
            format!("base: {reference}, not pinned (the run has no lock)\n")
        }
        BasePin::Digest(r) => format!("base: pinned by digest, {r}\n"),
        BasePin::Id { reference, id } => format!(
            "base: {reference} with image id {id}; the engine knows no registry digest for it, run.sh checks the id\n"
        ),
        BasePin::Bootstrap { reference, .. } => format!(
            "base: {reference} was bootstrapped by the run; run.sh stops unless it is that bootstrap, make-base.sh makes it again\n"
        ),
        BasePin::Tarball { reference, .. } => format!(
            "base: {reference} was imported from a tarball; run.sh stops unless it is imported again\n"
        ),
    });
    text.push_str(&format!("run it with: {}/run.sh\n", e.dir.display()));
    super::write_out(out, &text)?;
    Ok(ExitCode::Success)
}

/// The registry digests the engine knows for an image id; none when the
/// engine cannot be reached or does not have it (the reproducer then checks
/// the image id instead).
fn registry_digests(id: &str) -> Vec<String> {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    rt.block_on(async {
        let Ok(engine) = crate::engine::Engine::connect().await else {
            return Vec::new();
        };
        match engine.image(id).await {
            Ok(Some(i)) => i.digests,
            _ => Vec::new(),
        }
    })
}
