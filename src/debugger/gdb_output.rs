//! gdb's output read into a [`Backtrace`]: where it stopped, the frames
//! (function, file, line or library), and a note where the picture is
//! incomplete — no debug info, a command that could not be run again, a
//! program that did not stop, gdb cut off by its timeout.

use super::gdb::{EXITED, MARK};
use crate::store::record::{Backtrace, Frame, Stop};

/// The heading a backtrace goes under after a failure's text, in a test's
/// output and in a signature's example (a blank line before it).
pub const HEADING: &str = "backtrace (gdb):";

/// `text` cut where a backtrace under [`HEADING`] begins: the failure's
/// own text, and what follows the heading, if there is one.
pub fn split_off(text: &str) -> (&str, Option<&str>) {
    let at = text
        .match_indices(HEADING)
        .map(|(i, _)| i)
        .find(|&i| text[..i].ends_with("\n\n"));
    match at {
        Some(i) => (&text[..i - 2], Some(&text[i + HEADING.len()..])),
        None => (text, None),
    }
}

/// What the step shell writes instead of gdb's output when it did not run
/// the command again (see [`super::capture`]).
pub const NOT_RERUN: &str = "@@rocmatrix-not-rerun@@";

/// Parses gdb's `output` for `command`, whose breakpoints were `breaks`
/// (numbered from 1 in that order), keeping at most `max_frames` per
/// stop; `artifact` is where the output is kept.
pub fn parse(
    command: &str,
    output: &str,
    breaks: &[String],
    max_frames: usize,
    artifact: &str,
) -> Backtrace {
    let mut bt = Backtrace {
        command: command.trim().to_string(),
        stops: Vec::new(),
        debug_info: false,
        note: None,
        artifact: artifact.to_string(),
    };
    if let Some(rest) = output.trim_start().strip_prefix(NOT_RERUN) {
        bt.note = Some(format!("not run again under gdb: {}", rest.trim()));
        return bt;
    }
    let parts: Vec<&str> = output.split(MARK).collect();
    let before = parts[0];
    for (i, seg) in parts.iter().enumerate().skip(1) {
        // What follows the last stop (gdb's own messages) is not a stop.
        let seg = seg.split(EXITED).next().unwrap_or(seg);
        // gdb announces a breakpoint's hit just before the mark.
        let hit = announced(parts[i - 1]);
        bt.stops.push(stop(seg, hit, breaks, max_frames));
    }
    if bt.stops.is_empty() {
        if let Some(at) = output.find(EXITED) {
            let code = output[at + EXITED.len()..]
                .lines()
                .find_map(|l| l.split_once(" = ").map(|(_, v)| v.trim().to_string()))
                .unwrap_or_else(|| "?".into());
            bt.note = Some(format!(
                "under gdb the command ran to its end (exit {code}) without stopping at a breakpoint or signal"
            ));
        } else {
            let last = before
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            bt.note = Some(if output.trim().is_empty() {
                "gdb printed nothing (timed out before the program stopped, or could not start)"
                    .into()
            } else {
                format!(
                    "gdb printed no backtrace (timed out, or stopped early): {}",
                    last.trim()
                )
            });
        }
        return bt;
    }
    describe_frames(&mut bt);
    bt
}

/// `bt.debug_info` from its frames, and the note when they are few or
/// without debug info.
pub(super) fn describe_frames(bt: &mut Backtrace) {
    let frames: Vec<&Frame> = bt.stops.iter().flat_map(|s| &s.frames).collect();
    bt.debug_info = frames.iter().any(|f| f.line.is_some());
    if frames.is_empty() {
        bt.note = Some("gdb stopped but printed no frames".into());
    } else if !bt.debug_info {
        let n = bt.stops.iter().map(|s| s.frames.len()).max().unwrap_or(0);
        let more = if bt.stops.iter().any(|s| s.truncated) {
            "+"
        } else {
            ""
        };
        bt.note = Some(if frames.iter().all(|f| f.function == "??") {
            format!("no debug info: {n}{more} frames of ??")
        } else {
            format!("no debug info: {n}{more} frames, none with a source line")
        });
    }
}

