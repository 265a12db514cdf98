//! A file sent back behind a process's own output, in the same exec: the
//! process wrapper prints a marker line no test can foresee, then the file
//! (googletest's XML report). Reading the report this way costs no second
//! exec, and its bytes arrive while the controller is still waiting.
//!
//! [`Trailer`] splits the stream: bytes before the marker are the process's
//! output and are handed on as they come, bytes after it are the file.
//!
//! The marker is looked for as `<marker>\n` anywhere in the stream, not
//! only at a line's start: it carries the controller's pid, a counter and
//! the time in nanoseconds, so no test prints it, and the wrapper prints it
//! straight after the process's last byte. What is held back is therefore
//! only the end of an unfinished line that could begin the marker, never a
//! line break: every complete line reaches the progress parser the moment
//! the process has written it. (Looking for `\n<marker>\n` held back the
//! newline of a test's `[ RUN ]` line, so a test that then hung in silence
//! was never seen running and never timed out.)

use memchr::memmem;

/// Splits one process's output stream at its marker.
#[derive(Debug)]
pub struct Trailer {
    /// `<marker>\n`, exactly as the wrapper prints it.
    needle: Vec<u8>,
    /// Output bytes that may be the start of the needle, not yet handed on
    /// (never a line break: the needle's only one is its last byte).
    held: Vec<u8>,
    /// The file's bytes, once the needle was seen.
    file: Option<Vec<u8>>,
    /// At most this many of the file's bytes are kept.
    limit: usize,
}

impl Trailer {
    /// A splitter for `marker` (which must hold no line break);
    /// the file after it is kept up to `limit` bytes.
    pub fn new(marker: &str, limit: usize) -> Trailer {
        Trailer {
            needle: format!("{marker}\n").into_bytes(),
            held: Vec::new(),
            file: None,
            limit,
        }
    }

    /// Feeds a chunk of the stream; `output` gets the process's own bytes.
    pub fn feed(&mut self, bytes: &[u8], output: &mut dyn FnMut(&[u8])) {
        if let Some(file) = &mut self.file {
            let room = self.limit.saturating_sub(file.len());
            file.extend_from_slice(&bytes[..bytes.len().min(room)]);
            return;
        }
        let joined;
        let buf: &[u8] = if self.held.is_empty() {
            bytes
        } else {
            let mut b = std::mem::take(&mut self.held);
            b.extend_from_slice(bytes);
            joined = b;
            &joined
        };
        if let Some(at) = memmem::find(buf, &self.needle) {
            if at > 0 {
                output(&buf[..at]);
            }
            self.file = Some(Vec::new());
            let rest = &buf[at + self.needle.len()..];
            self.feed(rest, output);
            return;
        }
        // Hold back the longest tail that could begin the needle.
        let keep = (1..self.needle.len().min(buf.len() + 1))
            .rev()
            .find(|&k| buf.ends_with(&self.needle[..k]))
            .unwrap_or(0);
        let (now, later) = buf.split_at(buf.len() - keep);
        if !now.is_empty() {
            output(now);
        }
        self.held = later.to_vec();
    }

    /// Ends the stream: hands on what was held back (the marker never came)
    /// and returns the file, if the marker came.
    pub fn finish(mut self, output: &mut dyn FnMut(&[u8])) -> Option<Vec<u8>> {
        if !self.held.is_empty() {
            output(&std::mem::take(&mut self.held));
        }
        self.file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `stream` cut into chunks of `size`: (output, file).
    fn split(stream: &[u8], size: usize, limit: usize) -> (Vec<u8>, Option<Vec<u8>>) {
        let mut t = Trailer::new("MARK-42", limit);
        let mut out = Vec::new();
        for chunk in stream.chunks(size.max(1)) {
            t.feed(chunk, &mut |b| out.extend_from_slice(b));
        }
        let file = t.finish(&mut |b| out.extend_from_slice(b));
        (out, file)
    }

    #[test]
    fn output_and_file_are_split_at_the_marker_however_the_stream_is_cut() {
        // The wrapper prints the marker straight after the process's last
        // byte, here an unfinished line.
        let stream = b"[ RUN      ] A.B\n[       OK ] A.B (0 ms)\nno newlineMARK-42\n<?xml?>\n<testsuites/>\n";
        for size in 1..stream.len() + 1 {
            let (out, file) = split(stream, size, 1 << 20);
            assert_eq!(
                String::from_utf8_lossy(&out),
                "[ RUN      ] A.B\n[       OK ] A.B (0 ms)\nno newline",
                "chunks of {size}"
            );
            assert_eq!(file.as_deref(), Some(&b"<?xml?>\n<testsuites/>\n"[..]));
        }
    }

    #[test]
    fn every_complete_line_is_handed_on_as_soon_as_it_is_fed() {
        // A test that prints its RUN line and then hangs in silence: the
        // line must reach the progress parser with its newline at once,
        // however the stream is cut and whatever follows it.
        let stream = b"[ RUN      ] Gamma.Hangs\nMARK\n\nMARK-4\n\n\npartial MARK-";
        for size in 1..stream.len() + 1 {
            let mut t = Trailer::new("MARK-42", 1 << 20);
            let mut out = Vec::new();
            let mut fed = 0;
            for chunk in stream.chunks(size) {
                t.feed(chunk, &mut |b| out.extend_from_slice(b));
                fed += chunk.len();
                let complete = stream[..fed]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                assert!(
                    out.len() >= complete && out[..complete] == stream[..complete],
                    "chunks of {size}, after {fed} bytes: {:?}",
                    String::from_utf8_lossy(&out)
                );
            }
            assert_eq!(t.finish(&mut |b| out.extend_from_slice(b)), None);
            assert_eq!(out, stream, "chunks of {size}");
        }
    }

    #[test]
    fn a_stream_without_the_marker_is_all_output() {
        // Ends with what could have begun the marker.
        let stream = b"line\nMARK-4\nMARK";
        for size in 1..stream.len() + 1 {
            let (out, file) = split(stream, size, 1 << 20);
            assert_eq!(out, stream, "chunks of {size}");
            assert_eq!(file, None);
        }
    }

    #[test]
    fn the_file_is_bounded() {
        let stream = b"then\nMARK-42\n0123456789";
        let (out, file) = split(stream, 3, 4);
        assert_eq!(out, b"then\n");
        assert_eq!(file.as_deref(), Some(&b"0123"[..]));
    }

    #[test]
    fn a_marker_at_the_very_start_leaves_no_output() {
        let (out, file) = split(b"MARK-42\nx", 2, 10);
        assert!(out.is_empty());
        assert_eq!(file.as_deref(), Some(&b"x"[..]));
    }
}
