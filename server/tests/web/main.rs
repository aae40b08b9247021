//! The web platform's integration tests: each binds port 0 and talks HTTP to
//! the real app over a fresh SQLite file.

#[path = "../common/fake_openai.rs"]
mod fake_openai;
mod assignments;
mod audit;
mod auth;
mod browser;
mod e2e;
mod e2e_witnessed;
mod frame;
mod hardening;
mod library;
mod mail;
mod meter;
mod review;
mod support;
mod webdriver;

mod api;
mod candidate;
mod queue;
mod security;
mod upload;
mod evidence;
mod witness;
mod transcripts;

use support::TestApp;

#[tokio::test]
async fn healthz_answers_without_auth() {
    let app = TestApp::spawn().await;
    let r = reqwest::get(app.url("/healthz")).await.unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["ok"], true);
    assert_eq!(body["database"], "sqlite");
}
