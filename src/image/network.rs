//! Which network image builds use. Containers on the default bridge cannot
//! reach the package mirror on some hosts; `auto` probes once whether a
//! container on the bridge can open a TCP connection to the mirror and falls
//! back to host networking when it cannot.

use std::time::Duration;

use crate::engine::{ContainerSpec, Engine, EngineError, ExecOutcome};

/// The build network a user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkChoice {
    Auto,
    /// The engine's default bridge.
    Bridge,
    Host,
    /// A named network.
    Named(String),
}

impl NetworkChoice {
    pub fn parse(s: &str) -> NetworkChoice {
        match s {
            "auto" | "" => NetworkChoice::Auto,
            "bridge" | "default" => NetworkChoice::Bridge,
            "host" => NetworkChoice::Host,
            other => NetworkChoice::Named(other.to_string()),
        }
    }
}

/// `host:port` of a mirror URL (`http://deb.debian.org/debian` → `deb.debian.org:80`).
pub fn mirror_endpoint(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split('/').next()?;
    let authority = authority.rsplit('@').next()?;
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.contains(']') || h.ends_with(']') => {
            Some((h.to_string(), p.parse().ok()?))
        }
        _ => Some((authority.to_string(), default_port)),
    }
}

/// Whether a container started from `image` on the default bridge reaches
/// `host:port` within a few seconds. Uses bash's `/dev/tcp`, present in
/// every Debian-family base.
pub async fn bridge_reaches(
    engine: &Engine,
    image: &str,
    host: &str,
    port: u16,
) -> Result<bool, EngineError> {
    reaches(engine, image, None, host, port).await
}

/// Whether a container started from `image` on `network_mode` (the default
/// bridge when `None`) reaches `host:port` within a few seconds.
pub async fn reaches(
    engine: &Engine,
    image: &str,
    network_mode: Option<&str>,
    host: &str,
    port: u16,
) -> Result<bool, EngineError> {
    // Unique per call: the package cache probes while a run may be probing
    // the mirror.
    static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let spec = ContainerSpec {
        name: format!("rocmatrix-netprobe-{}-{n}", std::process::id()),
        image: image.to_string(),
        labels: crate::engine::labels::owner_labels("netprobe", "netprobe"),
        network_mode: network_mode.map(str::to_string),
        ..Default::default()
    };
    let id = engine.start_container(&spec).await?;
    let script = format!("exec 3<>/dev/tcp/{host}/{port}");
    let result = engine
        .exec(
            &id,
            vec![
                "timeout".into(),
                "8".into(),
                "bash".into(),
                "-c".into(),
                script,
            ],
            Vec::new(),
            &mut |_: &[u8]| {},
            Some(Duration::from_secs(15)),
        )
        .await;
    let _ = engine.remove_container(&id).await;
    Ok(matches!(result?, ExecOutcome::Exited(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            mirror_endpoint("http://deb.debian.org/debian"),
            Some(("deb.debian.org".into(), 80))
        );
        assert_eq!(
            mirror_endpoint("https://m.example:8443/debian/"),
            Some(("m.example".into(), 8443))
        );
        assert_eq!(mirror_endpoint("file:/srv/debian"), None);
    }
}
