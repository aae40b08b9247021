//! The loose ends of erasure (#46), on both backends: a dead link says the
//! same on every surface; an erasure waits for a grading and takes nothing
//! from the candidate when it is refused; an upload, a witnessed run or a
//! model call still under way when the candidate is erased leaves nothing
//! behind; SQLite's write-ahead log is emptied after an erasure; the audit
//! log's redaction takes the email as a whole address; and the candidate's
//! copy of their data is built a bounded number of times.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use gatehouse::db::EraseReason;
use reqwest::StatusCode;
use serde_json::Value;

use crate::candidate::{app_with_packet, files_under, invite, sample_zip};
use crate::erasure::{folder, leftovers, stored_zip};
use crate::support::TestApp;

/// Erases `assignment` as an admin would.
async fn erase(app: &TestApp, assignment: &str) -> Result<(), gatehouse::error::AppError> {
    let a = app.state.db.assignment_by_id(assignment).await.unwrap().unwrap();
    gatehouse::erasure::erase(&app.state, &a, "user:1", EraseReason::Request).await.map(|_| ())
}

/// What an erased assignment's link says.
async fn erased_words(app: &TestApp, assignment: &str) -> String {
    let e = app.state.db.erasure_of(assignment).await.unwrap().expect("erased");
    gatehouse::assignment::erased_message(e.at)
}

/// Every route a link token opens, with a value for each path parameter:
/// the candidate's pages, forms and uploads (the token in the path) and the
/// API's operations (the token as the bearer), from the app's own routes.
fn link_routes(token: &str) -> Vec<(String, bool)> {
    gatehouse::web::routes()
        .paths()
        .iter()
        .filter(|p| {
            p.starts_with("/c/{token}")
                || (p.starts_with("/api/v1/") && !p.ends_with("openapi.json"))
        })
        .map(|p| {
            let path =
                p.replace("{token}", token).replace("{id}", "abc123").replace("{kind}", "red");
            (path, p.starts_with("/api/"))
        })
        .collect()
}

#[tokio::test]
async fn a_dead_link_answers_410_with_the_same_words_on_every_surface() {
    let app = app_with_packet().await;
    let q = invite(&app.state, "Quentin Erased").await;
    erase(&app, &q.assignment.id).await.unwrap();
    let words = erased_words(&app, &q.assignment.id).await;
    let client = TestApp::client();
    let routes = link_routes(&q.token);
    assert!(routes.len() >= 15, "{routes:?}");
    for (path, api) in routes {
        let mut answered = Vec::new();
        for method in [reqwest::Method::GET, reqwest::Method::POST] {
            for accept in ["application/json", "text/html"] {
                let mut req = client.request(method.clone(), format!("{}{}", app.base, path));
                req = req.header("accept", accept);
                if api {
                    req = req.bearer_auth(&q.token);
                }
                if method == reqwest::Method::POST {
                    req = req.multipart(crate::candidate::form(sample_zip()));
                }
                let r = req.send().await.unwrap();
                let status = r.status();
                if status == StatusCode::METHOD_NOT_ALLOWED {
                    continue;
                }
                let kind = r.headers()["content-type"].to_str().unwrap().to_string();
                let body = r.text().await.unwrap();
                assert_eq!(status, StatusCode::GONE, "{method} {path} ({accept}): {body}");
                if kind.starts_with("application/json") {
                    let v: Value = serde_json::from_str(&body).unwrap();
                    assert_eq!(v["error"], words.as_str(), "{method} {path}");
                } else {
                    assert!(kind.starts_with("text/html"), "{method} {path}: {kind}");
                    assert!(body.contains(&words), "{method} {path} ({accept}): {body}");
                }
                answered.push(format!("{method} {accept}"));
            }
        }
        assert!(!answered.is_empty(), "{path} answered nothing but 405");
    }
    // A token no link ever had stays 401 on the API and 404 on the pages.
    let never = "f".repeat(64);
    for (path, api) in link_routes(&never) {
        for method in [reqwest::Method::GET, reqwest::Method::POST] {
            let mut req = client
                .request(method.clone(), format!("{}{}", app.base, path))
                .header("accept", "application/json");
            if api {
                req = req.bearer_auth(&never);
            }
            let status = req.send().await.unwrap().status();
            let expected = if api { StatusCode::UNAUTHORIZED } else { StatusCode::NOT_FOUND };
            assert!(
                status == expected || status == StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path}: {status}"
            );
        }
    }
}

