//! Registry credentials as the docker CLI keeps them: the Docker config
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`) with its
//! `auths` entries (base64 `auth`, or `username`/`password`,
//! `identitytoken`), and `credHelpers` / `credsStore` answered by the
//! `docker-credential-<name>` helper binaries.
//!
//! No config, or no entry for a registry, means anonymous access. Errors name
//! the config file and the registry host, never a secret.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use bollard::auth::DockerCredentials;
use serde::Deserialize;

/// The Docker Hub's key in `auths` and for credential helpers.
const DOCKER_HUB: &str = "https://index.docker.io/v1/";

/// Why no credentials could be read for a registry.
#[derive(Debug, thiserror::Error)]
#[error("credentials for {host} from {}: {message}", config.display())]
pub struct AuthError {
    pub config: PathBuf,
    pub host: String,
    pub message: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    #[serde(default)]
    auths: HashMap<String, AuthEntry>,
    #[serde(default)]
    cred_helpers: HashMap<String, String>,
    creds_store: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
}

/// What a credential helper prints for `get`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct HelperAnswer {
    username: String,
    secret: String,
}

/// The Docker config file the docker CLI would read.
pub fn config_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = var("DOCKER_CONFIG") {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    var("HOME").map(|h| PathBuf::from(h).join(".docker/config.json"))
}

/// The registry host of an image reference (`ghcr.io/org/x` → `ghcr.io`,
/// `127.0.0.1:5000/x` → `127.0.0.1:5000`, `org/x` → the Docker Hub).
pub fn registry_host(reference: &str) -> &str {
    match reference.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            first
        }
        _ => "docker.io",
    }
}

/// Credentials for `host` from the Docker config, or `None` for anonymous
/// access (no config file, or nothing for this host in it).
pub fn credentials(host: &str) -> Result<Option<DockerCredentials>, AuthError> {
    let Some(path) = config_path() else {
        return Ok(None);
    };
    credentials_from(&path, host)
}

/// [`credentials`] from the config file at `path`.
pub fn credentials_from(path: &Path, host: &str) -> Result<Option<DockerCredentials>, AuthError> {
    let err = |message: String| AuthError {
        config: path.to_path_buf(),
        host: host.to_string(),
        message,
    };
    let text = match crate::safe_read::read_bounded(path, 1 << 20, "Docker config files", "") {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| err("not UTF-8".into()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(format!("cannot read: {e}"))),
    };
    // serde_json's messages quote no input, so they cannot leak a secret.
    let config: Config =
        serde_json::from_str(&text).map_err(|e| err(format!("not a Docker config: {e}")))?;
    let server = server_key(host);
    let helper = config
        .cred_helpers
        .iter()
        .find(|(k, _)| same_host(k, host))
        .map(|(_, v)| v)
        .or(config.creds_store.as_ref());
    if let Some(entry) = config
        .auths
        .iter()
        .find(|(k, _)| same_host(k, host))
        .map(|(_, v)| v)
    {
        if let Some(c) = from_entry(entry, &server, &err)? {
            return Ok(Some(c));
        }
    }
    match helper {
        Some(name) => from_helper(name, &server, &err),
        None => Ok(None),
    }
}

/// The server address the docker CLI files `host` under.
fn server_key(host: &str) -> String {
    if host == "docker.io" {
        DOCKER_HUB.to_string()
    } else {
        host.to_string()
    }
}

/// Whether a config key (`host`, `https://host/v1/`, …) names `host`.
fn same_host(key: &str, host: &str) -> bool {
    let bare = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let bare = bare.split('/').next().unwrap_or(bare);
    bare == host
        || (host == "docker.io"
            && matches!(
                bare,
                "index.docker.io" | "registry-1.docker.io" | "docker.io"
            ))
}

/// Builds an [`AuthError`] for this config file and host.
type ErrFn<'a> = &'a dyn Fn(String) -> AuthError;

