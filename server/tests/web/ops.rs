//! Helpers of the operations tests (#29: restarts, disk full, backups, the
//! soak): a packet that grades in a fraction of a second, so hundreds of
//! real gradings fit a test's time; uploads from a client; the checks an
//! operator makes afterwards (every receipt verifies, every scorecard
//! renders, every accepted submission graded exactly once).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use app::contract::JobKind;
use gatehouse::db::{NewVersion, PacketVersion, Role, Submission};
use gatehouse::invites::{self, Invite, Invited};
use gatehouse::state::AppState;

use crate::candidate::zip_of;

pub const SOAK_SLUG: &str = "soak-answer";

/// The packet: one replayed step (`grep`: is the answer 42?), a failure
/// when it is not, a criterion lowered by it, two bands. A sample and a
/// starter, so the grader can calibrate.
const PACKET_TOML: &str = r#"
[packet]
slug = "soak-answer"
version = "1.0.0"
title = "Soak: the answer"

[budgets]
time_box_minutes = 60

[limits]
wall_secs = 20

[commands]
test = "grep -q 42 answer.txt"

[[step]]
id = "answer"
title = "The answer file says 42"
run = "{RUN}"

[[criterion]]
id = "answer"
title = "The answer"
max = 1
mode = "auto"
levels = ["wrong", "right"]

[[band]]
min = 1
decision = "advance"

[[band]]
min = 0
decision = "close"

[[failure]]
id = "wrong-answer"
title = "The answer is not 42"
description = "the replayed step's grep failed"
effect = { criterion = "answer", set = 0 }
detect = { kind = "exit", step = "answer", not_equals = 0 }
"#;

/// Writes the soak packet into the app's library folder and publishes it
/// (as `support::publish_copy` does for a built-in).
pub async fn publish_soak_packet(state: &AppState) -> PacketVersion {
    publish_soak_packet_running(state, "grep -q 42 answer.txt").await
}

