//! The default history: one SQLite file beside the run stores. WAL mode
//! and a busy timeout let two runs record at once (one waits for the
//! other's transaction); a run records in one transaction, so a crash
//! leaves it recorded whole or not at all.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::backend::{
    from_json, host_from, host_json, to_json, Backend, DbError, Rows, RunRow, StoredCell,
    StoredTest,
};
use super::record::{hashes_from_bytes, hashes_to_bytes, RunRecord};
use super::{failset, schema, sql};
use crate::outcome::{CellVerdict, TestStatus};

/// How long a writer waits for another's transaction.
const BUSY: Duration = Duration::from_secs(60);

pub struct Sqlite {
    conn: Connection,
}

impl Sqlite {
    /// Opens (creating, or migrating) the database at `path`.
    pub fn open(path: &Path) -> Result<Sqlite, DbError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(DbError::of)?;
        }
        // Two processes opening a new file at once: switching it to WAL
        // takes a lock that SQLite's busy handler does not wait for, so the
        // loser is told "database is locked" at once; it waits here instead.
        let start = std::time::Instant::now();
        loop {
            match Self::setup(path) {
                Err(e) if e.0.contains("locked") && start.elapsed() < BUSY => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    /// Opens the database at `path` for reading only (`rocmatrix serve`):
    /// opened read-only and `query_only`, never created or migrated; a
    /// schema other than this rocmatrix's is refused.
    pub fn open_read_only(path: &Path) -> Result<Sqlite, DbError> {
        use rusqlite::OpenFlags;
        if !path.is_file() {
            return Err(DbError("no such file".into()));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(DbError::of)?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(DbError::of)?;
        conn.pragma_update(None, "query_only", true)
            .map_err(DbError::of)?;
        let found: i64 = conn
            .query_row(sql::VERSION, [], |r| r.get::<_, String>(0))
            .optional()
            .map_err(DbError::of)?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if let Some(why) = schema::refuse_read_only(found) {
            return Err(DbError(why));
        }
        Ok(Sqlite { conn })
    }

    fn setup(path: &Path) -> Result<Sqlite, DbError> {
        let mut conn = Connection::open(path).map_err(DbError::of)?;
        conn.busy_timeout(BUSY).map_err(DbError::of)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(DbError::of)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(DbError::of)?;
        migrate(&mut conn)?;
        Ok(Sqlite { conn })
    }
}

fn migrate(conn: &mut Connection) -> Result<(), DbError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(DbError::of)?;
    let has_meta: bool = tx
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(DbError::of)?
        > 0;
    let found: i64 = if has_meta {
        tx.query_row(sql::VERSION, [], |r| r.get::<_, String>(0))
            .optional()
            .map_err(DbError::of)?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    } else {
        0
    };
    if let Some(why) = schema::refuse_newer(found) {
        return Err(DbError(why));
    }
    if found == schema::VERSION {
        return Ok(());
    }
    for stmt in schema::migrations(found, "BLOB") {
        tx.execute(&stmt, []).map_err(DbError::of)?;
    }
    if schema::fills_failsets(found) {
        let rows = {
            let mut q = tx.prepare(schema::FAILSET_ROWS).map_err(DbError::of)?;
            let rows = q
                .query_map([], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64, r.get(3)?))
                })
                .map_err(DbError::of)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(DbError::of)?
        };
        let mut put = tx.prepare(sql::PUT_FAILSET).map_err(DbError::of)?;
        for (run, cell, bytes) in failset::of_rows(rows) {
            put.execute(params![run, cell, bytes])
                .map_err(DbError::of)?;
        }
    }
    tx.execute(sql::SET_VERSION, params![schema::VERSION.to_string()])
        .map_err(DbError::of)?;
    tx.commit().map_err(DbError::of)
}

use sql::RUNS;

fn run_row(r: &rusqlite::Row<'_>) -> Result<RunRow, rusqlite::Error> {
    Ok(RunRow {
        run: r.get(0)?,
        started_ms: r.get(1)?,
        name: r.get(2)?,
        sources: from_json(&r.get::<_, String>(3)?),
        environments: from_json(&r.get::<_, String>(4)?),
    })
}

use sql::CELLS;

fn stored_cell(r: &rusqlite::Row<'_>) -> Result<StoredCell, rusqlite::Error> {
    Ok(StoredCell {
        run: r.get(0)?,
        cell: r.get(1)?,
        axes: Arc::new(from_json(&r.get::<_, String>(2)?)),
        outcome: CellVerdict::of_word(&r.get::<_, String>(3)?),
        inputs: r.get::<_, String>(4)?.into(),
        passed: r.get(5)?,
        host: host_from(&r.get::<_, String>(6)?),
    })
}