#[tokio::test]
async fn an_erasure_waits_for_a_grading_and_a_refused_one_changes_nothing() {
    let app = app_with_packet().await;
    let q = invite(&app.state, "Gianna Graded").await;
    let id = q.assignment.id.clone();
    let key = crate::meter::key_of(&app, &q.token).await;
    let keys_valid = async || {
        let keys = app.state.db.model_keys_of(&id).await.unwrap();
        !keys.is_empty() && keys.iter().all(|k| k.revoked_at.is_none())
    };
    assert!(keys_valid().await);
    // Queued (no worker runs yet).
    let r = crate::candidate::upload(&app.base, &q.token, sample_zip(), true).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let submission = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    // The store's own check, in the erasure's transaction.
    let refused =
        app.state.db.erase_assignment(&id, "user:1", EraseReason::Request, gatehouse::now_ms());
    assert_eq!(refused.await.unwrap().unwrap_err(), gatehouse::db::EraseRefusal::Grading);
    let check_nothing_changed = async |why: &str| {
        let a = app.state.db.assignment_by_id(&id).await.unwrap().unwrap();
        assert!(a.erased_at.is_none() && a.candidate_name == "Gianna Graded", "{why}");
        assert!(app.state.db.erasure_of(&id).await.unwrap().is_none(), "{why}");
        assert_eq!(app.state.db.submissions_of(&id).await.unwrap().len(), 1, "{why}");
        // The candidate's model key still works.
        assert!(keys_valid().await, "{why}: the model key was revoked");
        assert_eq!(
            crate::meter::key_of(&app, &q.token).await,
            key,
            "{why}: the candidate page shows the same key"
        );
    };
    check_nothing_changed("the store refused").await;
    let e = erase(&app, &id).await.unwrap_err();
    assert_eq!(e.status(), StatusCode::CONFLICT);
    assert!(e.to_string().contains("is being graded"), "{e}");
    check_nothing_changed("queued").await;
    // Running: a worker claimed it.
    let job = app
        .state
        .db
        .claim_job("test-worker", gatehouse::now_ms(), 60_000)
        .await
        .unwrap()
        .expect("the grading is claimed");
    assert_eq!(job.subject, submission);
    let e = erase(&app, &id).await.unwrap_err();
    assert_eq!(e.status(), StatusCode::CONFLICT, "{e}");
    check_nothing_changed("running").await;
    app.state
        .db
        .release_job_uncounted(job.id, "test-worker", "handed back by the test")
        .await
        .unwrap();
    // Graded: the erasure goes through.
    let workers = gatehouse::queue::spawn_workers(&app.state, 1);
    crate::candidate::wait_final(&app.state, &submission, Duration::from_secs(180)).await;
    erase(&app, &id).await.unwrap();
    assert!(app.state.db.model_keys_of(&id).await.unwrap().is_empty());
    for w in workers {
        w.abort();
    }
}

