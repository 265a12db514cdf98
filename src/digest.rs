//! SHA-256 digests as lowercase hex: content hashes of cells, environments,
//! matrix files and tarballs.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The 12-character form people see of a hash or an engine id (as the
/// docker CLI shows ids).
pub fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// SHA-256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// SHA-256 of a file's contents, hex, reading it in 1 MiB chunks.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}
