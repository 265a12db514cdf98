//! Images to and from a registry: pull and push with the Docker config's
//! credentials ([`super::auth`]), each answering with the registry digest
//! (`sha256:…`) the engine reports; tagging.

use std::time::Duration;

use bollard::query_parameters::{CreateImageOptions, PushImageOptions, TagImageOptions};
use futures_util::StreamExt;

use super::image::split_reference;
use super::{auth, Engine, EngineError};

/// Why a registry transfer did not happen.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The registry answered that it has no such tag or repository.
    #[error("{reference} is not in the registry")]
    Missing { reference: String },
    #[error(transparent)]
    Auth(#[from] auth::AuthError),
    /// Anything else: unreachable, refused, denied, timed out.
    #[error("{0}")]
    Failed(String),
}

/// `transfer`'s result, or a failure when nothing answered within `limit`.
async fn within<T>(
    limit: Duration,
    transfer: impl std::future::Future<Output = Result<T, TransferError>>,
) -> Result<T, TransferError> {
    tokio::time::timeout(limit, transfer)
        .await
        .unwrap_or_else(|_| {
            Err(TransferError::Failed(format!(
                "no answer within {} s",
                limit.as_secs()
            )))
        })
}

impl Engine {
    /// Pulls `reference` (`repo:tag`) and returns its registry digest.
    pub async fn pull_digest(
        &self,
        reference: &str,
        limit: Duration,
    ) -> Result<String, TransferError> {
        let creds = auth::credentials(auth::registry_host(reference))?;
        let (image, tag) = split_reference(reference);
        let opts = CreateImageOptions {
            from_image: Some(image.to_string()),
            tag: Some(tag.to_string()),
            ..Default::default()
        };
        let pull = async {
            let mut s = self.docker().create_image(Some(opts), None, creds);
            let mut digest = None;
            while let Some(item) = s.next().await {
                let info = item.map_err(|e| classify(reference, stream_message(e)))?;
                if let Some(m) = info.error_detail.and_then(|d| d.message) {
                    return Err(classify(reference, m));
                }
                if let Some(d) = info
                    .status
                    .as_deref()
                    .and_then(|s| s.strip_prefix("Digest: "))
                {
                    digest = Some(d.trim().to_string());
                }
            }
            Ok(digest)
        };
        let digest = within(limit, pull).await?;
        match digest {
            Some(d) => Ok(d),
            None => self.repo_digest(reference).await?.ok_or_else(|| {
                TransferError::Failed(format!("the engine reported no digest for {reference}"))
            }),
        }
    }

    /// Pushes `reference` (`repo:tag`, present in the engine) and returns
    /// the registry digest of what was pushed.
    pub async fn push_digest(
        &self,
        reference: &str,
        limit: Duration,
    ) -> Result<String, TransferError> {
        let creds = auth::credentials(auth::registry_host(reference))?;
        let (image, tag) = split_reference(reference);
        let opts = PushImageOptions {
            tag: Some(tag.to_string()),
            ..Default::default()
        };
        let push = async {
            let mut s = self.docker().push_image(image, Some(opts), creds);
            let mut digest = None;
            while let Some(item) = s.next().await {
                let info = item.map_err(|e| TransferError::Failed(stream_message(e)))?;
                if let Some(m) = info.error_detail.and_then(|d| d.message) {
                    return Err(TransferError::Failed(m));
                }
                // "<tag>: digest: sha256:… size: 1234"
                if let Some(rest) = info
                    .status
                    .as_deref()
                    .and_then(|s| s.split_once("digest: "))
                {
                    digest = rest.1.split_whitespace().next().map(str::to_string);
                }
            }
            Ok(digest)
        };
        within(limit, push).await?.ok_or_else(|| {
            TransferError::Failed(format!("the engine reported no digest for {reference}"))
        })
    }

    /// Tags image `source` as `target` (`repo:tag`).
    pub async fn tag(&self, source: &str, target: &str) -> Result<(), EngineError> {
        let (repo, tag) = split_reference(target);
        let opts = TagImageOptions {
            repo: Some(repo.to_string()),
            tag: Some(tag.to_string()),
        };
        use super::Context;
        self.docker()
            .tag_image(source, Some(opts))
            .await
            .doing(|| format!("tagging {source} as {target}"))
    }

    /// The digest under which the image `reference` is known in its own
    /// repository (its `RepoDigests`), if it came from or went to one.
    pub async fn repo_digest(&self, reference: &str) -> Result<Option<String>, TransferError> {
        let (repo, _) = split_reference(reference);
        match self.docker().inspect_image(reference).await {
            Ok(i) => Ok(i.repo_digests.unwrap_or_default().iter().find_map(|d| {
                d.split_once('@')
                    .filter(|(r, _)| *r == repo)
                    .map(|(_, d)| d.to_string())
            })),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(TransferError::Failed(e.to_string())),
        }
    }
}

fn stream_message(e: bollard::errors::Error) -> String {
    match e {
        bollard::errors::Error::DockerStreamError { error } => error,
        bollard::errors::Error::DockerResponseServerError { message, .. } => message,
        other => other.to_string(),
    }
}

/// A missing tag or repository is a miss; anything else is a failure.
fn classify(reference: &str, message: String) -> TransferError {
    let m = message.to_lowercase();
    if m.contains("manifest unknown") || m.contains("name unknown") {
        TransferError::Missing {
            reference: reference.to_string(),
        }
    } else {
        TransferError::Failed(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_manifest_is_a_miss() {
        let m = "manifest for 127.0.0.1:5000/r/env:x not found: manifest unknown: manifest unknown";
        assert!(matches!(
            classify("r", m.into()),
            TransferError::Missing { .. }
        ));
        let m = "Get \"http://127.0.0.1:9/v2/\": dial tcp 127.0.0.1:9: connect: connection refused";
        assert!(matches!(classify("r", m.into()), TransferError::Failed(_)));
    }
}
