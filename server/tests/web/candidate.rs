//! The candidate's link: page, starter, upload, receipt, grading, refusals.
//! Also the helpers the upload, queue, API and security tests share.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gatehouse::db::{PacketVersion, Submission};
use gatehouse::invites::{self, Invite, Invited};
use gatehouse::state::AppState;
use serde_json::Value;

use crate::support::{TestApp, repo_root};

pub const SLUG: &str = "null-status";

pub fn packet_src() -> PathBuf {
    repo_root().join("packets").join(SLUG)
}

/// Copies `packets/null-status` into the data directory and publishes it.
pub async fn publish_packet(state: &AppState) -> PacketVersion {
    crate::support::publish_copy(state, SLUG, "1", |toml| toml).await
}

/// A fresh app with `packets/null-status` published.
pub async fn app_with_packet() -> TestApp {
    let app = TestApp::spawn().await;
    publish_packet(&app.state).await;
    app
}

pub async fn invite(state: &AppState, name: &str) -> Invited {
    invite_with(state, name, None, None).await
}

pub async fn invite_with(
    state: &AppState,
    name: &str,
    deadline: Option<i64>,
    time_box_secs: Option<i64>,
) -> Invited {
    let email = format!("{}@example.com", name.to_lowercase().replace(' ', "."));
    invites::create(
        state,
        None,
        Invite { slug: SLUG, candidate_name: name, email: &email, deadline, time_box_secs },
    )
    .await
    .unwrap()
}

/// A zip of `entries` (name, contents), deflated.
pub fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut out);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in entries {
            z.start_file(*name, opts).unwrap();
            z.write_all(bytes).unwrap();
        }
        z.finish().unwrap();
    }
    out.into_inner()
}

/// The packet's sample solution as a submission zip (it grades well).
pub fn sample_zip() -> Vec<u8> {
    let dir = packet_src().join("sample");
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            files.push((
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            ));
        }
    }
    files.sort();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    zip_of(&refs)
}

pub fn form(bytes: Vec<u8>) -> reqwest::multipart::Form {
    let part = reqwest::multipart::Part::bytes(bytes)
        .file_name("submission.zip")
        .mime_str("application/zip")
        .unwrap();
    reqwest::multipart::Form::new().part("file", part)
}

/// Uploads through the candidate form; `json` asks for the JSON answer.
pub async fn upload(base: &str, token: &str, bytes: Vec<u8>, json: bool) -> reqwest::Response {
    let client = TestApp::client();
    let mut req = client.post(format!("{base}/c/{token}/submit")).multipart(form(bytes));
    if json {
        req = req.header("accept", "application/json");
    }
    req.send().await.unwrap()
}