/// A transaction of the test's own on the app's database, holding the
/// assignment's model keys (Postgres: their rows; SQLite: the write lock),
/// in which a grading of `assignment` is queued; committed by `release`.
async fn queue_behind_a_lock(app: &TestApp, assignment: &str, submission: &str) -> Holder {
    let url = &app.state.config.database_url;
    let now = gatehouse::now_ms();
    let statements = [
        format!(
            "INSERT INTO submissions (id, assignment_id, blob_sha256, size_bytes, received_at, state) VALUES ('{submission}', '{assignment}', '{}', 1, {now}, 'queued')",
            "0".repeat(64)
        ),
        format!(
            "INSERT INTO jobs (kind, subject, created_at, turn) VALUES ('grade', '{submission}', {now}, 0)"
        ),
    ];
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("SELECT id FROM model_keys WHERE assignment_id = $1 FOR UPDATE")
            .bind(assignment)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        for s in &statements {
            sqlx::query(s).execute(&mut *tx).await.unwrap();
        }
        Holder::Pg(tx)
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let mut conn = pool.acquire().await.unwrap().detach();
        use sqlx::Connection;
        sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await.unwrap();
        for s in &statements {
            sqlx::query(s).execute(&mut conn).await.unwrap();
        }
        let _ = conn.ping().await;
        Holder::Sqlite(conn)
    }
}