fn from_entry(
    entry: &AuthEntry,
    server: &str,
    err: ErrFn,
) -> Result<Option<DockerCredentials>, AuthError> {
    let mut c = DockerCredentials {
        serveraddress: Some(server.to_string()),
        ..Default::default()
    };
    if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| err("`auth` is not base64".into()))?;
        let decoded = String::from_utf8(decoded).map_err(|_| err("`auth` is not UTF-8".into()))?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| err("`auth` is not base64 of user:password".into()))?;
        c.username = Some(user.to_string());
        c.password = Some(password.to_string());
    } else if let Some(user) = &entry.username {
        c.username = Some(user.clone());
        c.password = entry.password.clone();
    }
    if let Some(token) = entry.identitytoken.as_deref().filter(|t| !t.is_empty()) {
        c.identitytoken = Some(token.to_string());
    }
    if c.username.is_none() && c.identitytoken.is_none() {
        return Ok(None);
    }
    Ok(Some(c))
}

/// Asks `docker-credential-<name> get`; a helper that knows nothing of the
/// server (or is not installed) means anonymous access.
fn from_helper(
    name: &str,
    server: &str,
    err: ErrFn,
) -> Result<Option<DockerCredentials>, AuthError> {
    let program = format!("docker-credential-{name}");
    let mut child = match Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(format!("cannot run {program}: {e}"))),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(server.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| err(format!("{program} get: {e}")))?;
    if !out.status.success() {
        // "credentials not found in native keychain" and the like.
        return Ok(None);
    }
    let answer: HelperAnswer = serde_json::from_slice(&out.stdout).map_err(|_| {
        err(format!(
            "{program} get did not answer with credentials JSON"
        ))
    })?;
    let mut c = DockerCredentials {
        serveraddress: Some(server.to_string()),
        ..Default::default()
    };
    if answer.username == "<token>" {
        c.identitytoken = Some(answer.secret);
    } else {
        c.username = Some(answer.username);
        c.password = Some(answer.secret);
    }
    Ok(Some(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn hosts_of_references() {
        assert_eq!(registry_host("ghcr.io/org/rocmatrix"), "ghcr.io");
        assert_eq!(registry_host("127.0.0.1:5000/x"), "127.0.0.1:5000");
        assert_eq!(registry_host("localhost/x"), "localhost");
        assert_eq!(registry_host("org/x"), "docker.io");
    }

    #[test]
    fn reads_base64_auth_and_username_password() {
        let (_d, p) = config(
            r#"{"auths": {"https://ghcr.io": {"auth": "dTpwQHNz"},
                          "reg:5000": {"username": "a", "password": "b"},
                          "https://index.docker.io/v1/": {"identitytoken": "tok"}}}"#,
        );
        let c = credentials_from(&p, "ghcr.io").unwrap().unwrap();
        assert_eq!(c.username.as_deref(), Some("u"));
        assert_eq!(c.password.as_deref(), Some("p@ss"));
        let c = credentials_from(&p, "reg:5000").unwrap().unwrap();
        assert_eq!(
            (c.username.as_deref(), c.password.as_deref()),
            (Some("a"), Some("b"))
        );
        let c = credentials_from(&p, "docker.io").unwrap().unwrap();
        assert_eq!(c.identitytoken.as_deref(), Some("tok"));
        assert!(credentials_from(&p, "other.io").unwrap().is_none());
    }

    #[test]
    fn no_config_is_anonymous() {
        let dir = tempfile::tempdir().unwrap();
        assert!(credentials_from(&dir.path().join("config.json"), "x.io")
            .unwrap()
            .is_none());
    }

    #[test]
    fn errors_name_file_and_host_but_no_secret() {
        let (_d, p) = config(r#"{"auths": {"x.io": {"auth": "c2VjcmV0LXdpdGhvdXQtY29sb24="}}}"#);
        let e = credentials_from(&p, "x.io").unwrap_err().to_string();
        assert!(
            e.contains("x.io") && e.contains(&p.display().to_string()),
            "{e}"
        );
        assert!(!e.contains("secret"), "{e}");
        let (_d, p) = config("{not json");
        let e = credentials_from(&p, "x.io").unwrap_err().to_string();
        assert!(e.contains("not a Docker config"), "{e}");
    }

    #[test]
    fn a_missing_helper_is_anonymous() {
        let (_d, p) = config(r#"{"credsStore": "rocmatrix-test-absent"}"#);
        assert!(credentials_from(&p, "x.io").unwrap().is_none());
    }
}