/// [`publish_soak_packet`] whose replayed step runs `run` (shell text
/// without double quotes), e.g. slower.
pub async fn publish_soak_packet_running(state: &AppState, run: &str) -> PacketVersion {
    let rel = format!("packets/{SOAK_SLUG}/v1/{SOAK_SLUG}");
    let toml = PACKET_TOML.replace("{RUN}", run);
    let dir = state.config.data_dir.join(&rel);
    for (path, body) in [
        ("packet.toml", toml.as_str()),
        ("prompt.md", "Write the answer in answer.txt.\n"),
        ("starter/answer.txt", "0\n"),
        ("sample/answer.txt", "42\n"),
    ] {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    let packet = grader::packet::Packet::load(&dir).expect("the soak packet loads");
    gatehouse::library::keep_archive(state, &dir, &packet.digest).await.expect("archived");
    state
        .db
        .create_version(NewVersion {
            slug: SOAK_SLUG,
            title: &packet.manifest.packet.title,
            builtin: false,
            dir: &rel,
            digest: &packet.digest,
            created_by: None,
            publish: true,
        })
        .await
        .unwrap()
}

/// `n` assignments of the soak packet, each taking up to `per` submissions
/// with no pending limit of its own.
pub async fn soak_assignments(state: &AppState, url: &str, n: usize, per: i64) -> Vec<Invited> {
    let mut out = Vec::new();
    for i in 0..n {
        let name = format!("Soak {i}");
        let invited = invites::create(
            state,
            None,
            Invite {
                slug: SOAK_SLUG,
                candidate_name: &name,
                email: &format!("soak{i}@example.com"),
                deadline: None,
                time_box_secs: None,
            },
        )
        .await
        .unwrap();
        crate::support::raw_exec(
            url,
            "UPDATE assignments SET max_submissions = ? WHERE id = ?",
            &[crate::support::Arg::I(per), crate::support::Arg::T(&invited.assignment.id)],
        )
        .await;
        out.push(invited);
    }
    out
}

/// A distinct submission zip: right or wrong answer, and a note making it
/// unique (its own blob).
pub fn answer_zip(right: bool, note: &str) -> Vec<u8> {
    let answer: &[u8] = if right { b"42\n" } else { b"41\n" };
    zip_of(&[("answer.txt", answer), ("NOTES.md", note.as_bytes())])
}

/// What an upload through the candidate form answered.
pub enum Uploaded {
    Accepted(String),
    /// Refused with this status and message (nothing was accepted).
    Refused(u16, String),
    /// The connection failed (the server was down).
    Unreachable(String),
}

pub async fn upload_answer(base: &str, token: &str, zip: Vec<u8>) -> Uploaded {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let r = client
        .post(format!("{base}/c/{token}/submit"))
        .header("accept", "application/json")
        .multipart(crate::candidate::form(zip))
        .send()
        .await;
    match r {
        Err(e) => Uploaded::Unreachable(e.to_string()),
        Ok(r) => {
            let status = r.status().as_u16();
            let body: serde_json::Value = r.json().await.unwrap_or_default();
            if status == 201 {
                Uploaded::Accepted(body["id"].as_str().unwrap().to_string())
            } else {
                Uploaded::Refused(status, body["error"].as_str().unwrap_or_default().to_string())
            }
        }
    }
}

/// Waits until none of `ids` is queued or grading; their submissions.
pub async fn wait_all_final(
    state: &AppState,
    ids: &[String],
    limit: Duration,
) -> BTreeMap<String, Submission> {
    let start = Instant::now();
    loop {
        let mut out = BTreeMap::new();
        let mut open = Vec::new();
        for id in ids {
            let s = state.db.submission_by_id(id).await.unwrap().expect("an accepted submission");
            if !s.state.is_final() {
                open.push(format!("{id}: {}", s.state));
            }
            out.insert(id.clone(), s);
        }
        if open.is_empty() {
            return out;
        }
        assert!(
            start.elapsed() < limit,
            "{} submissions not final after {limit:?}: {:?}",
            open.len(),
            &open[..open.len().min(10)]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The receipt of a graded submission verifies: its digest is the SHA-256
/// of the rest (recomputed), and it names the stored zip's SHA-256.
pub fn receipt_verifies(s: &Submission) -> Result<(), String> {
    let json = s.receipt_json.as_deref().ok_or("no receipt")?;
    let receipt: grader::grade::Receipt =
        serde_json::from_str(json).map_err(|e| format!("the receipt does not parse: {e}"))?;
    let digest = grader::grade::receipt_digest(&receipt);
    if digest != receipt.digest {
        return Err(format!("digest {} recomputed as {digest}", receipt.digest));
    }
    let sha = &receipt.submission.archive_sha256;
    if *sha != s.blob_sha256 {
        return Err(format!("the receipt names zip {sha}, the submission {}", s.blob_sha256));
    }
    Ok(())
}

/// Every accepted submission was graded exactly once: graded, one `grade`
/// job, done. Returns the attempts each job took (over 1: claimed again
/// after its worker died).
pub async fn graded_exactly_once(
    state: &AppState,
    subs: &BTreeMap<String, Submission>,
) -> BTreeMap<String, i64> {
    let mut attempts = BTreeMap::new();
    for (id, s) in subs {
        assert_eq!(s.state.as_str(), "graded", "{id}: {:?} {:?}", s.state, s.error);
        let jobs = state.db.jobs_for(JobKind::Grade, id).await.unwrap();
        assert_eq!(jobs.len(), 1, "{id}: one grade job: {jobs:?}");
        assert_eq!(jobs[0].state.as_str(), "done", "{id}: {jobs:?}");
        attempts.insert(id.clone(), jobs[0].attempts);
        if let Err(e) = receipt_verifies(s) {
            panic!("{id}: the receipt does not verify: {e}");
        }
    }
    attempts
}

/// A reviewer's client signed in on the server at `base`.
pub async fn reviewer_at(state: &AppState, base: &str) -> reqwest::Client {
    const PASSWORD: &str = "correct horse battery";
    let email = "ops-reviewer@example.test";
    if state.db.user_by_email(email).await.unwrap().is_none() {
        let hash = gatehouse::auth::password::hash_async(PASSWORD.into()).await.unwrap();
        state
            .db
            .create_user(gatehouse::db::NewUser {
                email,
                name: "Ops",
                role: Role::Reviewer,
                password_hash: &hash,
            })
            .await
            .unwrap();
    }
    let client = crate::support::TestApp::client();
    let html = crate::auth::page(&client, format!("{base}/login")).await.text().await.unwrap();
    let csrf = crate::auth::csrf_of(&html);
    let r = client
        .post(format!("{base}/login"))
        .form(&[("csrf", csrf.as_str()), ("email", email), ("password", PASSWORD), ("next", "/")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
    client
}

/// The scorecard page of `s` renders (200, names its decision).
pub async fn scorecard_renders(client: &reqwest::Client, base: &str, s: &Submission) {
    let r = crate::auth::page(client, format!("{base}/submissions/{}", s.id)).await;
    assert_eq!(r.status(), 200, "the scorecard of {}", s.id);
    let html = r.text().await.unwrap();
    let decision = s.decision.as_deref().unwrap_or("?");
    assert!(html.contains(decision), "the scorecard of {} shows {decision}", s.id);
}