/// The number of the breakpoint gdb last announced as hit in `text`
/// (`Temporary breakpoint 3, f (…) at …`, `Breakpoint 1, …`,
/// `Catchpoint 1 (call to syscall exit_group), …`).
fn announced(text: &str) -> Option<usize> {
    text.lines().rev().find_map(|l| {
        let l = l.trim();
        let rest = l
            .strip_prefix("Temporary breakpoint ")
            .or_else(|| l.strip_prefix("Breakpoint "))
            .or_else(|| l.strip_prefix("Catchpoint "))?;
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let after = &rest[digits..];
        (digits > 0 && (after.starts_with(", ") || after.starts_with(" (call")))
            .then(|| rest[..digits].parse().ok())
            .flatten()
    })
}

/// One stop: the lines after a mark, up to the next; `hit` is the
/// breakpoint gdb announced before it.
fn stop(seg: &str, hit: Option<usize>, breaks: &[String], max_frames: usize) -> Stop {
    let mut s = Stop {
        at: String::new(),
        frames: Vec::new(),
        truncated: false,
    };
    let named = |n: usize| match breaks.get(n.wrapping_sub(1)) {
        Some(b) => format!("breakpoint {b}"),
        None if breaks.is_empty() => "exit".into(),
        None => format!("breakpoint {n}"),
    };
    for line in seg.lines() {
        let line = line.trim_end();
        if s.at.is_empty() {
            if let Some(rest) = line.trim().strip_prefix("It stopped at breakpoint ") {
                s.at = named(rest.trim_end_matches('.').parse().unwrap_or(0));
            } else if line
                .trim()
                .starts_with("It stopped at a breakpoint that has since been deleted")
            {
                s.at = hit.map(named).unwrap_or_else(|| "a breakpoint".into());
            } else if let Some(rest) = line.trim().strip_prefix("It stopped with signal ") {
                let rest = rest.trim_end_matches('.');
                s.at = match rest.split_once(", ") {
                    Some((sig, what)) => format!("signal {sig} ({what})"),
                    None => format!("signal {rest}"),
                };
            }
        }
        if line.starts_with("(More stack frames follow") {
            s.truncated = true;
        }
        if let Some(f) = frame(line) {
            if s.frames.len() < max_frames {
                s.frames.push(f);
            } else {
                s.truncated = true;
            }
        }
    }
    if s.at.is_empty() {
        s.at = "a stop gdb did not name".into();
    }
    s
}

/// `(rest, file, line, library)` of a frame's text without its number.
fn strip_location(text: &str) -> (&str, Option<String>, Option<u32>, Option<String>) {
    if let Some(i) = text.rfind(" at ") {
        let loc = &text[i + 4..];
        if let Some((file, line)) = loc.rsplit_once(':') {
            if let Ok(n) = line.trim().parse::<u32>() {
                if !file.contains(' ') {
                    return (&text[..i], Some(file.to_string()), Some(n), None);
                }
            }
        }
    }
    if let Some(i) = text.rfind(" from ") {
        let lib = &text[i + 6..];
        if !lib.contains(' ') {
            return (&text[..i], None, None, Some(lib.to_string()));
        }
    }
    (text, None, None, None)
}

