//! Candidate data (#31, part 5): an admin erases one candidate, the
//! retention sweep erases on schedule, and the candidate downloads
//! everything held about them first. "Nothing is left" is checked by
//! reading everything: every row of every table (cast to text; Postgres's
//! bytes also as hex), every file under the test's folder (the SQLite
//! database and its write-ahead log included, byte for byte) and the
//! server's log, for the candidate's name, email, a marker only their code,
//! test run and prompts carry, and the digests of their own blobs. Another
//! candidate who handed in the identical zip keeps it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use gatehouse::db::Role;
use gatehouse::invites::{self, Invite};
use reqwest::StatusCode;
use serde_json::Value;

use crate::auth::{page, signed_in};
use crate::candidate::{files_under, form, packet_src, upload, wait_final};
use crate::meter::{call, chat, key_of, setup, spawn_upstream};

const NAME: &str = "Quintessa Marrowby";
const EMAIL: &str = "quintessa.marrowby@example.org";
/// Only the erased candidate's code, tree and prompt carry it.
const MARK: &str = "qm-erase-marker-71c3";

/// A zip of `entries`, stored (not deflated), so its bytes hold the text.
pub(crate) fn stored_zip(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut out);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in entries {
            z.start_file(name.as_str(), opts).unwrap();
            z.write_all(bytes).unwrap();
        }
        z.finish().unwrap();
    }
    out.into_inner()
}

/// The files of the packet's `sub` folder (sample or starter).
pub(crate) fn folder(sub: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(packet_src().join(sub))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect();
    files.sort();
    files
}

/// The packet's starter as a tree zip: its tests fail (a red run).
pub fn starter_zip() -> Vec<u8> {
    stored_zip(&folder("starter"))
}

fn with_mark(mut files: Vec<(String, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
    files.push(("NOTES-extra.txt".into(), format!("written by {NAME}: {MARK}\n").into_bytes()));
    files
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The needles in `haystack`, as text or (for Postgres's bytea) hex.
pub(crate) fn found<'a>(haystack: &[u8], needles: &[&'a str]) -> Vec<&'a str> {
    let lower = haystack.to_ascii_lowercase();
    needles
        .iter()
        .filter(|n| {
            let n = n.to_ascii_lowercase();
            let hex = hex::encode(n.as_bytes());
            memfind(&lower, n.as_bytes()) || memfind(&lower, hex.as_bytes())
        })
        .copied()
        .collect()
}

fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// (table, row as text) for every row of every table of the database.
async fn every_row(url: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        for t in tables {
            let rows: Vec<String> =
                sqlx::query_scalar(&format!("SELECT CAST(t AS TEXT) FROM \"{t}\" t"))
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            out.extend(rows.into_iter().map(|r| (t.clone(), r.into_bytes())));
        }
        pool.close().await;
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
                .fetch_all(&pool)
                .await
                .unwrap();
        for t in tables {
            let cols: Vec<String> =
                sqlx::query_scalar(&format!("SELECT name FROM pragma_table_info('{t}')"))
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            let joined = cols
                .iter()
                .map(|c| format!("COALESCE(CAST(\"{c}\" AS TEXT), '')"))
                .collect::<Vec<_>>()
                .join(" || '|' || ");
            let rows: Vec<Vec<u8>> =
                sqlx::query_scalar(&format!("SELECT CAST({joined} AS BLOB) FROM \"{t}\""))
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            out.extend(rows.into_iter().map(|r| (t.clone(), r)));
        }
        pool.close().await;
    }
    out
}

/// What of the candidate is still anywhere: rows, files (byte for byte)
/// and the log text given.
pub(crate) async fn leftovers(url: &str, dir: &Path, log: &str, needles: &[&str]) -> Vec<String> {
    let mut left = Vec::new();
    for (table, row) in every_row(url).await {
        for n in found(&row, needles) {
            let row = String::from_utf8_lossy(&row);
            left.push(format!(
                "row of {table} holds {n:?}: {}",
                row.chars().take(300).collect::<String>()
            ));
        }
    }
    for file in files_under(dir) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        for n in found(&bytes, needles) {
            left.push(format!("{} holds {n:?}", file.display()));
        }
    }
    for line in log.lines() {
        for n in found(line.as_bytes(), needles) {
            left.push(format!("log line holds {n:?}: {line}"));
        }
    }
    left
}

