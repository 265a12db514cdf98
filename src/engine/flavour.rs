//! Which engine answers the Docker API: Docker itself or Podman's
//! compatibility layer, told apart once, at connection, by the `/version`
//! call's components (Podman names one "Podman Engine").
//!
//! The differences rocmatrix has to work around stay in the engine module;
//! this only says which side of them a connection is on.

use bollard::Docker;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    Docker,
    Podman,
}

impl Flavour {
    /// Asks the engine. An engine whose `/version` cannot be read is taken
    /// for Docker: that is the API rocmatrix speaks by default.
    pub async fn detect(docker: &Docker) -> Flavour {
        match docker.version().await {
            Ok(v) => Self::from_components(v.components.iter().flatten().map(|c| c.name.as_str())),
            Err(_) => Flavour::Docker,
        }
    }

    fn from_components<'a>(mut names: impl Iterator<Item = &'a str>) -> Flavour {
        if names.any(|n| n.eq_ignore_ascii_case("Podman Engine")) {
            Flavour::Podman
        } else {
            Flavour::Docker
        }
    }
}

impl std::fmt::Display for Flavour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Flavour::Docker => "Docker",
            Flavour::Podman => "Podman",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Flavour;

    #[test]
    fn tells_podman_from_docker_by_component_names() {
        let podman = ["Podman Engine", "Conmon", "OCI Runtime (runc)"];
        assert_eq!(
            Flavour::from_components(podman.into_iter()),
            Flavour::Podman
        );
        let docker = ["Engine", "containerd", "runc", "docker-init"];
        assert_eq!(
            Flavour::from_components(docker.into_iter()),
            Flavour::Docker
        );
    }
}
