//! A history shared by a fleet of CI runners: a PostgreSQL server given by
//! URL (`--history postgres://…`). Each run records in one transaction;
//! creating or migrating the schema holds an advisory lock, so runners that
//! start together do not race to create the same tables.
//!
//! The `postgres` client runs its own small runtime: it is used outside
//! rocmatrix's tokio runtime (after a run, from the command line).

use std::sync::Arc;

use postgres::{Client, NoTls};

use super::backend::{
    from_json, host_from, host_json, to_json, Backend, DbError, Rows, RunRow, StoredCell,
    StoredTest,
};
use super::record::{hashes_from_bytes, hashes_to_bytes, RunRecord};
use super::{failset, schema, sql};
use crate::outcome::{CellVerdict, TestStatus};

/// The advisory lock key held while the schema is made or migrated.
const SCHEMA_LOCK: i64 = 0x726f_636d_6174;

pub struct Postgres {
    client: Client,
}

impl Postgres {
    /// Connects to `url` and creates or migrates the schema.
    pub fn open(url: &str) -> Result<Postgres, DbError> {
        let mut config: postgres::Config = url.parse().map_err(unopened)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        let mut client = config.connect(NoTls).map_err(unopened)?;
        migrate(&mut client)?;
        Ok(Postgres { client })
    }
}

impl Postgres {
    /// Connects for reading only (`rocmatrix serve`): every transaction of
    /// the session read-only, nothing created or migrated; a schema other
    /// than this rocmatrix's is refused.
    pub fn open_read_only(url: &str) -> Result<Postgres, DbError> {
        let mut config: postgres::Config = url.parse().map_err(unopened)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(5));
        }
        let mut client = config.connect(NoTls).map_err(unopened)?;
        client
            .batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            .map_err(DbError::of)?;
        let found: i64 = client
            .query_opt(sql::VERSION, &[])
            .map_err(DbError::of)?
            .and_then(|r| r.get::<_, String>(0).parse().ok())
            .unwrap_or(0);
        if let Some(why) = schema::refuse_read_only(found) {
            return Err(DbError(why));
        }
        Ok(Postgres { client })
    }
}

/// Why the history could not be opened, in the server's words
/// (`database "nodb" does not exist`) or with the cause under the driver's
/// (`error connecting to server: Connection refused (os error 111)`):
/// the driver's own `Display` says only `db error`.
fn unopened(e: postgres::Error) -> DbError {
    if let Some(db) = e.as_db_error() {
        let mut said = db.message().to_string();
        for (what, text) in [("detail", db.detail()), ("hint", db.hint())] {
            if let Some(t) = text {
                said.push_str(&format!(" ({what}: {t})"));
            }
        }
        return DbError(said);
    }
    let mut said = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        said.push_str(&format!(": {c}"));
        cause = c.source();
    }
    DbError(said)
}

fn migrate(client: &mut Client) -> Result<(), DbError> {
    let e = DbError::of;
    let mut tx = client.transaction().map_err(e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(e)?;
    let has_meta: bool = tx
        .query_one("SELECT to_regclass('meta') IS NOT NULL", &[])
        .map_err(e)?
        .get(0);
    let found: i64 = if has_meta {
        tx.query_opt(sql::VERSION, &[])
            .map_err(e)?
            .and_then(|r| r.get::<_, String>(0).parse().ok())
            .unwrap_or(0)
    } else {
        0
    };
    if let Some(why) = schema::refuse_newer(found) {
        return Err(DbError(why));
    }
    if found == schema::VERSION {
        return tx.commit().map_err(e);
    }
    for stmt in schema::migrations(found, "BYTEA") {
        tx.batch_execute(&stmt).map_err(e)?;
    }
    if schema::fills_failsets(found) {
        let rows = tx
            .query(schema::FAILSET_ROWS, &[])
            .map_err(e)?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get::<_, i64>(2) as u64, r.get(3)))
            .collect();
        let put = tx.prepare(sql::PUT_FAILSET).map_err(e)?;
        for (run, cell, bytes) in failset::of_rows(rows) {
            tx.execute(&put, &[&run, &cell, &bytes]).map_err(e)?;
        }
    }
    tx.execute(sql::SET_VERSION, &[&schema::VERSION.to_string()])
        .map_err(e)?;
    tx.commit().map_err(e)
}

use sql::RUNS;

fn run_row(r: &postgres::Row) -> RunRow {
    RunRow {
        run: r.get(0),
        started_ms: r.get(1),
        name: r.get(2),
        sources: from_json(r.get(3)),
        environments: from_json(r.get(4)),
    }
}

use sql::CELLS;

fn stored_cell(r: &postgres::Row) -> StoredCell {
    StoredCell {
        run: r.get(0),
        cell: r.get(1),
        axes: Arc::new(from_json(r.get(2))),
        outcome: CellVerdict::of_word(r.get(3)),
        inputs: r.get::<_, String>(4).into(),
        passed: r.get(5),
        host: host_from(r.get(6)),
    }
}

