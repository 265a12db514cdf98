//! A real PostgreSQL server of the test's own, for the shared-history
//! backend: Debian's server binaries (`.ci/install-history.sh`), a cluster
//! made by `initdb` in a temporary directory owned by the `postgres` user,
//! password authentication (SCRAM), listening on 127.0.0.1 on a free port.
//! Stopped and removed when dropped.

use std::path::PathBuf;
use std::process::Command;

use super::unavailable;

/// The password of the server's `postgres` user.
pub const PASSWORD: &str = "hist-s3cret-pw";

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
}

impl Postgres {
    /// Starts a server, or `None` (after the gate said why) when Debian's
    /// PostgreSQL is not installed or the `postgres` user is missing.
    pub fn start(test: &str) -> Option<Postgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|rd| {
                let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path().join("bin")).collect();
                v.sort();
                v.into_iter().rev().find(|b| b.join("initdb").is_file())
            });
        let Some(bin) = bin else {
            unavailable(
                test,
                "no PostgreSQL server (.ci/install-history.sh installs it)",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let chown = Command::new("chown")
            .arg("-R")
            .arg("postgres:postgres")
            .arg(dir.path())
            .status();
        if !chown.is_ok_and(|s| s.success()) {
            unavailable(test, "cannot give a directory to the postgres user");
            return None;
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        let _ = Command::new("chown").arg("postgres").arg(&pwfile).status();
        let data = dir.path().join("data");
        let as_postgres = |args: &[&str]| {
            let out = Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let initdb = bin.join("initdb");
        as_postgres(&[
            initdb.to_str().unwrap(),
            "-D",
            data.to_str().unwrap(),
            "-U",
            "postgres",
            "--auth=scram-sha-256",
            &format!("--pwfile={}", pwfile.display()),
        ]);
        let port = free_port();
        let pg_ctl = bin.join("pg_ctl");
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1",
            dir.path().display()
        );
        as_postgres(&[
            pg_ctl.to_str().unwrap(),
            "-D",
            data.to_str().unwrap(),
            "-o",
            &opts,
            "-l",
            dir.path().join("log").to_str().unwrap(),
            "-w",
            "start",
        ]);
        Some(Postgres { dir, bin, port })
    }

    /// `postgres://postgres:<password>@127.0.0.1:<port>/<db>`.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://postgres:{PASSWORD}@127.0.0.1:{}/{db}",
            self.port
        )
    }

    /// Creates database `db`.
    pub fn create_db(&self, db: &str) {
        let out = Command::new(self.bin.join("psql"))
            .env("PGPASSWORD", PASSWORD)
            .args([
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-p",
                &self.port.to_string(),
            ])
            .args(["-d", "postgres", "-c", &format!("CREATE DATABASE \"{db}\"")])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

/// A TCP port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
