//! Signed webhooks (#31, part 3) end to end: the admin page adds an
//! endpoint, real gradings and a reviewer's score raise the events, the
//! server's deliverer posts them, and a receiver of the test's own checks
//! every one with the official `standardwebhooks` package from PyPI
//! (`webhook_receiver.py`). A receiver that refuses the signature, one that
//! is down, and a server killed between two attempts each still end in
//! exactly one verified delivery per event.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gatehouse::db::{ResultsRelease, Role};
use reqwest::StatusCode;
use serde_json::Value;

use crate::auth::{page, signed_in};
use crate::candidate::{publish_packet, sample_zip, upload, wait_final};
use crate::support::{TestApp, repo_root};

/// `webhook_receiver.py` on a port of 127.0.0.1, killed when dropped.
struct Receiver {
    child: Child,
    port: u16,
    log: PathBuf,
    secret: PathBuf,
}

impl Receiver {
    /// Starts it on `port` (0: any) with `secret`, answering 503 to the
    /// first `fail_first` deliveries that verify.
    fn start(dir: &Path, port: u16, secret: &str, fail_first: usize) -> Receiver {
        use std::io::BufRead;
        let log = dir.join(format!("received-{port}.jsonl"));
        let secret_file = dir.join(format!("secret-{port}"));
        std::fs::write(&secret_file, secret).unwrap();
        let mut child = Command::new(crate::support::tool("python3"))
            .arg(repo_root().join("server/tests/web/webhook_receiver.py"))
            .args(["--port", &port.to_string(), "--fail-first", &fail_first.to_string()])
            .arg("--secret-file")
            .arg(&secret_file)
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("webhook_receiver.py on the tools' python");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line
            .strip_prefix("listening ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the receiver did not start: {line:?} (is standardwebhooks installed? scripts/setup installs it)"));
        Receiver { child, port, log, secret: secret_file }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn set_secret(&self, secret: &str) {
        std::fs::write(&self.secret, secret).unwrap();
    }

