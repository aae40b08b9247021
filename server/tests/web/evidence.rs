//! Witnessed evidence on the reviewer's scorecard: rows of `witness_runs`
//! and `model_calls` written straight into the database for an assignment,
//! the submission graded through `grading::grade_submission`, and the
//! scorecard page showing the witnessed finding, the ledger table and the
//! timeline chart.

use std::collections::{BTreeMap, HashMap};

use gatehouse::db::{NewSubmission, NewVersion, Role};
use gatehouse::grading::{GradeOutcome, grade_submission};
use gatehouse::invites::{self, Invite};
use gatehouse::web::session::DbSessionStore;
use grader::manifest::TIME_BASE;
use grader::packet::Packet;
use grader::tree::copy_path;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::SessionStore;

use crate::support::{TestApp, repo_root};

const SLUG: &str = "refund-invoices";
const SUB: &str = "sub-witnessed-01";

/// A reviewer's client: a session stored directly in the database, sent as
/// the session cookie.
async fn reviewer(app: &TestApp) -> reqwest::Client {
    let user = app.user("rita@example.com", Role::Reviewer, "correct horse battery").await;
    let id = Id::default();
    let data: HashMap<String, serde_json::Value> = HashMap::from([
        ("user_id".to_string(), serde_json::json!(user.id)),
        ("csrf".to_string(), serde_json::json!(gatehouse::auth::password::random_token())),
    ]);
    let expiry_date = tower_sessions::cookie::time::OffsetDateTime::now_utc()
        + tower_sessions::cookie::time::Duration::hours(1);
    DbSessionStore(app.state.db.clone()).save(&Record { id, data, expiry_date }).await.unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::COOKIE, format!("gatehouse_session={id}").parse().unwrap());
    reqwest::Client::builder()
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Publishes the refund-invoices packet, invites a candidate and stores the
/// sample as their submission (off the queue); returns the assignment id
/// and the submission's receipt time.
async fn submitted(app: &TestApp) -> (String, i64) {
    let rel = format!("packets/1/{SLUG}");
    let dest = app.state.config.data_dir.join(&rel);
    copy_path(&repo_root().join("packets").join(SLUG), &dest).unwrap();
    let packet = Packet::load(&dest).unwrap();
    let db = &app.state.db;
    db.create_version(NewVersion {
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
    let work = tempfile::tempdir().unwrap();
    let zip = work.path().join("sample.zip");
    let times: BTreeMap<String, i64> =
        packet.manifest.sample.times.iter().map(|(k, v)| (k.clone(), TIME_BASE + v)).collect();
    grader::ingest::write_zip_from_dir(&packet.sample_dir(), &zip, &times, TIME_BASE).unwrap();
    let bytes = std::fs::read(&zip).unwrap();
    let sha = grader::tree::sha256_hex(&bytes);
    let blob = gatehouse::blobs::blob_path(&app.state.config.data_dir, &sha);
    std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
    std::fs::write(&blob, &bytes).unwrap();
    let invite = Invite {
        slug: SLUG,
        candidate_name: "Wanda Witnessed",
        email: "wanda@example.com",
        deadline: None,
        time_box_secs: None,
    };
    let invited = invites::create(&app.state, None, invite).await.unwrap();
    db.create_submission(NewSubmission {
        id: SUB,
        assignment_id: &invited.assignment.id,
        blob_sha256: &sha,
        size_bytes: bytes.len() as i64,
    })
    .await
    .unwrap();
    // This test grades the submission itself: take the queued job away.
    while let Some(job) = db.claim_job("evidence-test", gatehouse::now_ms(), 600_000).await.unwrap()
    {
        db.finish_job(job.id, "evidence-test", true, None).await.unwrap();
    }
    let received_at = db.submission_by_id(SUB).await.unwrap().unwrap().received_at;
    (invited.assignment.id, received_at)
}

/// Writes the witnessed record straight into the tables: a red run ten
/// minutes before the submission; one forwarded call before it (id 1); then
/// a forwarded call, two duplicates of it refused by the meter, and a green.
async fn witness(app: &TestApp, assignment: &str, submitted: i64) -> i64 {
    use crate::support::{Arg, raw_exec};
    let url = &app.state.config.database_url;
    let red_at = submitted - 600_000;
    let red_log = std::fs::read_to_string(
        repo_root().join("packets").join(SLUG).join("sample/artifacts/red.log"),
    )
    .unwrap();
    let tree = "a".repeat(64);
    for (id, kind, at, accepted, exit, log) in [
        (1, "red", red_at, 1, 1, red_log.as_str()),
        (2, "green", submitted - 60_000, 1, 0, "== 2 passed in 0.01s =="),
    ] {
        raw_exec(
            url,
            "INSERT INTO witness_runs (id, assignment_id, kind, at, accepted, exit_code, log, tree_sha256, env_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '{}')",
            &[Arg::I(id), Arg::T(assignment), Arg::T(kind), Arg::I(at), Arg::I(accepted), Arg::I(exit), Arg::T(log), Arg::T(&tree)],
        )
        .await;
    }
    // (n, at, status, refused, tokens, duplicate_of)
    type Call<'a> = (i64, i64, i64, Option<&'a str>, i64, Option<i64>);
    let calls: [Call; 4] = [
        (1, red_at - 120_000, 200, None, 300, None),
        (2, red_at + 60_000, 200, None, 400, None),
        (3, red_at + 61_000, 429, Some("calls"), 0, Some(2)),
        (4, red_at + 62_000, 429, Some("calls"), 0, Some(2)),
    ];
    for (id, at, status, refused, tokens, duplicate_of) in calls {
        let sha = format!("{:064}", duplicate_of.unwrap_or(id));
        raw_exec(
            url,
            "INSERT INTO model_calls (id, assignment_id, at, model, request_bytes, prompt_tokens, completion_tokens, status, refused, request_sha256, duplicate_of)
             VALUES (?, ?, ?, 'fake-model', 512, ?, 20, ?, ?, ?, ?)",
            &[Arg::I(id), Arg::T(assignment), Arg::I(at), Arg::I(tokens), Arg::I(status), Arg::OptT(refused), Arg::T(&sha), Arg::OptI(duplicate_of)],
        )
        .await;
    }
    if url.starts_with("postgres") {
        // Rows written with explicit ids leave Postgres's sequences behind (SQLite's rowid follows by itself).
        for table in ["witness_runs", "model_calls"] {
            raw_exec(url, &format!("SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))"), &[]).await;
        }
    }
    red_at
}

#[tokio::test]
async fn the_scorecard_shows_witnessed_findings_the_ledger_and_the_timeline() {
    let app = TestApp::spawn().await;
    let (assignment, submitted) = submitted(&app).await;
    witness(&app, &assignment, submitted).await;

    let GradeOutcome::Graded { scorecard_json, receipt_json, decision, score } =
        grade_submission(&app.state, SUB).await.unwrap()
    else {
        panic!("the sample was refused");
    };
    let card: grader::grade::Scorecard = serde_json::from_str(&scorecard_json).unwrap();
    let finding = card
        .findings
        .iter()
        .find(|f| f.id == "model-before-red")
        .unwrap_or_else(|| panic!("no model-before-red: {:?}", card.findings));
    assert_eq!(finding.provenance, grader::evidence::Provenance::Witnessed);
    assert!(finding.evidence.iter().any(|e| e.contains("model call 1 ")), "{:?}", finding.evidence);
    assert!(
        !finding.evidence.iter().any(|e| e.contains("model call 2 ")),
        "{:?}",
        finding.evidence
    );
    // The claimed red log is the one the platform witnessed.
    assert!(!card.findings.iter().any(|f| f.id == "forged-red-log"), "{:?}", card.findings);
    assert!(card.not_witnessed.is_empty());
    assert!(card.receipt.witness_sha256.is_some());
    app.state
        .db
        .set_graded(SUB, &scorecard_json, &receipt_json, &decision, score.unwrap_or(0.0))
        .await
        .unwrap();

    let client = reviewer(&app).await;
    let page = client
        .get(app.url(&format!("/submissions/{SUB}")))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    // The finding, badged witnessed.
    assert!(html.contains("id=\"finding-model-before-red\""), "{html}");
    let finding_html = &html[html.find("id=\"finding-model-before-red\"").unwrap()..];
    assert!(
        finding_html[..finding_html.find("</article>").unwrap()].contains("badge witnessed"),
        "{html}"
    );
    // The ledger table: four calls, two refused, with their duplicate.
    assert!(html.contains("class=\"ledger\""), "{html}");
    // The receipt digests the witnessed record, and the page names its digest.
    assert!(html.contains(card.receipt.witness_sha256.as_deref().unwrap()), "{html}");
    assert_eq!(html.matches("class=\"model-call forwarded\"").count(), 2, "{html}");
    assert_eq!(html.matches("class=\"model-call refused\"").count(), 2, "{html}");
    assert!(html.contains("before red"), "{html}");
    assert_eq!(html.matches("class=\"witnessed-run ").count(), 2, "{html}");
    // The timeline: red, the calls (refused ones marked), green, submission.
    let svg = &html
        [html.find("<svg").expect("an SVG timeline")..html.find("</svg>").expect("a closed SVG")];
    assert!(svg.contains("class=\"run red accepted\""), "{svg}");
    assert!(svg.contains("class=\"run green accepted\""), "{svg}");
    assert_eq!(svg.matches("class=\"call forwarded\"").count(), 2, "{svg}");
    assert_eq!(svg.matches("class=\"call refused\"").count(), 2, "{svg}");
    assert!(svg.contains("model call 3 at") && svg.contains("refused: calls"), "{svg}");
    assert!(svg.contains("class=\"submission\""), "{svg}");
    // Red before the first forwarded call after it, on one axis: x grows with time.
    // The marks' positions, whatever order the renderer writes attributes in.
    let mark = |kind: &str, class: &str| -> String {
        let at =
            svg.find(&format!("class=\"{class}\"")).unwrap_or_else(|| panic!("{class} in {svg}"));
        let start = svg[..at].rfind(&format!("<{kind}")).unwrap();
        svg[start..].to_string()
    };
    let x = |el: String, attr: &str| -> f64 {
        let i = el.find(attr).unwrap() + attr.len();
        el[i..i + el[i..].find('"').unwrap()].parse().unwrap()
    };
    let call = |id: i64| {
        x(
            svg[svg.find(&format!("<g data-id=\"{id}\" class=\"call forwarded\"")).unwrap()..]
                .to_string(),
            "x1=\"",
        )
    };
    assert!(call(1) < x(mark("circle", "run red accepted"), "cx=\""));
    assert!(x(mark("circle", "run red accepted"), "cx=\"") < call(2));
    assert!(x(mark("circle", "run green accepted"), "cx=\"") < x(mark("g", "submission"), "x1=\""));
}

#[tokio::test]
async fn an_offline_submission_lists_the_witnessed_checks_as_not_applicable() {
    let app = TestApp::spawn().await;
    let (_assignment, _submitted) = submitted(&app).await;
    let GradeOutcome::Graded { scorecard_json, receipt_json, decision, score } =
        grade_submission(&app.state, SUB).await.unwrap()
    else {
        panic!("the sample was refused");
    };
    let card: grader::grade::Scorecard = serde_json::from_str(&scorecard_json).unwrap();
    let ids: Vec<&str> = card.not_witnessed.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(ids, ["forged-red-log", "model-before-red"]);
    assert!(card.receipt.witness_sha256.is_none());
    app.state
        .db
        .set_graded(SUB, &scorecard_json, &receipt_json, &decision, score.unwrap_or(0.0))
        .await
        .unwrap();
    let html = reviewer(&app)
        .await
        .get(app.url(&format!("/submissions/{SUB}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("class=\"not-witnessed\""), "{html}");
    assert!(!html.contains("class=\"ledger\""), "{html}");
}
