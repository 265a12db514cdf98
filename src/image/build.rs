//! Environment images: render the family template, build it from a tar
//! context, tag it `rocmatrix/env:<hash of the recipe>`; an existing tag is
//! reused, so a warm cache builds nothing.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use super::{BaseImage, Family, ImageError};
use crate::engine::{Engine, LABEL_BUILDER, LABEL_KIND};
use crate::plan::{Environment, Llvm};
pub use crate::store::lock::EnvImage;

/// Repository of environment images.
pub const ENV_REPO: &str = "rocmatrix/env";
/// Repository of snapshots: images kept on purpose across runs and
/// `images --prune` (debug-LLVM environments, cells committed after a step).
pub const SNAPSHOT_REPO: &str = "rocmatrix/snapshot";

/// The rendered recipe of an environment: its Containerfile, any extra
/// context files, and the tag derived from them and the base image id.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub containerfile: String,
    pub files: Vec<(String, String)>,
    pub tag: String,
}

/// Renders the recipe for `env` on `base`.
pub fn recipe(
    family: &Family,
    env: &Environment,
    env_hash: &str,
    base: &BaseImage,
) -> Result<Recipe, ImageError> {
    let containerfile = family
        .containerfile(env, &base.reference, env_hash)
        .map_err(|e| ImageError::Recipe {
            env: crate::digest::short(env_hash).to_string(),
            message: e.to_string(),
        })?;
    let mut files = Vec::new();
    if let Llvm::Source(src) = &env.llvm {
        let script = family
            .llvm_source_script(src)
            .map_err(|e| ImageError::Recipe {
                env: crate::digest::short(env_hash).to_string(),
                message: e.to_string(),
            })?;
        files.push(("llvm-source.sh".to_string(), script));
    }
    if let Some(setup) = &env.setup {
        files.push(("setup.sh".to_string(), setup.clone()));
    }
    let mut material = format!("{containerfile}\0{}\0", base.id);
    for (name, text) in &files {
        material.push_str(&format!("{name}\0{text}\0"));
    }
    let hash = crate::digest::sha256_hex(material.as_bytes());
    // A debug-LLVM environment is expensive to make and is kept as a named
    // snapshot, shared by every cell that names it.
    let tag = match env.llvm {
        Llvm::Debug => format!("{SNAPSHOT_REPO}:llvm-debug-{}", &hash[..32]),
        Llvm::Release | Llvm::Source(_) => format!("{ENV_REPO}:{}", &hash[..32]),
    };
    Ok(Recipe {
        containerfile,
        files,
        tag,
    })
}

/// Builds the image for `recipe` unless its tag exists. Build output is
/// written to `log`. With `proxy` (the package cache,
/// [`super::aptcache`]), the build's downloads go through it: `http_proxy`
/// is a build argument, in no layer and no config of the image.
pub async fn ensure_env_image(
    engine: &Engine,
    recipe: &Recipe,
    env_hash: &str,
    base: &BaseImage,
    network_mode: Option<&str>,
    proxy: Option<&str>,
    log: &Path,
) -> Result<EnvImage, ImageError> {
    // Another process building this tag: wait for it, then reuse its image.
    let cache = crate::dirs::cache_dir();
    let _lock = super::build_lock::acquire(&cache, &recipe.tag, |path| {
        tracing::warn!(
            "{}: another rocmatrix process is building it (lock {}); waiting",
            recipe.tag,
            path.display()
        )
    })
    .await
    .map_err(|e| ImageError::io(&super::build_lock::lock_path(&cache, &recipe.tag), e))?;
    if let Some(img) = engine.image(&recipe.tag).await? {
        return Ok(EnvImage {
            tag: recipe.tag.clone(),
            id: img.id,
            reused: true,
            pulled: false,
            registry: None,
        });
    }
    let context = context_tar(recipe).map_err(|e| ImageError::io(log, e))?;
    if let Some(dir) = log.parent() {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| ImageError::io(dir, e))?;
    }
    let mut file = tokio::fs::File::create(log)
        .await
        .map_err(|e| ImageError::io(log, e))?
        .into_std()
        .await;
    let _ = writeln!(
        file,
        "# {}\n{}\n# package cache: {}\n# build output:",
        recipe.tag,
        recipe.containerfile,
        proxy.unwrap_or("none")
    );
    let kind = if recipe.tag.starts_with(SNAPSHOT_REPO) {
        "snapshot"
    } else {
        "env"
    };
    let mut labels = HashMap::from([
        (LABEL_KIND.to_string(), kind.to_string()),
        ("rocmatrix.env".to_string(), env_hash.to_string()),
        ("rocmatrix.base".to_string(), base.reference.clone()),
        ("rocmatrix.base.id".to_string(), base.id.clone()),
    ]);
    // The base's `--label` labels are its maker's, not this build's.
    let from = engine.image(&base.id).await?.map(|i| i.labels);
    labels.extend(crate::engine::labels::handed_down(
        &from.unwrap_or_default(),
        engine.extra_labels(),
    ));
    let mut sink = |line: &str| {
        let _ = file.write_all(line.as_bytes());
    };
    let id = engine
        .build(
            context,
            &recipe.tag,
            labels,
            network_mode,
            &proxy.map(super::aptcache::proxy_vars).unwrap_or_default(),
            &mut sink,
        )
        .await
        .map_err(|e| match e {
            crate::engine::EngineError::Failed { action, message } => {
                crate::engine::EngineError::Failed {
                    action,
                    message: format!("{message}\n(full build log: {})", log.display()),
                }
            }
            other => other,
        })?;
    Ok(EnvImage {
        tag: recipe.tag.clone(),
        id,
        reused: false,
        pulled: false,
        registry: None,
    })
}

/// `containerfile` as sent to the engine: a `LABEL` after the `FROM` marks
/// every intermediate container of the build with its owner, and one at the
/// end empties it again, so the image (and containers made from it) carry
/// no owner. Only the build context changes: the tag is the recipe's hash.
fn owned_containerfile(containerfile: &str) -> String {
    let owner = format!(
        "{}/{}",
        crate::engine::labels::hostname(),
        std::process::id()
    );
    let mut out = String::with_capacity(containerfile.len() + 128);
    let mut labelled = false;
    for line in containerfile.lines() {
        out.push_str(line);
        out.push('\n');
        if !labelled && line.trim_start().to_ascii_uppercase().starts_with("FROM ") {
            out.push_str(&format!("LABEL {LABEL_BUILDER}=\"{owner}\"\n"));
            labelled = true;
        }
    }
    if labelled {
        out.push_str(&format!("LABEL {LABEL_BUILDER}=\"\"\n"));
    }
    out
}

fn context_tar(recipe: &Recipe) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut add = |name: &str, text: &str| -> std::io::Result<()> {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        b.append_data(&mut h, name, text.as_bytes())
    };
    add("Containerfile", &owned_containerfile(&recipe.containerfile))?;
    for (name, text) in &recipe.files {
        add(name, text)?;
    }
    b.into_inner()
}
