//! Where the history is: an SQLite file (by default `<out>/history.sqlite`,
//! beside the run stores) or a PostgreSQL server given by URL, or nowhere
//! (`off`). A URL's password is never shown: [`Location`]'s `Display`
//! writes it as `***`, and [`Location::scrub`] takes it out of any message
//! a driver wrote.

use std::path::{Path, PathBuf};

/// The file name of the default history beside the run stores.
pub const DEFAULT_FILE: &str = "history.sqlite";

#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(String),
    Off,
}

impl Location {
    /// `--history` / `ROCMATRIX_HISTORY` as given (`None`: the default
    /// file under `out`, the parent of `runs/`).
    pub fn resolve(given: Option<&str>, out: &Path) -> Location {
        match given.map(str::trim) {
            None | Some("") => Location::Sqlite(out.join(DEFAULT_FILE)),
            Some("off") => Location::Off,
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Location::Postgres(url.to_string())
            }
            Some(path) => Location::Sqlite(PathBuf::from(
                path.strip_prefix("sqlite://").unwrap_or(path),
            )),
        }
    }

    /// The URL's password, if it has one.
    fn password(&self) -> Option<&str> {
        let Location::Postgres(url) = self else {
            return None;
        };
        let rest = url.split_once("://")?.1;
        let auth = rest.split(['/', '?']).next()?.rsplit_once('@')?.0;
        let pass = auth.split_once(':')?.1;
        (!pass.is_empty()).then_some(pass)
    }

    /// `message` with the URL's password (if any) replaced by `***`.
    pub fn scrub(&self, message: &str) -> String {
        match self.password() {
            Some(p) => message.replace(p, "***"),
            None => message.to_string(),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "{}", p.display()),
            Location::Postgres(url) => f.write_str(&self.scrub(url)),
            Location::Off => f.write_str("off"),
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Location({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_and_passwords() {
        let out = Path::new(".rocmatrix");
        assert_eq!(
            Location::resolve(None, out),
            Location::Sqlite(PathBuf::from(".rocmatrix/history.sqlite"))
        );
        assert_eq!(Location::resolve(Some("off"), out), Location::Off);
        assert_eq!(
            Location::resolve(Some("/srv/h.db"), out),
            Location::Sqlite(PathBuf::from("/srv/h.db"))
        );
        let pg = Location::resolve(
            Some("postgres://ci:s3cr%21t@db:5432/rocm?sslmode=disable"),
            out,
        );
        assert_eq!(
            pg.to_string(),
            "postgres://ci:***@db:5432/rocm?sslmode=disable"
        );
        assert_eq!(
            pg.scrub("password authentication failed for s3cr%21t"),
            "password authentication failed for ***"
        );
        let nopass = Location::resolve(Some("postgresql://ci@db/rocm"), out);
        assert_eq!(nopass.to_string(), "postgresql://ci@db/rocm");
        assert!(!format!("{pg:?}").contains("s3cr"));
    }
}
