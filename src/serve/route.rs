//! A request's path and query, parsed into the page it asks for. Every
//! value is bounded here, once: a count (`?n=`) is clamped to
//! [`MAX_RUNS`], a name to [`MAX_NAME`] bytes, and the path of a run
//! store's file is decoded (`%2e%2e` is `..`) before `super::files` keeps
//! it inside the stores.

/// The most runs a page looks back over, whatever `?n=` asks.
pub const MAX_RUNS: usize = 100;
/// The runs a page looks back over when `?n=` is not given.
pub const DEFAULT_RUNS: usize = 20;
/// The most rows a list (flaky tests) shows.
pub const MAX_ROWS: usize = 1_000;
/// The longest name (of a matrix or a test) a query may give.
pub const MAX_NAME: usize = 2_048;
/// The prefix of the JSON of every page.
pub const API: &str = "/api";

/// A page of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// The matrices the history holds.
    Matrices,
    /// One matrix: its last run's grid, its runs' counts, its failing tests.
    Matrix { name: String },
    /// One test, in every cell that ran it (`matrix` narrows).
    Test { name: String, matrix: String },
    /// The flaky tests, by rate.
    Flaky,
    /// The runs, newest first (`matrix` narrows).
    Runs { matrix: String },
    /// Failures and flakes per host and GPU.
    Hosts,
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A page as HTML, or as JSON under [`API`]; `n` runs (clamped).
    Page {
        page: Page,
        json: bool,
        n: usize,
    },
    /// A file of a run store: its path under `runs/`, decoded.
    File(String),
    /// The pages' style sheet.
    Style,
    NotFound,
}

/// The route of `path` (with its `?query`).
pub fn parse(target: &str) -> Route {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if let Some(rest) = path.strip_prefix("/store/") {
        return Route::File(decode(rest, false));
    }
    if path == "/style.css" {
        return Route::Style;
    }
    let (json, path) = match path.strip_prefix(API) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => (true, rest),
        _ => (false, path),
    };
    let q = Query::parse(query);
    let page = match path.trim_end_matches('/') {
        "" => Page::Matrices,
        "/matrix" => Page::Matrix {
            name: q.get("name"),
        },
        "/test" => Page::Test {
            name: q.get("name"),
            matrix: q.get("matrix"),
        },
        "/flaky" => Page::Flaky,
        "/runs" => Page::Runs {
            matrix: q.get("matrix"),
        },
        "/hosts" => Page::Hosts,
        _ => return Route::NotFound,
    };
    Route::Page {
        page,
        json,
        n: q.count("n"),
    }
}

/// A query's pairs, decoded.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: &str) -> Query {
        Query(
            query
                .split('&')
                .filter(|p| !p.is_empty())
                .take(32)
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k, true), decode(v, true))
                })
                .collect(),
        )
    }

    /// The value of `key`, at most [`MAX_NAME`] bytes; empty when absent.
    fn get(&self, key: &str) -> String {
        let mut v = self
            .0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        if v.len() > MAX_NAME {
            let mut at = MAX_NAME;
            while !v.is_char_boundary(at) {
                at -= 1;
            }
            v.truncate(at);
        }
        v
    }

    /// A count: [`DEFAULT_RUNS`] when absent or unreadable, else clamped
    /// to 1..=[`MAX_RUNS`].
    fn count(&self, key: &str) -> usize {
        let v = self.get(key);
        if v.is_empty() {
            return DEFAULT_RUNS;
        }
        match v.parse::<u64>() {
            Ok(n) => (n as usize).clamp(1, MAX_RUNS),
            Err(_) if v.chars().all(|c| c.is_ascii_digit()) => MAX_RUNS,
            Err(_) => DEFAULT_RUNS,
        }
    }
}

/// Percent-decoding (and `+` as a space in a query); bytes that are not
/// UTF-8 are replaced.
pub fn decode(s: &str, plus: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `s` percent-encoded for a query value or a path segment: everything
/// but unreserved characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_routes_are_parsed_and_bounded() {
        assert_eq!(
            parse("/api/matrix?name=a%20b&n=10000000"),
            Route::Page {
                page: Page::Matrix { name: "a b".into() },
                json: true,
                n: MAX_RUNS
            }
        );
        assert_eq!(
            parse("/flaky?n=0"),
            Route::Page {
                page: Page::Flaky,
                json: false,
                n: 1
            }
        );
        assert_eq!(
            parse("/runs?n=abc"),
            Route::Page {
                page: Page::Runs {
                    matrix: String::new()
                },
                json: false,
                n: DEFAULT_RUNS
            }
        );
        assert_eq!(
            parse("/store/r1/%2e%2e/%2E%2E/etc/passwd"),
            Route::File("r1/../../etc/passwd".into())
        );
        assert_eq!(parse("/apix"), Route::NotFound);
        assert_eq!(parse("/nothing"), Route::NotFound);
        let long = "x".repeat(10 * MAX_NAME);
        let Route::Page {
            page: Page::Test { name, .. },
            ..
        } = parse(&format!("/test?name={long}"))
        else {
            panic!()
        };
        assert_eq!(name.len(), MAX_NAME);
        assert_eq!(decode("%e2%9c%93+%zz%4", true), "✓ %zz%4");
        assert_eq!(decode(&encode("a/b c<✓>"), false), "a/b c<✓>");
    }
}
