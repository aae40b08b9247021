//! Issue #30 end to end in a real headless Chromium: a TypeScript candidate
//! of `token-bucket-ts` opens the link, witnesses red on the starter tree
//! and green on the finished tree through the page's forms (both through
//! the grader's Node runner), submits, and sees the submission graded; the
//! reviewer's scorecard shows the decision `keep` with no finding, and the
//! Node and TypeScript versions the grading used.

use std::time::{Duration, Instant};

use gatehouse::db::{NewVersion, Role};
use gatehouse::invites::{self, Invite};

use crate::browser::require_bundle;
use crate::e2e_witnessed::{copy_dir, write_tree_zip};
use crate::support::{TestApp, repo_root};
use crate::webdriver::{Browser, exclusive};

const SLUG: &str = "token-bucket-ts";

#[tokio::test]
async fn a_typescript_candidate_witnesses_red_and_green_submits_and_is_scored() {
    let _one = exclusive().await;
    require_bundle();
    let started = Instant::now();
    let app = TestApp::spawn().await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    app.user("reviewer@example.com", Role::Reviewer, "reviewer-password-1").await;

    let rel = format!("packets/{SLUG}/1/{SLUG}");
    let dir = app.state.config.data_dir.join(&rel);
    copy_dir(&repo_root().join("packets").join(SLUG), &dir);
    let packet = grader::packet::Packet::load(&dir).unwrap();
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
            candidate_name: "Grace",
            email: "grace@example.com",
            deadline: None,
            time_box_secs: None,
        },
    )
    .await
    .unwrap();
    let invite = app.url(&format!("/c/{}", invited.token));

    // The candidate's zips: the starter tree (red), the sample over it (green, submit).
    let files = tempfile::tempdir().unwrap();
    let starter_zip = files.path().join("starter-tree.zip");
    let done = files.path().join("done");
    copy_dir(&packet.root.join("starter"), &done);
    copy_dir(&packet.sample_dir(), &done);
    let done_zip = files.path().join("done-tree.zip");
    write_tree_zip(&packet.root.join("starter"), &starter_zip);
    write_tree_zip(&done, &done_zip);

    let candidate = Browser::new(&app.base).await;
    candidate.goto(&invite).await;
    assert!(candidate.text("body").await.contains("npm test"), "the page names the test command");

    candidate.choose_file("form.witness.red input[type='file']", &starter_zip).await;
    candidate.click("form.witness.red button[type='submit']").await;
    candidate.wait_for("#witness li.witness-run.red.accepted", Duration::from_secs(120)).await;
    let red = candidate.text("#witness").await;
    assert!(red.contains("no test files found"), "{red}");

    candidate.choose_file("form.witness.green input[type='file']", &done_zip).await;
    candidate.click("form.witness.green button[type='submit']").await;
    candidate
        .wait_for("#witness-green li.witness-run.green.accepted", Duration::from_secs(120))
        .await;
    let green = candidate.text("#witness-green").await;
    assert!(green.contains("node 20") && green.contains("typescript 5"), "{green}");
    candidate.snapshot("ts1-green").await;

    candidate.goto(&invite).await;
    candidate.wait("#upload-form[data-hydrated='true']").await;
    candidate.choose_file("#upload-file", &done_zip).await;
    candidate.click("#upload-submit").await;
    let receipt = candidate.wait_path(&format!("/c/{}/submissions/", invited.token)).await;
    candidate.wait("#live-state[data-hydrated='true']").await;
    candidate.wait_for("#live-state[data-state='graded']", Duration::from_secs(300)).await;
    let submission = receipt.rsplit('/').next().unwrap().to_string();
    candidate.close().await;

    let reviewer = Browser::new(&app.base).await;
    reviewer.goto("/login").await;
    reviewer.fill("form[action^='/login'] input[name='email']", "reviewer@example.com").await;
    reviewer.fill("form[action^='/login'] input[name='password']", "reviewer-password-1").await;
    reviewer.click("form[action^='/login'] button[type='submit']").await;
    reviewer.wait(".signout").await;
    reviewer.goto(&format!("/submissions/{submission}")).await;
    reviewer.wait("section.ledger").await;
    reviewer.snapshot("ts2-scorecard").await;
    let page = reviewer.text("body").await;
    assert!(page.contains("keep"), "{page}");
    assert!(!page.contains("evidence-tampering"), "{page}");
    assert!(page.contains("typescript"), "{page}");
    reviewer.close().await;
    eprintln!("the TypeScript end-to-end test took {:?}", started.elapsed());
}