/// Waits until the submission reaches a final state.
pub async fn wait_final(state: &AppState, id: &str, limit: Duration) -> Submission {
    let start = Instant::now();
    loop {
        let s = state.db.submission_by_id(id).await.unwrap().expect("submission exists");
        if matches!(s.state.as_str(), "graded" | "failed" | "refused") {
            return s;
        }
        assert!(start.elapsed() < limit, "submission {id} still {} after {limit:?}", s.state);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every file under `dir` (recursively); empty when it does not exist.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files_under(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

/// The blobs under the data folder that are not packet versions' archives
/// (the library keeps those as blobs when the database is Postgres): what
/// uploads left behind.
pub async fn upload_blobs(state: &gatehouse::state::AppState) -> Vec<String> {
    let mut archives = Vec::new();
    for p in state.db.list_packets().await.unwrap() {
        for v in state.db.versions_of(p.id).await.unwrap() {
            archives.extend(state.db.packet_archive(&v.digest).await.unwrap());
        }
    }
    files_under(&gatehouse::blobs::blobs_dir(&state.config.data_dir))
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|sha| !archives.contains(sha))
        .collect()
}

/// Removes run-dependent timings so two gradings of the same inputs compare.
pub fn without_timings(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("timings");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// What `gatehouse grade --format json` prints for this zip.
pub fn cli_scorecard(packet_dir: &Path, zip: &[u8]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.zip");
    std::fs::write(&path, zip).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        // The test binary's own GATEHOUSE_TEST_DATABASE is no setting of the app.
        .env_remove("GATEHOUSE_TEST_DATABASE")
        .env_remove("GATEHOUSE_TEST_PG_STATEMENTS")
        .args(["grade", packet_dir.to_str().unwrap(), path.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gatehouse grade failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn good_upload_gets_a_receipt_and_the_cli_scorecard() {
    let app = TestApp::spawn().await;
    let version = publish_packet(&app.state).await;
    let invited = invite(&app.state, "Ada Lovelace").await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let client = TestApp::client();

    // The page shows the prompt, budgets and rules; reading it does not
    // start the time box (the starter download below does).
    let page = client.get(app.url(&format!("/c/{}", invited.token))).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("Don&#x27;t page on a null status")
            || html.contains("Don't page on a null status"),
        "{html}"
    );
    assert!(html.contains("Model calls") && html.contains("30000"), "budgets missing: {html}");
    assert!(
        html.contains("name=\"file\"") && html.contains("/submit"),
        "upload form missing: {html}"
    );
    let a = app.state.db.assignment_by_id(&invited.assignment.id).await.unwrap().unwrap();
    assert!(a.started_at.is_none(), "a page view must not start the time box");

    // The starter is a zip.
    let starter =
        client.get(app.url(&format!("/c/{}/starter.zip", invited.token))).send().await.unwrap();
    assert_eq!(starter.status(), 200);
    assert_eq!(starter.headers()["content-type"], "application/zip");
    let bytes = starter.bytes().await.unwrap();
    assert_eq!(&bytes[..4], b"PK\x03\x04");

    // A good upload with Accept: application/json.
    let zip = sample_zip();
    let r = upload(&app.base, &invited.token, zip.clone(), true).await;
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    let id = body["id"].as_str().unwrap().to_string();
    assert_eq!(body["receipt_url"], format!("/c/{}/submissions/{id}", invited.token));
    assert_eq!(body["sha256"].as_str().unwrap().len(), 64);
    assert!(body["received_at"].as_i64().unwrap() > 0);

    // The receipt page names the digest and size.
    let receipt = client.get(app.url(body["receipt_url"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(receipt.status(), 200);
    let html = receipt.text().await.unwrap();
    assert!(html.contains(body["sha256"].as_str().unwrap()), "{html}");
    assert!(html.contains(&format!("{} bytes", zip.len())), "{html}");

    let s = wait_final(&app.state, &id, Duration::from_secs(120)).await;
    assert_eq!(s.state.as_str(), "graded", "error: {:?} refusal: {:?}", s.error, s.refusal);

    // The stored scorecard is what the CLI prints for the same zip.
    let stored: Value = serde_json::from_str(s.scorecard_json.as_deref().unwrap()).unwrap();
    let mut cli = cli_scorecard(&app.state.config.data_dir.join(&version.dir), &zip);
    // One version scheme: the platform's receipt names the published
    // version as the pages do ("v1"), where the CLI, which has no published
    // versions, names the packet.toml's ("1.0.0"); the digest covers it and
    // verifies.
    assert_eq!(stored["packet"]["version"], "v1");
    assert_eq!(stored["receipt"]["packet"]["version"], "v1");
    assert_ne!(cli["receipt"]["packet"]["version"], "v1");
    let receipt: grader::grade::Receipt =
        serde_json::from_value(stored["receipt"].clone()).unwrap();
    assert_eq!(
        grader::grade::receipt_digest(&receipt),
        receipt.digest,
        "the stored receipt's digest verifies"
    );
    let stored_json: grader::grade::Receipt =
        serde_json::from_str(s.receipt_json.as_deref().unwrap()).unwrap();
    assert_eq!(stored_json, receipt);
    cli["packet"]["version"] = "v1".into();
    cli["receipt"]["packet"]["version"] = "v1".into();
    // A command's wall limit derives from the sample's time on the machine
    // that measured it (the server's from the version's self-test, the
    // CLI's from its own run of the sample), so the two may differ; both
    // are at least the floor. The rest must agree exactly.
    let floor = grader::grade::WALL_FLOOR.as_secs_f64();
    let stored_runs = stored["receipt"]["runs"].as_array().unwrap().clone();
    let cli_runs = cli["receipt"]["runs"].as_array_mut().unwrap();
    assert_eq!(cli_runs.len(), stored_runs.len());
    for (c, s) in cli_runs.iter_mut().zip(&stored_runs) {
        assert_eq!(c["id"], s["id"]);
        let (cw, sw) = (
            c["limits"]["wall_secs"].as_f64().unwrap(),
            s["limits"]["wall_secs"].as_f64().unwrap(),
        );
        assert!(cw >= floor && sw >= floor, "{}: {cw} / {sw}", s["id"]);
        c["limits"]["wall_secs"] = s["limits"]["wall_secs"].clone();
    }
    let mut cli_receipt: grader::grade::Receipt =
        serde_json::from_value(cli["receipt"].clone()).unwrap();
    cli_receipt.digest = grader::grade::receipt_digest(&cli_receipt);
    cli["receipt"]["digest"] = cli_receipt.digest.into();
    assert_eq!(without_timings(stored.clone()), without_timings(cli));
    assert_eq!(s.decision.as_deref(), stored["decision"].as_str());

    // The candidate's status URL.
    let status: Value = client
        .get(app.url(&format!("/c/{}/submissions/{id}/status", invited.token)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["state"], "graded");
    // Results are the hiring team's to release (default never): the
    // candidate sees the state and the receipt digest, not the decision.
    assert!(status.get("decision").is_none(), "{status}");
    assert_eq!(status["receipt_digest"], stored["receipt"]["digest"]);

    // Exactly one job, done once.
    let jobs = app.state.db.jobs_for(app::contract::JobKind::Grade, &id).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].state.as_str(), "done");
    assert_eq!(jobs[0].attempts, 1);

    // The plain form answers with a redirect to the receipt.
    let r = upload(&app.base, &invited.token, zip, false).await;
    assert_eq!(r.status(), 303);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    assert!(to.starts_with(&format!("/c/{}/submissions/", invited.token)), "{to}");
}

/// A zip whose only entry is named `name`.
fn zip_with_name(name: &str) -> Vec<u8> {
    zip_of(&[(name, b"print('hi')\n")])
}

/// A deflate bomb: 100 MiB of zeros in one entry (about 100 KiB compressed).
fn zip_bomb() -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut out);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .large_file(false);
        z.start_file("zeros.txt", opts).unwrap();
        let block = vec![0u8; 1 << 20];
        for _ in 0..100 {
            z.write_all(&block).unwrap();
        }
        z.finish().unwrap();
    }
    out.into_inner()
}

/// Asserts that the refusal paragraph of a candidate page answer is the one
/// element with `autofocus` (and focusable).
fn refusal_has_the_focus(html: &str, what: &str) {
    let at = html
        .find("id=\"upload-refusal\"")
        .unwrap_or_else(|| panic!("{what}: no #upload-refusal: {html}"));
    let start = html[..at].rfind('<').unwrap();
    let tag = &html[start..start + html[start..].find('>').unwrap()];
    assert!(tag.contains("autofocus") && tag.contains("tabindex=\"-1\""), "{what}: {tag}");
    assert_eq!(html.matches("autofocus").count(), 1, "{what}: one autofocus target");
}

/// With JavaScript off, a refused upload answers with the page again, and
/// Chromium shows it scrolled to the refusal (far down the page), not at
/// the top.
#[tokio::test]
async fn a_refused_upload_lands_at_the_refusal_with_javascript_off() {
    let _one = crate::webdriver::exclusive().await;
    let app = app_with_packet().await;
    let invited = invite(&app.state, "Mallory").await;
    let files = tempfile::tempdir().unwrap();
    let evil = files.path().join("evil.zip");
    std::fs::write(&evil, zip_with_name("../x.py")).unwrap();
    let b = crate::webdriver::Browser::without_js(&app.base).await;
    b.goto(&format!("/c/{}", invited.token)).await;
    b.choose_file("#upload-file", &evil).await;
    b.click("#upload-submit").await;
    b.wait("#upload-refusal").await;
    let seen = b
        .script(
            "const r = document.getElementById('upload-refusal').getBoundingClientRect();
             return { active: document.activeElement ? document.activeElement.id : '', top: r.top, bottom: r.bottom,
                      inner: window.innerHeight, scrolled: window.scrollY, offset: r.top + window.scrollY };",
        )
        .await;
    assert_eq!(seen["active"], "upload-refusal", "{seen}");
    let (top, bottom, inner) = (
        seen["top"].as_f64().unwrap(),
        seen["bottom"].as_f64().unwrap(),
        seen["inner"].as_f64().unwrap(),
    );
    assert!(
        seen["offset"].as_f64().unwrap() > inner,
        "the refusal is below the first screen, so landing on it means scrolling: {seen}"
    );
    assert!(
        top >= 0.0 && bottom <= inner && seen["scrolled"].as_f64().unwrap() > 0.0,
        "the refusal is in view: {seen}"
    );
    assert!(b.text("#upload-refusal").await.contains("`..`"));
    b.close().await;
}

#[tokio::test]
async fn hostile_zips_are_refused_with_the_reason_and_nothing_is_stored() {
    let app = app_with_packet().await;
    let invited = invite(&app.state, "Mallory").await;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("zip slip", zip_with_name("../x.py"), "`..`"),
        ("absolute path", zip_with_name("/etc/cron.d/x"), "absolute path"),
        ("zip bomb", zip_bomb(), "ratio"),
        ("not a zip", b"this is plain text, not an archive".repeat(100), "could not be read"),
    ];
    for (what, bytes, reason) in cases {
        let r = upload(&app.base, &invited.token, bytes.clone(), true).await;
        assert_eq!(r.status(), 422, "{what}");
        let body: Value = r.json().await.unwrap();
        let error = body["error"].as_str().unwrap();
        assert!(error.contains(reason), "{what}: {error}");

        // The plain form shows the page again with the refusal.
        let r = upload(&app.base, &invited.token, bytes, false).await;
        assert_eq!(r.status(), 422, "{what}");
        let html = r.text().await.unwrap();
        assert!(html.contains("Your upload was refused"), "{what}: {html}");
        // With JavaScript off the page lands at the refusal: it takes the
        // focus, and it is the only thing on the page that does.
        refusal_has_the_focus(&html, what);
    }
    let page = TestApp::client()
        .get(app.url(&format!("/c/{}", invited.token)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains("autofocus") && !page.contains("upload-refusal"),
        "no refusal, nothing takes the focus: {page}"
    );
    assert!(app.state.db.submissions_of(&invited.assignment.id).await.unwrap().is_empty());
    let data = &app.state.config.data_dir;
    assert_eq!(upload_blobs(&app.state).await, Vec::<String>::new());
    assert_eq!(files_under(&data.join("tmp")), Vec::<PathBuf>::new());
    let r = TestApp::client()
        .post(app.url(&format!("/c/{}/submit", invited.token)))
        .header("accept", "application/json")
        .multipart(reqwest::multipart::Form::new().text("other", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "a form without `file`");

    // The author sees each refusal on the assignment: when and why.
    let (author, _) = crate::auth::signed_in(&app, gatehouse::db::Role::Author).await;
    let html =
        crate::auth::page(&author, app.url(&format!("/assignments/{}", invited.assignment.id)))
            .await
            .text()
            .await
            .unwrap();
    let section = &html
        [html.find("Refused uploads").unwrap_or_else(|| panic!("no refused uploads on {html}"))..];
    assert_eq!(
        section.matches("class=\"refusal-reason\"").count(),
        9,
        "eight hostile uploads and the form without a file: {section}"
    );
    for reason in ["`..`", "absolute path", "ratio", "could not be read", "has no `file` field"] {
        assert!(
            section.contains(reason) || section.contains(&reason.replace('`', "&#x60;")),
            "{reason} in {section}"
        );
    }
    assert!(section.contains(" UTC"), "with the time: {section}");
    // A clean assignment shows no such section.
    let other = invite(&app.state, "Clean").await;
    let html =
        crate::auth::page(&author, app.url(&format!("/assignments/{}", other.assignment.id)))
            .await
            .text()
            .await
            .unwrap();
    assert!(!html.contains("Refused uploads"), "{html}");
}

#[tokio::test]
async fn over_limit_upload_is_cut_off_with_413_and_nothing_left() {
    let app = TestApp::spawn_with(|c| c.max_upload_mb = 1).await;
    publish_packet(&app.state).await;
    let invited = invite(&app.state, "Big").await;
    let big = vec![7u8; 3 << 20];

    // A declared length over the cap is refused before the body is read.
    let r = upload(&app.base, &invited.token, big.clone(), true).await;
    assert_eq!(r.status(), 413);
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("limit of 1 MiB"), "{body}");

    // Without a length (chunked), reading stops once past the cap.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        big.chunks(64 << 10).map(|c| Ok(c.to_vec())).collect();
    let stream = futures_util::stream::iter(chunks);
    let part =
        reqwest::multipart::Part::stream(reqwest::Body::wrap_stream(stream)).file_name("big.zip");
    let r = TestApp::client()
        .post(app.url(&format!("/c/{}/submit", invited.token)))
        .header("accept", "application/json")
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);

    assert!(app.state.db.submissions_of(&invited.assignment.id).await.unwrap().is_empty());
    let data = &app.state.config.data_dir;
    assert_eq!(upload_blobs(&app.state).await, Vec::<String>::new());
    assert_eq!(files_under(&data.join("tmp")), Vec::<PathBuf>::new());
}

#[tokio::test]
async fn expired_link_answers_410() {
    let app = app_with_packet().await;
    let invited = invite_with(&app.state, "Late", Some(gatehouse::now_ms() + 400), None).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let client = TestApp::client();
    let r = client.get(app.url(&format!("/c/{}", invited.token))).send().await.unwrap();
    assert_eq!(r.status(), 410);
    let html = r.text().await.unwrap();
    assert!(html.contains("deadline"), "{html}");
    assert!(!html.contains("name=\"file\""), "no upload form on an expired link");
    let r = upload(&app.base, &invited.token, sample_zip(), true).await;
    assert_eq!(r.status(), 410);
    let r = client.get(app.url(&format!("/c/{}/starter.zip", invited.token))).send().await.unwrap();
    assert_eq!(r.status(), 410);
    // An unknown token is a 404 that says the link is not valid and whom
    // to ask, with no sign-in or start page a candidate cannot use.
    let r = client.get(app.url("/c/not-a-real-token")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let html = r.text().await.unwrap();
    assert!(
        html.contains("This invite link is not valid")
            && html.contains("Ask the person at the company who invited you"),
        "{html}"
    );
    assert!(!html.contains("Go to the start page") && !html.contains("href=\"/login\""), "{html}");
}

#[tokio::test]
async fn ended_time_box_refuses_submission() {
    let app = app_with_packet().await;
    let invited = invite_with(&app.state, "Slow", None, Some(1)).await;
    let client = TestApp::client();
    let r = client.post(app.url(&format!("/c/{}/start", invited.token))).send().await.unwrap();
    assert_eq!(r.status(), 303);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let html = client
        .get(app.url(&format!("/c/{}", invited.token)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("time box") && html.contains("submissions are closed"), "{html}");
    let r = upload(&app.base, &invited.token, sample_zip(), true).await;
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("time box"), "{body}");
}
