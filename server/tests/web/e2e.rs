//! End to end in a real headless Chromium, through the pages' own forms and
//! links: an author imports and publishes a packet and invites a candidate;
//! the candidate opens the link, downloads the starter, uploads a good zip
//! (receipt, then the state turns graded live) and a hostile zip (refused,
//! with the reason); the reviewer opens the graded scorecard, scores a human
//! criterion with a reason and exports the standalone HTML receipt. A second
//! test signs in and out with JavaScript off.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use fantoccini::Locator;
use gatehouse::db::Role;

use crate::browser::require_bundle;
use crate::support::{TestApp, repo_root};
use crate::webdriver::{Browser, exclusive};

/// Zips the files under `root`, each named `prefix` + its relative path.
pub fn zip_tree(root: &Path, prefix: &str, out: &Path) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(out).expect("create zip"));
    let mut files: Vec<_> = walk(root);
    files.sort();
    for path in files {
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        zip.start_file(format!("{prefix}{rel}"), zip::write::SimpleFileOptions::default())
            .expect("zip entry");
        zip.write_all(&std::fs::read(&path).expect("read file")).expect("zip body");
    }
    zip.finish().expect("finish zip");
}

pub fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The names inside a zip.
fn zip_names(bytes: &[u8]) -> Vec<String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a zip");
    (0..zip.len())
        .map(|i| zip.by_index(i).expect("entry").name().expect("a name").to_string())
        .collect()
}

/// Signs in through the sign-in form.
pub async fn sign_in(b: &Browser, email: &str, password: &str) {
    b.goto("/login").await;
    b.fill("form[action^='/login'] input[name='email']", email).await;
    b.fill("form[action^='/login'] input[name='password']", password).await;
    b.click("form[action^='/login'] button[type='submit']").await;
    b.wait(".signout").await;
}

/// The session cookie the browser holds, for fetching downloads with reqwest.
async fn session_cookie(b: &Browser) -> String {
    let cookies = b.client.get_all_cookies().await.expect("cookies");
    let c = cookies.iter().find(|c| c.name() == "gatehouse_session").expect("a session cookie");
    format!("gatehouse_session={}", c.value())
}

