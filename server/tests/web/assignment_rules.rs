//! The rules an assignment holds a candidate to, tried over HTTP against
//! the real app: the time box starts only on Start or the starter, an upload
//! streamed past the deadline is refused, results are the hiring team's to
//! release, the submission limit, fair grading across assignments, and the
//! per-assignment and global caps.

use std::time::Duration;

use gatehouse::db::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api::api_token;
use crate::auth::{PASSWORD, page};
use crate::candidate::{SLUG, app_with_packet, publish_packet};
use crate::support::TestApp;

async fn started_at(app: &TestApp, id: &str) -> Option<i64> {
    app.state.db.assignment_by_id(id).await.unwrap().unwrap().started_at
}

#[tokio::test]
async fn the_time_box_starts_on_start_or_the_starter_never_on_a_page_view() {
    let app = app_with_packet().await;
    let a = crate::candidate::invite_with(&app.state, "Alice Candidate", None, Some(3600)).await;
    let client = TestApp::client();
    for _ in 0..3 {
        let r = page(&client, app.url(&format!("/c/{}", a.token))).await;
        assert_eq!(r.status(), StatusCode::OK);
        let html = r.text().await.unwrap();
        assert!(
            html.contains(r#"id="start-time-box""#) && html.contains("cannot be paused"),
            "{html}"
        );
    }
    assert_eq!(started_at(&app, &a.assignment.id).await, None, "a page view started the clock");
    let before = gatehouse::now_ms();
    let r = client.post(app.url(&format!("/c/{}/start", a.token))).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(started_at(&app, &a.assignment.id).await.is_some_and(|t| t >= before));
    let html = page(&client, app.url(&format!("/c/{}", a.token))).await.text().await.unwrap();
    assert!(!html.contains(r#"id="start-time-box""#), "{html}");
    assert!(html.contains("left"), "{html}");

    // Taking the starter (the prompt and the credentials) starts it too.
    let b = crate::candidate::invite_with(&app.state, "Bob Candidate", None, Some(3600)).await;
    assert_eq!(started_at(&app, &b.assignment.id).await, None);
    let r = client.get(app.url(&format!("/c/{}/starter.zip", b.token))).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        started_at(&app, &b.assignment.id).await.is_some(),
        "the starter download did not start the clock"
    );
}

/// A submission upload that sends the sample zip in `pieces`, one per `gap`.
async fn slow_upload(
    app: &TestApp,
    token: &str,
    pieces: usize,
    gap: Duration,
) -> reqwest::Response {
    let zip = crate::candidate::sample_zip();
    let size = zip.len().div_ceil(pieces);
    let chunks: Vec<Vec<u8>> = zip.chunks(size).map(<[u8]>::to_vec).collect();
    let stream =
        futures_util::StreamExt::then(futures_util::stream::iter(chunks), move |c| async move {
            tokio::time::sleep(gap).await;
            Ok::<_, std::io::Error>(c)
        });
    let part = reqwest::multipart::Part::stream(reqwest::Body::wrap_stream(stream))
        .file_name("submission.zip")
        .mime_str("application/zip")
        .unwrap();
    TestApp::client()
        .post(app.url(&format!("/c/{token}/submit")))
        .header("accept", "application/json")
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_upload_streamed_past_the_deadline_is_refused_after_its_body() {
    let app = app_with_packet().await;
    let late = crate::candidate::invite_with(
        &app.state,
        "Late Larry",
        Some(gatehouse::now_ms() + 2_000),
        None,
    )
    .await;
    let r = slow_upload(&app, &late.token, 4, Duration::from_millis(900)).await;
    assert_eq!(r.status(), StatusCode::GONE, "{}", r.text().await.unwrap());
    assert!(app.state.db.submissions_of(&late.assignment.id).await.unwrap().is_empty());
    // The same slow upload well before the deadline is taken.
    let early = crate::candidate::invite(&app.state, "Early Erin").await;
    let r = slow_upload(&app, &early.token, 4, Duration::from_millis(900)).await;
    assert_eq!(r.status(), StatusCode::CREATED, "{}", r.text().await.unwrap());
}

async fn candidate_view(app: &TestApp, token: &str, id: &str) -> (Value, String, Value) {
    let client = TestApp::client();
    let status: Value = client
        .get(app.url(&format!("/c/{token}/submissions/{id}/status")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let receipt =
        page(&client, app.url(&format!("/c/{token}/submissions/{id}"))).await.text().await.unwrap();
    let api: Value = client
        .get(app.url(&format!("/api/v1/submissions/{id}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (status, receipt, api)
}

#[tokio::test]
async fn results_are_the_hiring_teams_to_release() {
    use gatehouse::db::ResultsRelease;
    let app = app_with_packet().await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let a = crate::candidate::invite(&app.state, "Alice Candidate").await;
    assert_eq!(a.assignment.results, ResultsRelease::Never);
    assert_eq!(a.assignment.max_submissions, 3);
    let r =
        crate::candidate::upload(&app.base, &a.token, crate::candidate::sample_zip(), true).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let s = crate::candidate::wait_final(&app.state, &id, Duration::from_secs(180)).await;
    assert_eq!(s.state.as_str(), "graded");
    let decision = s.decision.clone().expect("graded with a decision");
    let digest: String = serde_json::from_str::<Value>(s.receipt_json.as_deref().unwrap()).unwrap()
        ["digest"]
        .as_str()
        .unwrap()
        .to_string();

    // Default: received, graded and the receipt digest; no decision, no score.
    let (status, receipt, api) = candidate_view(&app, &a.token, &id).await;
    assert_eq!(status["state"], "graded");
    assert_eq!(status["receipt_digest"], digest.as_str());
    assert!(status.get("decision").is_none() && status.get("score").is_none(), "{status}");
    assert!(api.get("decision").is_none() && api.get("score").is_none(), "{api}");
    assert_eq!(api["receipt_digest"], digest.as_str());
    assert!(receipt.contains(&digest), "the receipt page shows the digest");
    assert!(!receipt.contains(">Decision<") && !receipt.contains(">Score<"), "{receipt}");

    // After review: only once a reviewer has scored it.
    app.state
        .db
        .set_assignment_policy(&a.assignment.id, ResultsRelease::AfterReview, 3)
        .await
        .unwrap();
    let (status, _, _) = candidate_view(&app, &a.token, &id).await;
    assert!(status.get("decision").is_none(), "{status}");
    let reviewer = app.user("rev@example.test", Role::Reviewer, PASSWORD).await;
    app.state.db.add_human_score(&id, "unknowns_stop", 5, "solid", reviewer.id).await.unwrap();
    let (status, receipt, api) = candidate_view(&app, &a.token, &id).await;
    assert_eq!(status["decision"], decision.as_str(), "{status}");
    assert_eq!(api["decision"], decision.as_str(), "{api}");
    assert!(receipt.contains(">Decision<"), "{receipt}");

    // Immediately: as soon as it is graded.
    let b = crate::candidate::invite(&app.state, "Bob Candidate").await;
    app.state
        .db
        .set_assignment_policy(&b.assignment.id, ResultsRelease::Immediately, 3)
        .await
        .unwrap();
    let r =
        crate::candidate::upload(&app.base, &b.token, crate::candidate::sample_zip(), true).await;
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    crate::candidate::wait_final(&app.state, &id, Duration::from_secs(180)).await;
    let (status, _, _) = candidate_view(&app, &b.token, &id).await;
    assert!(status["decision"].is_string(), "{status}");
    // Staff still see everything.
    let (staff, _) = crate::auth::signed_in(&app, Role::Reviewer).await;
    let full: Value = staff
        .get(app.url(&format!("/submissions/{id}/status")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(full["decision"].is_string(), "{full}");
}

#[tokio::test]
async fn an_assignment_takes_its_submission_limit_and_says_so_when_reached() {
    // No worker runs here; the pending-jobs cap is tested on its own.
    let app = TestApp::spawn_with(|c| c.max_pending_jobs = 10).await;
    publish_packet(&app.state).await;
    let a = crate::candidate::invite(&app.state, "Alice Candidate").await;
    app.state
        .db
        .set_assignment_policy(&a.assignment.id, gatehouse::db::ResultsRelease::Never, 2)
        .await
        .unwrap();
    for _ in 0..2 {
        let r = crate::candidate::upload(&app.base, &a.token, crate::candidate::sample_zip(), true)
            .await;
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let r =
        crate::candidate::upload(&app.base, &a.token, crate::candidate::sample_zip(), true).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let error = r.json::<Value>().await.unwrap()["error"].as_str().unwrap().to_string();
    assert!(error.contains("accepts 2 submissions"), "{error}");
    let r =
        crate::candidate::upload(&app.base, &a.token, crate::candidate::sample_zip(), false).await;
    let html = r.text().await.unwrap();
    assert!(html.contains("accepts 2 submissions"), "the page says why: {html}");
    assert_eq!(
        app.state.db.submissions_of(&a.assignment.id).await.unwrap().len(),
        2,
        "all are kept, no third"
    );

    // The default is 3, and the API sets both settings with clear errors.
    let token = api_token(&app, "author@example.test", Role::Author).await;
    let client = TestApp::client();
    let body = json!({ "packet": SLUG, "candidate_name": "Cy", "email": "cy@example.test", "results": "sometimes" });
    let r = client
        .post(app.url("/api/v1/assignments"))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("never, after-review, immediately"));
    let body = json!({ "packet": SLUG, "candidate_name": "Cy", "email": "cy@example.test", "max_submissions": 0 });
    let r = client
        .post(app.url("/api/v1/assignments"))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body = json!({ "packet": SLUG, "candidate_name": "Cy", "email": "cy@example.test", "results": "after-review", "max_submissions": 5 });
    let r = client
        .post(app.url("/api/v1/assignments"))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let stored = app.state.db.assignment_by_id(&id).await.unwrap().unwrap();
    assert_eq!(
        (stored.results, stored.max_submissions),
        (gatehouse::db::ResultsRelease::AfterReview, 5)
    );
}

async fn submit_json(app: &TestApp, token: &str) -> reqwest::Response {
    crate::candidate::upload(&app.base, token, crate::candidate::sample_zip(), true).await
}

#[tokio::test]
async fn the_queue_is_fair_across_assignments() {
    let app = TestApp::spawn_with(|c| c.max_pending_jobs = 10).await;
    publish_packet(&app.state).await;
    let a = crate::candidate::invite(&app.state, "Alice Many").await;
    let b = crate::candidate::invite(&app.state, "Bob Once").await;
    app.state
        .db
        .set_assignment_policy(&a.assignment.id, gatehouse::db::ResultsRelease::Never, 10)
        .await
        .unwrap();
    let mut a_ids = Vec::new();
    for _ in 0..4 {
        let r = submit_json(&app, &a.token).await;
        assert_eq!(r.status(), StatusCode::CREATED);
        a_ids.push(r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string());
    }
    let r = submit_json(&app, &b.token).await;
    let b_id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    // Each job's turn is fixed when it is queued; migration 0016's backfill
    // gives pending jobs queued before it the same turns: lose them, run it.
    let url = &app.state.config.database_url;
    let turns = "SELECT subject, turn FROM jobs ORDER BY id";
    let queued = crate::support::raw_text_int_rows(url, turns).await;
    let expect: Vec<i64> = vec![0, 1, 2, 3, 0];
    assert_eq!(queued.iter().map(|r| r.1).collect::<Vec<_>>(), expect, "{queued:?}");
    crate::support::raw_exec(url, "UPDATE jobs SET turn = 0", &[]).await;
    let backend = if url.starts_with("postgres") { "postgres" } else { "sqlite" };
    let migration =
        crate::support::repo_root().join(format!("migrations/{backend}/0016_job_turns.sql"));
    let migration = std::fs::read_to_string(&migration).unwrap();
    let backfill = migration
        .split(';')
        .map(|s| s.lines().filter(|l| !l.starts_with("--")).collect::<Vec<_>>().join("\n"))
        .find(|s| s.trim_start().starts_with("UPDATE jobs SET turn"))
        .expect("0016 backfills the turns");
    crate::support::raw_exec(url, &backfill, &[]).await;
    assert_eq!(crate::support::raw_text_int_rows(url, turns).await, queued);
    // Claim as a worker would: Bob's first job comes second, not fifth.
    let mut order = Vec::new();
    while let Some(job) =
        app.state.db.claim_job("test-worker", gatehouse::now_ms(), 60_000).await.unwrap()
    {
        order.push(job.subject.clone());
        app.state.db.finish_job(job.id, "test-worker", true, None).await.unwrap();
    }
    assert_eq!(order.len(), 5, "{order:?}");
    assert_eq!(order[0], a_ids[0]);
    assert_eq!(order[1], b_id, "one candidate's queue delayed another's first job: {order:?}");
    assert_eq!(&order[2..], &a_ids[1..], "{order:?}");
}

#[tokio::test]
async fn per_assignment_and_global_caps_refuse_with_a_clear_message() {
    let app = TestApp::spawn_with(|c| {
        c.max_pending_jobs = 1;
        c.max_concurrent_uploads = 1;
        c.max_witness_runs = 0;
    })
    .await;
    publish_packet(&app.state).await;
    let a = crate::candidate::invite(&app.state, "Alice Candidate").await;
    assert_eq!(submit_json(&app, &a.token).await.status(), StatusCode::CREATED);
    // No worker runs: the first is still queued, so the second waits.
    let r = submit_json(&app, &a.token).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.text().await.unwrap().contains("still waiting for grading"));

    // One upload at a time over everyone: a second, concurrent one gets 503.
    let b = crate::candidate::invite(&app.state, "Bob Candidate").await;
    let c = crate::candidate::invite(&app.state, "Cy Candidate").await;
    let slow = slow_upload(&app, &b.token, 4, Duration::from_millis(700));
    let quick = async {
        tokio::time::sleep(Duration::from_millis(600)).await;
        submit_json(&app, &c.token).await
    };
    let (slow, quick) = tokio::join!(slow, quick);
    assert_eq!(slow.status(), StatusCode::CREATED);
    assert_eq!(quick.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(quick.text().await.unwrap().contains("busy with other uploads"));
    assert_eq!(
        submit_json(&app, &c.token).await.status(),
        StatusCode::CREATED,
        "free again once the first is in"
    );

    // The witnessed-run cap.
    let form = crate::candidate::form(crate::candidate::sample_zip());
    let r = TestApp::client()
        .post(app.url(&format!("/c/{}/witness/red", a.token)))
        .header("accept", "application/json")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.text().await.unwrap().contains("witnessed runs"));
    assert!(app.state.db.witness_runs_of(&a.assignment.id).await.unwrap().is_empty());
}
