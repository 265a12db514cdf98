//! hyper's HTTP/1 server under the pages: one task a connection; a page's
//! work — opening the history read-only, its queries, rendering — on a
//! blocking thread, at most [`AT_ONCE`] at a time so that memory stays
//! bounded however many clients ask. Only `GET` and `HEAD` are answered.

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
}

/// Accepts connections for ever.
pub async fn serve(listener: TcpListener, opts: Arc<Options>) {
    let state = Arc::new(State {
        opts,
        work: Semaphore::new(AT_ONCE),
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
type Answer = (StatusCode, &'static str, Vec<u8>);

const HTML: &str = "text/html; charset=utf-8";
const JSON: &str = "application/json";

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let head = req.method() == Method::HEAD;
    let (status, ty, body) = if req.method() != Method::GET && !head {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            b"read-only: GET only\n".to_vec(),
        )
    } else {
        let target = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        if target.len() > MAX_TARGET {
            (
                StatusCode::URI_TOO_LONG,
                "text/plain",
                b"too long\n".to_vec(),
            )
        } else {
            answer(&state, target.to_string()).await
        }
    };
    let mut resp = Response::new(Full::new(if head {
        Bytes::new()
    } else {
        Bytes::from(body)
    }));
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
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            b"stopping\n".to_vec(),
        );
    };
    let opts = state.opts.clone();
    let work = tokio::task::spawn_blocking(move || blocking(&opts, route, &target));
    match work.await {
        Ok(a) => a,
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            HTML,
            pages::problem("this page failed", &e.to_string()).into_bytes(),
        ),
    }
}

/// The answer to `route`, worked out on a blocking thread.
fn blocking(opts: &Options, route: Route, target: &str) -> Answer {
    let runs = opts.out.join("runs");
    match route {
        Route::Style => (
            StatusCode::OK,
            "text/css; charset=utf-8",
            pages::STYLE.as_bytes().to_vec(),
        ),
        Route::NotFound => not_found("no such page", false),
        Route::File(rel) => match files::read(&runs, &rel) {
            Some((bytes, ty)) => (StatusCode::OK, ty, bytes),
            None => not_found("no such file in the run stores", false),
        },
        Route::Page { page, json, n } => {
            let got = History::open_read_only(&opts.history)
                .map_err(Problem::History)
                .and_then(|mut history| {
                    let mut src = Source {
                        history: &mut history,
                        runs: &runs,
                        out: &opts.out,
                    };
                    data::of(&mut src, &page, n)
                });
            page_answer(&page, json, target, got, opts)
        }
    }
}

fn not_found(what: &str, json: bool) -> Answer {
    if json {
        let v = serde_json::json!({"error": what});
        (StatusCode::NOT_FOUND, JSON, v.to_string().into_bytes())
    } else {
        (
            StatusCode::NOT_FOUND,
            HTML,
            pages::problem("not found", what).into_bytes(),
        )
    }
}

fn page_answer(
    page: &Page,
    json: bool,
    target: &str,
    got: Result<serde_json::Value, Problem>,
    opts: &Options,
) -> Answer {
    let (status, title, why) = match got {
        Ok(mut v) => {
            if json {
                let text = serde_json::to_string_pretty(&v).unwrap_or_default();
                return (StatusCode::OK, JSON, text.into_bytes());
            }
            v["self_path"] = serde_json::json!(target);
            let name = match page {
                Page::Matrices => "matrices.html",
                Page::Matrix { .. } => "matrix.html",
                Page::Test { .. } => "test.html",
                Page::Flaky => "flaky.html",
                Page::Runs { .. } => "runs.html",
                Page::Hosts => "hosts.html",
            };
            return (StatusCode::OK, HTML, pages::render(name, &v).into_bytes());
        }
        Err(Problem::NotFound(why)) => (StatusCode::NOT_FOUND, "not found", why),
        // The error's text names the history with its password scrubbed.
        Err(Problem::History(e)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the history cannot be read",
            opts.history.scrub(&e.to_string()),
        ),
    };
    if json {
        let v = serde_json::json!({"error": title, "why": why});
        (status, JSON, v.to_string().into_bytes())
    } else {
        (status, HTML, pages::problem(title, &why).into_bytes())
    }
}
