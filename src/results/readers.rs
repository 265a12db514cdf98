//! Reading a source's JUnit files on several threads, handed on in order.
//!
//! A few worker threads each parse whole files (one file, one worker) into
//! batches of compact events: a test case that simply passed is its two
//! names in the batch's text, its time and its identity hash, with no
//! allocation of its own; anything else is a boxed [`Case`]. The judging
//! thread ([`super::collect`]) takes the events file by file, in the
//! source's order, so the merged JUnit file and the results are the same
//! as when one thread reads everything.
//!
//! Memory stays bounded: at most [`WINDOW`] files beyond the workers are
//! handed out ahead of the file being judged, and each file's channel holds
//! at most [`CHANNEL_BATCHES`] batches (a batch is cut at [`BATCH_EVENTS`]
//! events or [`BATCH_BYTES`] bytes of text). Files are taken in order, so
//! the file being judged is always being read, never waiting behind others.

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::junit::{self, Case, Limits, Outcome, Visitor};
use super::model::TestHashPrefix;
use super::source::Source;

/// Batches waiting per file.
const CHANNEL_BATCHES: usize = 4;
/// A batch is sent at this many events or text bytes, whichever comes first.
const BATCH_EVENTS: usize = 2048;
const BATCH_BYTES: usize = 1 << 20;
/// Files handed out beyond one per worker.
const WINDOW: usize = 2;
/// Reading threads at most (a few saturate the judging thread).
const MAX_WORKERS: usize = 4;

/// A byte range of a batch's text.
#[derive(Clone, Copy)]
pub(crate) struct Span(u32, u32);

/// What the reading threads tell the judging thread, in document order.
pub(crate) enum Ev {
    SuiteStart(String, Option<String>),
    SuiteEnd(String),
    /// The suite of the cases that follow.
    Suite(String),
    /// A test case that passed with nothing more to say than its names
    /// (in the batch's text) and time; `hash` is its [`test_hash`].
    Pass {
        name: Span,
        classname: Span,
        time: Option<f64>,
        hash: u64,
    },
    Case(Box<Case>),
    /// The end of one file (always the last event of its batch).
    FileDone(junit::ReadReport),
}

/// Events and the text their [`Span`]s point into.
struct Batch {
    events: Vec<Ev>,
    text: String,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            events: Vec::with_capacity(BATCH_EVENTS),
            text: String::with_capacity(BATCH_EVENTS * 48),
        }
    }
}

/// Whether the case says nothing beyond its names and time.
fn is_plain(c: &Case) -> bool {
    c.outcome == Outcome::Passed
        && c.flaky.is_empty()
        && c.reruns.is_empty()
        && c.message.is_empty()
        && c.kind.is_empty()
        && c.text.is_empty()
        && c.system_out.is_empty()
        && c.system_err.is_empty()
}

/// The reading side of one file: a visitor that batches events into its channel.
struct Batcher {
    tx: SyncSender<Batch>,
    batch: Batch,
    bytes: usize,
    suite: Option<String>,
    /// The hash prefix of the last plain case's suite and class.
    prefix: Option<(String, TestHashPrefix)>,
    closed: bool,
}

impl Batcher {
    fn push(&mut self, ev: Ev, bytes: usize) {
        self.batch.events.push(ev);
        self.bytes += bytes;
        if self.batch.events.len() >= BATCH_EVENTS || self.bytes >= BATCH_BYTES {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.batch.events.is_empty() || self.closed {
            return;
        }
        let batch = std::mem::replace(&mut self.batch, Batch::new());
        self.bytes = 0;
        // The judging side hung up: stop sending (the reader still finishes).
        self.closed = self.tx.send(batch).is_err();
    }

    /// The hash prefix of `suite` and `classname`, made again only when
    /// they change (the suite is this file's current one).
    fn hash_prefix(&mut self, suite: &str, classname: &str) -> TestHashPrefix {
        match &self.prefix {
            Some((class, prefix)) if class == classname => *prefix,
            _ => {
                let prefix = TestHashPrefix::new(suite, classname);
                self.prefix = Some((classname.to_string(), prefix));
                prefix
            }
        }
    }

    fn span(&mut self, s: &str) -> Span {
        let start = self.batch.text.len();
        self.batch.text.push_str(s);
        Span(start as u32, self.batch.text.len() as u32)
    }
}

impl Visitor for Batcher {
    fn suite_start(&mut self, path: &str, timestamp: Option<&str>) {
        self.push(
            Ev::SuiteStart(path.to_string(), timestamp.map(str::to_string)),
            0,
        );
    }