/// One `#N …` line of `bt`.
pub(super) fn frame(line: &str) -> Option<Frame> {
    let rest = line.strip_prefix('#')?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let index: u32 = rest[..digits].parse().ok()?;
    let mut text = rest[digits..].trim_start();
    // With `print address off` there is no pc, but an inlined or old gdb
    // may still print `0x… in `.
    if text.starts_with("0x") {
        if let Some((_, after)) = text.split_once(" in ") {
            text = after;
        }
    }
    let (body, file, line_no, library) = strip_location(text);
    let function = match body.rfind(" (") {
        Some(i) if body.ends_with(')') => body[..i].trim(),
        _ => body.trim(),
    };
    Some(Frame {
        index,
        function: if function.is_empty() {
            "??".into()
        } else {
            function.to_string()
        },
        file,
        line: line_no,
        library,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBUG: &str = "Breakpoint 1 at 0x1234: file /usr/src/llvm-source/llvm/lib/Support/YAMLTraits.cpp, line 930.
Breakpoint 2 at 0x1238: file /usr/src/llvm-source/llvm/lib/MC/MCParser/MCAsmParser.cpp, line 98.

Breakpoint 1, llvm::yaml::ScalarTraits<bool, void>::input (...) at /usr/src/llvm-source/llvm/lib/Support/YAMLTraits.cpp:930
930\t    Val = *Parsed;

@@rocmatrix-backtrace@@
\tUsing the running image of child process 4242.
Program stopped at 0x5555.
It stopped at breakpoint 1.
#0  llvm::yaml::ScalarTraits<bool, void>::input (...) at /usr/src/llvm-source/llvm/lib/Support/YAMLTraits.cpp:930
#1  llvm::msgpack::DocNode::fromString (...) at /usr/src/llvm-source/llvm/lib/BinaryFormat/MsgPackDocumentYAML.cpp:89
Deleted breakpoint 1

Breakpoint 2, llvm::MCAsmParser::Error (...) at /usr/src/llvm-source/llvm/lib/MC/MCParser/MCAsmParser.cpp:98

@@rocmatrix-backtrace@@
It stopped at breakpoint 2.
#0  llvm::MCAsmParser::Error (...) at /usr/src/llvm-source/llvm/lib/MC/MCParser/MCAsmParser.cpp:98
#1  (anonymous namespace)::AMDGPUAsmParser::ParseDirectiveHSAMetadata (...) at /usr/src/llvm-source/llvm/lib/Target/AMDGPU/AsmParser/AMDGPUAsmParser.cpp:5890
#2  llvm::function_ref<bool ()>::callback_fn<x::$_0> (...) at /usr/include/c++/15/bits/std_function.h:292
#3  main (...) at /usr/src/llvm-source/llvm/tools/llvm-mc/llvm-mc.cpp:600
Deleted breakpoint 2
k.s:20:3: error: invalid HSA metadata
[Inferior 1 (process 4242) exited with code 01]
";

    const RELEASE: &str = "
@@rocmatrix-backtrace@@
It stopped at breakpoint 1.
#0  0x00007ffff1 in llvm::MCAsmParser::Error(llvm::SMLoc, llvm::Twine const&, llvm::SMRange) () from /lib/x86_64-linux-gnu/libLLVM.so.21.1
#1  ?? () from /lib/x86_64-linux-gnu/libLLVM.so.21.1
#2  ?? ()
(More stack frames follow...)
";

    fn breaks(b: &[&str]) -> Vec<String> {
        b.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_stop_has_its_breakpoint_and_frames_with_function_file_and_line() {
        let b = breaks(&["YAMLTraits.cpp:930", "llvm::MCAsmParser::Error"]);
        let bt = parse("llvm-mc k.s", DEBUG, &b, 32, "backtraces/00-assemble.txt");
        assert!(bt.debug_info);
        assert_eq!(bt.note, None);
        assert_eq!(bt.stops.len(), 2);
        assert_eq!(bt.stops[0].at, "breakpoint YAMLTraits.cpp:930");
        assert_eq!(
            bt.stops[0].frames[1].function,
            "llvm::msgpack::DocNode::fromString"
        );
        assert_eq!(bt.stops[1].at, "breakpoint llvm::MCAsmParser::Error");
        let f = &bt.stops[1].frames[1];
        assert_eq!(
            f.function,
            "(anonymous namespace)::AMDGPUAsmParser::ParseDirectiveHSAMetadata"
        );
        assert_eq!(f.line, Some(5890));
        assert_eq!(
            f.line_text(),
            "#1 (anonymous namespace)::AMDGPUAsmParser::ParseDirectiveHSAMetadata at AMDGPU/AsmParser/AMDGPUAsmParser.cpp:5890"
        );
        assert_eq!(
            bt.stops[1].frames[2].function,
            "llvm::function_ref<bool ()>::callback_fn<x::$_0>"
        );
        // The program's own output after the last stop is no frame.
        assert_eq!(bt.stops[1].frames.len(), 4);
        let top = bt.top(2);
        assert_eq!(top[0], "stopped at breakpoint YAMLTraits.cpp:930:");
        assert!(top.iter().any(|l| l == "  …"), "{top:?}");
    }

    #[test]
    fn a_binary_without_symbols_is_said_to_have_none() {
        let bt = parse(
            "llvm-mc-21 k.s",
            RELEASE,
            &breaks(&["llvm::MCAsmParser::Error"]),
            32,
            "a.txt",
        );
        assert!(!bt.debug_info);
        let s = &bt.stops[0];
        assert!(s.truncated);
        assert_eq!(s.frames.len(), 3);
        assert_eq!(
            s.frames[0].function,
            "llvm::MCAsmParser::Error(llvm::SMLoc, llvm::Twine const&, llvm::SMRange)"
        );
        assert_eq!(s.frames[1].function, "??");
        assert_eq!(
            s.frames[1].library.as_deref(),
            Some("/lib/x86_64-linux-gnu/libLLVM.so.21.1")
        );
        assert_eq!(
            bt.note.as_deref(),
            Some("no debug info: 3+ frames, none with a source line")
        );
        assert_eq!(s.frames[1].line_text(), "#1 ?? from libLLVM.so.21.1");
    }

    #[test]
    fn temporary_breakpoints_are_named_by_gdb_s_announcement() {
        let out = "Temporary breakpoint 1: file t.c, line 3.\n\
                   Temporary breakpoint 2: file t.c, line 9.\n\
                   \nTemporary breakpoint 2, check (x=...) at t.c:9\n\
                   @@rocmatrix-backtrace@@\n\
                   It stopped at a breakpoint that has since been deleted.\n\
                   #0  check (x=...) at t.c:9\n\
                   \nTemporary breakpoint 1, other () at t.c:3\n\
                   @@rocmatrix-backtrace@@\n\
                   It stopped at a breakpoint that has since been deleted.\n\
                   #0  other () at t.c:3\n";
        let bt = parse("./t", out, &breaks(&["t.c:3", "check"]), 8, "a");
        let at: Vec<&str> = bt.stops.iter().map(|s| s.at.as_str()).collect();
        assert_eq!(at, ["breakpoint check", "breakpoint t.c:3"]);
    }

    #[test]
    fn a_backtrace_is_split_off_only_after_a_blank_line() {
        let (text, bt) = split_off("killed by SIGSEGV\n\nbacktrace (gdb):\n#0 f");
        assert_eq!((text, bt), ("killed by SIGSEGV", Some("\n#0 f")));
        let said = "the log says backtrace (gdb): here";
        assert_eq!(split_off(said), (said, None));
    }

    #[test]
    fn frames_are_capped() {
        let bt = parse("x", DEBUG, &[], 2, "a.txt");
        assert_eq!(bt.stops[1].frames.len(), 2);
        assert!(bt.stops[1].truncated);
    }

    #[test]
    fn signals_exits_and_silence_are_told_apart() {
        let crash = "Program received signal SIGSEGV, Segmentation fault.\n@@rocmatrix-backtrace@@\nIt stopped with signal SIGSEGV, Segmentation fault.\n#0  f () at t.c:3\n";
        let bt = parse("./t", crash, &[], 8, "a");
        assert_eq!(bt.stops[0].at, "signal SIGSEGV (Segmentation fault)");
        assert_eq!(bt.stops[0].frames[0].file.as_deref(), Some("t.c"));
        let exited =
            "[Inferior 1 (process 9) exited with code 01]\n@@rocmatrix-no-stop@@\n$1 = 1\n";
        let bt = parse("./t", exited, &[], 8, "a");
        assert!(bt.stops.is_empty());
        assert!(bt.note.unwrap().contains("exit 1"));
        let bt = parse("./t", "", &[], 8, "a");
        assert!(bt.note.unwrap().contains("timed out"));
        let bt = parse(
            "[ 1 = 2 ]",
            "@@rocmatrix-not-rerun@@ not a program: [\n",
            &[],
            8,
            "a",
        );
        assert_eq!(
            bt.note.as_deref(),
            Some("not run again under gdb: not a program: [")
        );
    }
}
