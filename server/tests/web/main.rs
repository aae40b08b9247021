//! The web platform's integration tests: each binds port 0 and talks HTTP to
//! the real app over a fresh database: a SQLite file, or with
//! `GATEHOUSE_TEST_DATABASE=postgres` a database of its own in a throwaway
//! Postgres cluster (one suite, both backends; `scripts/test` runs it twice).
//!
//! `server/tests/web` is the platform's one integration-test binary. Each test
//! starts the real app on port 0 over a fresh database and talks HTTP to it (a
//! SQLite file; with `GATEHOUSE_TEST_DATABASE=postgres` a new database in a
//! throwaway Postgres cluster that `tests/common/postgres.rs` starts once per
//! binary run in a temporary folder, on a Unix socket there, as `nobody` when
//! run as root, and a watchdog process stops and removes once the binary exits;
//! `scripts/test` runs the binary on both) (`support::TestApp`; every app of
//! the binary uses one grader, `support::shared_grader`, as a platform's
//! workers share theirs, so the environment is probed and each version
//! calibrated once per binary; the idle-priority self-tests are
//! `background.rs`, which `scripts/test` runs as a phase of its own, last);
//! some start the real `gatehouse` binary as a child to kill it mid-upload or
//! mid-grading, or to measure its memory; the browser tests drive a real
//! headless Chromium through chromedriver (WebDriver). The audit's tests
//! (`audit.rs`) run the `audit` job with a real worker and sandbox on a draft
//! of a built-in packet, follow its live status in Chromium, and call a fake
//! OpenAI-format upstream on port 0 for model mode. The sign-in tests
//! (`oidc.rs`) start the certified `oidc-provider` package (npm,
//! `server/tests/oidc/provider.mjs`) once per binary on a loopback port and
//! register a client per test; its test hook re-signs a client's next ID token
//! with changed claims or another key. The Greenhouse test (`greenhouse.rs`)
//! speaks the partner API's shapes from the client side, with the SMTP sink, a
//! real grading and a callback receiver on port 0. The tests' other Python
//! counterparts (`standardwebhooks` as the webhook verifier, `schemathesis` as
//! the API fuzzer, the official `openai` client) live in `.tools-venv/`
//! (`requirements-tools.txt`), never in the interpreter the sandbox runs: the
//! trusted runner loads every pytest plugin installed with that interpreter, as
//! pytest's autoload would, and hypothesis's and schemathesis's cost about 3 s
//! per candidate test run, anyio's (an `openai` dependency) about 0.16 s. The
//! meter's tests run real upstreams on port 0: plain HTTP, and TLS with a CA
//! and certificate made by the test (`rcgen`, `tokio-rustls`); one drives the
//! meter with the official `openai` Python package (in `.tools-venv/`), one
//! kills a `gatehouse serve` child mid-call. They live in `meter/` by area
//! (access, budgets, upstream, clients, recovery); `meter/mod.rs` holds the
//! fake upstream and the fixtures other tests reuse (`setup`, `call`, `chat`).

mod accessibility;
mod assignment_rules;
mod assignments;
mod audit;
mod auth;
mod background;
mod backup;
mod browser;
mod e2e;
mod e2e_typescript;
mod e2e_witnessed;
#[path = "../common/fake_openai.rs"]
mod fake_openai;
mod frame;
mod greenhouse;
mod hardening;
mod leftovers;
mod library;
mod limits;
mod mail;
mod meter;
mod oidc;
mod openapi;
mod ops;
#[path = "../common/postgres.rs"]
mod postgres;
mod review;
mod screenshots;
mod support;
mod webdriver;

mod api;
mod candidate;
mod children;
mod disk_full;
mod erasure;
mod erasure_edges;
mod evidence;
mod queue;
mod restart;
mod scale_out;
mod security;
mod soak;
mod transcripts;
mod upload;
mod webhooks;
mod witness;

use support::TestApp;

#[tokio::test]
async fn healthz_answers_without_auth() {
    let app = TestApp::spawn().await;
    let r = reqwest::get(app.url("/healthz")).await.unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["ok"], true);
    assert_eq!(body["database"], support::backend());
}

#[tokio::test]
async fn a_database_url_that_cannot_be_opened_is_named_in_the_error() {
    let err = gatehouse::db::open("mysql://x@localhost/db").await.err().expect("refused");
    assert!(err.to_string().contains("expected sqlite://<path> or postgres://"), "{err}");
    // Port 1 on 127.0.0.1: nothing listens there.
    let err = gatehouse::db::open("postgres://gatehouse@127.0.0.1:1/nothing")
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("opening postgres://gatehouse@127.0.0.1:1/nothing"), "{err}");
}