    fn suite_end(&mut self, path: &str) {
        self.push(Ev::SuiteEnd(path.to_string()), 0);
    }

    fn case(&mut self, suite: &str, case: &mut Case) {
        if self.suite.as_deref() != Some(suite) {
            self.suite = Some(suite.to_string());
            self.prefix = None;
            self.push(Ev::Suite(suite.to_string()), 0);
        }
        if is_plain(case) {
            let hash = self
                .hash_prefix(suite, &case.classname)
                .with_name(&case.name);
            let name = self.span(&case.name);
            let classname = self.span(&case.classname);
            let bytes = case.name.len() + case.classname.len();
            let time = case.time;
            self.push(
                Ev::Pass {
                    name,
                    classname,
                    time,
                    hash,
                },
                bytes,
            );
            return;
        }
        let bytes = 64
            + case.name.len()
            + case.message.len()
            + case.text.text.len()
            + case.system_out.text.len()
            + case.system_err.text.len();
        self.push(Ev::Case(Box::new(std::mem::take(case))), bytes);
    }
}

/// Files waiting for a worker, each with the channel its events go to.
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

struct QueueState {
    jobs: VecDeque<(usize, SyncSender<Batch>)>,
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next file to read; `None` once closed.
    fn take(&self) -> Option<(usize, SyncSender<Batch>)> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if let Some(job) = s.jobs.pop_front() {
                return Some(job);
            }
            s = self.ready.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give(&self, job: usize, tx: SyncSender<Batch>) {
        let mut s = self.lock();
        // Once closed, the sender is dropped here: its file reads as stopped.
        if !s.closed {
            s.jobs.push_back((job, tx));
            self.ready.notify_one();
        }
    }

    /// No more files: waiting workers end, and the senders of files not
    /// yet taken are dropped (their receivers see the end).
    fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.jobs.clear();
        self.ready.notify_all();
    }
}

/// Closes the queue when a worker unwinds, so the judging thread never
/// waits for files nobody will read.
struct CloseOnDrop<'q>(&'q Queue);
impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.close();
        }
    }
}

fn worker(queue: &Queue, files: &[(&Path, &str)], limits: Limits) {
    let _guard = CloseOnDrop(queue);
    while let Some((job, tx)) = queue.take() {
        let (dir, rel) = files[job];
        let mut b = Batcher {
            tx,
            batch: Batch::new(),
            bytes: 0,
            suite: None,
            prefix: None,
            closed: false,
        };
        let report = match open_junit(dir, rel) {
            Ok(f) => junit::read(BufReader::with_capacity(256 * 1024, f), limits, &mut b),
            Err(e) => junit::ReadReport {
                problem: Some(junit::Problem::Io {
                    message: e.to_string(),
                }),
                ..Default::default()
            },
        };
        b.batch.events.push(Ev::FileDone(report));
        b.flush();
    }
}

/// Opens the JUnit file `rel` of a cell: a regular file (a FIFO would hang,
/// `/dev/zero` would never end) inside the cell's directory, also after
/// symlinks (a run store's `cell.json` may come from a downloaded artifact
/// and name `/etc/…` or `../../…`).
fn open_junit(dir: &Path, rel: &str) -> std::io::Result<File> {
    let path = crate::safe_read::within(dir, Path::new(rel))?;
    crate::safe_read::open_regular(&path)
}

/// The judging side: the events of every file, file after file.
pub(crate) struct FileEvents<'q> {
    queue: &'q Queue,
    files: usize,
    /// Files handed to the queue so far.
    given: usize,
    /// The channels of the files handed out and not yet judged, in order.
    open: VecDeque<Receiver<Batch>>,
    /// The current batch (moved out of one event at a time, never copied).
    pending: std::vec::IntoIter<Ev>,
    text: String,
}

impl FileEvents<'_> {
    fn give_next(&mut self) {
        if self.given < self.files {
            let (tx, rx) = sync_channel(CHANNEL_BATCHES);
            self.queue.give(self.given, tx);
            self.open.push_back(rx);
            self.given += 1;
        }
    }

    /// The next event of the current file; `None` when its reader stopped
    /// without finishing it (the next call goes on with the next file).
    pub(crate) fn next(&mut self) -> Option<Ev> {
        loop {
            if let Some(ev) = self.pending.next() {
                if matches!(ev, Ev::FileDone(_)) {
                    self.open.pop_front();
                    self.give_next();
                }
                return Some(ev);
            }
            let received = self.open.front()?.recv();
            match received {
                Ok(b) => {
                    self.pending = b.events.into_iter();
                    self.text = b.text;
                }
                Err(_) => {
                    self.open.pop_front();
                    self.give_next();
                    return None;
                }
            }
        }
    }

    /// The text of a [`Ev::Pass`] span of the current batch.
    pub(crate) fn text(&self, s: Span) -> &str {
        self.text.get(s.0 as usize..s.1 as usize).unwrap_or("")
    }
}

