//! `journal.jsonl`: every event, one JSON object per line, appended and
//! flushed as it happens, so a killed run still tells what it did.
//!
//! A run killed in the middle of a line leaves the file without its final
//! newline; reopening it (`--resume`) cuts that torn line off, so the next
//! event starts a line of its own and every line stays parseable. A write
//! that fails is kept and turned into the run's error at its end
//! ([`Journal::failure`]): the journal is a record, not a best effort.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::events::{Event, Listener};
use crate::store::now_rfc3339;

pub struct Journal {
    path: PathBuf,
    state: Mutex<State>,
}

struct State {
    file: File,
    /// The first failed write; later events are not written after it (a
    /// line after a gap would tell a wrong story).
    failed: Option<std::io::Error>,
}

/// What [`Journal::open`] found.
pub struct Opened {
    pub journal: Journal,
    /// A warning when a torn last line was cut off.
    pub repaired: Option<String>,
}

impl Journal {
    /// Opens (appending) `path`, first cutting an incomplete last line off.
    pub fn open(path: &Path) -> std::io::Result<Opened> {
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)?;
        let repaired = cut_torn_line(&mut file)?.map(|cut| {
            format!(
                "warning: {}: its last line was incomplete (a run killed while writing it); \
                 cut {cut} bytes back to the last whole line",
                path.display()
            )
        });
        Ok(Opened {
            journal: Journal {
                path: path.to_path_buf(),
                state: Mutex::new(State { file, failed: None }),
            },
            repaired,
        })
    }

    /// The first write that failed, as `(path, error)`.
    pub fn failure(&self) -> Option<(PathBuf, std::io::Error)> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.failed.as_ref().map(|e| {
            (
                self.path.clone(),
                std::io::Error::new(e.kind(), e.to_string()),
            )
        })
    }
}

/// Truncates `file` after its last newline when it does not end with one;
/// returns how many bytes were cut.
fn cut_torn_line(file: &mut File) -> std::io::Result<Option<u64>> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    // Read backwards in blocks up to the last newline.
    const BLOCK: u64 = 64 * 1024;
    let mut end = len;
    let mut buf = vec![0u8; BLOCK as usize];
    loop {
        let start = end.saturating_sub(BLOCK);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            let keep = start + i as u64 + 1;
            if keep == len {
                return Ok(None);
            }
            file.set_len(keep)?;
            return Ok(Some(len - keep));
        }
        if start == 0 {
            file.set_len(0)?;
            return Ok(Some(len));
        }
        end = start;
    }
}

impl Listener for Journal {
    fn on_event(&self, event: &Event) {
        let mut value = match serde_json::to_value(event) {
            Ok(v) => v,
            Err(_) => return,
        };
        if let Some(obj) = value.as_object_mut() {
            obj.insert("time".into(), now_rfc3339().into());
        }
        let mut line = value.to_string();
        line.push('\n');
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.failed.is_some() {
            return;
        }
        // One write per line keeps lines whole; flush per event.
        let written = st
            .file
            .write_all(line.as_bytes())
            .and_then(|_| st.file.flush());
        if let Err(e) = written {
            eprintln!(
                "error: {}: writing the journal failed: {e}",
                self.path.display()
            );
            st.failed = Some(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal_with(text: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::store::layout::journal_of(dir.path());
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_torn_last_line_is_cut_and_the_next_event_starts_a_line() {
        let (_d, path) =
            journal_with(b"{\"event\":\"warning\",\"message\":\"a\"}\n{\"event\":\"cell_fin");
        let opened = Journal::open(&path).unwrap();
        assert!(opened.repaired.unwrap().contains("cut 18 bytes"));
        opened.journal.on_event(&Event::Warning {
            message: "b".into(),
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for l in lines {
            serde_json::from_str::<serde_json::Value>(l).unwrap();
        }
        assert!(opened.journal.failure().is_none());
    }

    #[test]
    fn whole_and_empty_journals_are_left_alone() {
        let (_d, path) = journal_with(b"{\"event\":\"warning\",\"message\":\"a\"}\n");
        assert!(Journal::open(&path).unwrap().repaired.is_none());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
        let (_d, path) = journal_with(b"");
        assert!(Journal::open(&path).unwrap().repaired.is_none());
        let (_d, path) = journal_with(&[b'x'; 200_000]);
        assert!(Journal::open(&path).unwrap().repaired.is_some());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn a_failed_write_is_kept() {
        let j = Journal {
            path: PathBuf::from("/dev/full"),
            state: Mutex::new(State {
                file: OpenOptions::new().write(true).open("/dev/full").unwrap(),
                failed: None,
            }),
        };
        j.on_event(&Event::Warning {
            message: "x".into(),
        });
        let (path, e) = j.failure().unwrap();
        assert_eq!(path, Path::new("/dev/full"));
        assert!(e.to_string().contains("No space"), "{e}");
    }
}
