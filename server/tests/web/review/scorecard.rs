//! The scorecard page: evidence in order with provenance, what was not
//! evaluated, grading failures, and the cap on diffs.

#[allow(unused_imports)]
use super::*;

#[tokio::test]
async fn scorecard_shows_evidence_in_order_with_provenance_and_commands() {
    let f = fixture().await;
    let (good_card, bad_card) = cards(&f.app).await;
    assert_eq!(good_card.findings, vec![], "the sample grades clean");
    assert!(bad_card.findings.iter().any(|x| x.id == "invented-value"));

    let good = f.page(&format!("/submissions/{}", f.good)).await;
    in_order(
        &good,
        &[
            "class=\"decision",
            "<h2>Gates</h2>",
            "class=\"gate ",
            "<h2>Findings</h2>",
            "<h2>Criteria</h2>",
            "<h2>Commands</h2>",
            "step:unknowns",
            "exit 0",
            "<h2>Environment</h2>",
            "receipt-digest",
            "class=\"diff\"",
            "gate.py",
        ],
    );
    assert!(good.contains("tests 8 / 8 passed") || good.contains(" passed</span>"), "{good}");
    assert!(!good.contains("invented-value"), "{good}");
    assert!(good.contains(&good_card.receipt.digest));
    assert!(good.contains("No reviewer has scored this submission yet."));
    // One scoring form per human or auto-override criterion, with CSRF.
    assert_eq!(good.matches("class=\"human-score\"").count(), 2, "{good}");
    assert!(good.contains("name=\"csrf\""));

    let bad = f.page(&format!("/submissions/{}", f.bad)).await;
    let finding = bad_card.findings.iter().find(|x| x.id == "invented-value").unwrap();
    let badge = format!(
        "class=\"badge {}\"",
        serde_json::to_value(finding.provenance).unwrap().as_str().unwrap()
    );
    in_order(
        &bad,
        &[
            "<h2>Gates</h2>",
            "<h2>Findings</h2>",
            "class=\"finding\"",
            "invented-value",
            &badge,
            "<h2>Commands</h2>",
            "class=\"diff\"",
        ],
    );
    assert!(bad.contains(&format!("decision {}", bad_card.scoring.decision)), "{bad}");
    // The diff against the starter shows the variant's guess table.
    in_order(
        &bad,
        &[
            "class=\"diff\"",
            "class=\"diff-text\"",
            "<span class=\"add\">+# what an outage on checkout usually looks like",
        ],
    );
    // A failing held-out test names itself in the commands section.
    assert!(bad.contains("test_no_invented_values"), "{bad}");

    // The assignment page lists its submission and links to it.
    let page = f.page(&format!("/assignments/{}", f.bad_assignment)).await;
    assert!(
        page.contains("Bob Guesser") && page.contains(&format!("href=\"/submissions/{}\"", f.bad)),
        "{page}"
    );
}

#[tokio::test]
async fn scorecard_shows_unevaluated_mismatches_and_grading_failures() {
    let f = fixture().await;
    let db = &f.app.state.db;
    // A stored scorecard with an unevaluated failure and a tool mismatch,
    // as a grading on a host with another interpreter would leave it.
    let mut card = cards(&f.app).await.1.clone();
    card.environment.mismatches.push("python is pinned to 3.11 but the sandbox has 3.9.2".into());
    card.unevaluated.push(grader::grade::Unevaluated {
        id: "sentinel-laundering".into(),
        reason: "detector script crashed: exit 1".into(),
    });
    db.update_scorecard(
        &f.bad,
        &serde_json::to_string(&card).unwrap(),
        &serde_json::to_string(&card.receipt).unwrap(),
        &card.scoring.decision,
        Some(0.0),
    )
    .await
    .unwrap();
    let page = f.page(&format!("/submissions/{}", f.bad)).await;
    in_order(
        &page,
        &[
            "<h2>Findings</h2>",
            "class=\"unevaluated\"",
            "sentinel-laundering",
            "detector script crashed: exit 1",
            "<h2>Environment</h2>",
            "class=\"mismatch\"",
            "python is pinned to 3.11 but the sandbox has 3.9.2",
        ],
    );

    // A grading that failed says so, with its error, and takes no score.
    db.set_submission_state(
        &f.good,
        app::contract::SubmissionState::Failed,
        Some("sandbox failure: clone: EPERM"),
    )
    .await
    .unwrap();
    let page = f.page(&format!("/submissions/{}", f.good)).await;
    assert!(
        page.contains("data-state=\"failed\"")
            && page.contains("Grading failed: sandbox failure: clone: EPERM"),
        "{page}"
    );
    assert!(!page.contains("class=\"human-score\""), "no scoring form without a scorecard");
    let r = f
        .post(
            &format!("/submissions/{}/human", f.good),
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "narrative"),
                ("level", "1"),
                ("reason", "r"),
            ],
        )
        .await;
    assert_eq!(r.status(), 409);
    // A failed grading may be regraded.
    let r =
        f.post(&format!("/submissions/{}/regrade", f.good), &[("csrf", &f.reviewer.csrf)]).await;
    assert_eq!(r.status(), 303);
    assert_eq!(db.submission_by_id(&f.good).await.unwrap().unwrap().state.as_str(), "queued");

    // The assignment page shows its candidate, packet and state.
    let page = f.page(&format!("/assignments/{}", f.good_assignment)).await;
    assert!(
        page.contains("Ada Lovelace")
            && page.contains("ada@example.com")
            && page.contains("null-status"),
        "{page}"
    );
    assert_eq!(f.get("/assignments/nope").await.0, 404);
}