impl Drop for FileEvents<'_> {
    fn drop(&mut self) {
        // Receivers go first (a worker blocked on a full channel wakes up
        // to a closed one), then the queue (idle workers end).
        self.open.clear();
        self.queue.close();
    }
}

/// How many threads read: the cores there are, at most [`MAX_WORKERS`],
/// at most one per file (none without files: a run's judge collects cells
/// that wrote no JUnit, one at a time).
fn workers(files: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_WORKERS)
        .min(files)
}

/// Reads every JUnit file of `source` on worker threads while `judge`
/// takes their events, in order, on this thread.
pub(crate) fn read_all<R>(
    source: &Source,
    limits: Limits,
    judge: impl FnOnce(&mut FileEvents<'_>) -> R,
) -> R {
    let files: Vec<(&Path, &str)> = source
        .cells
        .iter()
        .flat_map(|cs| cs.junit.iter().map(|rel| (cs.dir.as_path(), rel.as_str())))
        .collect();
    let queue = Queue {
        state: Mutex::new(QueueState {
            jobs: VecDeque::new(),
            closed: false,
        }),
        ready: Condvar::new(),
    };
    let n = workers(files.len());
    std::thread::scope(|scope| {
        for _ in 0..n {
            scope.spawn(|| worker(&queue, &files, limits));
        }
        let mut events = FileEvents {
            queue: &queue,
            files: files.len(),
            given: 0,
            open: VecDeque::new(),
            pending: Vec::new().into_iter(),
            text: String::new(),
        };
        for _ in 0..n + WINDOW {
            events.give_next();
        }
        judge(&mut events)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::collect::{collect, Sink};
    use crate::results::TestStatus;

    /// The cases in the order a sink sees them.
    struct Order(Vec<String>);
    impl Sink for Order {
        fn case(&mut self, suite: &str, case: &Case, status: TestStatus) {
            self.0.push(format!(
                "{suite}:{}.{}:{status:?}",
                case.classname, case.name
            ));
        }
    }

    #[test]
    fn files_read_side_by_side_arrive_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let mut want = Vec::new();
        let mut dirs = Vec::new();
        let mut hashes_by_cell = Vec::new();
        for c in 0..3 {
            let mut hashes = Vec::new();
            let dir = tmp.path().join(format!("c{c}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..7 {
                // 1 to 5,000 cases a file: some files span several batches.
                let n = 1 + (c * 7 + f) * 731 % 5000;
                let mut xml = format!("<testsuite name=\"s{f}\">");
                for i in 0..n {
                    if i % 97 == 0 {
                        xml.push_str(&format!(
                            "<testcase classname=\"k\" name=\"t{i}\"><failure message=\"m\"/></testcase>"
                        ));
                        want.push(format!("s{f}:k.t{i}:Failed"));
                    } else {
                        xml.push_str(&format!(
                            "<testcase classname=\"k&amp;\" name=\"t{i}\" time=\"0.1\"/>"
                        ));
                        want.push(format!("s{f}:k&.t{i}:Passed"));
                        hashes.push(super::super::model::test_hash(
                            &format!("s{f}"),
                            "k&",
                            &format!("t{i}"),
                        ));
                    }
                }
                xml.push_str("</testsuite>");
                std::fs::write(dir.join(format!("f{f}.xml")), xml).unwrap();
            }
            dirs.push(dir);
            hashes.sort_unstable();
            hashes_by_cell.push(hashes);
        }
        let src = Source::junit_dirs(&dirs).unwrap();
        let mut order = Order(Vec::new());
        let r = collect(&src, Limits::default(), &mut order);
        assert_eq!(order.0.len(), want.len());
        assert!(order.0 == want, "cases out of order");
        let passed = want.iter().filter(|w| w.ends_with(":Passed")).count();
        assert_eq!(r.totals().passed as usize, passed);
        for (cell, want) in r.cells.iter().zip(&hashes_by_cell) {
            assert_eq!(&cell.passed_hashes, want, "{}", cell.id);
        }
    }
}