enum Holder {
    Pg(sqlx::Transaction<'static, sqlx::Postgres>),
    Sqlite(sqlx::SqliteConnection),
}

impl Holder {
    /// Waits until the erasure waits on the lock (Postgres says so; SQLite
    /// is given five seconds), then commits.
    async fn release(self, url: &str) {
        match self {
            Holder::Pg(tx) => {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                let start = Instant::now();
                loop {
                    let waiting: i64 =
                        sqlx::query_scalar("SELECT COUNT(*) FROM pg_locks WHERE NOT granted")
                            .fetch_one(&pool)
                            .await
                            .unwrap();
                    if waiting > 0 {
                        break;
                    }
                    assert!(start.elapsed() < Duration::from_secs(30), "the erasure never waited");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                tx.commit().await.unwrap();
            }
            Holder::Sqlite(mut conn) => {
                // (The erasure's busy wait lasts ten seconds.)
                tokio::time::sleep(Duration::from_secs(5)).await;
                sqlx::query("COMMIT").execute(&mut conn).await.unwrap();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grading_queued_while_the_erasure_began_gives_the_candidate_their_key_back() {
    let app = app_with_packet().await;
    let q = invite(&app.state, "Rita Raced").await;
    let id = q.assignment.id.clone();
    let key = crate::meter::key_of(&app, &q.token).await;
    // The erasure's first check finds no grading; then it waits to revoke
    // the keys while the test queues one and lets it go on.
    let holder = queue_behind_a_lock(&app, &id, "raced-submission").await;
    let erasing = {
        let app_state = app.state.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let a = app_state.db.assignment_by_id(&id).await.unwrap().unwrap();
            gatehouse::erasure::erase(&app_state, &a, "user:1", EraseReason::Request).await
        })
    };
    holder.release(&app.state.config.database_url).await;
    let e = erasing.await.unwrap().expect_err("refused");
    assert_eq!(e.status(), StatusCode::CONFLICT);
    assert!(e.to_string().contains("was queued for grading while it was being erased"), "{e}");
    let keys = app.state.db.model_keys_of(&id).await.unwrap();
    assert!(!keys.is_empty() && keys.iter().all(|k| k.revoked_at.is_none()), "{keys:?}");
    assert_eq!(crate::meter::key_of(&app, &q.token).await, key);
    let a = app.state.db.assignment_by_id(&id).await.unwrap().unwrap();
    assert!(a.erased_at.is_none() && a.candidate_name == "Rita Raced");
}

/// A multipart upload of `zip` as field `file` whose body the test sends in
/// two parts: all but the last 100 bytes, then (when `rest` is sent) the rest.
fn slow_upload(zip: &[u8]) -> (reqwest::Body, tokio::sync::oneshot::Sender<()>, String) {
    let boundary = "gatehouse-test-boundary-4612";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"s.zip\"\r\nContent-Type: application/zip\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(zip);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let split = body.len() - 100;
    let (first, last) = (body[..split].to_vec(), body[split..].to_vec());
    let (go, wait) = tokio::sync::oneshot::channel::<()>();
    let stream = futures_util::stream::once(async move { Ok::<_, std::io::Error>(first) }).chain(
        futures_util::stream::once(async move {
            let _ = wait.await;
            Ok(last)
        }),
    );
    (reqwest::Body::wrap_stream(stream), go, format!("multipart/form-data; boundary={boundary}"))
}

/// What is under the data folder's `tmp/` now.
fn tmp_now(app: &TestApp) -> Vec<std::path::PathBuf> {
    files_under(&app.state.config.data_dir.join("tmp"))
}

/// Waits until something new is being written under the data folder's
/// `tmp/` (an upload being received), beside what was there `before`.
async fn receiving(app: &TestApp, before: &[std::path::PathBuf]) {
    let start = Instant::now();
    while tmp_now(app).iter().all(|f| before.contains(f)) {
        assert!(start.elapsed() < Duration::from_secs(60), "the upload never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const MARK: &str = "edge-erase-marker-5d1e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_under_way_when_the_candidate_is_erased_is_refused_and_kept_nowhere() {
    let app = app_with_packet().await;
    let q = invite(&app.state, "Ursula Uploading").await;
    let mut files = folder("sample");
    files.push(("NOTES-extra.txt".into(), format!("{MARK}\n").into_bytes()));
    let zip = stored_zip(&files);
    let (body, go, kind) = slow_upload(&zip);
    let before = tmp_now(&app);
    let sending = tokio::spawn(
        TestApp::client()
            .post(app.url("/api/v1/submissions"))
            .bearer_auth(&q.token)
            .header("content-type", kind)
            .body(body)
            .send(),
    );
    receiving(&app, &before).await;
    erase(&app, &q.assignment.id).await.unwrap();
    go.send(()).unwrap();
    let r = sending.await.unwrap().unwrap();
    assert_eq!(r.status(), StatusCode::GONE);
    let words = erased_words(&app, &q.assignment.id).await;
    assert_eq!(r.json::<Value>().await.unwrap()["error"], words.as_str());
    assert!(app.state.db.submissions_of(&q.assignment.id).await.unwrap().is_empty());
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&zip));
    assert!(!gatehouse::blobs::blob_path(&app.state.config.data_dir, &sha).exists());
    let needles = [MARK, "Ursula Uploading", sha.as_str()];
    let left = leftovers(&app.state.config.database_url, app.dir.path(), "", &needles).await;
    assert!(left.is_empty(), "left:\n{}", left.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witnessed_run_ending_after_the_erasure_is_refused_and_recorded_nowhere() {
    let app = app_with_packet().await;
    let q = invite(&app.state, "Wanda Witnessed").await;
    // The starter (red), with a conftest that makes the run last.
    let mut files = folder("starter");
    files.push((
        "conftest.py".into(),
        format!("import time\n# {MARK}\ntime.sleep(4)\nprint('{MARK}')\n").into_bytes(),
    ));
    let tree = stored_zip(&files);
    let before = tmp_now(&app);
    let sending = tokio::spawn(
        TestApp::client()
            .post(app.url("/api/v1/witness/red"))
            .bearer_auth(&q.token)
            .multipart(crate::candidate::form(tree))
            .send(),
    );
    receiving(&app, &before).await;
    // The tree is in; the sandbox is running it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!sending.is_finished(), "the run ended before the erasure");
    erase(&app, &q.assignment.id).await.unwrap();
    let r = sending.await.unwrap().unwrap();
    let words = erased_words(&app, &q.assignment.id).await;
    assert_eq!(r.status(), StatusCode::GONE);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], words.as_str());
    assert!(app.state.db.witness_runs_of(&q.assignment.id).await.unwrap().is_empty());
    let a = app.state.db.assignment_by_id(&q.assignment.id).await.unwrap().unwrap();
    assert!(a.started_at.is_none(), "the tombstone was not started");
    let left =
        leftovers(&app.state.config.database_url, app.dir.path(), "", &[MARK, "Wanda Witnessed"])
            .await;
    assert!(left.is_empty(), "left:\n{}", left.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_call_answered_after_the_erasure_leaves_no_transcript() {
    let (upstream, up) = crate::meter::spawn_upstream().await;
    let m = crate::meter::setup(Some(&upstream), "model_calls = 5", false, |_| {}).await;
    let app = &m.app;
    let answer_mark = "late-answer-marker-9c2f";
    up.set(|b| {
        b.delay = Duration::from_secs(3);
        b.content = Some(format!("the fix is {answer_mark}"));
    });
    let calling = {
        let (base, key) = (app.base.clone(), m.key.clone());
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{base}/v1/chat/completions"))
                .bearer_auth(key)
                .json(&crate::meter::chat(&format!("{MARK}: fix my bug")))
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    let start = Instant::now();
    while up.hits() == 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "the call never reached the upstream");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Admitted and forwarded: its row and its request's transcript exist.
    assert_eq!(crate::meter::ledger(app, &m.assignment).await.len(), 1);
    erase(app, &m.assignment).await.unwrap();
    assert!(!calling.is_finished(), "the call was answered before the erasure ended");
    // The upstream answered; the candidate's client got the answer.
    assert_eq!(calling.await.unwrap(), StatusCode::OK);
    // (A write still queued would land within this.)
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(crate::meter::ledger(app, &m.assignment).await.is_empty());
    let left =
        leftovers(&app.state.config.database_url, app.dir.path(), "", &[MARK, answer_mark]).await;
    assert!(left.is_empty(), "left after the call ended:\n{}", left.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_waits_for_a_transcript_still_being_written_then_removes_it() {
    let (upstream, _up) = crate::meter::spawn_upstream().await;
    let m = crate::meter::setup(Some(&upstream), "model_calls = 5", false, |_| {}).await;
    let app = &m.app;
    let (status, _) = crate::meter::call(app, &m.key, &crate::meter::chat(MARK)).await;
    assert_eq!(status, 200);
    let calls = crate::meter::ledger(app, &m.assignment).await;
    let sha = calls[0].request_body_sha256.clone().expect("a transcript");
    let path = gatehouse::blobs::blob_path(&app.state.config.data_dir, &sha);
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "the transcript was never written");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // As if the blob writer had not got to it yet: not on disk, in flight.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let writing = app.state.memo.blob_writer.writing(&sha);
    let erasing = {
        let (state, id) = (app.state.clone(), m.assignment.clone());
        tokio::spawn(async move {
            let a = state.db.assignment_by_id(&id).await.unwrap().unwrap();
            gatehouse::erasure::erase(&state, &a, "user:1", EraseReason::Request).await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!erasing.is_finished(), "the erasure waits for the write");
    // The write lands; then the erasure removes it.
    std::fs::write(&path, &bytes).unwrap();
    drop(writing);
    let erased = erasing.await.unwrap().unwrap();
    assert!(!path.exists(), "the late transcript was removed");
    assert!(erased.blobs >= 1, "{erased:?}");
}

#[tokio::test]
async fn after_an_erasure_sqlites_write_ahead_log_is_empty() {
    if crate::postgres::selected() {
        // Postgres keeps no write-ahead log in the data folder; the
        // checkpoint is SQLite's.
        return;
    }
    let app = app_with_packet().await;
    let q = invite(&app.state, "Wilhelmina Walford").await;
    let db = app.dir.path().join("gatehouse.db");
    let wal = app.dir.path().join("gatehouse.db-wal");
    let needles = ["Wilhelmina Walford", "wilhelmina.walford@example.com"];
    // The rows just written are still in the log (the check can fire).
    let before = std::fs::read(&wal).unwrap();
    assert!(!crate::erasure::found(&before, &needles).is_empty(), "the log holds them first");
    erase(&app, &q.assignment.id).await.unwrap();
    for file in [&db, &wal] {
        let bytes = std::fs::read(file).unwrap_or_default();
        assert!(
            crate::erasure::found(&bytes, &needles).is_empty(),
            "{} holds them",
            file.display()
        );
    }
    assert_eq!(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0), 0, "the log is truncated");
}

#[tokio::test]
async fn the_audit_log_is_redacted_where_it_names_the_email_as_a_whole_address() {
    let app = app_with_packet().await;
    let email = "ada_l@example.org";
    let q = gatehouse::invites::create(
        &app.state,
        None,
        gatehouse::invites::Invite {
            slug: crate::candidate::SLUG,
            candidate_name: "Ada L",
            email,
            deadline: None,
            time_box_secs: None,
        },
    )
    .await
    .unwrap();
    let entries = [
        ("named", format!("invite mailed to <{email}>"), true),
        ("named at the end of a sentence", format!("bounced: {email}."), true),
        ("named in capitals", format!("reply from {}", email.to_uppercase()), true),
        // Other people's addresses that hold this one, or match it as a
        // `LIKE` pattern (`_` is any one character there).
        ("a longer local part", format!("invite mailed to b{email}"), false),
        ("a longer domain", format!("invite mailed to {email}.uk"), false),
        ("the underscore as a wildcard", "invite mailed to adaxl@example.org".into(), false),
        ("nothing like it", "settings changed".into(), false),
    ];
    for (what, detail, _) in &entries {
        app.state.db.audit("user:1", "test.entry", &format!("test:{what}"), detail).await.unwrap();
    }
    erase(&app, &q.assignment.id).await.unwrap();
    let all = app.state.db.audit_entries(None, 1000).await.unwrap();
    for (what, detail, redacted) in &entries {
        let e = all.iter().find(|e| e.subject == format!("test:{what}")).unwrap();
        let expected = if *redacted { "[erased]" } else { detail.as_str() };
        assert_eq!(e.detail, expected, "{what}");
    }
}

#[tokio::test]
async fn the_candidates_copy_is_built_a_bounded_number_of_times() {
    let app = TestApp::spawn_with(|c| {
        c.my_data_per_hour = 2;
        c.max_concurrent_exports = 1;
    })
    .await;
    crate::candidate::publish_packet(&app.state).await;
    let q = invite(&app.state, "Petra Patient").await;
    let other = invite(&app.state, "Olga Other").await;
    let get = async |token: &str| {
        reqwest::Client::new()
            .get(app.url(&format!("/c/{token}/my-data.zip")))
            .send()
            .await
            .unwrap()
    };
    let retry_after = |r: &reqwest::Response| -> u64 {
        r.headers()["retry-after"].to_str().unwrap().parse().unwrap()
    };
    // One build at a time per link: 429 while one runs.
    let own = gatehouse::state::Slot::take_named(&app.state.memo, "my-data", &q.assignment.id)
        .expect("free");
    let r = get(&q.token).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after(&r) >= 1);
    let error = r.json::<Value>().await.unwrap()["error"].as_str().unwrap().to_string();
    assert!(
        error.contains("being built for this link already") && error.contains("try again in"),
        "{error}"
    );
    drop(own);
    // The server's builds at once: 503 while they are taken.
    let all = app.state.gates.exports.clone().acquire_many_owned(1).await.unwrap();
    let r = get(&other.token).await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(retry_after(&r) >= 1);
    assert!(r.text().await.unwrap().contains("busy building"));
    drop(all);
    // Two an hour per link (the refused ones above took none).
    for _ in 0..2 {
        let r = get(&q.token).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["content-type"], "application/zip");
    }
    let r = get(&q.token).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait = retry_after(&r);
    assert!((60..=3600).contains(&wait), "{wait}");
    let error = r.json::<Value>().await.unwrap()["error"].as_str().unwrap().to_string();
    assert!(error.contains("2 times in the last hour"), "{error}");
    // Another link has its own.
    assert_eq!(get(&other.token).await.status(), StatusCode::OK);
    // A link that never was is still 404, whatever the caps.
    assert_eq!(get(&"f".repeat(64)).await.status(), StatusCode::NOT_FOUND);
}
