//! `journal.jsonl`: every event, one JSON object per line, appended and
//! flushed as it happens, so a killed run still tells what it did.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use super::events::{Event, Listener};
use crate::store::now_rfc3339;

pub struct Journal {
    file: Mutex<File>,
}

impl Journal {
    /// Opens (appending) `path`.
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Journal {
            file: Mutex::new(file),
        })
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
        if let Ok(mut f) = self.file.lock() {
            // One write per line keeps lines whole; flush per event.
            let _ = f.write_all(line.as_bytes());
            let _ = f.flush();
        }
    }
}
