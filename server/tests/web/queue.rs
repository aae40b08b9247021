//! The grading queue: leases, retries, attempt limits, the queue pages.

use std::time::Duration;

use gatehouse::db::{GradeResult, NewSubmission, Submission};
use gatehouse::now_ms;

use crate::candidate::{app_with_packet, invite, publish_packet, sample_zip, upload, wait_final};
use crate::support::TestApp;

/// Invites `name` and records their submission `id` straight in the store,
/// with `blob_sha256` as its zip (never stored), which queues its grading.
async fn queued_submission(app: &TestApp, name: &str, id: &str, blob_sha256: &str) -> Submission {
    let invited = invite(&app.state, name).await;
    let new =
        NewSubmission { id, assignment_id: &invited.assignment.id, blob_sha256, size_bytes: 1 };
    app.state.db.create_submission(new).await.unwrap()
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_and_the_old_owner_cannot_complete() {
    let app = app_with_packet().await;
    let db = &app.state.db;
    let s = queued_submission(&app, "Lease", "sub-lease", &"0".repeat(64)).await;
    let now = now_ms();
    let first = db.claim_job("worker-a", now, 50).await.unwrap().expect("a queued job");
    assert_eq!(first.attempts, 1);
    assert!(db.claim_job("worker-b", now + 10, 50).await.unwrap().is_none(), "the lease is held");
    let second = db
        .claim_job("worker-b", now + 100, 60_000)
        .await
        .unwrap()
        .expect("the expired lease is claimable");
    assert_eq!(second.id, first.id);
    assert_eq!(second.attempts, 2);
    // The first owner lost the lease: it can neither renew nor complete.
    assert!(!db.renew_lease(first.id, "worker-a", now + 1000).await.unwrap());
    let done = db
        .complete_grade_job(
            first.id,
            "worker-a",
            &s.id,
            GradeResult::Graded {
                scorecard_json: "{}",
                receipt_json: "{}",
                decision: "x",
                score: None,
            },
        )
        .await
        .unwrap();
    assert!(!done);
    assert_eq!(db.submission_by_id(&s.id).await.unwrap().unwrap().state.as_str(), "queued");
    // The holder completes once; a second completion is refused.
    let r = GradeResult::Refused { reason: "test" };
    assert!(db.complete_grade_job(first.id, "worker-b", &s.id, r).await.unwrap());
    let r = GradeResult::Refused { reason: "test" };
    assert!(!db.complete_grade_job(first.id, "worker-b", &s.id, r).await.unwrap());
    assert_eq!(db.job_by_id(first.id).await.unwrap().unwrap().state.as_str(), "done");
}

#[tokio::test]
async fn a_job_interrupted_too_often_fails_with_a_message() {
    let app = app_with_packet().await;
    let db = &app.state.db;
    let s = queued_submission(&app, "Crashy", "sub-crashy", &"0".repeat(64)).await;
    // Three workers claim the job and die (their leases lapse at once).
    let base = now_ms() - 10_000;
    for i in 0..3 {
        db.claim_job(&format!("dead-{i}"), base + i * 100, 1).await.unwrap().expect("claimable");
    }
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let s = wait_final(&app.state, &s.id, Duration::from_secs(20)).await;
    assert_eq!(s.state.as_str(), "failed");
    assert_eq!(s.error.as_deref(), Some("grading was interrupted 3 times"));
    let jobs = db.jobs_for(app::contract::JobKind::Grade, &s.id).await.unwrap();
    assert_eq!(jobs[0].state.as_str(), "failed");
    assert_eq!(jobs[0].attempts, 4);
}

#[tokio::test]
async fn grader_errors_are_retried_then_failed_with_the_error() {
    let app = app_with_packet().await;
    // The submission's zip is not in the blob store, so every attempt fails.
    let s = queued_submission(&app, "Missing", "sub-missing", &"a".repeat(64)).await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let s = wait_final(&app.state, &s.id, Duration::from_secs(30)).await;
    assert_eq!(s.state.as_str(), "failed");
    assert!(s.error.as_deref().unwrap_or("").contains("is missing"), "{:?}", s.error);
    let jobs = app.state.db.jobs_for(app::contract::JobKind::Grade, &s.id).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].state.as_str(), "failed");
    assert_eq!(jobs[0].attempts, 3, "retried up to max_attempts");
}

