//! A real image registry for a test: Debian's `docker-registry` (the
//! distribution registry) on 127.0.0.1 at a free port, storing into a
//! temporary directory, optionally behind htpasswd basic auth; killed when
//! dropped. The Docker engine treats 127.0.0.0/8 registries as insecure
//! (plain HTTP allowed), so nothing needs TLS.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;

pub struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub addr: String,
    /// `user:password` when the registry wants basic auth.
    basic: Option<String>,
    _dir: tempfile::TempDir,
}

/// A port nothing listens on (bound, then let go).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

impl Registry {
    /// An open registry.
    pub fn start() -> Registry {
        Self::launch(None)
    }

    /// A registry that lets in only `user` with `password` (htpasswd, bcrypt).
    pub fn start_with_auth(user: &str, password: &str) -> Registry {
        Self::launch(Some((user, password)))
    }

    fn launch(auth: Option<(&str, &str)>) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = auth {
            let o = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .expect("htpasswd (apache2-utils, .ci/install-registry.sh)");
            assert!(o.status.success(), "htpasswd: {}", super::stderr(&o));
            let file = dir.path().join("htpasswd");
            std::fs::write(&file, &o.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: rocmatrix-test\n    path: {}\n",
                file.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry (.ci/install-registry.sh)");
        let registry = Registry {
            child,
            addr,
            basic: auth.map(|(u, p)| format!("{u}:{p}")),
            _dir: dir,
        };
        registry.wait_ready();
        registry
    }

    fn wait_ready(&self) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if self.get("/v2/", &[]).is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log =
            std::fs::read_to_string(self._dir.path().join("registry.log")).unwrap_or_default();
        panic!(
            "docker-registry on {} did not answer within 30 s:\n{log}",
            self.addr
        );
    }

    /// `127.0.0.1:<port>/<path>`, a repository in this registry.
    pub fn repository(&self, path: &str) -> String {
        format!("{}/{path}", self.addr)
    }

    /// The tags of `repo` (a path in this registry, e.g. `rocmatrix/env`),
    /// from the registry's tags API.
    pub fn tags(&self, repo: &str) -> Vec<String> {
        let Some((status, _, body)) = self.get(&format!("/v2/{repo}/tags/list"), &[]) else {
            return Vec::new();
        };
        if status != 200 {
            return Vec::new();
        }
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["tags"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The digest the registry serves `repo:tag` under (`sha256:…`).
    pub fn digest(&self, repo: &str, tag: &str) -> Option<String> {
        let accept = "Accept: application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json";
        let (status, headers, _) = self.get(&format!("/v2/{repo}/manifests/{tag}"), &[accept])?;
        if status != 200 {
            return None;
        }
        headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("docker-content-digest")
                .then(|| v.trim().to_string())
        })
    }

    /// A plain HTTP/1.0 GET: status, headers, body; `None` when nothing answers.
    fn get(&self, path: &str, extra: &[&str]) -> Option<(u16, String, String)> {
        let mut s = TcpStream::connect(&self.addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let mut req = format!("GET {path} HTTP/1.0\r\nHost: {}\r\n", self.addr);
        if let Some(b) = &self.basic {
            let token = base64::engine::general_purpose::STANDARD.encode(b);
            req.push_str(&format!("Authorization: Basic {token}\r\n"));
        }
        for h in extra {
            req.push_str(&format!("{h}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, head.to_string(), body.to_string()))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Docker config directory (for `DOCKER_CONFIG`) whose `config.json`
/// holds `auths` for `host` as the docker CLI writes them (base64
/// `user:password`), or none at all.
pub fn docker_config(dir: &Path, auth: Option<(&str, &str, &str)>) -> std::path::PathBuf {
    let config = dir.join("docker-config");
    std::fs::create_dir_all(&config).unwrap();
    let json = match auth {
        Some((host, user, password)) => serde_json::json!({
            "auths": { host: {
                "auth": base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            }}
        }),
        None => serde_json::json!({}),
    };
    std::fs::write(config.join("config.json"), json.to_string()).unwrap();
    config
}
