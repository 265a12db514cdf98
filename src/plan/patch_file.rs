//! Patch files a plan names outside git: read within [`MAX_PATCH`], as
//! UTF-8 text, refused when binary. Used for the debug LLVM's `patches:`
//! (`environment.llvm`) and by `rocmatrix try`.

use std::path::Path;

/// The largest patch read.
pub const MAX_PATCH: u64 = 16 << 20;

/// One patch of the debug LLVM, as the toolchain build applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlvmPatch {
    /// The file's name, for the build's log.
    pub name: String,
    pub sha256: String,
    pub text: String,
}

/// Why a file cannot be read as a patch.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotAPatch(String);

/// The text of the patch at `path`.
pub fn read_text(path: &Path) -> Result<String, NotAPatch> {
    let bytes = crate::safe_read::read_bounded(path, MAX_PATCH, "patches", "")
        .map_err(|e| NotAPatch(e.to_string()))?;
    if let Some(why) = binary(&bytes) {
        return Err(NotAPatch(format!("{why}; only text patches are applied")));
    }
    String::from_utf8(bytes).map_err(|e| NotAPatch(format!("not UTF-8 text: {e}")))
}

/// Why `bytes` is a binary patch, if it is one.
pub fn binary(bytes: &[u8]) -> Option<&'static str> {
    if bytes.contains(&0) {
        return Some("it holds NUL bytes (a binary file, not a patch)");
    }
    let text = String::from_utf8_lossy(bytes);
    text.lines().find_map(|l| {
        if l == "GIT binary patch" {
            Some("it is a binary patch (`GIT binary patch`)")
        } else if l.starts_with("Binary files ") && l.ends_with(" differ") {
            Some("it changes a binary file (`Binary files … differ`)")
        } else {
            None
        }
    })
}
