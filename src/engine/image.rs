//! Images: inspect, pull, import a root file system, build, list, remove.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use bollard::query_parameters::{
    BuildImageOptions, CreateImageOptions, ListImagesOptions, RemoveImageOptions,
};
use bollard::{body_full, body_try_stream};
use futures_util::StreamExt;

use super::{Context, Engine, EngineError, Flavour};

/// What rocmatrix needs to know about an image.
#[derive(Debug, Clone)]
pub struct ImageInfo {
    pub id: String,
    pub tags: Vec<String>,
    pub size: i64,
    /// Seconds since the epoch.
    pub created: i64,
    pub labels: HashMap<String, String>,
    /// `name@sha256:…` for each registry the engine pulled it from or
    /// pushed it to (`RepoDigests`); none for a local build or import.
    pub digests: Vec<String>,
}

impl Engine {
    /// The image named `reference`, or `None` when the engine has no such image.
    pub async fn image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        let action = || format!("looking for image {reference}");
        self.within(action, async {
            match self.docker().inspect_image(reference).await {
                Ok(i) => Ok(Some(ImageInfo {
                    id: i.id.unwrap_or_default(),
                    tags: self.docker_names(i.repo_tags.unwrap_or_default()),
                    size: i.size.unwrap_or_default(),
                    created: 0,
                    labels: i.config.and_then(|c| c.labels).unwrap_or_default(),
                    digests: i.repo_digests.unwrap_or_default(),
                })),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => Ok(None),
                Err(e) => Err(e).doing(action),
            }
        })
        .await
    }

    /// Pulls `reference`, giving up after `limit` (registries may be unreachable
    /// in ways that only time out).
    pub async fn pull(&self, reference: &str, limit: Duration) -> Result<(), EngineError> {
        let (image, tag) = split_reference(reference);
        let opts = CreateImageOptions {
            from_image: Some(image.to_string()),
            tag: Some(tag.to_string()),
            ..Default::default()
        };
        let pull = async {
            let mut s = self.docker().create_image(Some(opts), None, None);
            while let Some(item) = s.next().await {
                item.doing(|| format!("pulling {reference}"))?;
            }
            Ok(())
        };
        match tokio::time::timeout(limit, pull).await {
            Ok(r) => r,
            Err(_) => Err(EngineError::failed(
                format!("pulling {reference}"),
                format!("no result within {} s", limit.as_secs()),
            )),
        }
    }

    /// Imports a root file system tarball as image `reference` (the engine's
    /// "create image from source" call), applying Dockerfile `changes`.
    pub async fn import_rootfs(
        &self,
        tarball: &Path,
        reference: &str,
        mut changes: Vec<String>,
    ) -> Result<String, EngineError> {
        let action = || format!("importing {} as {reference}", tarball.display());
        let mut extra: Vec<_> = self.extra_labels().iter().collect();
        extra.sort();
        for (k, v) in extra {
            changes.push(format!("LABEL {k:?}={v:?}"));
        }
        let keys = super::labels::keys_of(self.extra_labels());
        changes.push(format!("LABEL {:?}={keys:?}", super::labels::LABEL_KEYS));
        let file = tokio::fs::File::open(tarball)
            .await
            .map_err(|e| EngineError::failed(action(), e.to_string()))?;
        if self.flavour() == Flavour::Podman {
            return self.import_rootfs_podman(file, reference, changes).await;
        }
        let (repo, tag) = split_reference(reference);
        let opts = CreateImageOptions {
            from_src: Some("-".into()),
            repo: Some(repo.to_string()),
            tag: Some(tag.to_string()),
            changes,
            ..Default::default()
        };
        let body = body_try_stream(file_chunks(file));
        let mut s = self.docker().create_image(Some(opts), Some(body), None);
        while let Some(item) = s.next().await {
            let info = item.doing(action)?;
            if let Some(err) = info.error_detail.and_then(|d| d.message) {
                return Err(EngineError::failed(action(), err));
            }
        }
        self.image(reference).await?.map(|i| i.id).ok_or_else(|| {
            EngineError::failed(action(), "the engine reports no such image afterwards")
        })
    }

    /// [`Self::import_rootfs`] on Podman (4.3), whose import differs from
    /// Docker's twice: it ignores `tag` (filing the image as
    /// `<repo>:latest`, taking that tag from whatever had it), and it reads
    /// each `changes` parameter as one instruction where bollard sends them
    /// all in one, newline-separated (so every label after the first became
    /// part of the first one's value). So the root file system is imported
    /// bare and untagged, and the changes are applied by a build of just
    /// `FROM <id>` and the changes, tagged `reference`; the bare import is
    /// removed again.
    async fn import_rootfs_podman(
        &self,
        file: tokio::fs::File,
        reference: &str,
        changes: Vec<String>,
    ) -> Result<String, EngineError> {
        let action = || format!("importing a root file system as {reference}");
        let opts = CreateImageOptions {
            from_src: Some("-".into()),
            ..Default::default()
        };
        let body = body_try_stream(file_chunks(file));
        let mut s = self.docker().create_image(Some(opts), Some(body), None);
        let mut bare = None;
        while let Some(item) = s.next().await {
            let info = item.doing(action)?;
            if let Some(err) = info.error_detail.and_then(|d| d.message) {
                return Err(EngineError::failed(action(), err));
            }
            bare = info
                .id
                .or(info.status)
                .filter(|s| s.starts_with("sha256:"))
                .or(bare);
        }
        let bare = bare.ok_or_else(|| {
            EngineError::failed(action(), "the engine did not say which image it made")
        })?;
        self.restyle(&bare, reference, &changes, HashMap::new())
            .await
    }

    /// Podman only: image `from` again as `reference`, with Dockerfile
    /// `instructions` and `labels` applied by a build of nothing but
    /// `FROM from` and them; `from` is removed afterwards (the new image
    /// shares its layers: only its record goes). Returns the new image's id.
    pub(super) async fn restyle(
        &self,
        from: &str,
        reference: &str,
        instructions: &[String],
        labels: HashMap<String, String>,
    ) -> Result<String, EngineError> {
        let containerfile = format!("FROM {from}\n{}\n", instructions.join("\n"));
        let context = one_file_tar("Containerfile", &containerfile).map_err(|e| {
            EngineError::failed(format!("making {reference} from {from}"), e.to_string())
        })?;
        let built = self
            .build(
                context,
                reference,
                labels,
                None,
                &HashMap::new(),
                &mut |_| {},
            )
            .await;
        let _ = self.remove_image(from).await;
        built
    }

    /// Builds an image from a tar build context, tagging it `tag`. Build output
    /// goes line by line to `log`. `build_args` are passed as `--build-arg`
    /// (the predefined proxy ones, `http_proxy`…, stay out of the image's
    /// history and config). Returns the image id.
    pub async fn build(
        &self,
        context: Vec<u8>,
        tag: &str,
        labels: HashMap<String, String>,
        network_mode: Option<&str>,
        build_args: &HashMap<String, String>,
        log: &mut (dyn FnMut(&str) + Send),
    ) -> Result<String, EngineError> {
        let action = || format!("building image {tag}");
        let opts = BuildImageOptions {
            dockerfile: "Containerfile".into(),
            t: Some(tag.to_string()),
            rm: true,
            forcerm: true,
            labels: Some(self.labelled(&labels)),
            networkmode: network_mode.map(str::to_string),
            buildargs: (!build_args.is_empty()).then(|| build_args.clone()),
            ..Default::default()
        };
        let mut s = self
            .docker()
            .build_image(opts, None, Some(body_full(context.into())));
        let mut last_lines: Vec<String> = Vec::new();
        let tagged = format!("Successfully tagged {tag}");
        let stall = super::deadline::build_stall();
        loop {
            // The stall timer: a build that prints nothing for `stall` is
            // cut (dropping the stream cancels it in the engine).
            let Ok(item) = tokio::time::timeout(stall, s.next()).await else {
                let why = format!(
                    "no output for {} s: the build stalled and was cut (ROCMATRIX_BUILD_STALL sets the limit)",
                    stall.as_secs()
                );
                log(&format!("error: {why}\n"));
                return Err(EngineError::failed(
                    action(),
                    tail_message(&why, &last_lines),
                ));
            };
            let Some(item) = item else { break };
            let info = match item {
                Ok(i) => i,
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    log(&format!("error: {error}\n"));
                    return Err(EngineError::failed(
                        action(),
                        tail_message(&error, &last_lines),
                    ));
                }
                // The engine said the build is done and the stream's end was
                // torn (seen on a loaded machine: "bytes remaining on
                // stream" after the last message): the image decides.
                Err(e) if last_lines.iter().any(|l| l.trim_end().ends_with(&tagged)) => {
                    log(&format!(
                        "warning: the build's stream ended badly after it was tagged: {e}\n"
                    ));
                    break;
                }
                Err(e) => return Err(e).doing(action),
            };
            if let Some(text) = info.stream.as_deref() {
                log(text);
                for l in text.lines().filter(|l| !l.trim().is_empty()) {
                    last_lines.push(l.to_string());
                    if last_lines.len() > 8 {
                        last_lines.remove(0);
                    }
                }
            }
            if let Some(err) = info.error_detail.and_then(|d| d.message) {
                log(&format!("error: {err}\n"));
                return Err(EngineError::failed(
                    action(),
                    tail_message(&err, &last_lines),
                ));
            }
        }
        self.image(tag)
            .await?
            .map(|i| i.id)
            .ok_or_else(|| EngineError::failed(action(), "the build ended without an image"))
    }

    /// Images carrying `label` (`key` or `key=value`).
    pub async fn images_with_label(&self, label: &str) -> Result<Vec<ImageInfo>, EngineError> {
        let opts = ListImagesOptions {
            filters: super::label_filter(label),
            ..Default::default()
        };
        let list = self
            .docker()
            .list_images(Some(opts))
            .await
            .doing(|| format!("listing images labelled {label}"))?;
        Ok(list
            .into_iter()
            .map(|i| ImageInfo {
                id: i.id,
                tags: self.docker_names(i.repo_tags),
                size: i.size,
                created: i.created,
                labels: i.labels,
                digests: i.repo_digests,
            })
            .collect())
    }

    /// Image names as Docker writes them. Podman qualifies Docker Hub
    /// names (`docker.io/library/debian:bookworm`, `docker.io/rocmatrix/env:…`)
    /// where Docker writes `debian:bookworm` and `rocmatrix/env:…`, the names
    /// rocmatrix records in locks and image use.
    fn docker_names(&self, tags: Vec<String>) -> Vec<String> {
        if self.flavour() != Flavour::Podman {
            return tags;
        }
        tags.into_iter()
            .map(|t| docker_name(&t).to_string())
            .collect()
    }

    pub async fn remove_image(&self, reference: &str) -> Result<(), EngineError> {
        let opts = RemoveImageOptions {
            force: true,
            ..Default::default()
        };
        self.docker()
            .remove_image(reference, Some(opts), None)
            .await
            .doing(|| format!("removing image {reference}"))?;
        Ok(())
    }
}

