//! Browser tests of the page frame and the islands, in a real headless
//! Chromium: the hydrate bundle loads and the islands come alive, the upload
//! island sends with a progress bar and shows refusals, the live status
//! follows the server, and the same pages work with JavaScript off.
//!
//! These run against the real router plus a few fixture routes that play
//! the candidate endpoints' JSON contract (`/fixture/...`), so they test the
//! islands and the frame independently of the candidate pages.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use app::islands::{LiveStatus, UploadForm};
use axum::Router;
use axum::extract::{Multipart, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use gatehouse::config::Config;
use leptos::prelude::*;

use crate::support::repo_root;
use crate::webdriver::{Browser, exclusive};

/// Fails clearly when the hydrate bundle was not built.
pub fn require_bundle() {
    let js = repo_root().join("target/site/pkg/gatehouse.js");
    assert!(
        js.is_file(),
        "{} is missing: build the hydrate bundle with `cargo run -p site --release` (scripts/test does)",
        js.display()
    );
}

/// The fixture server: the real router with `/fixture/...` routes merged in.
pub struct Fixture {
    pub base: String,
    _dir: tempfile::TempDir,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// How many times the fixture status endpoint was asked; the third answer
/// and later say "graded".
#[derive(Clone, Default)]
struct Polls(Arc<AtomicUsize>);

impl Polls {
    fn state(&self) -> &'static str {
        match self.0.load(Ordering::SeqCst) {
            0 => "queued",
            1 | 2 => "grading",
            _ => "graded",
        }
    }
}

async fn spawn_fixture() -> Fixture {
    require_bundle();
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
    let addr = listener.local_addr().unwrap();
    let config = Config {
        listen: addr,
        public_url: format!("http://{addr}"),
        database_url: crate::support::database_url(dir.path()).await,
        data_dir: dir.path().join("data"),
        packets_dir: PathBuf::new(),
        site_dir: repo_root().join("target/site"),
        ..Config::default()
    };
    let state = gatehouse::serve::state(config).await.expect("app state");
    let fixtures = Router::new()
        .route("/fixture/upload", get(upload_page))
        .route("/fixture/upload-slow", get(slow_upload_page))
        .route(
            "/fixture/slow-submit",
            post(slow_submit).layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .route("/fixture/submit", post(submit))
        .route("/fixture/receipt", get(receipt_page))
        .route("/fixture/status", get(status))
        .route("/fixture/echo", post(echo))
        .with_state(Polls::default());
    let app = gatehouse::web::router(state).merge(fixtures);
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    Fixture { base: format!("http://{addr}"), _dir: dir, server }
}

/// A fixture page's frame: the bundle is built (`Fixture` checks it).
fn meta(title: &str) -> app::shell::PageMeta {
    app::shell::PageMeta { title: title.into(), hydrate: true, ..Default::default() }
}

async fn upload_page() -> Html<String> {
    Html(app::shell::document(meta("Upload"), || {
        view! {
            <h1>"Upload fixture"</h1>
            <UploadForm action="/fixture/submit".to_string() accept_json=true />
            <form method="post" action="/fixture/echo" id="echo-form">
                <label for="word">"Word"</label>
                <input type="text" id="word" name="word" />
                <button type="submit" id="echo">"Echo"</button>
            </form>
        }
    }))
}

async fn slow_upload_page() -> Html<String> {
    Html(app::shell::document(meta("Upload"), || {
        view! {
            <h1>"Slow upload fixture"</h1>
            <UploadForm action="/fixture/slow-submit".to_string() accept_json=true />
        }
    }))
}

/// Reads the upload at about [`SLOW_BYTES_PER_SEC`] (a throttled link:
/// once the socket buffers are full, the browser can only send as fast as
/// this reads), then takes a moment to "check the zip" before it answers.
const SLOW_BYTES_PER_SEC: u64 = 3 << 20;

async fn slow_submit(mut form: Multipart) -> Response {
    let started = std::time::Instant::now();
    let mut read: u64 = 0;
    while let Some(mut field) = form.next_field().await.expect("multipart") {
        while let Some(chunk) = field.chunk().await.expect("chunk") {
            read += chunk.len() as u64;
            let due = Duration::from_secs_f64(read as f64 / SLOW_BYTES_PER_SEC as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let receipt = format!("/fixture/receipt?via=json&bytes={read}");
    (
        StatusCode::CREATED,
        axum::Json(
            serde_json::json!({ "id": 1, "receipt_url": receipt, "sha256": "0", "received_at": 0 }),
        ),
    )
        .into_response()
}

/// Plays `POST /c/{token}/submit`: a file whose bytes mention `../evil` is
/// refused with 422 `{"error"}`; anything else is accepted (201 JSON when
/// asked for JSON, else 303 to the receipt).
async fn submit(headers: HeaderMap, mut form: Multipart) -> Response {
    let json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"));
    let mut bytes = Vec::new();
    while let Some(field) = form.next_field().await.expect("multipart") {
        if field.name() == Some("file") {
            bytes = field.bytes().await.expect("file bytes").to_vec();
        }
    }
    if bytes.windows(7).any(|w| w == b"../evil") {
        let error = "entry ../evil would be written outside the submission folder";
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(serde_json::json!({ "error": error })),
        )
            .into_response();
    }
    let via = if json { "json" } else { "form" };
    if json {
        // Long enough for the test to see the progress bar.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let receipt = format!("/fixture/receipt?via={via}&bytes={}", bytes.len());
    if json {
        (StatusCode::CREATED, axum::Json(serde_json::json!({ "id": 1, "receipt_url": receipt, "sha256": "0", "received_at": 0 }))).into_response()
    } else {
        Redirect::to(&receipt).into_response()
    }
}

#[derive(serde::Deserialize)]
struct ReceiptQuery {
    via: String,
    bytes: usize,
}

async fn receipt_page(State(polls): State<Polls>, Query(q): Query<ReceiptQuery>) -> Html<String> {
    let state = polls.state().to_string();
    Html(app::shell::document(meta("Receipt"), move || {
        view! {
            <h1>"Receipt"</h1>
            <p id="receipt">{format!("received {} bytes via {}", q.bytes, q.via)}</p>
            <p>"State: " <LiveStatus url="/fixture/status".to_string() initial_state=state /></p>
        }
    }))
}

async fn status(State(polls): State<Polls>) -> axum::Json<serde_json::Value> {
    polls.0.fetch_add(1, Ordering::SeqCst);
    axum::Json(serde_json::json!({ "state": polls.state(), "decision": null, "score": null }))
}

#[derive(serde::Deserialize)]
struct Echo {
    word: String,
}

async fn echo(axum::Form(f): axum::Form<Echo>) -> Html<String> {
    Html(app::shell::document(
        meta("Echo"),
        move || view! { <p id="echoed">{format!("You said {}", f.word)}</p> },
    ))
}

/// Writes a zip with one file `name` holding `body`.
pub fn write_zip(path: &Path, entries: &[(&str, &[u8])]) {
    let file = std::fs::File::create(path).expect("create zip");
    let mut zip = zip::ZipWriter::new(file);
    for (name, body) in entries {
        zip.start_file(*name, zip::write::SimpleFileOptions::default()).expect("zip entry");
        zip.write_all(body).expect("zip body");
    }
    zip.finish().expect("finish zip");
}

#[tokio::test]
async fn islands_hydrate_upload_with_progress_and_follow_status() {
    let _one = exclusive().await;
    let app = spawn_fixture().await;
    let files = tempfile::tempdir().unwrap();
    let good = files.path().join("good.zip");
    let big = vec![b'x'; 3 << 20];
    write_zip(&good, &[("solution.py", b"print('hi')\n"), ("padding.bin", &big)]);
    let evil = files.path().join("evil.zip");
    write_zip(&evil, &[("../evil", b"boom")]);

    let b = Browser::new(&app.base).await;
    b.goto("/fixture/upload").await;
    // The bundle loads and the island hydrates.
    b.wait("#upload-form[data-hydrated='true']").await;
    assert!(!b.exists("#upload-progress").await, "no progress bar before an upload");

    // A refused zip shows the server's message in the page, without leaving it.
    b.choose_file("#upload-file", &evil).await;
    b.click("#upload-submit").await;
    let refusal = b
        .wait_text("#upload-error", "outside the submission folder", Duration::from_secs(10))
        .await;
    assert!(refusal.contains("../evil"), "{refusal}");
    assert_eq!(b.path().await, "/fixture/upload");

    // A good upload shows the progress bar (the fixture holds its answer
    // back a moment), then goes to the receipt.
    b.choose_file("#upload-file", &good).await;
    b.click("#upload-submit").await;
    let bar = b.wait("#upload-progress").await;
    let value: f64 = bar.attr("value").await.unwrap().unwrap_or_default().parse().unwrap_or(-1.0);
    assert!((0.0..=100.0).contains(&value), "progress value {value}");
    b.wait_path("/fixture/receipt?via=json").await;
    assert!(b.text("#receipt").await.contains("via json"));

    // The live status follows the server and the page reloads at the end.
    b.wait("#live-state[data-hydrated='true']").await;
    b.wait_for("#live-state[data-state='graded']", Duration::from_secs(15)).await;
    assert_eq!(b.text("#live-state").await, "graded");
    b.close().await;
}

/// The progress bar follows the bytes actually sent: over a throttled
/// upload (the fixture reads 3 MiB/s) of a 24 MiB zip, the test sees values
/// strictly between 0 and 100, never going back, then "checking the zip"
/// while the server holds its answer, then the receipt.
#[tokio::test]
async fn the_upload_progress_bar_follows_the_transfer_then_says_checking() {
    let _one = exclusive().await;
    let app = spawn_fixture().await;
    let files = tempfile::tempdir().unwrap();
    let big = files.path().join("big.zip");
    // Incompressible bytes (xorshift), so the zip is as large as its content.
    let mut x: u64 = 0x9E3779B97F4A7C15;
    let noise: Vec<u8> = (0..24 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    write_zip(&big, &[("solution.py", b"print('hi')\n"), ("noise.bin", &noise)]);

    let b = Browser::new(&app.base).await;
    b.goto("/fixture/upload-slow").await;
    b.wait("#upload-form[data-hydrated='true']").await;
    b.choose_file("#upload-file", &big).await;
    b.click("#upload-submit").await;
    b.wait("#upload-progress").await;
    let mut seen: Vec<f64> = Vec::new();
    let mut checking = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let now = b
            .script(
                "const p = document.getElementById('upload-progress'); const s = document.getElementById('upload-phase');
                 return { value: p ? Number(p.value) : null, phase: s ? s.textContent : '', sent: s ? s.dataset.sent === 'true' : false, path: location.pathname };",
            )
            .await;
        if now["path"] != "/fixture/upload-slow" {
            break;
        }
        if let Some(v) = now["value"].as_f64()
            && seen.last() != Some(&v)
        {
            seen.push(v);
        }
        let phase = now["phase"].as_str().unwrap_or_default().to_string();
        if now["sent"] == true {
            assert!(phase.contains("checking the zip"), "{phase}");
            checking = true;
            break;
        }
        assert!(phase.starts_with("Uploading: "), "{phase}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let between: Vec<f64> = seen.iter().copied().filter(|v| *v > 0.0 && *v < 100.0).collect();
    println!("upload progress values seen: {seen:?}");
    assert!(between.len() >= 3, "intermediate progress values were seen: {seen:?}");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "progress never goes back: {seen:?}");
    assert!(checking, "the page said it was checking the zip after the transfer: {seen:?}");
    assert_eq!(
        b.find("#upload-progress").await.attr("value").await.unwrap().as_deref(),
        Some("100")
    );
    b.wait_path("/fixture/receipt?via=json").await;
    let bytes: usize = b.text("#receipt").await.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(bytes > 24 << 20, "the whole body arrived: {bytes}");
    b.close().await;
}

#[tokio::test]
async fn pages_work_with_javascript_off() {
    let _one = exclusive().await;
    let app = spawn_fixture().await;
    let files = tempfile::tempdir().unwrap();
    let good = files.path().join("good.zip");
    write_zip(&good, &[("solution.py", b"print('hi')\n")]);

    let b = Browser::without_js(&app.base).await;
    b.goto("/fixture/upload").await;
    b.wait("#upload-form").await;
    // Scripts are off: give the bundle a moment it would have used, then
    // check the island stayed plain HTML.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!b.exists("[data-hydrated]").await, "the island hydrated with JavaScript off");

    // A plain form posts and the answer renders.
    b.fill("#word", "plain").await;
    b.click("#echo").await;
    b.wait_text("#echoed", "You said plain", Duration::from_secs(10)).await;

    // The upload island is a working multipart form without scripts.
    b.goto("/fixture/upload").await;
    b.choose_file("#upload-file", &good).await;
    b.click("#upload-submit").await;
    b.wait_path("/fixture/receipt?via=form").await;
    assert!(b.text("#receipt").await.contains("via form"));
    assert_eq!(b.text("#live-state").await, "queued", "no polling without scripts");
    b.close().await;
}

#[tokio::test]
async fn error_pages_are_html_for_browsers() {
    let _one = exclusive().await;
    let app = spawn_fixture().await;
    let b = Browser::new(&app.base).await;
    b.goto("/no/such/page").await;
    let msg = b.wait_text("#error-message", "not found", Duration::from_secs(10)).await;
    assert!(msg.contains("this page not found"), "{msg}");
    assert!(b.text("h1").await.contains("404"));
    b.close().await;
}
