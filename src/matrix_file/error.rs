//! Errors in matrix files: always a file, usually a line and column.

use std::fmt;
use std::path::PathBuf;

use super::tree::Pos;

/// A problem in a matrix file, pointing at where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub file: PathBuf,
    pub pos: Option<Pos>,
    pub message: String,
}

impl SpecError {
    pub fn new(file: impl Into<PathBuf>, pos: Option<Pos>, message: impl Into<String>) -> Self {
        SpecError {
            file: file.into(),
            pos,
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(p) => write!(
                f,
                "{}:{}:{}: {}",
                self.file.display(),
                p.line,
                p.col,
                self.message
            ),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for SpecError {}