    /// Every request it took, in order.
    fn taken(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The requests it verified and accepted (200), by `webhook-id`.
    fn accepted(&self) -> BTreeMap<String, Vec<Value>> {
        let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for t in self.taken().into_iter().filter(|t| t["answered"] == 200) {
            assert_eq!(t["verified"], true, "{t}");
            out.entry(t["id"].as_str().unwrap().to_string()).or_default().push(t);
        }
        out
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn until(limit: Duration, what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every delivery is recorded as delivered: a receiver has an
/// event before the deliverer has read its answer and written it down.
async fn every_delivery_recorded(app: &TestApp) {
    until(Duration::from_secs(20), "every delivery recorded as delivered", async || {
        let all = app.state.db.recent_webhook_deliveries(100).await.unwrap();
        !all.is_empty() && all.iter().all(|d| d.state == "delivered")
    })
    .await;
}

const EVENTS: [&str; 4] =
    ["submission.received", "submission.graded", "submission.scored", "results.released"];

#[tokio::test]
async fn events_are_signed_verified_retried_and_redelivered() {
    let app = TestApp::spawn_with(|c| {
        c.webhook_poll_ms = 50;
        c.webhook_retry_base_ms = 100;
        c.webhook_max_attempts = 1000;
    })
    .await;
    let deliverer = gatehouse::webhooks::spawn(app.state.clone());
    let tmp = tempfile::tempdir().unwrap();
    // The receiver starts with a secret that is not the endpoint's.
    let hook = Receiver::start(tmp.path(), 0, &gatehouse::webhooks::new_secret(), 0);
    let (admin, csrf) = signed_in(&app, Role::Admin).await;
    let add = |form: Vec<(&'static str, String)>| {
        let admin = admin.clone();
        let url = app.url("/admin/webhooks");
        async move { admin.post(url).form(&form).send().await.unwrap() }
    };
    let mut form: Vec<(&str, String)> = vec![("url", hook.url())];
    form.extend(EVENTS.map(|e| ("events", e.to_string())));

    // Refused: no CSRF token, a URL that is not http(s), no event.
    assert_eq!(add(form.clone()).await.status(), StatusCode::FORBIDDEN);
    let mut with_csrf = form.clone();
    with_csrf.push(("csrf", csrf.clone()));
    let mut bad = with_csrf.clone();
    bad[0].1 = "ftp://127.0.0.1/hook".into();
    let r = add(bad).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("only http and https"));
    let r = add(vec![("url", hook.url()), ("csrf", csrf.clone())]).await;
    assert!(r.text().await.unwrap().contains("choose at least one event"));
    assert!(app.state.db.list_webhook_endpoints().await.unwrap().is_empty());

    // Added: its secret is shown once.
    assert_eq!(add(with_csrf).await.status(), StatusCode::SEE_OTHER);
    let html = page(&admin, app.url("/admin/webhooks")).await.text().await.unwrap();
    let secret = html
        .split("<code class=\"webhook-secret\">")
        .nth(1)
        .expect("the new secret is shown")
        .split('<')
        .next()
        .unwrap()
        .to_string();
    assert!(secret.starts_with("whsec_"), "{secret}");
    let again = page(&admin, app.url("/admin/webhooks")).await.text().await.unwrap();
    assert!(!again.contains(&secret), "the secret is shown only once");

    // A candidate's submission is graded; results go out immediately.
    publish_packet(&app.state).await;
    let invited = crate::candidate::invite(&app.state, "Ada Lovelace").await;
    let aid = invited.assignment.id.clone();
    app.state.db.set_assignment_policy(&aid, ResultsRelease::Immediately, 10).await.unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let workers = gatehouse::queue::spawn_workers_until(&app.state, 1, stopped);
    let r = upload(&app.base, &invited.token, sample_zip(), true).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let sid = app.state.db.submissions_of(&aid).await.unwrap()[0].id.clone();

    // The wrong secret: the verifier refuses, the delivery is kept and
    // tried again, and the admin page shows the receiver's answer.
    until(Duration::from_secs(20), "a refused delivery", async || {
        hook.taken().iter().any(|t| t["verified"] == false && t["answered"] == 400)
    })
    .await;
    // The receiver logs before it answers: the page shows the answer once
    // the deliverer has recorded it.
    let mut html = String::new();
    until(Duration::from_secs(20), "the refusal on the admin page", async || {
        html = page(&admin, app.url("/admin/webhooks")).await.text().await.unwrap();
        html.contains("invalid signature")
    })
    .await;
    assert!(html.contains("invalid signature"), "{html}");
    assert!(hook.accepted().is_empty());

    // The right secret: every event arrives, verified.
    hook.set_secret(&secret);
    let graded = wait_final(&app.state, &sid, Duration::from_secs(120)).await;
    assert_eq!(graded.state.as_str(), "graded", "{:?}", graded.error);
    stop.send(true).unwrap();
    for w in workers {
        w.await.unwrap();
    }
    let want = ["submission.received", "submission.graded", "results.released"];
    until(Duration::from_secs(30), "three events delivered", async || {
        hook.accepted().len() == want.len()
    })
    .await;
    // The receiver has the events before the deliverer has its answers.
    every_delivery_recorded(&app).await;
    let accepted = hook.accepted();
    let mut types: Vec<&str> =
        accepted.values().map(|v| v[0]["body"]["type"].as_str().unwrap()).collect();
    types.sort();
    let mut sorted = want.to_vec();
    sorted.sort();
    assert_eq!(types, sorted);
    let deliveries = app.state.db.recent_webhook_deliveries(100).await.unwrap();
    for d in &deliveries {
        assert_eq!(d.state, "delivered", "{d:?}");
        let got = &accepted[&d.message_id];
        assert_eq!(got.len(), 1, "delivered once: {got:?}");
        let body = &got[0]["body"];
        assert_eq!(body["type"], d.event.as_str());
        assert_eq!(body["data"]["submission_id"], sid.as_str());
        assert_eq!(body["data"]["assignment_id"], aid.as_str());
        // Identifiers and links only: no score, name or email.
        let text = body.to_string();
        for private in ["score", "Ada", "Lovelace", "@"] {
            assert!(!text.contains(private), "{private} in {text}");
        }
    }
    let graded_event = deliveries.iter().find(|d| d.event == "submission.graded").unwrap();
    assert_eq!(accepted[&graded_event.message_id][0]["body"]["data"]["state"], "graded");
    let received = deliveries.iter().find(|d| d.event == "submission.received").unwrap();
    assert!(received.attempts >= 2, "refused first, then delivered: {received:?}");

    // A reviewer's score: submission.scored, and no second release (the
    // grading released the results already).
    let r = admin
        .post(app.url(&format!("/submissions/{sid}/human")))
        .form(&[
            ("csrf", csrf.as_str()),
            ("criterion", "narrative"),
            ("level", "2"),
            ("reason", "Names the blanks."),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    until(Duration::from_secs(20), "the score event", async || hook.accepted().len() == 4).await;
    let scored = app.state.db.recent_webhook_deliveries(1).await.unwrap().remove(0);
    assert_eq!(scored.event, "submission.scored");
    assert_eq!(hook.accepted()[&scored.message_id][0]["body"]["data"]["criterion"], "narrative");

    // Redeliver: the same webhook-id again, verified again; CSRF-checked.
    let redeliver = app.url(&format!("/admin/webhooks/deliveries/{}/redeliver", received.id));
    let r = admin.post(&redeliver).form(&[("csrf", "forged")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = admin.post(&redeliver).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    until(Duration::from_secs(20), "the redelivery", async || {
        hook.accepted().get(&received.message_id).map(Vec::len) == Some(2)
    })
    .await;
    assert_eq!(hook.accepted().len(), 4, "no other event was posted again");
    every_delivery_recorded(&app).await;

    // Disabled: no more events reach it.
    let endpoint = app.state.db.list_webhook_endpoints().await.unwrap()[0].id;
    let r = admin
        .post(app.url(&format!("/admin/webhooks/{endpoint}/disable")))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let now = gatehouse::now_ms();
    let queued = app.state.db.queue_webhook_event("msg_after", EVENTS[0], "{}", now).await.unwrap();
    assert_eq!(queued, 0);
    let audit = app.state.db.audit_entries(None, 50).await.unwrap();
    for action in
        ["webhook.endpoint.create", "webhook.delivery.redeliver", "webhook.endpoint.disable"]
    {
        assert!(audit.iter().any(|e| e.action == action), "{action} audited");
    }
    deliverer.abort();

    // The sweep keeps ended deliveries `webhook_keep_days`, then removes
    // them; a pending one stays whatever its age.
    let swept = gatehouse::sweep::run(&app.state, gatehouse::sweep::Role::Server).await;
    assert_eq!(swept.webhook_deliveries, 0, "kept 30 days");
    let url = &app.state.config.database_url;
    let month = crate::support::Arg::I(31 * 86_400_000);
    crate::support::raw_exec(
        url,
        "UPDATE webhook_deliveries SET created_at = created_at - ?",
        &[month],
    )
    .await;
    let first = deliveries.last().unwrap().id;
    let pending = "UPDATE webhook_deliveries SET state = 'pending' WHERE id = ?";
    crate::support::raw_exec(url, pending, &[crate::support::Arg::I(first)]).await;
    let swept = gatehouse::sweep::run(&app.state, gatehouse::sweep::Role::Server).await;
    assert_eq!(swept.webhook_deliveries, 3);
    let left = app.state.db.recent_webhook_deliveries(100).await.unwrap();
    assert_eq!(left.iter().map(|d| d.id).collect::<Vec<_>>(), vec![first]);
}

/// A receiver that is down while the server is killed between two
/// attempts: once both are back, each event is delivered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_survives_a_restart_and_reaches_a_receiver_that_was_down() {
    use crate::children::{Server, free_port};
    use crate::ops::{Uploaded, answer_zip, publish_soak_packet, soak_assignments, upload_answer};
    let tmp = tempfile::tempdir().unwrap();
    let env = [
        ("GATEHOUSE_WEBHOOK_POLL_MS", "100"),
        ("GATEHOUSE_WEBHOOK_RETRY_BASE_MS", "200"),
        ("GATEHOUSE_WEBHOOK_MAX_ATTEMPTS", "1000"),
    ];
    let (settings, state) = crate::restart::over(tmp.path(), 2, &env).await;
    publish_soak_packet(&state).await;
    let assignment = soak_assignments(&state, &settings.database_url, 1, 5).await.remove(0);
    let port = free_port();
    let secret = gatehouse::webhooks::new_secret();
    let url = format!("http://127.0.0.1:{port}/hook");
    state.db.create_webhook_endpoint(&url, &secret, &EVENTS.join(" "), None).await.unwrap();
    let mut server = Server::new(settings, 1, tmp.path().join("serve.log"));
    server.start().await;
    let id = match upload_answer(&server.base(), &assignment.token, answer_zip(true, "w")).await {
        Uploaded::Accepted(id) => id,
        Uploaded::Refused(status, why) => panic!("upload refused: {status} {why}"),
        Uploaded::Unreachable(e) => panic!("upload: {e}"),
    };
    // Graded while the receiver is down: its deliveries are tried and kept.
    crate::ops::wait_all_final(&state, std::slice::from_ref(&id), Duration::from_secs(120)).await;
    until(Duration::from_secs(30), "two failed attempts of each delivery", async || {
        let d = state.db.recent_webhook_deliveries(100).await.unwrap();
        d.len() >= 2 && d.iter().all(|d| d.attempts >= 2 && d.state == "pending")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(25)).await;
    server.kill9();
    let pending = state.db.recent_webhook_deliveries(100).await.unwrap();
    assert!(pending.iter().all(|d| d.state == "pending" && d.last_status.is_none()), "{pending:?}");
    assert!(pending.iter().any(|d| d.event == "submission.received"), "{pending:?}");
    assert!(pending.iter().any(|d| d.event == "submission.graded"), "{pending:?}");

    let hook = Receiver::start(tmp.path(), port, &secret, 0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(hook.taken().is_empty(), "nothing is posted while the server is down");
    server.start().await;
    // The backoff kept its schedule over the restart: a delivery tried many
    // times while the grading ran (a loaded machine) is due late, so the wait
    // runs from the latest due time, not from now.
    let due = pending.iter().map(|d| d.next_attempt_at).max().unwrap();
    let late = Duration::from_millis((due - gatehouse::now_ms()).max(0) as u64);
    assert!(late < Duration::from_secs(300), "a retry is due {late:?} out: {pending:?}");
    until(late + Duration::from_secs(30), "every delivery delivered", async || {
        let d = state.db.recent_webhook_deliveries(100).await.unwrap();
        d.iter().all(|d| d.state == "delivered")
    })
    .await;
    // Several rounds of the deliverer later, still once each.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let accepted = hook.accepted();
    assert_eq!(hook.taken().len(), pending.len(), "{:?}", hook.taken());
    for d in &pending {
        let got = accepted.get(&d.message_id).unwrap_or_else(|| panic!("{d:?} delivered"));
        assert_eq!(got.len(), 1, "exactly once: {got:?}");
        assert_eq!(got[0]["body"]["data"]["submission_id"], id.as_str());
    }
}
