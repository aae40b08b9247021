//! Issue #4 end to end in a real headless Chromium: the candidate of
//! refund-invoices (whose model waits for a witnessed red) opens the link,
//! finds the model closed, witnesses red through the page's form, makes
//! three metered model calls (one a repeat) and sees the live budget drop,
//! witnesses green, submits and sees the submission graded; the reviewer
//! then sees the Witnessed section with the runs, the ledger and the
//! timeline.

use std::path::Path;
use std::time::{Duration, Instant};

use gatehouse::db::{NewVersion, Role};
use gatehouse::invites::{self, Invite};
use serde_json::{Value, json};

use crate::browser::require_bundle;
use crate::support::{TestApp, repo_root};
use crate::webdriver::{Browser, exclusive};

const SLUG: &str = "refund-invoices";

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// Writes a zip of every file under `root` (names relative to it) to `out`.
pub(crate) fn write_tree_zip(root: &Path, out: &Path) {
    let mut files = Vec::new();
    for path in crate::candidate::files_under(root) {
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        files.push((rel, std::fs::read(&path).unwrap()));
    }
    files.sort();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    std::fs::write(out, crate::candidate::zip_of(&refs)).unwrap();
}

/// The same chat request body for the same `content`, so a repeat is a duplicate.
fn chat(content: &str) -> Value {
    json!({"model": "fake-model", "messages": [{"role": "user", "content": content}]})
}

/// One model call through the meter with the assignment's key.
async fn model_call(base: &str, key: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .expect("model call");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| json!({"raw": text})))
}

/// The "left" column of the live budget, keyed by cap, as the page shows it.
async fn budget_left(b: &Browser) -> Value {
    b.script(
        "const out = {}; document.querySelectorAll('#live-budget tr[data-cap]').forEach(tr => { out[tr.dataset.cap] = tr.querySelector('td.left').textContent.trim(); }); return out;",
    )
    .await
}

