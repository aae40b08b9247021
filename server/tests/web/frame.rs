//! The page frame over HTTP: the stylesheet and bundle are served with the
//! right types and caching, and errors are HTML pages for browsers but stay
//! JSON for API clients.

use crate::support::TestApp;

const BROWSER_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

#[tokio::test]
async fn stylesheet_is_embedded_and_cached() {
    let app = TestApp::spawn().await;
    let client = reqwest::Client::new();
    let r = client.get(app.url("/style/gatehouse.css")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/css; charset=utf-8");
    assert!(r.headers()["cache-control"].to_str().unwrap().contains("max-age"));
    let etag = r.headers()["etag"].clone();
    let body = r.text().await.unwrap();
    assert!(body.contains(".badge.witnessed"), "the stylesheet styles provenance badges");
    let again = client
        .get(app.url("/style/gatehouse.css"))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
}

#[tokio::test]
async fn bundle_is_served_with_the_wasm_type() {
    crate::browser::require_bundle();
    let app = TestApp::spawn().await;
    let r = reqwest::get(app.url("/pkg/gatehouse_bg.wasm")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/wasm");
    assert_eq!(&r.bytes().await.unwrap()[..4], b"\0asm");
    let js = reqwest::get(app.url("/pkg/gatehouse.js")).await.unwrap();
    assert_eq!(js.status(), 200);
    assert!(js.headers()["content-type"].to_str().unwrap().contains("javascript"));
    let missing = reqwest::get(app.url("/pkg/../Cargo.toml")).await.unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn errors_are_pages_for_browsers_and_json_for_clients() {
    let app = TestApp::spawn().await;
    let client = reqwest::Client::new();
    let page =
        client.get(app.url("/no/such/page")).header("accept", BROWSER_ACCEPT).send().await.unwrap();
    assert_eq!(page.status(), 404);
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = page.text().await.unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.contains("this page not found"), "{html}");

    let json = client
        .get(app.url("/no/such/page"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(json.status(), 404);
    let body: serde_json::Value = json.json().await.unwrap();
    assert_eq!(body["error"], "this page not found");

    // No Accept header at all (curl, scripts): JSON.
    let bare = client.get(app.url("/no/such/page")).send().await.unwrap();
    assert!(bare.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
}

#[tokio::test]
async fn a_form_post_without_a_session_gets_a_sign_in_page() {
    let app = TestApp::spawn().await;
    let r = reqwest::Client::new()
        .post(app.url("/assignments"))
        .header("accept", BROWSER_ACCEPT)
        .form(&[("csrf", "x"), ("packet", "p")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let html = r.text().await.unwrap();
    assert!(html.contains("401 · Unauthorized") && html.contains("sign in first"), "{html}");
    assert!(html.contains(r#"href="/login""#), "{html}");
}
