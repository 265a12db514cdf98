//! The bytes of a JUnit file bounded before the XML parser sees them: a tag
//! longer than [`MAX_TAG`] ends the input, a text run longer than
//! [`MAX_TEXT_RUN`] is cut to its start and its tail, and offsets are mapped
//! back to the file's own.

use std::io::BufRead;

use super::{MAX_TAG, MAX_TEXT_RUN, TEXT_TAIL};

/// The bytes of a JUnit file as the XML parser gets them: a tag longer than
/// [`MAX_TAG`] ends the input with an error, and of a text run longer than
/// [`MAX_TEXT_RUN`] only its start and its last [`TEXT_TAIL`] bytes are
/// passed on. The parser buffers one token at a time, so this bounds its
/// memory whatever the file holds.
pub(super) struct Tokens<R> {
    inner: R,
    /// Bytes since the last `<` or `>`.
    run: u64,
    /// Whether the last delimiter was `>` (or none yet): text, not a tag.
    in_text: bool,
    /// Skipping the rest of a long text run.
    skipping: bool,
    /// The last byte handed out was `<`.
    after_lt: bool,
    /// The last bytes skipped, passed on before the next `<`.
    tail: std::collections::VecDeque<u8>,
    /// Bytes to hand out before reading more.
    pending: Vec<u8>,
    /// Bytes handed out, and (handed out, skipped so far) at each cut.
    out: u64,
    cuts: Vec<(u64, u64)>,
    skipped: u64,
    /// Why the input was ended early, for [`Problem::TooLarge`].
    pub(super) too_long: std::cell::Cell<Option<String>>,
}

impl<R: BufRead> Tokens<R> {
    pub(super) fn new(inner: R) -> Self {
        Tokens {
            inner,
            run: 0,
            in_text: true,
            skipping: false,
            after_lt: false,
            tail: std::collections::VecDeque::with_capacity(TEXT_TAIL),
            pending: Vec::new(),
            out: 0,
            cuts: Vec::new(),
            skipped: 0,
            too_long: std::cell::Cell::new(None),
        }
    }

    /// The offset in the file of byte `pos` of what was handed out.
    pub(super) fn original(&self, pos: u64) -> u64 {
        let i = self.cuts.partition_point(|(at, _)| *at <= pos);
        pos + if i == 0 { 0 } else { self.cuts[i - 1].1 }
    }

    /// Hands out as many whole runs (and their delimiters) as fit `out`
    /// while none reaches its limit, in one copy; 0 when the next run needs
    /// the byte-by-byte path of `read` (a limit, the end of the input).
    /// Tracks `run`, `in_text` and `after_lt` as that path would.
    fn read_runs(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let chunk = self.inner.fill_buf()?;
        let max = chunk.len().min(out.len());
        let (mut run, mut in_text, mut after_lt) = (self.run, self.in_text, self.after_lt);
        let mut i = 0;
        while i < max {
            if std::mem::take(&mut after_lt) && chunk[i] == b'!' {
                in_text = true;
            }
            let limit = if in_text { MAX_TEXT_RUN } else { MAX_TAG };
            let seg = memchr::memchr2(b'<', b'>', &chunk[i..max]).unwrap_or(max - i);
            if run + seg as u64 >= limit {
                break;
            }
            run += seg as u64;
            i += seg;
            if i < max {
                let b = chunk[i];
                in_text = b == b'>';
                after_lt = b == b'<';
                run = 0;
                i += 1;
            }
        }
        if i == 0 {
            return Ok(0);
        }
        // `after_lt` of a `<` not yet followed by a byte stays set.
        out[..i].copy_from_slice(&chunk[..i]);
        self.inner.consume(i);
        (self.run, self.in_text, self.after_lt) = (run, in_text, after_lt);
        self.out += i as u64;
        Ok(i)
    }

    fn give(&mut self, out: &mut [u8], bytes: &[u8]) -> usize {
        let n = bytes.len().min(out.len());
        out[..n].copy_from_slice(&bytes[..n]);
        self.out += n as u64;
        n
    }
}

impl<R: BufRead> std::io::Read for Tokens<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            let n = self.give(out, &pending);
            self.pending = pending[n..].to_vec();
            return Ok(n);
        }
        if !self.skipping {
            let n = self.read_runs(out)?;
            if n > 0 {
                return Ok(n);
            }
        }
        loop {
            let chunk = self.inner.fill_buf()?;
            if chunk.is_empty() {
                if self.skipping {
                    self.skipping = false;
                    let tail: Vec<u8> = self.tail.drain(..).collect();
                    self.cuts.push((self.out, self.skipped));
                    let n = self.give(out, &tail);
                    self.pending = tail[n..].to_vec();
                    return Ok(n);
                }
                return Ok(0);
            }
            let delim = memchr::memchr2(b'<', b'>', chunk);
            let seg_len = delim.unwrap_or(chunk.len());
            if self.skipping {
                let seg = &chunk[..seg_len];
                for &b in &seg[seg.len().saturating_sub(TEXT_TAIL)..] {
                    if self.tail.len() == TEXT_TAIL {
                        self.skipped += 1;
                        self.tail.pop_front();
                    }
                    self.tail.push_back(b);
                }
                self.skipped += seg.len().saturating_sub(TEXT_TAIL) as u64;
                self.inner.consume(seg_len);
                if delim.is_some() {
                    // The `<` ends the run: pass on its tail, then go on.
                    self.skipping = false;
                    self.cuts.push((self.out, self.skipped));
                    let tail: Vec<u8> = self.tail.drain(..).collect();
                    let n = self.give(out, &tail);
                    self.pending = tail[n..].to_vec();
                    return Ok(n);
                }
                continue;
            }
            if std::mem::take(&mut self.after_lt) && chunk[0] == b'!' {
                // `<![CDATA[`, `<!--`: text to the parser's reader, bounded as text.
                self.in_text = true;
            }
            let limit = if self.in_text { MAX_TEXT_RUN } else { MAX_TAG };
            let room = (limit - self.run) as usize;
            if seg_len == 0 {
                // A delimiter: starts a new run.
                let b = chunk[0];
                self.in_text = b == b'>';
                self.after_lt = b == b'<';
                self.run = 0;
                self.inner.consume(1);
                return Ok(self.give(out, &[b]));
            }
            if room == 0 {
                if self.in_text {
                    self.skipping = true;
                    continue;
                }
                let message = format!(
                    "a tag longer than {} MiB (the limit for one element and its attributes)",
                    MAX_TAG >> 20
                );
                self.too_long.set(Some(message.clone()));
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    message,
                ));
            }
            let take = seg_len.min(room).min(out.len());
            out[..take].copy_from_slice(&chunk[..take]);
            self.inner.consume(take);
            self.run += take as u64;
            self.out += take as u64;
            return Ok(take);
        }
    }
}