fn unzip(bytes: &[u8]) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for i in 0..z.len() {
        let mut f = z.by_index(i).unwrap();
        let mut b = Vec::new();
        f.read_to_end(&mut b).unwrap();
        out.insert(f.name().unwrap().to_string(), b);
    }
    out
}

fn blob_path(app: &crate::support::TestApp, sha256: &str) -> PathBuf {
    gatehouse::blobs::blob_path(&app.state.config.data_dir, sha256)
}

#[tokio::test]
async fn an_admin_erases_one_candidate_and_nothing_of_theirs_is_left() {
    let (upstream, up) = spawn_upstream().await;
    // "Ada" is the other candidate; the meter waits for a witnessed red.
    let m = setup(Some(&upstream), "model_calls = 5", true, |_| {}).await;
    let app = &m.app;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    up.set(|b| b.content = Some("def f():\n    return 1\n".into()));
    let q = invites::create(
        &app.state,
        None,
        Invite {
            slug: "null-status",
            candidate_name: NAME,
            email: EMAIL,
            deadline: None,
            time_box_secs: None,
        },
    )
    .await
    .unwrap();
    let id = q.assignment.id.clone();
    let key = key_of(app, &q.token).await;

    // Their witnessed red, a model call, two uploads: one identical to
    // Ada's (a shared blob), one their own; a reviewer's note about them.
    let tree = stored_zip(&with_mark(folder("starter")));
    let r = crate::support::TestApp::client()
        .post(app.url(&format!("/c/{}/witness/red", q.token)))
        .multipart(form(tree.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let (status, answer) = call(app, &key, &chat(&format!("{MARK}: fix my bug"))).await;
    assert_eq!(status, 200, "{answer}");
    let shared = stored_zip(&folder("sample"));
    let own = stored_zip(&with_mark(folder("sample")));
    let mut ids = Vec::new();
    for (token, zip) in [(&q.token, &shared), (&q.token, &own), (&m.token, &shared)] {
        let r = upload(&app.base, token, zip.clone(), true).await;
        assert_eq!(r.status(), StatusCode::CREATED);
        ids.push(r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string());
    }
    for s in &ids {
        wait_final(&app.state, s, Duration::from_secs(120)).await;
    }
    let reviewer = app.user("rev@example.test", Role::Reviewer, "a long passphrase 1").await;
    let note = format!("{NAME} explained {MARK} well");
    app.state.db.add_human_score(&ids[1], "narrative", 2, &note, reviewer.id).await.unwrap();
    let mut calls = crate::meter::ledger(app, &id).await;
    for _ in 0..200 {
        if calls.iter().all(|c| c.status != 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        calls = crate::meter::ledger(app, &id).await;
    }
    assert_eq!(calls.len(), 1, "{calls:?}");
    let mut own_blobs = vec![sha(&own)];
    for c in &calls {
        own_blobs.extend(c.request_body_sha256.clone());
        own_blobs.extend(c.response_body_sha256.clone());
    }
    for b in &own_blobs {
        crate::transcripts::blob(app, b).await;
    }

    // The ATS sent this test: it hears what the hiring team released.
    let gh_key = "gh-erasure-key";
    let connection = app
        .state
        .db
        .create_ats_connection(gatehouse::db::NewAtsConnection {
            name: "Greenhouse",
            key_hash: &gatehouse::auth::password::token_hash(gh_key),
            results: gatehouse::db::ResultsRelease::Never,
            blind_review: false,
            deadline_days: 7,
            callback_hosts: &[],
            created_by: None,
        })
        .await
        .unwrap();
    app.state
        .db
        .create_ats_interview(gatehouse::db::NewAtsInterview {
            id: "gh-interview-1",
            connection_id: connection,
            assignment_id: &id,
            partner_test_id: "null-status",
            profile_url: Some("https://app.greenhouse.example/people/4242?q=marrowby"),
            callback_url: None,
        })
        .await
        .unwrap();
    let ats_status = async || -> Value {
        reqwest::Client::new()
            .get(app.url("/ats/greenhouse/test_status?partner_interview_id=gh-interview-1"))
            .basic_auth(gh_key, Some(""))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    };
    assert_eq!(ats_status().await["partner_status"], "complete");

    // The candidate's copy of everything: their details, both uploads,
    // the log of their red, their prompt; no score (results are never
    // released on this assignment).
    let r = reqwest::get(app.url(&format!("/c/{}/my-data.zip", q.token))).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "application/zip");
    let copy = unzip(&r.bytes().await.unwrap());
    let assignment: Value = serde_json::from_slice(&copy["assignment.json"]).unwrap();
    assert_eq!(
        (assignment["candidate_name"].as_str(), assignment["email"].as_str()),
        (Some(NAME), Some(EMAIL))
    );
    assert_eq!(copy[&format!("submissions/{}.zip", ids[1])], own);
    assert_eq!(copy[&format!("submissions/{}.zip", ids[0])], shared);
    let runs: Value = serde_json::from_slice(&copy["witness-runs.json"]).unwrap();
    assert_eq!(runs[0]["kind"], "red");
    assert!(runs[0]["log"].as_str().unwrap().contains("failed"), "{runs}");
    assert!(String::from_utf8_lossy(&copy["model-calls.json"]).contains(MARK));
    let subs: Value = serde_json::from_slice(&copy["submissions.json"]).unwrap();
    assert_eq!(subs.as_array().unwrap().len(), 2);
    assert!(subs[0].get("score").is_none() && subs[0].get("scorecard").is_none(), "{subs}");
    assert!(copy.contains_key("README.txt"));
    // Another candidate's link gives their own copy only.
    let ada = unzip(
        &reqwest::get(app.url(&format!("/c/{}/my-data.zip", m.token)))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    );
    assert!(!String::from_utf8_lossy(&ada["assignment.json"]).contains(NAME));

    // Before: the needles are there (the check can fire).
    let needles = [NAME, EMAIL, MARK, "people/4242?q=marrowby"];
    let mut with_blobs: Vec<&str> = needles.to_vec();
    with_blobs.extend(own_blobs.iter().map(String::as_str));
    let before = leftovers(&app.state.config.database_url, app.dir.path(), "", &with_blobs).await;
    for n in &with_blobs {
        assert!(
            before.iter().any(|l| l.contains(&format!("{n:?}"))),
            "{n} is found before the erasure"
        );
    }

    // Refused: a reviewer, no CSRF token, a confirmation that is not the email.
    let erase = app.url(&format!("/assignments/{id}/erase"));
    let (rev, rev_csrf) = signed_in(app, Role::Reviewer).await;
    let r = rev
        .post(&erase)
        .form(&[("csrf", rev_csrf.as_str()), ("confirm", EMAIL)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (admin, csrf) = signed_in(app, Role::Admin).await;
    let html = page(&admin, app.url(&format!("/assignments/{id}"))).await.text().await.unwrap();
    assert!(html.contains("erase-candidate"), "the admin sees the form");
    let r = admin.post(&erase).form(&[("confirm", EMAIL)]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = admin
        .post(&erase)
        .form(&[("csrf", csrf.as_str()), ("confirm", "someone@else")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("type the candidate's email"));
    assert!(app.state.db.assignment_by_id(&id).await.unwrap().unwrap().erased_at.is_none());

    // Erased.
    let r = admin
        .post(&erase)
        .form(&[("csrf", csrf.as_str()), ("confirm", EMAIL)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let left = leftovers(&app.state.config.database_url, app.dir.path(), "", &with_blobs).await;
    assert!(left.is_empty(), "left after the erasure:\n{}", left.join("\n"));
    for b in &own_blobs {
        assert!(!blob_path(app, b).exists(), "blob {b} removed");
    }
    // Ada keeps the zip she shares with them, and her graded submission.
    assert_eq!(std::fs::read(blob_path(app, &sha(&shared))).unwrap(), shared);
    let r = page(&admin, app.url(&format!("/submissions/{}", ids[2]))).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(app.state.db.submissions_of(&m.assignment).await.unwrap().len(), 1);

    // The record and the tombstone.
    let e = app.state.db.erasure_of(&id).await.unwrap().expect("an erasure record");
    assert_eq!((e.submissions, e.witness_runs, e.model_calls), (2, 1, calls.len() as i64));
    assert_eq!(e.blobs_removed, own_blobs.len() as i64);
    assert!(e.bytes_removed > own.len() as i64);
    assert_eq!((e.reason.as_str(), e.actor.starts_with("user:")), ("request", true));
    assert!(e.final_decision.is_some() && e.final_score.is_some(), "{e:?}");
    let audit = app.state.db.audit_entries(Some(&format!("assignment:{id}")), 100).await.unwrap();
    let record = audit.iter().find(|a| a.action == "candidate.erase").expect("audited");
    assert!(record.detail.contains("2 submission(s)"), "{}", record.detail);
    assert!(audit.iter().any(|a| a.action == "assignment.create" && a.detail == "[erased]"));
    let html = page(&admin, app.url(&format!("/assignments/{id}"))).await.text().await.unwrap();
    assert!(html.contains("erased-notice") && !html.contains("erase-candidate"), "{html}");
    let r =
        admin.post(&erase).form(&[("csrf", csrf.as_str()), ("confirm", "")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT, "erased once");
    let csv =
        page(&admin, app.url("/packets/null-status/scorecards.csv")).await.text().await.unwrap();
    let line = csv.lines().find(|l| l.starts_with(&id)).expect("the erased row");
    assert!(
        line.contains(",erased,,,erased,") && line.contains(e.final_decision.as_deref().unwrap()),
        "{line}"
    );
    let html = page(&admin, app.url("/admin/retention")).await.text().await.unwrap();
    assert!(html.contains(&id) && html.contains("2 submission(s)"), "{html}");

    // The retention forms: refused without CSRF or with a bad number; the
    // packet's own setting lists Ada's assignment as due at its deadline.
    let global = app.url("/admin/retention");
    let r = admin.post(&global).form(&[("days", "30")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    for bad in ["thirty", "-1", "3651"] {
        let r = admin
            .post(&global)
            .form(&[("csrf", csrf.as_str()), ("days", bad)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
        assert!(r.text().await.unwrap().contains("whole number of days"));
    }
    let r =
        admin.post(&global).form(&[("csrf", csrf.as_str()), ("days", "30")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(gatehouse::erasure::global_retention(&app.state).await.unwrap(), Some(30));
    let packet = app.url("/admin/retention/packets/null-status");
    let r =
        admin.post(&packet).form(&[("csrf", csrf.as_str()), ("days", "0")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = admin
        .post(app.url("/admin/retention/packets/no-such-packet"))
        .form(&[("csrf", csrf.as_str()), ("days", "0")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let html = page(&admin, app.url("/admin/retention")).await.text().await.unwrap();
    let due = &html[html.find("due-erasures").unwrap()..];
    assert!(due[..due.find("</table>").unwrap()].contains(&m.assignment), "{due}");
    assert!(html.contains("erased at the deadline"), "{html}");
    let r = page(&rev, app.url("/admin/retention")).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // The ATS learns that, and nothing else (#46: as the README says).
    assert_eq!(ats_status().await, serde_json::json!({ "partner_status": "erased" }));

    // Their link says so; it takes nothing more; the model key is dead.
    let r = reqwest::get(app.url(&format!("/c/{}", q.token))).await.unwrap();
    assert_eq!(r.status(), StatusCode::GONE);
    assert!(r.text().await.unwrap().contains("Your data was erased"));
    let r = reqwest::get(app.url(&format!("/c/{}/my-data.zip", q.token))).await.unwrap();
    assert_eq!(r.status(), StatusCode::GONE);
    let r = upload(&app.base, &q.token, own.clone(), true).await;
    assert_eq!(r.status(), StatusCode::GONE);
    let (status, _) = call(app, &key, &chat("again")).await;
    assert_eq!(status, 401);
    let left = leftovers(&app.state.config.database_url, app.dir.path(), "", &with_blobs).await;
    assert!(left.is_empty(), "left after their link was tried:\n{}", left.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retention_sweep_erases_after_the_deadline_and_the_log_never_named_them() {
    use crate::children::Server;
    use crate::ops::{Uploaded, publish_soak_packet, upload_answer, wait_all_final};
    let tmp = tempfile::tempdir().unwrap();
    let env = [("GATEHOUSE_SWEEP_SECS", "1"), ("RUST_LOG", "debug")];
    let (settings, state) = crate::restart::over(tmp.path(), 2, &env).await;
    let version = publish_soak_packet(&state).await;
    let url = settings.database_url.clone();
    let mut invited = Vec::new();
    for (name, email) in [(NAME, EMAIL), ("Kept Person", "kept.person@example.org")] {
        let i = invites::create(
            &state,
            None,
            Invite {
                slug: &version.slug,
                candidate_name: name,
                email,
                deadline: None,
                time_box_secs: None,
            },
        )
        .await
        .unwrap();
        invited.push(i);
    }
    // A deadline near i64::MAX would overflow the sweep's deadline + days
    // on Postgres (and fail it for everyone): refused at the invite.
    let far = invites::create(
        &state,
        None,
        Invite {
            slug: &version.slug,
            candidate_name: "Far Away",
            email: "far@example.org",
            deadline: Some(i64::MAX - 1),
            time_box_secs: None,
        },
    )
    .await;
    let Err(e) = far else { panic!("a deadline at the end of time was accepted") };
    assert!(e.to_string().contains("after the year 9999"), "{e}");
    let mut server = Server::new(settings, 1, tmp.path().join("serve.log"));
    server.start().await;
    let zip = stored_zip(&[
        ("answer.txt".into(), b"42\n".to_vec()),
        ("NOTES.md".into(), format!("{MARK}\n").into_bytes()),
    ]);
    let mut ids = Vec::new();
    for (i, z) in invited.iter().zip([zip.clone(), crate::ops::answer_zip(true, "kept")]) {
        match upload_answer(&server.base(), &i.token, z).await {
            Uploaded::Accepted(id) => ids.push(id),
            Uploaded::Refused(s, why) => panic!("upload refused: {s} {why}"),
            Uploaded::Unreachable(e) => panic!("upload: {e}"),
        }
    }
    wait_all_final(&state, &ids, Duration::from_secs(120)).await;
    // A week's global retention and none of the packet's own: both are
    // listed as due a week after their deadlines. Then the packet keeps 2
    // days (the packet's setting wins).
    state.db.set_setting(gatehouse::db::RETENTION_SETTING, "7").await.unwrap();
    let global = gatehouse::erasure::global_retention(&state).await.unwrap();
    let due = state.db.due_erasures(global, i64::MAX, 10).await.unwrap();
    assert_eq!(due.len(), 2, "{due:?}");
    assert!(state.db.set_packet_retention(&version.slug, Some(2)).await.unwrap());
    // Their deadline was three days ago; the other's is still ahead.
    let past = gatehouse::now_ms() - 3 * 86_400_000;
    crate::support::raw_exec(
        &url,
        "UPDATE assignments SET deadline = ? WHERE id = ?",
        &[crate::support::Arg::I(past), crate::support::Arg::T(&invited[0].assignment.id)],
    )
    .await;
    let due = state.db.due_erasures(global, gatehouse::now_ms(), 10).await.unwrap();
    assert_eq!(
        due.iter().map(|d| d.assignment_id.as_str()).collect::<Vec<_>>(),
        [invited[0].assignment.id.as_str()]
    );
    assert_eq!(due[0].days, 2);
    let start = std::time::Instant::now();
    while state.db.erasure_of(&invited[0].assignment.id).await.unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "erased by the server's sweep");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let e = state.db.erasure_of(&invited[0].assignment.id).await.unwrap().unwrap();
    assert_eq!(
        (e.reason.as_str(), e.actor.as_str(), e.submissions),
        ("retention", "system:retention", 1)
    );
    let kept = state.db.assignment_by_id(&invited[1].assignment.id).await.unwrap().unwrap();
    assert!(kept.erased_at.is_none() && kept.candidate_name == "Kept Person");
    assert_eq!(state.db.submissions_of(&kept.id).await.unwrap().len(), 1);
    // The server logs the erasure after its transaction commits: on a
    // loaded machine the line can follow the record by a moment.
    let start = std::time::Instant::now();
    while !server.log_text().contains("candidate data erased") {
        assert!(start.elapsed() < Duration::from_secs(30), "the log says an erasure happened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = server.log_text();
    let zip_sha = sha(&zip);
    let needles = [NAME, EMAIL, MARK, zip_sha.as_str()];
    let left = leftovers(&url, tmp.path(), &log, &needles).await;
    // The test's own copies of the log are the log itself: checked above
    // line by line.
    let left: Vec<_> = left.into_iter().filter(|l| !l.contains("serve.log")).collect();
    assert!(left.is_empty(), "left after the retention sweep:\n{}", left.join("\n"));
    server.kill9();
}