impl Backend for Postgres {
    fn record(&mut self, r: &RunRecord) -> Result<bool, DbError> {
        let e = DbError::of;
        let mut tx = self.client.transaction().map_err(e)?;
        let added = tx
            .execute(
                sql::PUT_RUN,
                &[
                    &r.run,
                    &r.started_ms,
                    &r.name,
                    &r.matrix_hash,
                    &to_json(&r.sources),
                    &to_json(&r.environments),
                    &super::record::now_ms(),
                ],
            )
            .map_err(e)?;
        if added == 0 {
            tx.rollback().map_err(e)?;
            return Ok(false);
        }
        let put = tx.prepare(sql::PUT_PASSSET).map_err(e)?;
        for (digest, hashes) in &r.passsets {
            tx.execute(&put, &[digest, &hashes_to_bytes(hashes)])
                .map_err(e)?;
        }
        let put = tx.prepare(sql::PUT_CELL).map_err(e)?;
        for c in &r.cells {
            tx.execute(
                &put,
                &[
                    &r.run,
                    &c.cell,
                    &to_json(&c.axes),
                    &c.outcome.word(),
                    &c.inputs,
                    &c.passed,
                    &to_json(&c.signatures),
                    &host_json(&c.host),
                ],
            )
            .map_err(e)?;
        }
        let put = tx.prepare(sql::PUT_TEST).map_err(e)?;
        for t in &r.tests {
            tx.execute(
                &put,
                &[
                    &r.run,
                    &t.cell,
                    &t.test,
                    &(t.hash as i64),
                    &t.outcome.as_str(),
                    &t.time,
                    &(t.reruns as i32),
                    &t.signature,
                    &t.message,
                ],
            )
            .map_err(e)?;
        }
        let put = tx.prepare(sql::PUT_FAILSET).map_err(e)?;
        for (cell, bytes) in failset::of_record(r) {
            tx.execute(&put, &[&r.run, &cell, &bytes]).map_err(e)?;
        }
        tx.commit().map_err(e)?;
        Ok(true)
    }

    fn runs(&mut self) -> Result<Vec<RunRow>, DbError> {
        let rows = self
            .client
            .query(&format!("{RUNS} ORDER BY started_ms, run"), &[])
            .map_err(DbError::of)?;
        Ok(rows.iter().map(run_row).collect())
    }

    fn stamp(&mut self) -> Result<(i64, i64), DbError> {
        let row = self
            .client
            .query_one(sql::STAMP, &[])
            .map_err(DbError::of)?;
        Ok((row.get(0), row.get(1)))
    }

    fn has_run(&mut self, run: &str) -> Result<bool, DbError> {
        let row = self
            .client
            .query_one(sql::HAS_RUN, &[&run])
            .map_err(DbError::of)?;
        Ok(row.get(0))
    }

    fn runs_of(&mut self, name: &str) -> Result<Vec<RunRow>, DbError> {
        let rows = self
            .client
            .query(
                &format!("{RUNS} WHERE name = $1 ORDER BY started_ms, run"),
                &[&name],
            )
            .map_err(DbError::of)?;
        Ok(rows.iter().map(run_row).collect())
    }

    fn cells(&mut self) -> Result<Vec<StoredCell>, DbError> {
        let rows = self.client.query(CELLS, &[]).map_err(DbError::of)?;
        Ok(rows.iter().map(stored_cell).collect())
    }

    fn cells_of_runs(&mut self, runs: &[String]) -> Result<Vec<StoredCell>, DbError> {
        let rows = self
            .client
            .query(&format!("{CELLS} WHERE run = ANY($1)"), &[&runs])
            .map_err(DbError::of)?;
        Ok(rows.iter().map(stored_cell).collect())
    }

    fn failsets(&mut self, runs: &[String]) -> Result<Vec<(String, String, Vec<u8>)>, DbError> {
        let rows = self
            .client
            .query(
                "SELECT run, cell, entries FROM failsets WHERE run = ANY($1)",
                &[&runs],
            )
            .map_err(DbError::of)?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    fn tests(&mut self, which: Rows<'_>) -> Result<Vec<StoredTest>, DbError> {
        let sql = sql::TESTS;
        let rows = match which {
            Rows::Named(t) => self.client.query(&format!("{sql} WHERE test = $1"), &[&t]),
            Rows::OfRuns(runs) => self
                .client
                .query(&format!("{sql} WHERE run = ANY($1)"), &[&runs]),
            Rows::All => self.client.query(sql, &[]),
        }
        .map_err(DbError::of)?;
        Ok(rows
            .iter()
            .map(|r| StoredTest {
                run: r.get(0),
                cell: r.get(1),
                test: r.get(2),
                hash: r.get::<_, i64>(3) as u64,
                outcome: TestStatus::parse(r.get(4)),
                reruns: r.get::<_, i32>(5) as u32,
                signature: r.get(6),
                message: r.get(7),
            })
            .collect())
    }

    fn passset_len(&mut self, digest: &str) -> Result<usize, DbError> {
        let row = self
            .client
            .query_opt(sql::PASSSET_LEN, &[&digest])
            .map_err(DbError::of)?;
        Ok(row.map_or(0, |r| r.get::<_, i32>(0)) as usize / 8)
    }

    fn passset(&mut self, digest: &str) -> Result<Vec<u64>, DbError> {
        let row = self
            .client
            .query_opt(sql::PASSSET, &[&digest])
            .map_err(DbError::of)?;
        Ok(row
            .map(|r| hashes_from_bytes(r.get::<_, &[u8]>(0)))
            .unwrap_or_default())
    }
}