#[tokio::test]
async fn author_candidate_and_reviewer_in_a_real_browser() {
    let _one = exclusive().await;
    require_bundle();
    let app = TestApp::spawn().await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    // Each step's time since the start, shown with a failure's message.
    let t0 = Instant::now();
    let step = |what: &str| eprintln!("[{:>6.1} s] {what}", t0.elapsed().as_secs_f64());
    app.user("author@example.com", Role::Author, "author-password-1").await;
    app.user("reviewer@example.com", Role::Reviewer, "reviewer-password-1").await;
    let files = tempfile::tempdir().unwrap();
    let packet_dir = repo_root().join("packets/null-status");
    let packet_zip = files.path().join("null-status.zip");
    zip_tree(&packet_dir, "null-status/", &packet_zip);
    // A well-formed submission: the packet's sample without its transcript,
    // so it grades with a catalog finding for the reviewer to see.
    let good = files.path().join("good.zip");
    let tree = files.path().join("submission");
    std::fs::create_dir_all(&tree).unwrap();
    for f in ["gate.py", "NOTES.md"] {
        std::fs::copy(packet_dir.join("sample").join(f), tree.join(f)).unwrap();
    }
    zip_tree(&tree, "", &good);
    let hostile = files.path().join("hostile.zip");
    crate::browser::write_zip(&hostile, &[("gate.py", b"print('ok')\n"), ("../evil", b"escaped")]);

    // The author imports the packet folder and publishes it (the self-test runs first).
    step("signing the author in");
    let author = Browser::new(&app.base).await;
    sign_in(&author, "author@example.com", "author-password-1").await;
    author.goto("/packets").await;
    author.choose_file("form[action='/packets/import'] input[type='file']", &packet_zip).await;
    author.click("form[action='/packets/import'] button[type='submit']").await;
    author.wait_path("/packets/null-status").await;
    author.snapshot("1-packet-draft").await;
    step("publishing (the self-test runs)");
    author.click("form[action$='/publish'] button[type='submit']").await;
    author.wait_path("/packets/null-status").await;
    // The queue page follows the self-test job live.
    author.goto("/queue").await;
    author.wait("#live-queue[data-hydrated='true']").await;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        author.goto("/assignments/new?packet=null-status").await;
        if author.exists("select[name='packet'] option[value='null-status']").await {
            break;
        }
        if Instant::now() > deadline {
            // The packet's page says where its self-test is, or why it failed.
            author.goto("/packets/null-status").await;
            panic!("null-status was not published within 180 s:\n{}", author.source().await);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // The author invites a candidate and gets the link.
    step("published; inviting");
    author.fill("input[name='candidate_name']", "Ada Candidate").await;
    author.fill("input[name='email']", "ada@example.com").await;
    author
        .script("document.querySelector(\"input[name='deadline']\").value = '2099-01-01T12:00';")
        .await;
    author.click("form[action='/assignments'] button[type='submit']").await;
    author.wait_path("/assignments/").await;
    author.snapshot("2-invited").await;
    let invite =
        author.find("input.invite-url").await.prop("value").await.unwrap().expect("an invite URL");
    assert!(invite.starts_with(&app.base) && invite.contains("/c/"), "{invite}");
    author.close().await;

    // The candidate opens the link and downloads the starter.
    step("the candidate opens the link");
    let candidate = Browser::new(&app.base).await;
    candidate.goto(&invite).await;
    let starter =
        candidate.find("a.starter").await.attr("href").await.unwrap().expect("starter link");
    let starter_url = if starter.starts_with("http") { starter } else { app.url(&starter) };
    let zip = reqwest::get(&starter_url).await.unwrap();
    assert_eq!(zip.status(), 200, "{starter_url}");
    let names = zip_names(&zip.bytes().await.unwrap());
    for want in ["gate.py", "test_gate.py", "tools.py"] {
        assert!(
            names.iter().any(|n| n.ends_with(want)),
            "{want} missing from the starter: {names:?}"
        );
    }
    assert!(
        !names.iter().any(|n| n.contains("hidden") || n.contains("NOTES.md")),
        "the starter leaks: {names:?}"
    );

    candidate.snapshot("3-candidate").await;
    // A good upload: receipt, then the state follows grading live.
    candidate.wait("#upload-form[data-hydrated='true']").await;
    step("uploading the good zip");
    candidate.choose_file("#upload-file", &good).await;
    candidate.click("#upload-submit").await;
    let receipt = candidate
        .wait_path(&format!("{}/submissions/", invite.trim_start_matches(&app.base)))
        .await;
    let page = candidate.source().await;
    let digest = sha256_hex(&std::fs::read(&good).unwrap());
    assert!(page.contains(&digest), "the receipt shows the submission digest {digest}");
    // Grading takes seconds, so the receipt first shows an earlier state
    // and the island turns it to graded without a manual reload.
    let first =
        candidate.find("#live-state").await.attr("data-state").await.unwrap().unwrap_or_default();
    assert!(first == "queued" || first == "grading", "the receipt opened in state {first}");
    candidate.wait("#live-state[data-hydrated='true']").await;
    step("receipt shown; waiting for the grading");
    candidate.wait_for("#live-state[data-state='graded']", Duration::from_secs(180)).await;
    candidate.snapshot("4-receipt-graded").await;
    let submission = receipt.rsplit('/').next().unwrap().to_string();

    // A hostile upload is refused with the reason, on the same page.
    step("graded; uploading the hostile zip");
    candidate.goto(&invite).await;
    candidate.wait("#upload-form[data-hydrated='true']").await;
    candidate.choose_file("#upload-file", &hostile).await;
    candidate.click("#upload-submit").await;
    let refusal = candidate.wait_text("#upload-error", "..", Duration::from_secs(30)).await;
    assert!(refusal.contains("../evil"), "{refusal}");
    candidate.snapshot("5-refused").await;
    candidate.close().await;

    // The reviewer sees the graded scorecard, scores a human criterion and
    // exports the standalone receipt.
    step("the reviewer signs in");
    let reviewer = Browser::new(&app.base).await;
    sign_in(&reviewer, "reviewer@example.com", "reviewer-password-1").await;
    reviewer.goto(&format!("/submissions/{submission}")).await;
    reviewer.wait(".summary .score").await;
    assert!(
        reviewer.exists(".gates-section").await && reviewer.exists("section.findings").await,
        "{}",
        reviewer.source().await
    );
    assert!(reviewer.exists(".commands").await);
    // Findings carry a provenance badge and an evidence excerpt.
    let badge = reviewer.text("section.findings .finding .badge").await;
    assert!(
        ["witnessed", "replayed", "claimed"].contains(&badge.trim().to_lowercase().as_str()),
        "badge {badge:?}"
    );
    let findings = reviewer.text("section.findings").await;
    assert!(findings.contains("transcript.jsonl"), "the finding names its evidence: {findings}");
    let form = reviewer.find("form.human-score").await;
    let select = form.find(Locator::Css("select[name='level']")).await.unwrap();
    step("scoring a human criterion");
    select.select_by_index(1).await.unwrap();
    let reason = "Names every unknown and records the assumption; checked by hand.";
    form.find(Locator::Css("textarea[name='reason']"))
        .await
        .unwrap()
        .send_keys(reason)
        .await
        .unwrap();
    form.find(Locator::Css("button[type='submit']")).await.unwrap().click().await.unwrap();
    reviewer.wait_text(".score-history .reason", reason, Duration::from_secs(20)).await;
    reviewer.snapshot("6-scorecard").await;

    let export =
        reviewer.find("a[href$='/receipt.html']").await.attr("href").await.unwrap().unwrap();
    let cookie = session_cookie(&reviewer).await;
    let html =
        reqwest::Client::new().get(app.url(&export)).header("cookie", cookie).send().await.unwrap();
    assert_eq!(html.status(), 200);
    let html = html.text().await.unwrap();
    assert!(
        html.to_ascii_lowercase().starts_with("<!doctype html>"),
        "{}",
        &html[..200.min(html.len())]
    );
    assert!(html.contains(&digest), "the standalone receipt names the archive digest");
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "the standalone receipt loads nothing from outside"
    );
    reviewer.close().await;
}

