//! The web platform's integration tests: each binds port 0 and talks HTTP to
//! the real app over a fresh database: a SQLite file, or with
//! `GATEHOUSE_TEST_DATABASE=postgres` a database of its own in a throwaway
//! Postgres cluster (one suite, both backends; `scripts/test` runs it twice).

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