impl Backend for Sqlite {
    fn record(&mut self, r: &RunRecord) -> Result<bool, DbError> {
        let e = DbError::of;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e)?;
        let now = super::record::now_ms();
        let added = tx
            .execute(
                sql::PUT_RUN,
                params![
                    r.run,
                    r.started_ms,
                    r.name,
                    r.matrix_hash,
                    to_json(&r.sources),
                    to_json(&r.environments),
                    now
                ],
            )
            .map_err(e)?;
        if added == 0 {
            return Ok(false);
        }
        {
            let mut put = tx.prepare(sql::PUT_PASSSET).map_err(e)?;
            for (digest, hashes) in &r.passsets {
                put.execute(params![digest, hashes_to_bytes(hashes)])
                    .map_err(e)?;
            }
            let mut put = tx.prepare(sql::PUT_CELL).map_err(e)?;
            for c in &r.cells {
                put.execute(params![
                    r.run,
                    c.cell,
                    to_json(&c.axes),
                    c.outcome.word(),
                    c.inputs,
                    c.passed,
                    to_json(&c.signatures),
                    host_json(&c.host)
                ])
                .map_err(e)?;
            }
            let mut put = tx.prepare(sql::PUT_TEST).map_err(e)?;
            for t in &r.tests {
                put.execute(params![
                    r.run,
                    t.cell,
                    t.test,
                    t.hash as i64,
                    t.outcome.as_str(),
                    t.time,
                    t.reruns,
                    t.signature,
                    t.message
                ])
                .map_err(e)?;
            }
            let mut put = tx.prepare(sql::PUT_FAILSET).map_err(e)?;
            for (cell, bytes) in failset::of_record(r) {
                put.execute(params![r.run, cell, bytes]).map_err(e)?;
            }
        }
        tx.commit().map_err(e)?;
        Ok(true)
    }

    fn runs(&mut self) -> Result<Vec<RunRow>, DbError> {
        let mut q = self
            .conn
            .prepare(&format!("{RUNS} ORDER BY started_ms, run"))
            .map_err(DbError::of)?;
        let rows = q.query_map([], run_row).map_err(DbError::of)?;
        rows.collect::<Result<_, _>>().map_err(DbError::of)
    }

    fn stamp(&mut self) -> Result<(i64, i64), DbError> {
        self.conn
            .query_row(sql::STAMP, [], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(DbError::of)
    }

    fn has_run(&mut self, run: &str) -> Result<bool, DbError> {
        self.conn
            .query_row(sql::HAS_RUN, params![run], |r| r.get(0))
            .map_err(DbError::of)
    }

    fn runs_of(&mut self, name: &str) -> Result<Vec<RunRow>, DbError> {
        let mut q = self
            .conn
            .prepare(&format!("{RUNS} WHERE name = ?1 ORDER BY started_ms, run"))
            .map_err(DbError::of)?;
        let rows = q.query_map(params![name], run_row).map_err(DbError::of)?;
        rows.collect::<Result<_, _>>().map_err(DbError::of)
    }

    fn cells(&mut self) -> Result<Vec<StoredCell>, DbError> {
        let mut q = self.conn.prepare(CELLS).map_err(DbError::of)?;
        let rows = q.query_map([], stored_cell).map_err(DbError::of)?;
        rows.collect::<Result<_, _>>().map_err(DbError::of)
    }

    fn cells_of_runs(&mut self, runs: &[String]) -> Result<Vec<StoredCell>, DbError> {
        let mut q = self
            .conn
            .prepare(&format!("{CELLS} WHERE run = ?1"))
            .map_err(DbError::of)?;
        let mut out = Vec::new();
        for run in runs {
            let rows = q
                .query_map(params![run], stored_cell)
                .map_err(DbError::of)?;
            for c in rows {
                out.push(c.map_err(DbError::of)?);
            }
        }
        Ok(out)
    }

    fn failsets(&mut self, runs: &[String]) -> Result<Vec<(String, String, Vec<u8>)>, DbError> {
        let mut q = self
            .conn
            .prepare("SELECT run, cell, entries FROM failsets WHERE run = ?1")
            .map_err(DbError::of)?;
        let mut out = Vec::new();
        for run in runs {
            let rows = q
                .query_map(params![run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(DbError::of)?;
            for f in rows {
                out.push(f.map_err(DbError::of)?);
            }
        }
        Ok(out)
    }

    fn tests(&mut self, which: Rows<'_>) -> Result<Vec<StoredTest>, DbError> {
        let sql = sql::TESTS;
        let e = DbError::of;
        let mut all = Vec::new();
        let mut take = |rows: &mut rusqlite::Rows<'_>| -> Result<(), rusqlite::Error> {
            while let Some(r) = rows.next()? {
                all.push(StoredTest {
                    run: r.get(0)?,
                    cell: r.get(1)?,
                    test: r.get(2)?,
                    hash: r.get::<_, i64>(3)? as u64,
                    outcome: TestStatus::parse(&r.get::<_, String>(4)?),
                    reruns: r.get(5)?,
                    signature: r.get(6)?,
                    message: r.get(7)?,
                });
            }
            Ok(())
        };
        match which {
            Rows::Named(t) => {
                let mut q = self
                    .conn
                    .prepare(&format!("{sql} WHERE test = ?1"))
                    .map_err(e)?;
                take(&mut q.query(params![t]).map_err(e)?).map_err(e)?;
            }
            Rows::OfRuns(runs) => {
                // One indexed range per run (the primary key leads with it).
                let mut q = self
                    .conn
                    .prepare(&format!("{sql} WHERE run = ?1"))
                    .map_err(e)?;
                for run in runs {
                    take(&mut q.query(params![run]).map_err(e)?).map_err(e)?;
                }
            }
            Rows::All => {
                let mut q = self.conn.prepare(sql).map_err(e)?;
                take(&mut q.query([]).map_err(e)?).map_err(e)?;
            }
        }
        Ok(all)
    }

    fn passset_len(&mut self, digest: &str) -> Result<usize, DbError> {
        let bytes: Option<i64> = self
            .conn
            .query_row(sql::PASSSET_LEN, params![digest], |r| r.get(0))
            .optional()
            .map_err(DbError::of)?;
        Ok(bytes.unwrap_or(0) as usize / 8)
    }

    fn passset(&mut self, digest: &str) -> Result<Vec<u64>, DbError> {
        let bytes: Option<Vec<u8>> = self
            .conn
            .query_row(sql::PASSSET, params![digest], |r| r.get(0))
            .optional()
            .map_err(DbError::of)?;
        Ok(bytes.map(|b| hashes_from_bytes(&b)).unwrap_or_default())
    }
}
