//! A PostgreSQL history that cannot be opened says why in the server's
//! words (issue 51, item 5), against a real server: a database that does
//! not exist, a password the server refuses, a port nothing listens on.
//! The password given is never shown.

use crate::harness::postgres::{Postgres, PASSWORD};
use crate::harness::*;

#[test]
fn history_errors_say_the_servers_words_without_the_password() {
    let test = "history_errors_say_the_servers_words_without_the_password";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    // A port that was free a moment ago, for the refused connection.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let wrong = "not-the-pw-51";
    let cases = [
        (
            format!("postgres://postgres:{PASSWORD}@127.0.0.1:{}/nodb", pg.port),
            format!(
                "error: history postgres://postgres:***@127.0.0.1:{}/nodb: database \"nodb\" does not exist",
                pg.port
            ),
        ),
        (
            format!("postgres://rm:{wrong}@127.0.0.1:{}/postgres", pg.port),
            format!(
                "error: history postgres://rm:***@127.0.0.1:{}/postgres: password authentication failed for user \"rm\"",
                pg.port
            ),
        ),
        (
            format!("postgres://postgres:{PASSWORD}@127.0.0.1:{closed}/nodb"),
            format!(
                "error: history postgres://postgres:***@127.0.0.1:{closed}/nodb: error connecting to server: Connection refused (os error 111)"
            ),
        ),
    ];
    let out = tempfile::tempdir().unwrap();
    for (url, said) in cases {
        let o = Rocmatrix::new()
            .arg("history")
            .arg("--out")
            .arg(out.path())
            .arg("--history")
            .arg(&url)
            .run();
        o.assert_code(3);
        let text = o.text();
        assert!(
            text.lines().any(|l| l == said),
            "{said:?} not a line of\n{}",
            o.context()
        );
        assert!(!text.contains(PASSWORD) && !text.contains(wrong), "{text}");
        assert!(!text.contains("db error"), "{text}");
    }
}