/// A submission cannot make a reviewer's page enormous: the scorecard's
/// diffs stop at a total, and say how many files were not shown; the
/// platform's own files are listed as such, never diffed.
#[tokio::test]
async fn scorecard_diffs_are_capped_in_total() {
    let f = fixture().await;
    let db = &f.app.state.db;
    let (good_card, good_zip) = &graded(&f.app).await.0;
    // The sample's zip plus 40 added files of 1,000 lines each.
    let mut entries = entries_of(good_zip);
    let big: String = (0..1000).map(|n| format!("line {n}\n")).collect();
    let mut card = good_card.clone();
    for i in 0..40 {
        let path = format!("flood/f{i:02}.txt");
        card.receipt.submission.files.push(grader::ingest::IngestedFile {
            path: path.clone(),
            size: big.len() as u64,
            sha256: grader::tree::sha256_hex(big.as_bytes()),
            mtime: None,
        });
        entries.push((path, big.clone().into_bytes()));
    }
    card.receipt.submission.platform_files.push(grader::ingest::IngestedFile {
        path: "GATEHOUSE_PIN.toml".into(),
        size: 3,
        sha256: "ab".repeat(32),
        mtime: None,
    });
    let zip_bytes = zip_of_entries(&entries);
    let sha = store_zip(&f.app, &zip_bytes);
    card.receipt.submission.archive_sha256 = sha.clone();
    db.set_graded(
        &f.good,
        &serde_json::to_string(&card).unwrap(),
        &serde_json::to_string(&card.receipt).unwrap(),
        &card.scoring.decision,
        0.0,
    )
    .await
    .unwrap();
    // The stored submission points at the new zip.
    let page = f.page(&format!("/submissions/{}", f.good)).await;
    let shown = page.matches("<span class=\"add\">").count();
    assert!(shown <= 20_000, "{shown} diff lines shown");
    assert!(page.contains("more file(s) not shown"), "no note on the files left out");
    assert!(
        page.contains("GATEHOUSE_PIN.toml") && page.contains(">platform<"),
        "the pin file is listed as the platform's"
    );
}

/// Seed files are compared with the copy the candidate received (the
/// assignment's seed filled in), not with the packet's template: one handed
/// back as received is unchanged, and an edited one's diff shows only the
/// candidate's edit, never the seed line.
#[tokio::test]
async fn seed_files_are_diffed_against_what_the_candidate_received() {
    let f = fixture().await;
    let db = &f.app.state.db;
    let template = "# Take-home\n\nSeed: {{seed}}\n\nRead PROMPT.md.\n";
    crate::support::publish_copy_with(&f.app.state, SLUG, "2", |dir| {
        let toml = dir.join("packet.toml");
        let text = std::fs::read_to_string(&toml).unwrap();
        let text = text.replacen(
            "seed_files = []",
            "seed_files = [\"TAKEHOME.md\", \"notes/SEEDED.md\"]",
            1,
        );
        std::fs::write(&toml, text).unwrap();
        std::fs::write(dir.join("starter/TAKEHOME.md"), template).unwrap();
        std::fs::create_dir_all(dir.join("starter/notes")).unwrap();
        std::fs::write(dir.join("starter/notes/SEEDED.md"), template).unwrap();
    })
    .await;
    let invited = invites::create(
        &f.app.state,
        None,
        Invite {
            slug: SLUG,
            candidate_name: "Sam Seeded",
            email: "sam@example.com",
            deadline: None,
            time_box_secs: None,
        },
    )
    .await
    .unwrap();
    let seed = invited.assignment.seed.clone();
    assert!(!seed.is_empty());
    let received = grader::packet::apply_seed(template, &seed);
    let edited = format!("{received}My own line.\n");
    let (good_card, good_zip) = &graded(&f.app).await.0;
    let mut entries = entries_of(good_zip);
    let mut card = good_card.clone();
    for (path, text) in [("TAKEHOME.md", &received), ("notes/SEEDED.md", &edited)] {
        card.receipt.submission.files.push(grader::ingest::IngestedFile {
            path: path.into(),
            size: text.len() as u64,
            sha256: grader::tree::sha256_hex(text.as_bytes()),
            mtime: None,
        });
        entries.push((path.into(), text.clone().into_bytes()));
    }
    let zip_bytes = zip_of_entries(&entries);
    let sha = store_zip(&f.app, &zip_bytes);
    card.receipt.submission.archive_sha256 = sha.clone();
    let sub = "sub-seeded-001";
    db.create_submission(gatehouse::db::NewSubmission {
        id: sub,
        assignment_id: &invited.assignment.id,
        blob_sha256: &sha,
        size_bytes: zip_bytes.len() as i64,
    })
    .await
    .unwrap();
    while let Some(job) = db.claim_job("review-test", gatehouse::now_ms(), 600_000).await.unwrap() {
        db.finish_job(job.id, "review-test", true, None).await.unwrap();
    }
    db.set_graded(
        sub,
        &serde_json::to_string(&card).unwrap(),
        &serde_json::to_string(&card.receipt).unwrap(),
        &card.scoring.decision,
        0.0,
    )
    .await
    .unwrap();
    let page = f.page(&format!("/submissions/{sub}")).await;
    let row = |path: &str| {
        let at = page
            .find(&format!("<td><code>{path}</code></td>"))
            .unwrap_or_else(|| panic!("{path} not listed"));
        let start = page[..at].rfind("<tr").unwrap();
        page[start..at].to_string()
    };
    assert!(row("TAKEHOME.md").contains("file unchanged"), "{}", row("TAKEHOME.md"));
    assert!(row("notes/SEEDED.md").contains("file changed"), "{}", row("notes/SEEDED.md"));
    assert!(page.contains("<span class=\"add\">+My own line.\n</span>"), "the edit is shown");
    assert!(!page.contains("{{seed}}"), "the template's seed line was diffed");
    assert!(
        !page.contains(&format!("<span class=\"add\">+Seed: {seed}")),
        "the seed line shows as the candidate's change"
    );
}