#[tokio::test]
async fn sign_in_and_out_with_javascript_off() {
    let _one = exclusive().await;
    let app = TestApp::spawn().await;
    app.user("plain@example.com", Role::Reviewer, "plain-password-1").await;
    let b = Browser::without_js(&app.base).await;
    // A wrong password shows the form again with a message.
    b.goto("/login").await;
    b.fill("input[name='email']", "plain@example.com").await;
    b.fill("input[name='password']", "wrong-password").await;
    b.click("form[action^='/login'] button[type='submit']").await;
    b.wait("[role='alert']").await;
    sign_in(&b, "plain@example.com", "plain-password-1").await;
    assert!(b.text(".who").await.contains("reviewer"));
    b.click(".signout button").await;
    b.wait_path("/login").await;
    assert!(!b.exists(".signout").await);
    b.close().await;
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// The conversation with the model, read in a real browser: on the
/// reviewer's scorecard each call is a closed `<details>` that opens on a
/// click to its prompt and answer, in time order beside the witnessed red
/// run; markup a model answered (a `<script>`, an `<img onerror>`) is shown
/// as text and never runs; the refused call shows its reason; lines of the
/// answer that the submission kept are marked in the diff. The candidate's
/// own transcript page reads the same way, and names no other candidate.
#[tokio::test]
async fn the_transcript_and_provenance_read_in_a_real_browser() {
    require_bundle();
    let _one = exclusive().await;
    // One line of the null-status sample's gate.py, so provenance marks it,
    // and markup that would run if it reached the page as HTML.
    let answer = "Try <script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">\n\
                  def _known(field: str, incident: dict, confirmed: dict) -> bool:";
    let r = crate::transcripts::reviewed("how do I <b>total</b>?", answer).await;
    let (forwarded, refused) = (r.calls[0].id, r.calls[1].id);
    let reviewer = Browser::new(&r.m.app.base).await;
    sign_in(&reviewer, "rita@example.com", "correct horse battery").await;
    reviewer.goto(&format!("/submissions/{}", r.submission)).await;
    reviewer.wait("section.transcript").await;

    // Time order: the forwarded call, the witnessed red, the refused call.
    let order = reviewer
        .script("return [...document.querySelectorAll('ol.transcript-entries > li')].map(li => li.className + ' ' + li.dataset.id)")
        .await;
    let order: Vec<String> = serde_json::from_value(order).unwrap();
    assert_eq!(order.len(), 3, "{order:?}");
    assert_eq!(order[0], format!("transcript-call forwarded {forwarded}"));
    assert!(order[1].starts_with("transcript-run red "), "{order:?}");
    assert_eq!(order[2], format!("transcript-call refused {refused}"));

    // Closed until opened: the answer is not shown, then it is, as text.
    let call = format!("li.transcript-call[data-id='{forwarded}']");
    let answer_text = format!("{call} .message.answer .message-text");
    assert!(
        !reviewer.find(&answer_text).await.is_displayed().await.unwrap(),
        "a call's answer is shown before it is opened"
    );
    reviewer.click(&format!("{call} summary")).await;
    let shown =
        reviewer.wait_text(&answer_text, "window.__pwned = 1", Duration::from_secs(10)).await;
    assert!(
        shown.contains("<script>window.__pwned = 1</script><img src=x onerror="),
        "the answer's markup is not shown as text: {shown:?}"
    );
    assert!(
        reviewer
            .text(&format!("{call} .message.prompt .message-text"))
            .await
            .contains("how do I <b>total</b>?")
    );
    // Nothing of the answer became markup, and nothing of it ran.
    let ran = reviewer
        .script("return [window.__pwned === undefined, document.querySelectorAll('section.transcript script, section.transcript img, section.transcript b').length]")
        .await;
    assert_eq!(ran, serde_json::json!([true, 0]), "markup from the model answer reached the page");

    // The refused call: opened, its cap and the reason the client got.
    let refusal = format!("li.transcript-call[data-id='{refused}']");
    assert!(reviewer.text(&format!("{refusal} summary")).await.contains("refused (model_calls)"));
    reviewer.click(&format!("{refusal} summary")).await;
    let reason = r.calls[1].error.clone().expect("the refusal's message");
    reviewer
        .wait_text(&format!("{refusal} .refusal-reason"), &reason, Duration::from_secs(10))
        .await;

    // Provenance: the kept line is marked with its call, and the share is stated.
    let marked = reviewer.text(".add.model-written").await;
    assert!(
        marked.contains("def _known(field: str, incident: dict, confirmed: dict) -> bool:"),
        "{marked:?}"
    );
    assert!(reviewer.source().await.contains(&format!("← model answer, call {forwarded}")));
    reviewer.snapshot("transcript-scorecard").await;
    reviewer.close().await;

    // The candidate's own page, through their link: the same conversation.
    let candidate = Browser::new(&r.m.app.base).await;
    candidate.goto(&format!("/c/{}", r.m.token)).await;
    candidate.click(&format!("a[href='/c/{}/transcript']", r.m.token)).await;
    candidate.wait_path(&format!("/c/{}/transcript", r.m.token)).await;
    let mine = format!("li.transcript-call[data-id='{forwarded}']");
    assert!(
        !candidate
            .find(&format!("{mine} .message.answer .message-text"))
            .await
            .is_displayed()
            .await
            .unwrap()
    );
    candidate.click(&format!("{mine} summary")).await;
    candidate
        .wait_text(
            &format!("{mine} .message.answer .message-text"),
            "<script>window.__pwned = 1</script>",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(
        candidate.script("return window.__pwned === undefined").await,
        serde_json::json!(true)
    );
    assert!(
        !candidate.source().await.contains("rita@example.com"),
        "the candidate's page names a reviewer"
    );
    candidate.snapshot("transcript-candidate").await;
    candidate.close().await;
}