#[tokio::test]
async fn red_model_calls_green_submit_and_the_reviewers_witnessed_timeline() {
    let _one = exclusive().await;
    require_bundle();
    let started = Instant::now();
    let (upstream_url, upstream) = crate::meter::spawn_upstream().await;
    let app = TestApp::spawn_with(move |c| {
        c.model_upstream_url = Some(upstream_url);
        c.model_upstream_key = Some("sk-upstream".into());
    })
    .await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    app.user("reviewer@example.com", Role::Reviewer, "reviewer-password-1").await;

    // The packet is copied into the data directory and published as is.
    let rel = format!("packets/{SLUG}/1/{SLUG}");
    let dir = app.state.config.data_dir.join(&rel);
    copy_dir(&repo_root().join("packets").join(SLUG), &dir);
    let packet = grader::packet::Packet::load(&dir).unwrap();
    assert!(
        std::fs::read_to_string(dir.join("packet.toml"))
            .unwrap()
            .contains("model_waits_for_red = true")
    );
    app.state
        .db
        .create_version(NewVersion {
            slug: SLUG,
            title: &packet.manifest.packet.title,
            builtin: false,
            dir: &rel,
            digest: &packet.digest,
            created_by: None,
            publish: true,
        })
        .await
        .unwrap();
    let invited = invites::create(
        &app.state,
        None,
        Invite {
            slug: SLUG,
            candidate_name: "Ada",
            email: "ada@example.com",
            deadline: None,
            time_box_secs: None,
        },
    )
    .await
    .unwrap();
    let invite = app.url(&format!("/c/{}", invited.token));

    // The candidate's zips: the starter tree (red) and the sample tree (green, submit).
    let files = tempfile::tempdir().unwrap();
    let starter_zip = files.path().join("starter-tree.zip");
    let sample_zip = files.path().join("sample-tree.zip");
    write_tree_zip(&repo_root().join("packets").join(SLUG).join("starter"), &starter_zip);
    write_tree_zip(&packet.sample_dir(), &sample_zip);

    // The candidate opens the link and reads the model key from the page.
    let candidate = Browser::new(&app.base).await;
    candidate.goto(&invite).await;
    let key = candidate.text("#model-key").await.trim().to_string();
    assert!(key.starts_with("gh-") && key.len() == 43, "unexpected model key {key:?}");
    assert!(
        candidate.text("#model-meter .model-window").await.contains("Closed"),
        "the model window is closed before red"
    );

    // Before a witnessed red the meter refuses and never reaches the upstream.
    let (status, body) = model_call(&app.base, &key, &chat("too early")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.to_string().contains("model_window_closed"), "{body}");
    assert_eq!(upstream.hits(), 0);

    // Red through the page's form, on the starter tree.
    candidate.choose_file("form.witness.red input[type='file']", &starter_zip).await;
    candidate.click("form.witness.red button[type='submit']").await;
    candidate.wait_for("#witness li.witness-run.red.accepted", Duration::from_secs(120)).await;
    candidate.snapshot("w1-red").await;
    candidate.wait("#live-budget[data-hydrated='true']").await;
    let before = budget_left(&candidate).await;

    // Three calls go through the meter; the third repeats the first.
    for content in ["first question", "second question", "first question"] {
        let (status, body) = model_call(&app.base, &key, &chat(content)).await;
        assert_eq!(status, 200, "{content}: {body}");
    }
    assert_eq!(upstream.hits(), 3);
    let calls = app.state.db.model_calls_of(&invited.assignment.id).await.unwrap();
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert_eq!(calls[3].duplicate_of, Some(calls[1].id), "{calls:?}");

    // The live budget island polls and shows fewer calls and tokens left.
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let now = budget_left(&candidate).await;
        if now != before {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "the live budget did not change from {before} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let left = |v: &Value, cap: &str| {
        v[cap]
            .as_str()
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or_else(|| panic!("no {cap} in {v}"))
    };
    assert_eq!(
        left(&after, "model_calls"),
        left(&before, "model_calls") - 3,
        "{before} -> {after}"
    );
    assert!(left(&after, "tokens") < left(&before, "tokens"), "{before} -> {after}");
    candidate.snapshot("w2-budget").await;

    // Green through the page's form, on the sample tree.
    candidate.choose_file("form.witness.green input[type='file']", &sample_zip).await;
    candidate.click("form.witness.green button[type='submit']").await;
    candidate
        .wait_for("#witness-green li.witness-run.green.accepted", Duration::from_secs(120))
        .await;
    candidate.snapshot("w3-green").await;

    // The submission: receipt, then graded live.
    candidate.goto(&invite).await;
    candidate.wait("#upload-form[data-hydrated='true']").await;
    candidate.choose_file("#upload-file", &sample_zip).await;
    candidate.click("#upload-submit").await;
    let receipt = candidate.wait_path(&format!("/c/{}/submissions/", invited.token)).await;
    candidate.wait("#live-state[data-hydrated='true']").await;
    candidate.wait_for("#live-state[data-state='graded']", Duration::from_secs(240)).await;
    candidate.snapshot("w4-graded").await;
    let submission = receipt.rsplit('/').next().unwrap().to_string();
    candidate.close().await;

    // The reviewer sees the Witnessed section: runs, ledger and timeline.
    let reviewer = Browser::new(&app.base).await;
    reviewer.goto("/login").await;
    reviewer.fill("form[action^='/login'] input[name='email']", "reviewer@example.com").await;
    reviewer.fill("form[action^='/login'] input[name='password']", "reviewer-password-1").await;
    reviewer.click("form[action^='/login'] button[type='submit']").await;
    reviewer.wait(".signout").await;
    reviewer.goto(&format!("/submissions/{submission}")).await;
    reviewer.wait("section.ledger").await;
    reviewer.snapshot("w5-scorecard").await;
    let count = |css: &str| format!("return document.querySelectorAll({css:?}).length;");
    let n = |v: Value| v.as_i64().unwrap_or(-1);
    assert_eq!(
        n(reviewer.script(&count("section.ledger table.witnessed-runs tbody tr")).await),
        2,
        "{}",
        reviewer.text("section.ledger").await
    );
    assert_eq!(
        n(reviewer.script(&count("table.model-calls tr.model-call.forwarded")).await),
        3,
        "{}",
        reviewer.text("section.ledger").await
    );
    assert_eq!(
        n(reviewer.script(&count("table.model-calls tr.model-call.refused")).await),
        1,
        "{}",
        reviewer.text("section.ledger").await
    );
    let dup = reviewer
        .text(&format!("table.model-calls tr[data-id='{}'] td:last-child", calls[3].id))
        .await;
    assert_eq!(
        dup.trim(),
        calls[1].id.to_string(),
        "the repeat is marked a duplicate of the first call"
    );
    assert_eq!(
        n(reviewer.script(&count("figure.timeline svg.witness-timeline circle.run")).await),
        2
    );
    assert_eq!(
        n(reviewer.script(&count("figure.timeline svg.witness-timeline g.call.forwarded")).await),
        3
    );
    assert_eq!(
        n(reviewer.script(&count("figure.timeline svg.witness-timeline g.call.refused")).await),
        1
    );
    assert_eq!(
        n(reviewer.script(&count("figure.timeline svg.witness-timeline g.submission")).await),
        1
    );
    reviewer.close().await;
    eprintln!("the witnessed end-to-end test took {:?}", started.elapsed());
}