#[tokio::test]
async fn queue_pages_need_a_session_and_workers_wake_promptly() {
    let app = app_with_packet().await;
    let client = TestApp::client();
    let r = client.get(app.url("/queue/status")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = client.get(app.url("/queue")).header("accept", "text/html").send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert!(r.headers()["location"].to_str().unwrap().starts_with("/login"));
    let r = client.get(app.url("/submissions/x/status")).send().await.unwrap();
    assert_eq!(r.status(), 401);

    // A worker idle in its poll is woken by the upload and grades at once.
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let invited = invite(&app.state, "Quick").await;
    let r = upload(&app.base, &invited.token, sample_zip(), true).await;
    assert_eq!(r.status(), 201);
    let id = r.json::<serde_json::Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let s = wait_final(&app.state, &id, Duration::from_secs(120)).await;
    assert_eq!(s.state.as_str(), "graded");

    // The metrics name the routes, never the link token.
    let metrics = client.get(app.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("gatehouse_jobs_done_total"), "{metrics}");
    assert!(metrics.contains("/c/{token}/submit"), "{metrics}");
    assert!(!metrics.contains(&invited.token), "the token leaked into metrics");
}

#[tokio::test]
async fn a_worker_that_lost_its_lease_mid_grading_stores_nothing() {
    let app = TestApp::spawn_with(|c| c.lease_secs = 1).await;
    publish_packet(&app.state).await;
    let db = &app.state.db;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let first = invite(&app.state, "Stolen").await;
    let r = upload(&app.base, &first.token, sample_zip(), true).await;
    assert_eq!(r.status(), 201);
    let id = r.json::<serde_json::Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let start = std::time::Instant::now();
    while db.submission_by_id(&id).await.unwrap().unwrap().state.as_str() != "grading" {
        assert!(start.elapsed() < Duration::from_secs(30), "the worker never started grading");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Another worker takes the job over (as if the lease had lapsed).
    let stolen = db
        .claim_job("thief", now_ms() + 3_600_000, 3_600_000)
        .await
        .unwrap()
        .expect("the running job");
    assert_eq!((stolen.subject.as_str(), stolen.attempts), (id.as_str(), 2));
    // The one worker takes a second submission only once the first grading
    // is over, so when that is graded the first worker's result was had.
    let second = invite(&app.state, "After").await;
    let r = upload(&app.base, &second.token, sample_zip(), true).await;
    let after = r.json::<serde_json::Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    assert_eq!(
        wait_final(&app.state, &after, Duration::from_secs(120)).await.state.as_str(),
        "graded"
    );
    let s = db.submission_by_id(&id).await.unwrap().unwrap();
    assert_eq!(s.state.as_str(), "grading", "the lost worker's result was not stored");
    let job = &db.jobs_for(app::contract::JobKind::Grade, &id).await.unwrap()[0];
    assert_eq!(
        (job.state.as_str(), job.lease_owner.as_deref()),
        ("running", Some("thief")),
        "the job is the new owner's"
    );
    // The new owner completes it once.
    assert!(
        db.complete_grade_job(job.id, "thief", &id, GradeResult::Refused { reason: "test" })
            .await
            .unwrap()
    );
    assert_eq!(db.submission_by_id(&id).await.unwrap().unwrap().state.as_str(), "refused");
}

#[tokio::test]
async fn concurrent_claimers_never_share_a_job() {
    // Eight workers (each its own connection from the pool) race for twenty
    // jobs; every job goes to exactly one of them, once. On Postgres this is
    // FOR UPDATE SKIP LOCKED plus the claim's re-check; on SQLite the single writer.
    let app = TestApp::spawn_with(|c| c.workers = 0).await;
    publish_packet(&app.state).await;
    let mut expected = Vec::new();
    for i in 0..20 {
        let id = format!("sub-race-{i}");
        queued_submission(&app, &format!("Race {i}"), &id, &"0".repeat(64)).await;
        expected.push(id);
    }
    let mut claimers = Vec::new();
    for w in 0..8 {
        let db = app.state.db.clone();
        claimers.push(tokio::spawn(async move {
            let owner = format!("racer-{w}");
            let mut got = Vec::new();
            while let Some(job) = db.claim_job(&owner, now_ms(), 600_000).await.unwrap() {
                assert_eq!(job.lease_owner.as_deref(), Some(owner.as_str()));
                got.push((job.kind, job.subject.clone()));
                assert!(
                    db.finish_job(job.id, &owner, true, None).await.unwrap(),
                    "{owner} holds job {} it claimed",
                    job.id
                );
            }
            got
        }));
    }
    let mut claimed = Vec::new();
    for c in claimers {
        claimed.extend(c.await.unwrap());
    }
    let mut graded: Vec<String> = claimed
        .iter()
        .filter(|(kind, _)| *kind == app::contract::JobKind::Grade)
        .map(|(_, s)| s.clone())
        .collect();
    graded.sort();
    expected.sort();
    assert_eq!(graded, expected, "each grading job claimed exactly once");
    let jobs = app.state.db.recent_jobs(100).await.unwrap();
    assert_eq!(claimed.len(), jobs.len(), "every job claimed once: {claimed:?}");
    for job in jobs {
        assert_eq!(
            (job.state.as_str(), job.attempts),
            ("done", 1),
            "job {} of {}",
            job.id,
            job.subject
        );
    }
}
