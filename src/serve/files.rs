//! A run store's own files, served as they are (a run's `report/`): only
//! regular files inside `<out>/runs/`, reached without `..`, an absolute
//! path or a symlink that leads out (`safe_read::within`), at most
//! [`MAX_FILE`] bytes. Anything else is not found.

use std::path::Path;

/// The largest file served.
pub const MAX_FILE: u64 = 256 << 20;

/// The bytes and content type of `rel` (decoded) under `runs`, or `None`.
pub fn read(runs: &Path, rel: &str) -> Option<(Vec<u8>, &'static str)> {
    if rel.is_empty() || rel.contains('\0') || rel.starts_with('/') || rel.contains('\\') {
        return None;
    }
    let rel = Path::new(rel);
    let real = crate::safe_read::within(runs, rel).ok()?;
    let bytes = crate::safe_read::read_bounded(&real, MAX_FILE, "served files", "").ok()?;
    Some((bytes, content_type(rel)))
}

/// The content type of a file by its name; text as UTF-8.
fn content_type(p: &Path) -> &'static str {
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "jsonl" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "xml" => "application/xml",
        "md" | "log" | "txt" | "yaml" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Where the run store of the recorded run `run` is under `runs`, if one
/// is: a merged run's id (`a+b`) is its first store's.
pub fn store_of(runs: &Path, run: &str) -> Option<String> {
    let first = run.split('+').next()?;
    if first.is_empty() || first.contains('/') || first.starts_with('.') {
        return None;
    }
    crate::store::layout::is_run(&runs.join(first)).then(|| first.to_string())
}

/// The path under `runs` of a run store's `report/index.html`, if it is
/// there.
pub fn report_of(runs: &Path, store: &str) -> Option<String> {
    let index = crate::store::layout::report_of(&runs.join(store)).join("index.html");
    index
        .is_file()
        .then(|| format!("{store}/report/index.html"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_files_stay_inside_the_stores() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        std::fs::create_dir_all(runs.join("r1/report")).unwrap();
        std::fs::write(runs.join("r1/report/index.html"), "<p>ok</p>").unwrap();
        std::fs::write(dir.path().join("secret"), "no").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), runs.join("r1/out")).unwrap();
        let (bytes, ty) = read(&runs, "r1/report/index.html").unwrap();
        assert_eq!(
            (bytes.as_slice(), ty),
            (&b"<p>ok</p>"[..], "text/html; charset=utf-8")
        );
        for bad in [
            "r1/../../secret",
            "../secret",
            "/etc/passwd",
            "r1/out",
            "r1",
            "",
            "r1/report/",
        ] {
            assert!(read(&runs, bad).is_none(), "{bad}");
        }
    }
}