/// The (name, bytes) entries of a zip.
fn entries_of(zip: &[u8]) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip.to_vec())).unwrap();
    (0..archive.len())
        .map(|i| {
            let mut e = archive.by_index(i).unwrap();
            let mut bytes = Vec::new();
            e.read_to_end(&mut bytes).unwrap();
            (e.name().unwrap().to_string(), bytes)
        })
        .collect()
}

/// A zip of `entries`.
fn zip_of_entries(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = zip::ZipWriter::new(&mut out);
    for (name, bytes) in entries {
        w.start_file(name.as_str(), zip::write::SimpleFileOptions::default()).unwrap();
        std::io::Write::write_all(&mut w, bytes).unwrap();
    }
    w.finish().unwrap();
    out.into_inner()
}

/// Keeps `zip` where the blob store keeps it (`blobs/<aa>/<sha256>`); its digest.
fn store_zip(app: &TestApp, zip: &[u8]) -> String {
    let sha = grader::tree::sha256_hex(zip);
    let blob = app.state.config.data_dir.join("blobs").join(&sha[..2]).join(&sha);
    std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
    std::fs::write(&blob, zip).unwrap();
    sha
}

/// A crash is named where the reviewer reads the tests (issue #48): the
/// run's "Crashed:" line with the test, the panic's message and the first
/// frame in the candidate's code, and each test it left unreported with
/// its reason, on the scorecard page and in the standalone receipt. A run
/// that did not crash shows no such line.
#[tokio::test]
async fn a_crash_is_named_where_the_reviewer_reads_the_tests() {
    use grader::evidence::{TestOutcome, TestStatus};
    let f = fixture().await;
    let good = f.page(&format!("/submissions/{}", f.good)).await;
    assert!(!good.contains("class=\"crash\"") && !good.contains("Crashed:"), "{good}");

    let (_, bad_card) = cards(&f.app).await;
    let mut card = bad_card.clone();
    let crash = "the test binary panicked in TestSquare: Please implement the Square function (at grains.go:7 in grains.Square)";
    let run = (card.receipt.runs.iter_mut())
        .find(|r| r.id.starts_with("step:") && r.tests.is_some())
        .expect("a step with tests");
    let step = run.id.clone();
    run.crash = Some(crash.into());
    run.tests.as_mut().unwrap().push(TestOutcome {
        classname: "grains".into(),
        name: "TestTotal".into(),
        status: TestStatus::Error,
        message: Some(format!("not run: {crash}")),
    });
    f.app
        .state
        .db
        .set_graded(
            &f.bad,
            &serde_json::to_string(&card).unwrap(),
            &serde_json::to_string(&card.receipt).unwrap(),
            &card.scoring.decision,
            card.scoring.score.unwrap_or(0) as f64,
        )
        .await
        .unwrap();
    let page = f.page(&format!("/submissions/{}", f.bad)).await;
    in_order(
        &page,
        &[
            "<h2>Commands</h2>",
            &step,
            "class=\"crash\">Crashed: ",
            crash,
            "class=\"failed-tests\"",
            &format!("grains::TestTotal: error (not run: {crash})"),
        ],
    );
    let r = (f.reviewer.client)
        .get(f.app.url(&format!("/submissions/{}/receipt.html", f.bad)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let html = r.text().await.unwrap();
    in_order(&html, &["<h2>Commands</h2>", &step, &format!("Crashed: {crash}")]);
}
