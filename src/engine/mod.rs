//! The only module that talks to the container engine (bollard).
//!
//! [`Engine`] wraps one connection to Docker or Podman's Docker-compatible
//! API. Every call is wrapped with what rocmatrix was doing, so an error reads
//! "building environment 3f2a…: …" rather than a bare HTTP status.

pub mod auth;
mod connect;
mod container;
mod deadline;
mod flavour;
mod image;
pub mod labels;
mod registry;
pub mod rootless;
mod volume;

use std::collections::HashMap;

use bollard::Docker;

pub use connect::Address;
pub use container::{Attached, ContainerSpec, ExecOutcome};
pub use deadline::{call_deadline, DEFAULT_DEADLINE_SECS};
pub use flavour::Flavour;
pub use image::{split_reference, ImageInfo};
pub use registry::TransferError;
pub use volume::VolumeInfo;

/// Label on everything rocmatrix creates, naming the run.
pub const LABEL_RUN: &str = "rocmatrix.run";
/// Label naming the cell a container runs.
pub const LABEL_CELL: &str = "rocmatrix.cell";
/// Label with the PID of the rocmatrix process that owns a container.
pub const LABEL_PID: &str = "rocmatrix.pid";
/// Label with the host name of that process (a PID means nothing elsewhere).
pub const LABEL_HOST: &str = "rocmatrix.host";
/// Label on images rocmatrix built or imported (`env`, `base`, `build` or
/// `snapshot`) and on its cache volumes (`cache`).
pub const LABEL_KIND: &str = "rocmatrix.kind";
/// Label on an image build's intermediate containers: the host and pid of
/// the rocmatrix process that builds (`host/pid`), so that the sweep of
/// dead runs removes what an interrupted build left; empty on the finished
/// image. Here, beside the other owner labels, so that the sweep
/// (`src/stop/`) needs nothing of `src/image/`.
pub const LABEL_BUILDER: &str = "rocmatrix.builder";

/// Label on a cache volume naming its key (`cache:`).
pub const LABEL_CACHE_KEY: &str = "rocmatrix.cache.key";

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot reach a container engine at {tried} ({reason}); start Docker or Podman's API socket, or set DOCKER_HOST (unix:///path/to.sock, tcp://host:2375, or tcp://host:2376 with DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH)")]
    Unreachable { tried: String, reason: String },
    #[error("{action}: {source}")]
    Api {
        action: String,
        #[source]
        source: bollard::errors::Error,
    },
    #[error("{action}: {message}")]
    Failed { action: String, message: String },
    /// The engine did not answer within the call's deadline.
    #[error("{action}: the engine at {address} has not answered for {secs} s")]
    Stalled {
        action: String,
        address: String,
        secs: u64,
    },
    /// The engine's socket refused or dropped the connection.
    #[error("{action}: the engine at {address} went away ({reason})")]
    Gone {
        action: String,
        address: String,
        reason: String,
    },
}

impl EngineError {
    pub fn failed(action: impl Into<String>, message: impl Into<String>) -> Self {
        EngineError::Failed {
            action: action.into(),
            message: message.into(),
        }
    }

    /// Whether retrying the same call may succeed (the engine hiccuped,
    /// a container vanished), as opposed to a definite refusal.
    pub fn is_transient(&self) -> bool {
        match self {
            EngineError::Unreachable { .. } => true,
            EngineError::Api { source, .. } => match source {
                bollard::errors::Error::DockerResponseServerError { status_code, .. } => {
                    *status_code >= 500 || *status_code == 404 || *status_code == 409
                }
                bollard::errors::Error::DockerStreamError { .. } => false,
                _ => true,
            },
            EngineError::Failed { .. } => false,
            // Retrying on an engine that is stuck or gone only waits longer.
            EngineError::Stalled { .. } | EngineError::Gone { .. } => false,
        }
    }

    /// Whether the engine itself failed (stuck or gone), rather than a call.
    pub fn is_engine_lost(&self) -> bool {
        matches!(self, EngineError::Stalled { .. } | EngineError::Gone { .. })
    }

    /// Whether the engine said "no such object".
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            EngineError::Api {
                source: bollard::errors::Error::DockerResponseServerError {
                    status_code: 404,
                    ..
                },
                ..
            }
        )
    }
}

/// The list filter selecting objects that carry `label` (`key` or `key=value`).
fn label_filter(label: &str) -> Option<std::collections::HashMap<String, Vec<String>>> {
    Some(std::collections::HashMap::from([(
        "label".to_string(),
        vec![label.to_string()],
    )]))
}

