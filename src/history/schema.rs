//! The history's tables, the same for SQLite and PostgreSQL but for the
//! type of a byte string, and the schema version a database records in
//! `meta`. Opening a database creates or migrates it (in one transaction);
//! a database of a newer schema than this rocmatrix knows is refused, not
//! written.
//!
//! docs/history.md describes each table.

/// The schema this rocmatrix writes.
pub const VERSION: i64 = 3;

/// Statements that make an empty database version 1; `BYTES` is the byte
/// string type (`BLOB`, `BYTEA`).
const V1: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS runs (
        run TEXT PRIMARY KEY,
        started_ms BIGINT NOT NULL,
        name TEXT NOT NULL,
        matrix_hash TEXT NOT NULL,
        sources TEXT NOT NULL,
        environments TEXT NOT NULL,
        recorded_ms BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS runs_by_start ON runs (name, started_ms)",
    "CREATE TABLE IF NOT EXISTS passsets (digest TEXT PRIMARY KEY, hashes BYTES NOT NULL)",
    "CREATE TABLE IF NOT EXISTS cells (
        run TEXT NOT NULL,
        cell TEXT NOT NULL,
        axes TEXT NOT NULL,
        outcome TEXT NOT NULL,
        inputs TEXT NOT NULL,
        passed TEXT NOT NULL,
        signatures TEXT NOT NULL,
        PRIMARY KEY (run, cell))",
    "CREATE TABLE IF NOT EXISTS tests (
        run TEXT NOT NULL,
        cell TEXT NOT NULL,
        test TEXT NOT NULL,
        hash BIGINT NOT NULL,
        outcome TEXT NOT NULL,
        time_s DOUBLE PRECISION,
        reruns INTEGER NOT NULL,
        signature TEXT NOT NULL,
        message TEXT NOT NULL,
        PRIMARY KEY (run, cell, test))",
    "CREATE INDEX IF NOT EXISTS tests_by_name ON tests (test)",
];

/// Version 2: each cell's non-passing tests of a run as one byte string
/// (`super::failset`), what a report's window reads.
const V2: &[&str] = &["CREATE TABLE IF NOT EXISTS failsets (
        run TEXT NOT NULL,
        cell TEXT NOT NULL,
        entries BYTES NOT NULL,
        PRIMARY KEY (run, cell))"];

/// Version 3: where each cell ran (`crate::store::host::HostFacts` as
/// JSON; empty for the cells of runs recorded before).
const V3: &[&str] = &["ALTER TABLE cells ADD COLUMN host TEXT NOT NULL DEFAULT ''"];

/// The statements that take a database from `from` to [`VERSION`].
pub fn migrations(from: i64, bytes: &str) -> Vec<String> {
    let mut out = Vec::new();
    if from < 1 {
        out.extend(V1.iter().map(|s| s.replace("BYTES", bytes)));
    }
    if from < 2 {
        out.extend(V2.iter().map(|s| s.replace("BYTES", bytes)));
    }
    if from < 3 {
        out.extend(V3.iter().map(|s| s.to_string()));
    }
    out
}

/// Whether moving from `from` must fill `failsets` from the rows a
/// database of version 1 already holds.
pub fn fills_failsets(from: i64) -> bool {
    from == 1
}

/// The rows [`fills_failsets`] reads: (run, cell, hash, outcome).
pub const FAILSET_ROWS: &str = "SELECT run, cell, hash, outcome FROM tests";

/// Why a database's schema cannot be used.
pub fn refuse_newer(found: i64) -> Option<String> {
    (found > VERSION).then(|| {
        format!(
            "its schema is version {found}, newer than the version {VERSION} this rocmatrix \
             knows; record with a newer rocmatrix"
        )
    })
}

/// Why a database of schema `found` cannot be read without migrating it
/// (a reader never writes): it must be this rocmatrix's.
pub fn refuse_read_only(found: i64) -> Option<String> {
    if let Some(why) = refuse_newer(found) {
        return Some(why);
    }
    (found < VERSION).then(|| {
        format!(
            "its schema is version {found}, older than the version {VERSION} this rocmatrix \
             reads; record one run into it (or `rocmatrix history import`) to migrate it"
        )
    })
}