fn tail_message(err: &str, last: &[String]) -> String {
    if last.is_empty() {
        err.to_string()
    } else {
        format!("{err}; last output:\n  {}", last.join("\n  "))
    }
}

/// `name` without Podman's Docker Hub qualification.
fn docker_name(name: &str) -> &str {
    name.strip_prefix("docker.io/library/")
        .or_else(|| name.strip_prefix("docker.io/"))
        .unwrap_or(name)
}

/// Splits `repo:tag` (a registry port is not a tag).
pub fn split_reference(reference: &str) -> (&str, &str) {
    match reference.rfind(':') {
        Some(i) if !reference[i + 1..].contains('/') => (&reference[..i], &reference[i + 1..]),
        _ => (reference, "latest"),
    }
}

/// A tar archive holding one file, `name`, with `text`: a build context.
fn one_file_tar(name: &str, text: &str) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(text.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_cksum();
    b.append_data(&mut h, name, text.as_bytes())?;
    b.into_inner()
}

/// A file as a stream of 256 KiB chunks, for request bodies.
pub(crate) fn file_chunks(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    use tokio::io::AsyncReadExt;
    futures_util::stream::try_unfold(file, |mut f| async move {
        let mut buf = vec![0u8; 256 * 1024];
        let n = f.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.truncate(n);
        Ok(Some((bytes::Bytes::from(buf), f)))
    })
}

#[cfg(test)]
mod tests {
    use super::{docker_name, split_reference};

    #[test]
    fn writes_podman_names_as_docker_does() {
        assert_eq!(docker_name("docker.io/library/debian:sid"), "debian:sid");
        assert_eq!(
            docker_name("docker.io/rocmatrix/env:ab"),
            "rocmatrix/env:ab"
        );
        assert_eq!(docker_name("localhost:5000/x:1"), "localhost:5000/x:1");
        assert_eq!(docker_name("rocmatrix/env:ab"), "rocmatrix/env:ab");
    }

    #[test]
    fn splits_references() {
        assert_eq!(split_reference("debian:trixie"), ("debian", "trixie"));
        assert_eq!(split_reference("debian"), ("debian", "latest"));
        assert_eq!(split_reference("reg:5000/x"), ("reg:5000/x", "latest"));
        assert_eq!(split_reference("reg:5000/x:1"), ("reg:5000/x", "1"));
    }
}
