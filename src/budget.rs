//! A memory budget for one piece of work on one thread: rendering a
//! template from a matrix file.
//!
//! minijinja bounds instructions (fuel) but not the size of the strings a
//! template builds: `{% set b = a ~ a %}` thirty times, or a chain of
//! `|replace("", a)`, makes gigabytes in a few dozen instructions, before
//! anything is written. No check between instructions can see that, so the
//! budget is kept where the memory is handed out: [`Budgeted`], the
//! binary's global allocator (`src/main.rs`), counts the bytes a thread
//! holds while a [`Guard`] is armed on it. When an allocation would take
//! the thread over its budget, the process prints the guard's message and
//! exits with code 2 (the matrix file is at fault) at once: an allocator
//! cannot return an error, and unwinding out of one is not allowed.
//!
//! Without [`Budgeted`] as the global allocator (a library user's own
//! program, the tests' process) guards cost nothing and bound nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Bytes this thread may still take while armed; `None` when not armed.
    static LEFT: Cell<Option<isize>> = const { Cell::new(None) };
    /// The armed guard's message (pointer and length), printed on exceeding.
    static MESSAGE: Cell<(*const u8, usize)> = const { Cell::new((std::ptr::null(), 0)) };
}

/// The exit code when a budget is exceeded: a usage or matrix-file error,
/// as `ExitCode::Usage` in `src/error.rs`.
pub const EXCEEDED_EXIT_CODE: i32 = 2;

/// The system allocator, counting the bytes of threads that armed a [`Guard`].
pub struct Budgeted;

/// Arms a budget of `bytes` on this thread until dropped.
pub struct Guard {
    /// Kept alive (and in place) while armed: [`MESSAGE`] points into it.
    message: Box<str>,
    previous: Option<isize>,
}

impl Guard {
    /// `message` is printed (after `error: `) if the thread goes over `bytes`.
    pub fn arm(bytes: usize, message: String) -> Guard {
        let message = message.into_boxed_str();
        let previous = LEFT.with(|l| l.get());
        MESSAGE.with(|m| m.set((message.as_ptr(), message.len())));
        LEFT.with(|l| l.set(Some(bytes.min(isize::MAX as usize) as isize)));
        Guard { message, previous }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        LEFT.with(|l| l.set(self.previous));
        if self.previous.is_none() {
            MESSAGE.with(|m| m.set((std::ptr::null(), 0)));
        }
        let _ = &self.message;
    }
}

/// Takes `n` bytes (negative: gives back) from the armed budget.
fn take(n: isize) {
    let _ = LEFT.try_with(|l| {
        if let Some(left) = l.get() {
            let now = left.saturating_sub(n);
            if now < 0 && n > 0 {
                l.set(None);
                exceeded();
            }
            l.set(Some(now));
        }
    });
}

/// Prints the armed message and exits; allocates nothing.
fn exceeded() -> ! {
    let (ptr, len) = MESSAGE
        .try_with(|m| m.get())
        .unwrap_or((std::ptr::null(), 0));
    let write = |bytes: &[u8]| {
        // SAFETY: writing a valid buffer to stderr.
        unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
    };
    write(b"error: ");
    if !ptr.is_null() {
        // SAFETY: the armed guard owns these bytes and outlives the armed time.
        write(unsafe { std::slice::from_raw_parts(ptr, len) });
    } else {
        write(b"a memory budget was exceeded");
    }
    write(b"\n");
    // SAFETY: ends the process without running anything more.
    unsafe { libc::_exit(EXCEEDED_EXIT_CODE) }
}

// SAFETY: every call is passed to the system allocator unchanged; the
// bookkeeping only reads and writes this thread's cells.
unsafe impl GlobalAlloc for Budgeted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size() as isize);
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size() as isize);
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        take(-(layout.size() as isize));
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        take(new_size as isize - layout.size() as isize);
        System.realloc(ptr, layout, new_size)
    }
}