/// Adds "what rocmatrix was doing" to bollard errors.
pub(crate) trait Context<T> {
    fn doing(self, action: impl FnOnce() -> String) -> Result<T, EngineError>;
}

impl<T> Context<T> for Result<T, bollard::errors::Error> {
    fn doing(self, action: impl FnOnce() -> String) -> Result<T, EngineError> {
        self.map_err(|source| EngineError::Api {
            action: action(),
            source,
        })
    }
}

/// A connection to a container engine.
#[derive(Clone)]
pub struct Engine {
    docker: Docker,
    address: Address,
    /// Docker or Podman: the few calls that differ ask this.
    flavour: Flavour,
    /// Labels put on everything this engine handle creates (`--label`),
    /// beside the labels each call names.
    extra_labels: HashMap<String, String>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Engine({})", self.address)
    }
}

impl Engine {
    /// Connects as the docker CLI would: `DOCKER_HOST` (with
    /// `DOCKER_TLS_VERIFY`/`DOCKER_CERT_PATH`), else the default Docker
    /// socket, else Podman's sockets; the connection is checked with a ping
    /// and the API version negotiated down to what the engine speaks.
    pub async fn connect() -> Result<Engine, EngineError> {
        let candidates = connect::candidates_from_env();
        let mut tried = Vec::new();
        let mut last_reason = String::from("no address to try");
        for address in candidates {
            tried.push(address.to_string());
            match connect::open(&address).await {
                Ok(docker) => {
                    let flavour = Flavour::detect(&docker).await;
                    return Ok(Engine {
                        docker,
                        address,
                        flavour,
                        extra_labels: HashMap::new(),
                    });
                }
                Err(reason) => last_reason = reason.to_string(),
            }
        }
        Err(EngineError::Unreachable {
            tried: tried.join(", "),
            reason: last_reason,
        })
    }

    /// Puts `labels` on every image, container, network and volume created
    /// through this handle (`--label`, `ROCMATRIX_LABEL`), so that whoever
    /// ran rocmatrix can find and remove what it made.
    pub fn with_labels(mut self, labels: HashMap<String, String>) -> Engine {
        self.extra_labels = labels;
        self
    }

    /// The `--label` labels of this handle.
    pub fn extra_labels(&self) -> &HashMap<String, String> {
        &self.extra_labels
    }

    /// `labels` plus this handle's extra labels (the call's own win).
    pub(crate) fn labelled(&self, labels: &HashMap<String, String>) -> HashMap<String, String> {
        let mut all = self.extra_labels.clone();
        all.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        all
    }

    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Which engine answers: Docker or Podman.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    pub(crate) fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The gateway address of network `name` (`bridge` for the default
    /// one): where containers on it reach the host. Docker 20.10 names no
    /// gateway for its default bridge, only the subnet; the gateway is then
    /// the subnet's first address, as Docker assigns it. `None` when the
    /// engine names neither for IPv4.
    pub async fn network_gateway(
        &self,
        name: &str,
    ) -> Result<Option<std::net::IpAddr>, EngineError> {
        let net = self
            .docker
            .inspect_network(name, None)
            .await
            .doing(|| format!("inspecting network {name}"))?;
        Ok(net
            .ipam
            .and_then(|i| i.config)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|c| {
                c.gateway
                    .and_then(|g| g.parse::<std::net::Ipv4Addr>().ok())
                    .or_else(|| first_address(c.subnet.as_deref()?))
            })
            .next()
            .map(std::net::IpAddr::V4))
    }
}

/// The first host address of an IPv4 subnet (`172.17.0.0/16` → `172.17.0.1`).
fn first_address(subnet: &str) -> Option<std::net::Ipv4Addr> {
    let (ip, bits) = subnet.split_once('/')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let bits: u32 = bits.parse().ok().filter(|b| *b <= 30)?;
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    Some(std::net::Ipv4Addr::from((u32::from(ip) & mask) + 1))
}

#[cfg(test)]
mod gateway_tests {
    #[test]
    fn first_address_of_a_subnet() {
        use super::first_address;
        assert_eq!(first_address("172.17.0.0/16"), Some([172, 17, 0, 1].into()));
        assert_eq!(first_address("10.88.3.7/24"), Some([10, 88, 3, 1].into()));
        assert_eq!(first_address("fd00::/64"), None);
        assert_eq!(first_address("10.0.0.0/32"), None);
    }
}
