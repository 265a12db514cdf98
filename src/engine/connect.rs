//! Where the engine is: `DOCKER_HOST`, the default socket, Podman's sockets.

use std::fmt;
use std::path::PathBuf;

use bollard::{Docker, API_DEFAULT_VERSION};

/// Seconds before a request to the engine gives up.
const TIMEOUT_SECS: u64 = 600;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Unix(PathBuf),
    Tcp(String),
    Tls { addr: String, cert_dir: PathBuf },
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Unix(p) => write!(f, "unix://{}", p.display()),
            Address::Tcp(a) => write!(f, "tcp://{a}"),
            Address::Tls { addr, cert_dir } => {
                write!(
                    f,
                    "tcp://{addr} (TLS, certificates in {})",
                    cert_dir.display()
                )
            }
        }
    }
}

/// The addresses to try, in order.
pub fn candidates_from_env() -> Vec<Address> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(host) = var("DOCKER_HOST") {
        let tls = var("DOCKER_TLS_VERIFY").is_some_and(|v| v != "0");
        let cert_dir = var("DOCKER_CERT_PATH")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".docker")))
            .unwrap_or_else(|| PathBuf::from(".docker"));
        return vec![parse_host(&host, tls, cert_dir)];
    }
    let mut out = vec![Address::Unix("/var/run/docker.sock".into())];
    if let Some(xdg) = var("XDG_RUNTIME_DIR") {
        out.push(Address::Unix(PathBuf::from(xdg).join("podman/podman.sock")));
    }
    out.push(Address::Unix("/run/podman/podman.sock".into()));
    out
}

/// Parses a `DOCKER_HOST` value.
pub fn parse_host(host: &str, tls: bool, cert_dir: PathBuf) -> Address {
    if let Some(p) = host.strip_prefix("unix://") {
        return Address::Unix(p.into());
    }
    let addr = host
        .strip_prefix("tcp://")
        .or_else(|| host.strip_prefix("http://"))
        .or_else(|| host.strip_prefix("https://"))
        .unwrap_or(host)
        .trim_end_matches('/')
        .to_string();
    if tls || host.starts_with("https://") {
        Address::Tls { addr, cert_dir }
    } else {
        Address::Tcp(addr)
    }
}

/// Why an address gave no engine.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0} does not exist")]
    NoSocket(String),
    #[error(transparent)]
    Api(#[from] bollard::errors::Error),
    #[error("no answer within 10 s")]
    NoAnswer,
}

/// Opens, pings and negotiates.
pub async fn open(address: &Address) -> Result<Docker, OpenError> {
    let docker = match address {
        Address::Unix(p) => {
            if !p.exists() {
                return Err(OpenError::NoSocket(p.display().to_string()));
            }
            Docker::connect_with_unix(&p.to_string_lossy(), TIMEOUT_SECS, API_DEFAULT_VERSION)
        }
        Address::Tcp(a) => Docker::connect_with_http(a, TIMEOUT_SECS, API_DEFAULT_VERSION),
        Address::Tls { addr, cert_dir } => Docker::connect_with_ssl(
            addr,
            &cert_dir.join("key.pem"),
            &cert_dir.join("cert.pem"),
            &cert_dir.join("ca.pem"),
            TIMEOUT_SECS,
            API_DEFAULT_VERSION,
        ),
    }?;
    let ping = tokio::time::timeout(std::time::Duration::from_secs(10), docker.ping()).await;
    match ping {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => return Err(OpenError::NoAnswer),
    }
    Ok(docker.negotiate_version().await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_docker_host() {
        let c = PathBuf::from("/certs");
        assert_eq!(
            parse_host("unix:///run/user/1000/podman/podman.sock", false, c.clone()),
            Address::Unix("/run/user/1000/podman/podman.sock".into())
        );
        assert_eq!(
            parse_host("tcp://10.0.0.2:2375", false, c.clone()),
            Address::Tcp("10.0.0.2:2375".into())
        );
        assert_eq!(
            parse_host("tcp://h:2376", true, c.clone()),
            Address::Tls {
                addr: "h:2376".into(),
                cert_dir: c
            }
        );
    }
}
