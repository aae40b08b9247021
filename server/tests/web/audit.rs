//! "Audit the hidden tests" on a packet version's page: the audit runs as
//! an `audit` job (real worker, real sandbox) on a draft of the built-in
//! token-bucket packet, its live status goes queued → running → done, the
//! result is kept with the version (and shown after publish), a mutant is
//! kept as `mutants/audit/<id>.diff` of the draft, and model mode calls a fake
//! OpenAI-format upstream started here, every call a row of the author
//! ledger, within the audit's call cap.

use std::time::{Duration, Instant};

use gatehouse::db::{Role, VersionState};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::auth::{page, signed_in};
use crate::support::{TestApp, publish_copy_with};

/// A draft of token-bucket made from a published copy, as an author makes
/// one ("Edit as new draft"); returns its version id.
async fn draft_of_token_bucket(app: &TestApp, client: &reqwest::Client, csrf: &str) -> i64 {
    // Without the packet's list of explained survivors, so the audit below
    // finds a plain survivor to keep.
    let published = publish_copy_with(&app.state, "token-bucket", "builtin", |dir| {
        let _ = std::fs::remove_file(dir.join("mutants/EQUIVALENT.md"));
    })
    .await;
    let r = client
        .post(app.url(&format!("/packets/token-bucket/versions/{}/draft", published.id)))
        .form(&[("csrf", csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    r.headers()["location"].to_str().unwrap().rsplit_once("version=").unwrap().1.parse().unwrap()
}

async fn start(
    app: &TestApp,
    client: &reqwest::Client,
    draft: i64,
    form: &[(&str, &str)],
) -> reqwest::Response {
    client
        .post(app.url(&format!("/packets/token-bucket/versions/{draft}/audit")))
        .form(form)
        .send()
        .await
        .unwrap()
}

async fn status(app: &TestApp, client: &reqwest::Client, draft: i64, audit: i64) -> Value {
    let r = client
        .get(app.url(&format!("/packets/token-bucket/versions/{draft}/audits/{audit}/status")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

/// Polls the status endpoint until the audit is done or failed; returns
/// `seen` followed by every new state seen, in order.
async fn follow(
    app: &TestApp,
    client: &reqwest::Client,
    draft: i64,
    audit: i64,
    mut seen: Vec<String>,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let s = status(app, client, draft, audit).await["state"].as_str().unwrap().to_string();
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if s == "done" || s == "failed" {
            return seen;
        }
        assert!(Instant::now() < deadline, "the audit did not finish: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn audit_of(r: &reqwest::Response) -> i64 {
    r.headers()["location"].to_str().unwrap().rsplit_once("audit=").unwrap().1.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_audit_runs_as_a_job_is_kept_with_the_version_and_a_kept_survivor_fails_the_self_test()
 {
    let app = TestApp::spawn().await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let author = app.state.db.user_by_email("author@example.test").await.unwrap().unwrap();
    let draft = draft_of_token_bucket(&app, &client, &csrf).await;
    let form = [
        ("csrf", csrf.as_str()),
        ("mode", "rules"),
        ("mutants", "1"),
        ("functions", "_finite ManualClock"),
    ];

    // Refused: a wrong CSRF token, a reviewer, a model with no upstream, bad numbers.
    let mut forged = form;
    forged[0] = ("csrf", "not-the-token");
    assert_eq!(start(&app, &client, draft, &forged).await.status(), StatusCode::FORBIDDEN);
    let (reviewer, reviewer_csrf) = signed_in(&app, Role::Reviewer).await;
    let mut as_reviewer = form;
    as_reviewer[0] = ("csrf", reviewer_csrf.as_str());
    assert_eq!(start(&app, &reviewer, draft, &as_reviewer).await.status(), StatusCode::FORBIDDEN);
    let r = start(&app, &client, draft, &[("csrf", csrf.as_str()), ("mode", "model")]).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("no model upstream is configured for token-bucket"));
    let r = start(&app, &client, draft, &[("csrf", csrf.as_str()), ("mutants", "0")]).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("must be a whole number from 1 to 50"));
    let r = start(&app, &client, draft, &[("csrf", csrf.as_str()), ("functions", "os.system(1)")])
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        app.state.db.packet_audits_of(draft, 10).await.unwrap().is_empty(),
        "a refused request queues nothing"
    );
    assert!(app.state.db.jobs_for(app::contract::JobKind::Audit, "1").await.unwrap().is_empty());

    // Queued with no worker running: the page (JavaScript off) says so.
    let r = start(&app, &client, draft, &form).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let audit = audit_of(&r);
    assert_eq!(status(&app, &client, draft, audit).await["state"], "queued");
    let html = page(&client, app.url(&format!("/packets/token-bucket?version={draft}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("Audit the hidden tests")
            && html.contains("data-state=\"queued\"")
            && html.contains("Reload the page to see the result"),
        "{html}"
    );
    assert_eq!(
        start(&app, &client, draft, &form).await.status(),
        StatusCode::CONFLICT,
        "one audit of a version at a time"
    );
    let jobs =
        app.state.db.jobs_for(app::contract::JobKind::Audit, &audit.to_string()).await.unwrap();
    assert_eq!(jobs.len(), 1);

    // A worker takes the job: running, then done.
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let seen = follow(&app, &client, draft, audit, vec!["queued".to_string()]).await;
    assert_eq!(
        seen,
        ["queued", "running", "done"],
        "{:?}",
        app.state.db.packet_audit(audit).await.unwrap()
    );
    let row = app.state.db.packet_audit(audit).await.unwrap().unwrap();
    assert_eq!(
        (row.version_id, row.requested_by, row.mode.as_str(), row.functions.as_str(), row.mutants),
        (draft, Some(author.id), "rules", "_finite ManualClock", 1)
    );
    let report: Value = serde_json::from_str(row.report_json.as_deref().unwrap()).unwrap();
    assert_eq!(report["target"], "bucket.py");
    let mutants = report["mutants"].as_array().unwrap();
    assert_eq!(mutants.len(), 2, "{report:#}");
    let killed =
        mutants.iter().find(|m| m["outcome"] == "killed").unwrap_or_else(|| panic!("{report:#}"));
    let survived =
        mutants.iter().find(|m| m["outcome"] == "survived").unwrap_or_else(|| panic!("{report:#}"));
    assert!(
        killed["id"].as_str().unwrap().starts_with("rule-_finite-")
            && !killed["killed_by"].as_array().unwrap().is_empty()
    );
    assert!(survived["id"].as_str().unwrap().starts_with("rule-ManualClock-"));
    assert_eq!(
        report["counts"],
        json!({ "killed": 1, "survived": 1, "explained": 0, "crashed": 0, "invalid": 0 })
    );
    assert_eq!(status(&app, &client, draft, audit).await["counts"]["survived"], 1);
    assert!(app.state.db.audit_calls(audit).await.unwrap().is_empty(), "rules make no model calls");

    // The page shows the result: counts, each mutant's outcome, reason, diff and killers.
    let html = page(&client, app.url(&format!("/packets/token-bucket?version={draft}")))
        .await
        .text()
        .await
        .unwrap();
    let survivor = survived["id"].as_str().unwrap().to_string();
    assert!(html.contains("1 killed, 1 survived, 0 explained, 0 crashed, 0 invalid"), "{html}");
    assert!(html.contains(&survivor) && html.contains(killed["id"].as_str().unwrap()));
    assert!(html.contains("data-state=\"done\"") && html.contains("Keep as a packet mutant"));
    assert!(
        html.contains("class=\"diff\">--- a/bucket.py\n+++ b/bucket.py\n@@"),
        "the diff is shown: {html}"
    );
    assert!(
        html.contains(
            &survived["reason"]
                .as_str()
                .unwrap()
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        ),
        "the reason is shown"
    );
    assert!(html.contains("Killed by: "));

    // Keep the survivor: CSRF-checked, authors only, then the file is in the draft.
    let keep = format!("/packets/token-bucket/versions/{draft}/audits/{audit}/keep");
    let draft_row = app.state.db.version_by_id(draft).await.unwrap().unwrap();
    let diff_path = app
        .state
        .config
        .data_dir
        .join(&draft_row.dir)
        .join(format!("mutants/audit/{survivor}.diff"));
    let r = client
        .post(app.url(&keep))
        .form(&[("csrf", "forged"), ("mutant", survivor.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = reviewer
        .post(app.url(&keep))
        .form(&[("csrf", reviewer_csrf.as_str()), ("mutant", survivor.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = client
        .post(app.url(&keep))
        .form(&[("csrf", csrf.as_str()), ("mutant", "rule-nope-1-guard")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("the audit has no mutant of that id"));
    assert!(!diff_path.exists(), "nothing kept by a refused request");
    let r = client
        .post(app.url(&keep))
        .form(&[("csrf", csrf.as_str()), ("mutant", survivor.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    assert_eq!(std::fs::read_to_string(&diff_path).unwrap(), survived["diff"].as_str().unwrap());
    let html = page(&client, app.url(&format!("/packets/token-bucket?version={draft}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains(&format!("Kept as mutants/audit/{survivor}.diff")), "{html}");
    let r = client
        .post(app.url(&keep))
        .form(&[("csrf", csrf.as_str()), ("mutant", survivor.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST, "kept once");

    // The self-test now requires the hidden tests to kill it, and they do not.
    assert!(!gatehouse::library::run_check(&app.state, draft).await.unwrap());
    let checked = app.state.db.version_by_id(draft).await.unwrap().unwrap();
    let check: Value = serde_json::from_str(checked.check_report.as_deref().unwrap()).unwrap();
    let item = check["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| {
            i["name"].as_str().unwrap().contains(&format!("mutant audit/{survivor} is killed"))
        })
        .unwrap_or_else(|| panic!("{check:#}"));
    assert_eq!(item["ok"], false, "{item:#}");

    // Published, the version keeps its audit; nothing can be kept any more.
    // (The author would strengthen the hidden tests first; here the store
    // records a passing self-test of this very digest, as `run_check` does,
    // and publishes, as a passing check with a publish request does.)
    let digest = app.state.db.version_by_id(draft).await.unwrap().unwrap().digest;
    app.state
        .db
        .finish_check(draft, "passed", checked.check_report.as_deref().unwrap(), Some(&digest))
        .await
        .unwrap();
    assert!(app.state.db.publish(draft).await.unwrap());
    assert_eq!(
        app.state.db.version_by_id(draft).await.unwrap().unwrap().state,
        VersionState::Published
    );
    let html = page(&client, app.url(&format!("/packets/token-bucket?version={draft}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("1 killed, 1 survived, 0 explained, 0 crashed, 0 invalid")
            && !html.contains("Keep as a packet mutant"),
        "{html}"
    );
    let killed_id = killed["id"].as_str().unwrap();
    let r = client
        .post(app.url(&keep))
        .form(&[("csrf", csrf.as_str()), ("mutant", killed_id)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(r.text().await.unwrap().contains("published and cannot change"));
}

use crate::fake_openai::fake_upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_audit_calls_the_packets_upstream_within_its_cap_and_writes_the_author_ledger() {
    let (url, seen) = fake_upstream(|prompt| {
        assert!(prompt.contains("`_finite`"), "the first call is for _finite: {prompt}");
        json!([
            { "code": "def _finite(name: str, value: float, *, allow_zero: bool = True) -> float:\n    return float(value)\n", "fault": "accepts every value" },
            { "code": "def _finite(name: str, value: float, *, allow_zero: bool = True) -> float:\n    value = float(value)\n    return value\n", "fault": "no validation either" },
        ])
        .to_string()
    });
    let app = TestApp::spawn_with(|c| {
        c.model_upstreams.insert(
            "token-bucket".into(),
            gatehouse::config::ModelUpstream { url: url.clone(), key: Some("sk-test".into()) },
        );
        c.audit_max_calls = 4;
    })
    .await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let author = app.state.db.user_by_email("author@example.test").await.unwrap().unwrap();
    let draft = draft_of_token_bucket(&app, &client, &csrf).await;
    let html = page(&client, app.url(&format!("/packets/token-bucket?version={draft}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("the packet's model upstream"), "model mode is offered");

    // Above the configured cap is refused; one call of the two it would need is allowed.
    let r = start(
        &app,
        &client,
        draft,
        &[("csrf", csrf.as_str()), ("mode", "model"), ("max_calls", "5")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("must be a whole number from 1 to 4"));
    let form = [
        ("csrf", csrf.as_str()),
        ("mode", "model"),
        ("model", "fake-m"),
        ("mutants", "2"),
        ("functions", "_finite ManualClock"),
        ("max_calls", "1"),
        ("max_tokens", "5000"),
    ];
    let r = start(&app, &client, draft, &form).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let audit = audit_of(&r);
    let states = follow(&app, &client, draft, audit, Vec::new()).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("done"),
        "{:?}",
        app.state.db.packet_audit(audit).await.unwrap()
    );

    // One request reached the upstream, with the author's model name and key-less body.
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "the cap of one call holds: {requests:#?}");
    assert_eq!(requests[0]["body"]["model"], "fake-m");

    // The author ledger: the answered call and the one the cap refused.
    let calls = app.state.db.audit_calls(audit).await.unwrap();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let (a, b) = (&calls[0], &calls[1]);
    assert_eq!(
        (a.audit_id, a.version_id, a.author_id, a.n, a.function.as_str(), a.model.as_str()),
        (audit, draft, Some(author.id), 1, "_finite", "fake-m")
    );
    assert_eq!(
        (a.outcome.as_str(), a.status, a.prompt_tokens, a.completion_tokens, a.tokens_estimated),
        ("answered", Some(200), 100, 50, false)
    );
    assert!(
        a.request_bytes > 0
            && a.response_bytes > 0
            && a.started_at > 0
            && a.ended_at >= a.started_at
            && a.error.is_none(),
        "{a:?}"
    );
    assert_eq!(
        (b.n, b.function.as_str(), b.outcome.as_str(), b.status),
        (2, "ManualClock", "refused", None)
    );
    assert!(
        b.error.as_deref().unwrap().contains("the audit's cap of 1 model calls is reached"),
        "{b:?}"
    );

    let row = app.state.db.packet_audit(audit).await.unwrap().unwrap();
    let report: Value = serde_json::from_str(row.report_json.as_deref().unwrap()).unwrap();
    assert_eq!(report["mode"], "model");
    let ids: Vec<&str> =
        report["mutants"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["model-_finite-1", "model-_finite-2"]);
    assert_eq!(report["counts"]["killed"], 2, "{report:#}");
    assert!(
        report["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().contains("no mutants for ManualClock")),
        "{report:#}"
    );

    // The page shows the mutants and the ledger.
    let html = page(&client, app.url(&format!("/packets/token-bucket?version={draft}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("Author ledger")
            && html.contains("call call-answered")
            && html.contains("call call-refused"),
        "{html}"
    );
    assert!(
        html.contains("100 + 50")
            && html.contains("accepts every value")
            && html.contains("2 killed, 0 survived"),
        "{html}"
    );
}

/// The live status in a real headless Chromium: the audit's state pill
/// hydrates, follows the job (running), and the page reloads with the
/// result once it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_status_follows_live_in_a_browser_and_the_page_reloads_with_the_result() {
    let _one = crate::webdriver::exclusive().await;
    crate::browser::require_bundle();
    let app = TestApp::spawn().await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let draft = draft_of_token_bucket(&app, &client, &csrf).await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);

    let b = crate::webdriver::Browser::new(&app.base).await;
    b.goto("/login").await;
    b.fill("form[action^='/login'] input[name='email']", "author@example.test").await;
    b.fill("form[action^='/login'] input[name='password']", crate::auth::PASSWORD).await;
    b.click("form[action^='/login'] button[type='submit']").await;
    b.wait(".signout").await;
    b.goto(&format!("/packets/token-bucket?version={draft}")).await;
    b.fill(".audit-form input[name='mutants']", "1").await;
    b.fill(".audit-form input[name='functions']", "_finite").await;
    b.click(".audit-form button[type='submit']").await;
    b.wait("#live-state[data-hydrated='true']").await;
    b.wait_for("#live-state[data-state='running']", Duration::from_secs(60)).await;
    // Nobody reloads: the island does, once the audit is done.
    let counts = b.wait_for(".audit-counts", Duration::from_secs(600)).await;
    assert_eq!(
        counts.text().await.unwrap(),
        "1 killed, 0 survived, 0 explained, 0 crashed, 0 invalid"
    );
    assert_eq!(b.text("#live-state").await, "done");
    b.close().await;
}

/// An audit that cannot run is stored as failed with its reason, shown on
/// the page; the next one may start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_that_cannot_run_is_failed_with_its_reason() {
    let app = TestApp::spawn().await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let draft = draft_of_token_bucket(&app, &client, &csrf).await;
    let r = start(
        &app,
        &client,
        draft,
        &[("csrf", csrf.as_str()), ("mutants", "1"), ("functions", "no_such_function")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let audit = audit_of(&r);
    assert_eq!(
        follow(&app, &client, draft, audit, Vec::new()).await.last().map(String::as_str),
        Some("failed")
    );
    let row = app.state.db.packet_audit(audit).await.unwrap().unwrap();
    let error = row.error.unwrap();
    assert!(
        error.contains("no_such_function")
            && error.contains("has no top-level function or class of that name"),
        "{error}"
    );
    assert!(row.report_json.is_none());
    assert_eq!(status(&app, &client, draft, audit).await["error"], error.as_str());
    let html = page(&client, app.url(&format!("/packets/token-bucket?version={draft}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("data-state=\"failed\"")
            && html.contains("has no top-level function or class of that name"),
        "{html}"
    );
    // The worker finishes the job just after it stored the audit's failure.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let jobs = loop {
        let jobs =
            app.state.db.jobs_for(app::contract::JobKind::Audit, &audit.to_string()).await.unwrap();
        if jobs.iter().all(|j| j.state.is_final()) || std::time::Instant::now() > deadline {
            break jobs;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        jobs.iter().map(|j| j.state.as_str()).collect::<Vec<_>>(),
        ["done"],
        "the job ran; the audit is what failed"
    );
    // A finished audit does not block the next one.
    let r = start(
        &app,
        &client,
        draft,
        &[("csrf", csrf.as_str()), ("mutants", "1"), ("functions", "_finite")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

/// A worker killed while an audit's model call is in flight (#29): the
/// call's row of the author ledger was written before the request left, so
/// it is not lost; the job fails as interrupted and the row says the call
/// was interrupted (the upstream may have charged for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_call_leaves_the_calls_ledger_row_marked_interrupted() {
    // An upstream that never answers in time.
    let (url, seen) = fake_upstream(|_| {
        std::thread::sleep(Duration::from_secs(120));
        "[]".into()
    });
    let lease_secs = 2;
    let app = TestApp::spawn_with(|c| c.lease_secs = lease_secs).await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let draft = draft_of_token_bucket(&app, &client, &csrf).await;
    // The page offers model mode only with an upstream configured; the
    // job itself reads the worker's configuration. Queue it as the page
    // would, in model mode.
    let digest = app.state.db.version_by_id(draft).await.unwrap().unwrap().digest;
    let (audit, _) = app
        .state
        .db
        .queue_packet_audit(gatehouse::db::NewPacketAudit {
            version_id: draft,
            requested_by: None,
            mode: "model",
            functions: "_finite",
            mutants: 1,
            model: "fake-m",
            max_calls: 2,
            max_tokens: 5000,
            digest: &digest,
        })
        .await
        .unwrap();

    let data = app.state.config.data_dir.clone();
    let mut worker = crate::children::Workers::new(
        crate::children::Settings {
            database_url: app.state.config.database_url.clone(),
            data_dir: data.clone(),
            lease_secs,
            env: vec![("GATEHOUSE_MODEL_UPSTREAM_URL".into(), url.clone())],
        },
        app.dir.path().join("worker.log"),
    );
    worker.spawn(1);
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let calls = app.state.db.audit_calls(audit).await.unwrap();
        if calls.iter().any(|c| c.outcome == "in-flight") && !seen.lock().unwrap().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the call never left: {calls:?}");
        assert!(worker.children[0].try_wait().unwrap().is_none(), "the worker ended on its own");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(worker); // SIGKILL

    // Another worker finds the lease expired: the audit's one attempt is
    // used, so it fails as interrupted, and the row stays, marked so.
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    let row = loop {
        let row = app.state.db.packet_audit(audit).await.unwrap().unwrap();
        if row.state.as_str() == "failed" {
            break row;
        }
        assert!(Instant::now() < deadline, "the interrupted audit was not failed: {row:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(row.error.as_deref().unwrap_or_default().contains("interrupted"), "{row:?}");
    let calls = app.state.db.audit_calls(audit).await.unwrap();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let c = &calls[0];
    assert_eq!((c.n, c.function.as_str(), c.model.as_str()), (1, "_finite", "fake-m"));
    assert_eq!((c.outcome.as_str(), c.status), ("interrupted", None), "{c:?}");
    assert!(c.request_bytes > 0 && c.prompt_tokens > 0 && c.tokens_estimated, "{c:?}");
    assert!(c.ended_at >= c.started_at && c.started_at > 0, "{c:?}");
    assert!(c.error.as_deref().unwrap().contains("in flight when the audit stopped"), "{c:?}");
}
