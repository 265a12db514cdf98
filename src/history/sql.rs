//! The statements both backends send, written once. Parameters are `$1`,
//! `$2`, …: PostgreSQL's own, and to SQLite named parameters numbered in
//! the order they first appear, which is the order they are given. What
//! differs between the two (SQLite's `= ?` per run where PostgreSQL takes
//! `= ANY($1)`, each schema check) stays in its backend.

/// Records the schema's version.
pub const SET_VERSION: &str = "INSERT INTO meta (key, value) VALUES ('schema_version', $1)
     ON CONFLICT (key) DO UPDATE SET value = excluded.value";
/// The schema's version.
pub const VERSION: &str = "SELECT value FROM meta WHERE key = 'schema_version'";

pub const RUNS: &str = "SELECT run, started_ms, name, sources, environments FROM runs";
pub const CELLS: &str = "SELECT run, cell, axes, outcome, inputs, passed, host FROM cells";
pub const TESTS: &str =
    "SELECT run, cell, test, hash, outcome, reruns, signature, message FROM tests";
pub const HAS_RUN: &str = "SELECT EXISTS (SELECT 1 FROM runs WHERE run = $1)";
/// How many runs are recorded and when the latest was: what changes when
/// a run is recorded (`rocmatrix serve` keeps pages until it does).
pub const STAMP: &str = "SELECT count(*), coalesce(max(recorded_ms), 0) FROM runs";
/// How many bytes a set of passing tests takes (8 a test).
pub const PASSSET_LEN: &str = "SELECT length(hashes) FROM passsets WHERE digest = $1";
pub const PASSSET: &str = "SELECT hashes FROM passsets WHERE digest = $1";

/// A run; nothing when it is recorded already (the caller stops there).
pub const PUT_RUN: &str =
    "INSERT INTO runs (run, started_ms, name, matrix_hash, sources, environments, recorded_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (run) DO NOTHING";
/// A set of passing tests, kept once however many cells share it.
pub const PUT_PASSSET: &str =
    "INSERT INTO passsets (digest, hashes) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING";
pub const PUT_CELL: &str =
    "INSERT INTO cells (run, cell, axes, outcome, inputs, passed, signatures, host)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
pub const PUT_TEST: &str =
    "INSERT INTO tests (run, cell, test, hash, outcome, time_s, reruns, signature, message)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
pub const PUT_FAILSET: &str = "INSERT INTO failsets (run, cell, entries) VALUES ($1, $2, $3)";
