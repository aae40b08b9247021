//! The packet library: built-ins, import, the draft editor, self-test and
//! publish.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use gatehouse::db::{Role, VersionState};
use reqwest::StatusCode;

use crate::auth::{page, signed_in};
use crate::support::{TestApp, repo_root};

/// Zips the folder `dir` with every path under `prefix` (e.g. "null-status/"
/// or "" for the root), after `tweak` may change a file's contents (None
/// drops the file).
pub fn zip_packet(
    dir: &Path,
    prefix: &str,
    tweak: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>,
) -> Vec<u8> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, std::path::PathBuf)>) {
        let mut entries: Vec<_> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.is_file() {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                out.push((rel, p));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (rel, path) in files {
        let Some(bytes) = tweak(&rel, std::fs::read(&path).unwrap()) else { continue };
        zip.start_file(format!("{prefix}{rel}"), opts).unwrap();
        zip.write_all(&bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

pub fn null_status() -> std::path::PathBuf {
    repo_root().join("packets/null-status")
}

/// The web tests' own packet for the self-tests that exercise the
/// platform's check jobs (background, idle priority): one answer file and
/// one hidden test, so a `packet check` of it costs about 4 CPU s where
/// null-status's costs about 20. The built-in packets' own self-tests are
/// the grader's (`it packets::*`).
pub fn tiny() -> std::path::PathBuf {
    repo_root().join("server/tests/web/packets/tiny-answer")
}

/// A folder of built-in packets with a copy of `packets/null-status` in it.
fn builtin_packets() -> tempfile::TempDir {
    let packets = tempfile::tempdir().unwrap();
    grader::tree::copy_path(&null_status(), &packets.path().join("null-status")).unwrap();
    packets
}

/// An app whose built-in packets are those in `packets`, self-tested in the
/// background as `self_test` says.
pub async fn app_with_builtin(packets: &tempfile::TempDir, self_test: &str) -> TestApp {
    let (dir, self_test) = (packets.path().to_path_buf(), self_test.to_string());
    TestApp::spawn_with(move |c| {
        c.packets_dir = dir;
        c.builtin_self_test = self_test;
    })
    .await
}

/// Posts a zip to the import form; returns the response.
pub async fn import(
    app: &TestApp,
    client: &reqwest::Client,
    csrf: &str,
    zip: Vec<u8>,
) -> reqwest::Response {
    let form = reqwest::multipart::Form::new().text("csrf", csrf.to_string()).part(
        "file",
        reqwest::multipart::Part::bytes(zip)
            .file_name("packet.zip")
            .mime_str("application/zip")
            .unwrap(),
    );
    client.post(app.url("/packets/import")).multipart(form).send().await.unwrap()
}

/// Imports null-status (with `tweak`) and returns the new draft's id.
pub async fn import_draft(
    app: &TestApp,
    client: &reqwest::Client,
    csrf: &str,
    tweak: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>,
) -> i64 {
    let r = import(app, client, csrf, zip_packet(&null_status(), "null-status/", tweak)).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let to = r.headers()["location"].to_str().unwrap().to_string();
    to.rsplit_once("version=").unwrap().1.parse().unwrap()
}

/// Imports the tiny packet ([`tiny`]) with `tweak`, each of its hidden
/// runs first waiting `wait_secs` (no CPU; a self-test of it then lasts
/// long enough to be seen running), and returns the new draft's id.
pub async fn import_tiny_draft(
    app: &TestApp,
    client: &reqwest::Client,
    csrf: &str,
    wait_secs: u32,
    tweak: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>,
) -> i64 {
    let zip = zip_packet(&tiny(), "tiny-answer/", |p, b| {
        let b = if p == "hidden/test_hidden_answer.py" && wait_secs > 0 {
            [format!("import time\n\ntime.sleep({wait_secs})\n").into_bytes(), b].concat()
        } else {
            b
        };
        tweak(p, b)
    });
    let r = import(app, client, csrf, zip).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let to = r.headers()["location"].to_str().unwrap().to_string();
    to.rsplit_once("version=").unwrap().1.parse().unwrap()
}

/// Does what a worker does with version `id`'s queued `check` job: claims
/// it, runs the check and finishes the job. Returns whether it passed.
pub async fn work_check(app: &TestApp, id: i64) -> bool {
    let db = &app.state.db;
    let job = db
        .claim_job("library-test", gatehouse::now_ms(), 600_000)
        .await
        .unwrap()
        .expect("a queued job");
    assert_eq!(
        (job.kind.as_str(), job.subject.as_str()),
        ("check", id.to_string().as_str()),
        "the next job is {id}'s check"
    );
    let passed = gatehouse::library::run_check(&app.state, id).await.unwrap();
    assert!(db.finish_job(job.id, "library-test", true, None).await.unwrap());
    passed
}

fn files_under(dir: &Path) -> usize {
    if !dir.exists() {
        return 0;
    }
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| if p.is_dir() { 1 + files_under(&p) } else { 1 })
        .sum()
}

#[tokio::test]
async fn built_in_packets_load_once_and_list() {
    let packets = builtin_packets();
    std::fs::create_dir_all(packets.path().join("not-a-packet")).unwrap();
    let dir = packets.path().to_path_buf();
    let app = TestApp::spawn_with(move |c| c.packets_dir = dir).await;
    assert_eq!(gatehouse::library::load_builtin(&app.state).await.unwrap(), 1);
    assert_eq!(
        gatehouse::library::load_builtin(&app.state).await.unwrap(),
        0,
        "idempotent on restart"
    );
    let v = app.state.db.latest_published("null-status").await.unwrap().unwrap();
    assert_eq!(v.version, Some(1));
    assert_eq!(v.check_state, "none");
    let loaded =
        grader::packet::Packet::load(&gatehouse::library::version_dir(&app.state, &v.dir)).unwrap();
    assert_eq!(loaded.digest, v.digest);

    let (client, _) = signed_in(&app, Role::Reviewer).await;
    let html = page(&client, app.url("/packets")).await.text().await.unwrap();
    for want in ["null-status", "Don&#x27;t page on a null status", "v1", "not run", "built-in"] {
        assert!(
            html.contains(want) || html.contains(&want.replace("&#x27;", "'")),
            "{want} in {html}"
        );
    }
    assert!(!html.contains("Import a packet"), "reviewers do not import");
    let html = page(&client, app.url("/packets/null-status")).await.text().await.unwrap();
    for want in ["unknowns_stop", "Failure catalog", "starter/tools.py", "Self-test", "not run"] {
        assert!(html.contains(want), "{want} in the detail page");
    }
    // Each rubric level is numbered once, by the list (not "0. 0: ...").
    let packet =
        grader::packet::Packet::load(&crate::support::repo_root().join("packets/null-status"))
            .unwrap();
    let first = &packet.manifest.criteria[0].levels[0];
    let first = first.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    assert!(html.contains(&format!("<ol start=\"0\"><li value=\"0\">{first}")), "levels: {html}");
    assert!(!html.contains(">0: "), "a level numbered twice");
    assert!(!html.contains("Run self-test"), "reviewers do not run the self-test");
    assert!(!html.contains("/assignments/new?packet=null-status"), "reviewers do not invite");

    // An author's "Run self-test" enqueues one `check` job, however often pressed.
    let (author, csrf) = signed_in(&app, Role::Author).await;
    let html = page(&author, app.url("/packets/null-status")).await.text().await.unwrap();
    assert!(
        html.contains("Run self-test")
            && html.contains("Edit as new draft")
            && !html.contains("Save budgets")
    );
    // A published packet's page invites a candidate straight away.
    assert!(
        html.contains(r#"href="/assignments/new?packet=null-status""#)
            && html.contains(">Invite a candidate</a>"),
        "{html}"
    );
    for _ in 0..2 {
        let r = author
            .post(app.url(&format!("/packets/null-status/versions/{}/check", v.id)))
            .form(&[("csrf", csrf.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
    }
    let jobs =
        app.state.db.jobs_for(app::contract::JobKind::Check, &v.id.to_string()).await.unwrap();
    assert_eq!(jobs.len(), 1);
    let html = page(&author, app.url("/packets/null-status")).await.text().await.unwrap();
    assert!(html.contains("check-queued"), "the page shows the queued self-test");
}

#[tokio::test]
async fn import_of_a_packet_zip_creates_a_draft() {
    let app = TestApp::spawn().await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    for prefix in ["null-status/", ""] {
        let r =
            import(&app, &client, &csrf, zip_packet(&null_status(), prefix, |_, b| Some(b))).await;
        assert_eq!(
            r.status(),
            StatusCode::SEE_OTHER,
            "prefix {prefix:?}: {}",
            r.text().await.unwrap()
        );
    }
    let packet = app.state.db.packet_by_slug("null-status").await.unwrap().unwrap();
    let versions = app.state.db.versions_of(packet.id).await.unwrap();
    assert_eq!(versions.len(), 2);
    assert!(versions.iter().all(|v| v.state == VersionState::Draft && v.version.is_none()));
    let html = page(&client, app.url(&format!("/packets/null-status?version={}", versions[0].id)))
        .await
        .text()
        .await
        .unwrap();
    for want in [
        "draft of v1",
        "unknowns_stop",
        "Run self-test",
        "Publish",
        "starter/tools.py",
        "Save budgets",
        "<h1>",
        "<textarea name=\"prompt\"",
    ] {
        assert!(html.contains(want), "{want}");
    }
    assert!(!html.contains("Invite a candidate"), "nothing published yet, so no invite: {html}");
    assert!(!html.contains("draft #"), "one version scheme: no database ids: {html}");
    assert_eq!(files_under(&app.state.config.data_dir.join("tmp")), 0, "no scratch left behind");
}

#[tokio::test]
async fn broken_imports_are_refused_with_their_reason_and_leave_nothing() {
    let app = TestApp::spawn().await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let toml = std::fs::read_to_string(null_status().join("packet.toml")).unwrap();
    let line = toml.lines().position(|l| l.starts_with("[budgets]")).unwrap() + 2;
    let broken = {
        let mut lines: Vec<&str> = toml.lines().collect();
        lines.insert(line - 1, "bogus_budget = 3");
        lines.join("\n")
    };
    let check = async |zip: Vec<u8>, expect: &str| {
        let r = import(&app, &client, &csrf, zip).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let body = r.text().await.unwrap();
        assert!(body.contains(expect), "{expect} in {body}");
    };
    check(
        zip_packet(&null_status(), "null-status/", |p, b| {
            if p == "packet.toml" { Some(broken.clone().into_bytes()) } else { Some(b) }
        }),
        &format!("packet.toml:{line}:"),
    )
    .await;
    check(
        zip_packet(
            &null_status(),
            "null-status/",
            |p, b| if p == "prompt.md" { None } else { Some(b) },
        ),
        "no prompt.md",
    )
    .await;
    // Ingestion unwraps one lone top folder (how desktops zip) and the
    // import looks one folder further, so three levels down is too deep.
    check(
        zip_packet(&null_status(), "a/b/c/", |_, b| Some(b)),
        "no packet.toml at its root or in a single top folder",
    )
    .await;
    check(zip_packet(&null_status(), "../", |_, b| Some(b)), "the zip was refused").await;
    check(b"not a zip".to_vec(), "the zip was refused").await;
    assert!(app.state.db.list_packets().await.unwrap().is_empty());
    assert_eq!(files_under(&app.state.config.data_dir.join("packets")), 0);
    assert_eq!(files_under(&app.state.config.data_dir.join("tmp")), 0);
}

#[tokio::test]
async fn editing_a_draft_keeps_formatting_and_shows_on_the_page() {
    let app = TestApp::spawn().await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let id = import_draft(&app, &client, &csrf, |_, b| Some(b)).await;
    let base = format!("/packets/null-status/versions/{id}");
    let before = app.state.db.version_by_id(id).await.unwrap().unwrap();

    let r = client
        .post(app.url(&format!("{base}/budgets")))
        .form(&[
            ("csrf", csrf.as_str()),
            ("model_calls", "7"),
            ("tokens", "30000"),
            ("time_box_minutes", "45"),
            ("tool_calls", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let html = page(&client, app.url(&format!("/packets/null-status?version={id}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"data-budget="model_calls" class="budget">7<"#), "{html}");
    assert!(html.contains(r#"data-budget="time_box_minutes" class="budget">45<"#));
    let after = app.state.db.version_by_id(id).await.unwrap().unwrap();
    assert_ne!(before.digest, after.digest);
    let toml = std::fs::read_to_string(
        gatehouse::library::version_dir(&app.state, &after.dir).join("packet.toml"),
    )
    .unwrap();
    assert!(toml.starts_with("# null-status: blanks are not defaults."), "comments are kept");
    assert!(toml.contains("model_calls = 7"));

    // Prompt (raw HTML is escaped), a rubric row and a catalog entry.
    let prompt = "# Brief\n\nDo *not* guess.\n\n<script>alert(1)</script>\n</textarea><b>out</b>\n";
    let r = client
        .post(app.url(&format!("{base}/prompt")))
        .form(&[("csrf", csrf.as_str()), ("prompt", prompt)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = client
        .post(app.url(&format!("{base}/failures/0")))
        .form(&[
            ("csrf", csrf.as_str()),
            ("title", "Invented a value (edited)"),
            ("description", "A tool got a value nobody supplied."),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let html = page(&client, app.url(&format!("/packets/null-status?version={id}")))
        .await
        .text()
        .await
        .unwrap();
    // Under the page's h1 and the section's h2, the brief's own "# Brief" is an h3.
    assert!(html.contains("<h3>Brief</h3>") && html.contains("<em>not</em>"), "Markdown rendered");
    assert!(
        !html.contains("<script>alert(1)</script>") && html.contains("&lt;script&gt;"),
        "raw HTML escaped: {html}"
    );
    assert!(!html.contains("<b>out</b>"), "the editor's textarea cannot be closed from the prompt");
    assert!(html.contains("Invented a value (edited)"));

    // An edit that does not validate is refused with its line; the draft is unchanged.
    let digest = app.state.db.version_by_id(id).await.unwrap().unwrap().digest;
    let r = client
        .post(app.url(&format!("{base}/criteria/0")))
        .form(&[
            ("csrf", csrf.as_str()),
            ("title", "Unknowns"),
            ("max", "9"),
            ("levels", "none\nsome"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("packet.toml:"));
    assert_eq!(app.state.db.version_by_id(id).await.unwrap().unwrap().digest, digest);
    let r = client
        .post(app.url(&format!("{base}/budgets")))
        .form(&[("csrf", csrf.as_str()), ("model_calls", "many")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("model_calls"));
}

#[tokio::test]
async fn publish_runs_the_self_test_and_a_failing_packet_stays_a_draft() {
    let app = TestApp::spawn().await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let good = import_tiny_draft(&app, &client, &csrf, 0, |_, b| Some(b)).await;
    // Without the sample's answer the sample no longer passes: the check fails.
    let bad = import_tiny_draft(&app, &client, &csrf, 0, |p, b| {
        if p == "sample/answer.py" { None } else { Some(b) }
    })
    .await;

    for id in [good, bad] {
        let r = client
            .post(app.url(&format!("/packets/tiny-answer/versions/{id}/publish")))
            .form(&[("csrf", csrf.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        let jobs =
            app.state.db.jobs_for(app::contract::JobKind::Check, &id.to_string()).await.unwrap();
        assert_eq!(jobs.len(), 1, "one check job for {id}");
        assert_eq!(
            app.state.db.version_by_id(id).await.unwrap().unwrap().state,
            VersionState::Draft,
            "not published before the check"
        );
        let html = page(&client, app.url(&format!("/packets/tiny-answer?version={id}")))
            .await
            .text()
            .await
            .unwrap();
        assert!(html.contains("queued") && html.contains("Publish requested"), "{id}");
    }

    // The page follows the self-test live: its status URL, in the page.
    let status_url = format!("/packets/tiny-answer/versions/{good}/check/status");
    let html = page(&client, app.url(&format!("/packets/tiny-answer?version={good}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains(&format!("url&quot;:&quot;{status_url}")) || html.contains(&status_url),
        "{html}"
    );
    let status: serde_json::Value =
        client.get(app.url(&status_url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(status["state"], "queued");

    // What a worker does with the `check` jobs.
    assert!(work_check(&app, good).await);
    assert!(!work_check(&app, bad).await);

    let published = app.state.db.version_by_id(good).await.unwrap().unwrap();
    assert_eq!((published.state, published.version), (VersionState::Published, Some(1)));
    // The self-test's calibration is stored with the published version, for
    // its digest, with the hidden tests' ids that every grading of it expects.
    let recorded = gatehouse::grading::recorded_calibration(published.check_report.as_deref())
        .expect("a recorded calibration");
    assert_eq!(recorded.digest, published.digest);
    assert!(recorded.expected.values().any(|ids| !ids.is_empty()), "{recorded:?}");
    assert!(!recorded.run_ms.is_empty(), "{recorded:?}");
    let html = page(&client, app.url(&format!("/packets/tiny-answer?version={good}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("v1") && html.contains("passed"));
    // Settled: no live status any more (JavaScript off, a reload showed it).
    assert!(!html.contains(&status_url), "{html}");
    let status: serde_json::Value =
        client.get(app.url(&status_url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(status["state"], "passed");

    let refused = app.state.db.version_by_id(bad).await.unwrap().unwrap();
    assert_eq!((refused.state, refused.check_state.as_str()), (VersionState::Draft, "failed"));
    assert!(app.state.db.publish_request(bad).await.unwrap().is_none(), "the request is settled");
    let html = page(&client, app.url(&format!("/packets/tiny-answer?version={bad}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("check-item failed") && html.contains("the sample passes the test command"),
        "failing items shown"
    );

    // A published version is immutable; editing it makes a new draft.
    let r = client
        .post(app.url(&format!("/packets/tiny-answer/versions/{good}/budgets")))
        .form(&[("csrf", csrf.as_str()), ("model_calls", "3")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(r.text().await.unwrap().contains("published and cannot change"));
    let r = client
        .post(app.url(&format!("/packets/tiny-answer/versions/{good}/draft")))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let draft: i64 = r.headers()["location"]
        .to_str()
        .unwrap()
        .rsplit_once("version=")
        .unwrap()
        .1
        .parse()
        .unwrap();
    let d = app.state.db.version_by_id(draft).await.unwrap().unwrap();
    assert_eq!((d.state, d.digest.as_str()), (VersionState::Draft, published.digest.as_str()));
    assert_ne!(d.dir, published.dir);
    let r = client
        .post(app.url(&format!("/packets/tiny-answer/versions/{draft}/budgets")))
        .form(&[("csrf", csrf.as_str()), ("model_calls", "3")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        app.state.db.version_by_id(good).await.unwrap().unwrap().digest,
        published.digest,
        "the published version is untouched"
    );
}

/// The self-test's state follows live on the draft's page: "queued" after
/// the click, "running" while a worker checks (the same page, not
/// reloaded), then the page reloads with the result.
#[tokio::test]
async fn the_self_test_state_follows_live_in_a_real_browser() {
    let _one = crate::webdriver::exclusive().await;
    let app = TestApp::spawn().await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let id = import_tiny_draft(&app, &client, &csrf, 2, |_, b| Some(b)).await;
    let b = crate::webdriver::Browser::new(&app.base).await;
    crate::e2e::sign_in(&b, "author@example.test", crate::auth::PASSWORD).await;
    b.goto(&format!("/packets/tiny-answer?version={id}")).await;
    assert_eq!(b.text(".self-test h2 .check").await, "not run");
    assert!(!b.exists("#live-state").await, "nothing to follow before a self-test is asked for");
    b.click(&format!("form[action='/packets/tiny-answer/versions/{id}/check'] button")).await;
    b.wait("#live-state[data-hydrated='true'][data-state='queued']").await;
    // A mark on this page: a reload drops it.
    b.script("window.__same_page = 'yes'; return null;").await;

    let state = app.state.clone();
    let worker = tokio::spawn(async move {
        let job = state
            .db
            .claim_job("browser-test", gatehouse::now_ms(), 600_000)
            .await
            .unwrap()
            .expect("the check job");
        let passed = gatehouse::library::run_check(&state, id).await.unwrap();
        state.db.finish_job(job.id, "browser-test", true, None).await.unwrap();
        passed
    });
    b.wait_for("#live-state[data-state='running']", Duration::from_secs(30)).await;
    assert_eq!(
        b.script("return window.__same_page || null;").await,
        "yes",
        "running shown without a reload"
    );
    assert!(worker.await.unwrap(), "the check passes");
    // The reloaded page renders the result's own class (the live page kept
    // the class it was rendered with).
    b.wait_for(".self-test h2 .check-passed", Duration::from_secs(30)).await;
    assert_eq!(b.text(".self-test h2 .check").await, "passed");
    assert!(
        b.script("return window.__same_page || null;").await.is_null(),
        "the page reloaded with the result"
    );
    assert!(!b.exists("#live-state").await);
    b.close().await;
}

/// A candidate's grading is claimed before a built-in check that waits,
/// even an older one; an author asking for that check raises it to theirs.
#[tokio::test]
async fn a_grading_is_claimed_before_a_pending_built_in_check() {
    let packets = builtin_packets();
    let app = app_with_builtin(&packets, "null-status").await;
    let db = &app.state.db;
    assert_eq!(gatehouse::library::load_builtin(&app.state).await.unwrap(), 1);
    let v = db.latest_published("null-status").await.unwrap().unwrap();
    let check =
        db.jobs_for(app::contract::JobKind::Check, &v.id.to_string()).await.unwrap()[0].clone();

    let invited = crate::candidate::invite(&app.state, "First").await;
    assert_eq!(invited.assignment.packet_version_id, v.id, "graded against the built-in version");
    let s = db
        .create_submission(gatehouse::db::NewSubmission {
            id: "sub-first",
            assignment_id: &invited.assignment.id,
            blob_sha256: &"0".repeat(64),
            size_bytes: 1,
        })
        .await
        .unwrap();
    let grade = db.jobs_for(app::contract::JobKind::Grade, &s.id).await.unwrap()[0].clone();
    assert!(grade.id > check.id, "the check is the older job");
    let first = db.claim_job("w", gatehouse::now_ms(), 60_000).await.unwrap().expect("a job");
    assert_eq!((first.kind.as_str(), first.id), ("grade", grade.id), "the grading goes first");
    let next = db.claim_job("w", gatehouse::now_ms(), 60_000).await.unwrap().expect("a job");
    assert_eq!((next.kind.as_str(), next.id), ("check", check.id), "then the built-in check");
    assert!(db.release_job(next.id, "w", "test").await.is_ok());

    // An author's "Run self-test" on it raises it to a grading's priority:
    // then age decides, and it is the older.
    let invited = crate::candidate::invite(&app.state, "Second").await;
    let s = db
        .create_submission(gatehouse::db::NewSubmission {
            id: "sub-second",
            assignment_id: &invited.assignment.id,
            blob_sha256: &"0".repeat(64),
            size_bytes: 1,
        })
        .await
        .unwrap();
    assert_eq!(
        gatehouse::library::enqueue_check(&app.state, v.id).await.unwrap(),
        check.id,
        "the same job"
    );
    assert_eq!(db.job_by_id(check.id).await.unwrap().unwrap().priority, 0);
    let first = db.claim_job("w", gatehouse::now_ms(), 60_000).await.unwrap().expect("a job");
    assert_eq!(first.id, check.id);
    let next = db.claim_job("w", gatehouse::now_ms(), 60_000).await.unwrap().expect("a job");
    assert_eq!((next.kind.as_str(), next.subject.as_str()), ("grade", s.id.as_str()));
}

/// With the setting off, nothing is queued; a built-in check whose job
/// fails for good shows why on the page, in words.
#[tokio::test]
async fn built_in_self_test_off_queues_nothing_and_a_failed_one_says_why() {
    let packets = builtin_packets();
    let dir = packets.path().to_path_buf();
    let data = tempfile::tempdir().unwrap();
    let (db_url, data_dir) =
        (format!("sqlite://{}", data.path().join("g.db").display()), data.path().join("data"));
    // Each start is over the same database and data folder.
    let start = |self_test: &'static str| {
        let (d, u, dd) = (dir.clone(), db_url.clone(), data_dir.clone());
        TestApp::spawn_with(move |c| {
            c.packets_dir = d;
            c.database_url = u;
            c.data_dir = dd;
            c.builtin_self_test = self_test.into();
        })
    };
    let app = start("off").await;
    assert_eq!(gatehouse::library::load_builtin(&app.state).await.unwrap(), 1);
    let v = app.state.db.latest_published("null-status").await.unwrap().unwrap();
    assert!(app.state.db.pending_jobs().await.unwrap().is_empty(), "off: nothing queued");
    drop(app);

    // Restarted with a list naming it: its check is queued now (it never ran).
    let app = start("ledger, null-status").await;
    assert_eq!(gatehouse::library::load_builtin(&app.state).await.unwrap(), 0);
    let db = &app.state.db;
    let jobs = db.jobs_for(app::contract::JobKind::Check, &v.id.to_string()).await.unwrap();
    assert_eq!(jobs.len(), 1);
    // Three workers claim it and die (their leases lapse).
    let base = gatehouse::now_ms() - 10_000;
    for i in 0..3 {
        db.claim_job(&format!("dead-{i}"), base + i * 100, 1).await.unwrap().expect("claimable");
    }
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let started = std::time::Instant::now();
    // The worker fails the job, then the version's self-test (two writes):
    // wait for both.
    while db.job_by_id(jobs[0].id).await.unwrap().unwrap().state.as_str() != "failed"
        || db.version_by_id(v.id).await.unwrap().unwrap().check_state == "none"
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the interrupted check was not failed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failed = db.version_by_id(v.id).await.unwrap().unwrap();
    assert_eq!(failed.check_state, "failed");
    let (client, _) = signed_in(&app, Role::Reviewer).await;
    let html = page(&client, app.url("/packets/null-status")).await.text().await.unwrap();
    assert!(html.contains("check-failed") && html.contains("check-item failed"), "{html}");
    assert!(
        html.contains(
            "the self-test was interrupted 3 times (the worker running it stopped); run it again"
        ),
        "{html}"
    );
    assert!(!html.contains("Code(") && !html.contains("Some("), "{html}");

    // A bad setting stops the start with what is wrong.
    let e = gatehouse::serve::state(gatehouse::config::Config {
        builtin_self_test: "null_status".into(),
        ..gatehouse::config::Config::default()
    })
    .await
    .err()
    .expect("refused");
    assert!(
        e.to_string()
            .contains("builtin_self_test (GATEHOUSE_BUILTIN_SELF_TEST) is \"null_status\""),
        "{e}"
    );
}
