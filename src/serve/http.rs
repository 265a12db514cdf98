//! hyper's HTTP/1 server under the pages: one task a connection; a page's
//! work — opening the history read-only, its stamp, its queries, rendering
//! — on a blocking thread, at most [`AT_ONCE`] at a time, and of those only
//! one working a page out (the others answer from the cache or wait), so
//! that memory stays bounded however many clients ask. Only `GET` and
//! `HEAD` are answered.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::cache::Cache;
use super::data::{self, Problem, Source};
use super::route::{self, Page, Route};
use super::{files, pages, Options};
use crate::history::History;

/// How many pages are worked out at once.
const AT_ONCE: usize = 4;

/// The longest request target read.
const MAX_TARGET: usize = 8 * 1024;

struct State {
    opts: Arc<Options>,
    work: Semaphore,
    /// Held while a page is worked out from the history.
    one: std::sync::Mutex<()>,
    cache: Cache,
}

/// Accepts connections for ever.
pub async fn serve(listener: TcpListener, opts: Arc<Options>) {
    let state = Arc::new(State {
        opts,
        work: Semaphore::new(AT_ONCE),
        one: std::sync::Mutex::new(()),
        cache: Cache::default(),
    });
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of descriptors, say: try again shortly.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

/// An answer: status, content type, body.
type Answer = (StatusCode, &'static str, Bytes);

fn text(status: StatusCode, body: &'static str) -> Answer {
    (status, "text/plain", Bytes::from_static(body.as_bytes()))
}

const HTML: &str = "text/html; charset=utf-8";
const JSON: &str = "application/json";

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let head = req.method() == Method::HEAD;
    let (status, ty, body) = if req.method() != Method::GET && !head {
        text(StatusCode::METHOD_NOT_ALLOWED, "read-only: GET only\n")
    } else {
        let target = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        if target.len() > MAX_TARGET {
            text(StatusCode::URI_TOO_LONG, "too long\n")
        } else {
            answer(&state, target.to_string()).await
        }
    };
    let mut resp = Response::new(Full::new(if head { Bytes::new() } else { body }));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(ty));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    // The pages have no script; a file of a run store gets none either.
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; script-src 'none'; style-src 'self' 'unsafe-inline'",
        ),
    );
    Ok(resp)
}

async fn answer(state: &Arc<State>, target: String) -> Answer {
    let route = route::parse(&target);
    let Ok(_permit) = state.work.acquire().await else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "stopping\n");
    };
    let state = state.clone();
    let work = tokio::task::spawn_blocking(move || blocking(&state, route, &target));
    match work.await {
        Ok(a) => a,
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            HTML,
            pages::problem("this page failed", &e.to_string()).into(),
        ),
    }
}

/// The answer to `route`, worked out on a blocking thread.
fn blocking(state: &State, route: Route, target: &str) -> Answer {
    let runs = state.opts.out.join("runs");
    match route {
        Route::Style => (
            StatusCode::OK,
            "text/css; charset=utf-8",
            Bytes::from_static(pages::STYLE.as_bytes()),
        ),
        Route::NotFound => not_found("no such page", target.starts_with(route::API)),
        Route::File(rel) => match files::read(&runs, &rel) {
            Some((bytes, ty)) => (StatusCode::OK, ty, bytes.into()),
            None => not_found("no such file in the run stores", false),
        },
        Route::Page { page, json, n } => {
            let asked = Asked {
                page: &page,
                json,
                target,
            };
            page_of(state, &asked, &runs, n)
        }
    }
}

/// A page asked for.
struct Asked<'a> {
    page: &'a Page,
    json: bool,
    target: &'a str,
}

/// A page, from the cache while the history's stamp is the one it was
/// kept at, else worked out (one at a time) and kept.
fn page_of(state: &State, asked: &Asked<'_>, runs: &std::path::Path, n: usize) -> Answer {
    let opts = &state.opts;
    let opened = History::open_read_only(&opts.history).and_then(|mut h| {
        let stamp = h.stamp()?;
        Ok((h, stamp))
    });
    let (mut history, stamp) = match opened {
        Ok(o) => o,
        Err(e) => return page_answer(asked, Err(Problem::History(e)), opts),
    };
    if let Some((ty, body)) = state.cache.get(asked.target, stamp) {
        return (StatusCode::OK, ty, body);
    }
    // One page at a time; another request may have made it meanwhile.
    let _one = state.one.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((ty, body)) = state.cache.get(asked.target, stamp) {
        return (StatusCode::OK, ty, body);
    }
    let mut src = Source {
        history: &mut history,
        runs,
        out: &opts.out,
    };
    let got = data::of(&mut src, asked.page, n);
    let answer = page_answer(asked, got, opts);
    give_back_free_memory();
    if answer.0 == StatusCode::OK {
        state
            .cache
            .put(asked.target, stamp, (answer.1, answer.2.clone()));
    }
    answer
}

fn not_found(what: &str, json: bool) -> Answer {
    if json {
        let v = serde_json::json!({"error": what});
        (StatusCode::NOT_FOUND, JSON, v.to_string().into())
    } else {
        let page = pages::problem("not found", what);
        (StatusCode::NOT_FOUND, HTML, page.into())
    }
}

fn page_answer(
    asked: &Asked<'_>,
    got: Result<serde_json::Value, Problem>,
    opts: &Options,
) -> Answer {
    let (status, title, why) = match got {
        Ok(mut v) => {
            if asked.json {
                let text = serde_json::to_string_pretty(&v).unwrap_or_default();
                return (StatusCode::OK, JSON, text.into());
            }
            v["self_path"] = serde_json::json!(asked.target);
            let name = match asked.page {
                Page::Matrices => "matrices.html",
                Page::Matrix { .. } => "matrix.html",
                Page::Test { .. } => "test.html",
                Page::Flaky => "flaky.html",
                Page::Runs { .. } => "runs.html",
                Page::Hosts => "hosts.html",
            };
            return (StatusCode::OK, HTML, pages::render(name, &v).into());
        }
        Err(Problem::NotFound(why)) => (StatusCode::NOT_FOUND, "not found", why),
        // The error's text names the history with its password scrubbed.
        Err(Problem::History(e)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the history cannot be read",
            opts.history.scrub(&e.to_string()),
        ),
    };
    if asked.json {
        let v = serde_json::json!({"error": title, "why": why});
        (status, JSON, v.to_string().into())
    } else {
        (status, HTML, pages::problem(title, &why).into())
    }
}

/// Hands the memory a page's work freed back to the system. Pages are
/// worked out on whichever blocking thread is free, and glibc keeps each
/// thread's freed memory in that thread's arena: without this, the
/// server's resident memory grows to the sum of every arena's largest page
/// (182 MiB under 8 clients over the bench history, one page at most 76).
fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator's own
    // arenas to the system; it touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}
