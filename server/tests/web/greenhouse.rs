//! Greenhouse's Assessment Partner API end to end over HTTP: `Greenhouse`
//! below is a client that speaks the published shapes (list_tests,
//! send_test, test_status, response_error; HTTP Basic with the connection's
//! key as the username and an empty password), against the real app, an
//! SMTP sink that takes the invite, a real worker grading the candidate's
//! upload, and a callback receiver of the test's own that Gatehouse
//! `PATCH`es when a result is complete. The ATS learns no more than the
//! assignment's `results` setting and blind review release.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gatehouse::db::{NewSubmission, Role};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::{page, signed_in};
use crate::candidate::{publish_packet, sample_zip, upload, wait_final};
use crate::mail::SmtpSink;
use crate::support::TestApp;

/// The client side of the API, as Greenhouse calls it.
struct Greenhouse {
    base: String,
    key: String,
    http: reqwest::Client,
}

#[derive(Debug, Deserialize, PartialEq)]
struct PartnerTest {
    partner_test_id: String,
    partner_test_name: String,
}

#[derive(Serialize)]
struct SendTest<'a> {
    partner_test_id: &'a str,
    candidate: Candidate<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
}

#[derive(Serialize)]
struct Candidate<'a> {
    first_name: &'a str,
    last_name: &'a str,
    resume_url: Option<&'a str>,
    phone_number: Option<&'a str>,
    email: &'a str,
    greenhouse_profile_url: &'a str,
}

#[derive(Debug, Deserialize)]
struct SendTestAnswer {
    partner_interview_id: String,
}

/// A `test_status` answer; `metadata` must be flat, with primitive values.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestStatus {
    partner_status: String,
    #[serde(default)]
    partner_profile_url: Option<String>,
    #[serde(default)]
    partner_score: Option<f64>,
    #[serde(default)]
    metadata: BTreeMap<String, Value>,
}

impl Greenhouse {
    fn new(app: &TestApp, key: &str) -> Greenhouse {
        Greenhouse {
            base: app.url("/ats/greenhouse"),
            key: key.into(),
            http: reqwest::Client::new(),
        }
    }

    async fn list_tests(&self) -> Vec<PartnerTest> {
        let r = self
            .http
            .get(format!("{}/list_tests", self.base))
            .basic_auth(&self.key, Some(""))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    async fn send_test(&self, req: &SendTest<'_>) -> reqwest::Response {
        self.http
            .post(format!("{}/send_test", self.base))
            .basic_auth(&self.key, Some(""))
            .json(req)
            .send()
            .await
            .unwrap()
    }

    async fn status_response(&self, id: &str) -> reqwest::Response {
        self.http
            .get(format!("{}/test_status", self.base))
            .query(&[("partner_interview_id", id)])
            .basic_auth(&self.key, Some(""))
            .send()
            .await
            .unwrap()
    }

    async fn test_status(&self, id: &str) -> TestStatus {
        let r = self.status_response(id).await;
        assert_eq!(r.status(), 200);
        let s: TestStatus = r.json().await.unwrap();
        for (k, v) in &s.metadata {
            assert!(!v.is_object() && !v.is_array(), "metadata {k} is not a primitive: {v}");
        }
        if s.partner_status == "complete" {
            assert!(s.partner_profile_url.is_some(), "complete needs partner_profile_url");
        }
        s
    }
}

/// Creates an ATS connection on the admin page; returns its key, shown once.
async fn connect(
    app: &TestApp,
    admin: &reqwest::Client,
    csrf: &str,
    results: &str,
    blind: bool,
    hosts: &str,
) -> String {
    let mut form = vec![
        ("csrf", csrf),
        ("name", "Greenhouse (Acme)"),
        ("results", results),
        ("deadline_days", "5"),
        ("callback_hosts", hosts),
    ];
    if blind {
        form.push(("blind_review", "on"));
    }
    let r = admin.post(app.url("/admin/ats")).form(&form).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let html = page(admin, app.url("/admin/ats")).await.text().await.unwrap();
    let key = html.split("<code class=\"ats-key\">").nth(1).unwrap().split('<').next().unwrap();
    assert!(key.starts_with("gha_"), "{key}");
    let again = page(admin, app.url("/admin/ats")).await.text().await.unwrap();
    assert!(!again.contains(key), "the key is shown once");
    key.to_string()
}

/// The test's callback receiver: every PATCH body it took.
struct Receiver {
    port: u16,
    taken: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receiver() -> Receiver {
    let taken: Arc<Mutex<Vec<Value>>> = Arc::default();
    let store = taken.clone();
    let app = axum::Router::new().route(
        "/integrations/callback/{token}",
        axum::routing::patch(move |body: axum::body::Bytes| {
            let store = store.clone();
            async move {
                store.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    Receiver { port, taken, task }
}

fn candidate<'a>(first: &'a str, email: &'a str) -> Candidate<'a> {
    Candidate {
        first_name: first,
        last_name: "Lovelace",
        resume_url: None,
        phone_number: Some("123-456-7890"),
        email,
        greenhouse_profile_url: "https://app.greenhouse.io/people/17681532?application_id=26234709",
    }
}

/// Waits until `cond` holds, at most `limit`.
async fn until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const RELEASED_KEYS: [&str; 4] = ["Decision", "Score", "Summary", "Receipt digest"];

#[tokio::test]
async fn greenhouse_sends_a_test_and_reports_only_what_the_hiring_team_released() {
    let sink = SmtpSink::start().await;
    let app = TestApp::spawn_with(|c| {
        sink.configure(c);
        c.ats_callback_secs = 1;
    })
    .await;
    publish_packet(&app.state).await;
    let callbacks = gatehouse::ats::spawn_callbacks(app.state.clone());
    let hook = receiver().await;
    let (admin, csrf) = signed_in(&app, Role::Admin).await;
    let key =
        connect(&app, &admin, &csrf, "immediately", false, &format!("127.0.0.1:{}", hook.port))
            .await;
    let gh = Greenhouse::new(&app, &key);

    // HTTP Basic with the connection's key, nothing else.
    for auth in [None, Some("gha_not-a-key")] {
        let mut req = reqwest::Client::new().get(format!("{}/list_tests", gh.base));
        if let Some(k) = auth {
            req = req.basic_auth(k, Some(""));
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 401);
        assert!(r.headers().contains_key("www-authenticate"));
        let body: Value = r.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("key"), "{body}");
    }

    // The catalog: the published packets.
    let tests = gh.list_tests().await;
    assert_eq!(tests.len(), 1);
    assert_eq!(tests[0].partner_test_id, "null-status");
    assert!(tests[0].partner_test_name.ends_with("(v1)"), "{tests:?}");

    // Bad requests are refused by name, and leave nothing behind.
    let callback = format!("http://127.0.0.1:{}/integrations/callback/t0k3n", hook.port);
    for (req, want) in [
        (
            SendTest {
                partner_test_id: "no-such-test",
                candidate: candidate("Ada", "ada@example.com"),
                url: None,
            },
            "\"no-such-test\" is not a test list_tests offers",
        ),
        (
            SendTest {
                partner_test_id: "null-status",
                candidate: candidate("Ada", "ada@example.com"),
                url: Some("http://127.0.0.2:9/elsewhere"),
            },
            "127.0.0.2 is not a host this ATS connection may call back",
        ),
        (
            SendTest {
                partner_test_id: "null-status",
                candidate: candidate("Ada", "not-an-email"),
                url: None,
            },
            "is not an email address",
        ),
    ] {
        let r = gh.send_test(&req).await;
        assert_eq!(r.status(), 400);
        let body: Value = r.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains(want), "{body}");
    }
    // A number as partner_test_id (as in one of Greenhouse's examples) is
    // read as its text.
    let r = gh
        .http
        .post(format!("{}/send_test", gh.base))
        .basic_auth(&gh.key, Some(""))
        .json(&json!({"partner_test_id": 12345, "candidate": {"first_name": "A", "last_name": "B", "email": "a@example.com"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("\"12345\" is not a test list_tests offers"));
    assert!(app.state.db.list_assignments(None).await.unwrap().is_empty());
    assert!(sink.taken().is_empty());

    // send_test: an assignment, its invite emailed, the interview id back.
    let r = gh
        .send_test(&SendTest {
            partner_test_id: "null-status",
            candidate: candidate("Ada", "ada@example.com"),
            url: Some(&callback),
        })
        .await;
    assert_eq!(r.status(), 200);
    let id = r.json::<SendTestAnswer>().await.unwrap().partner_interview_id;
    let mail = sink.taken();
    assert_eq!(mail.len(), 1);
    assert_eq!(mail[0].to, vec!["<ada@example.com>".to_string()]);
    let text = mail[0].part("text/plain").unwrap();
    let token = text.split("/c/").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
    let a = &app.state.db.list_assignments(None).await.unwrap()[0];
    assert_eq!((a.candidate_name.as_str(), a.email.as_str()), ("Ada Lovelace", "ada@example.com"));
    assert_eq!(a.results.as_str(), "immediately");

    let s = gh.test_status(&id).await;
    assert_eq!(s.partner_status, "invited");
    assert_eq!(s.partner_score, None);

    // Another connection's key does not find this test.
    let other =
        Greenhouse::new(&app, &connect(&app, &admin, &csrf, "immediately", false, "").await);
    assert_eq!(other.status_response(&id).await.status(), 404);

    // The candidate submits; a worker grades it.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let workers = gatehouse::queue::spawn_workers_until(&app.state, 1, stopped);
    let r = upload(&app.base, &token, sample_zip(), true).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let sid = app.state.db.submissions_of(&a.id).await.unwrap()[0].id.clone();
    let graded = wait_final(&app.state, &sid, Duration::from_secs(120)).await;
    assert_eq!(graded.state.as_str(), "graded", "{:?}", graded.error);
    stop.send(true).unwrap();
    for w in workers {
        w.await.unwrap();
    }

    let s = gh.test_status(&id).await;
    assert_eq!(s.partner_status, "complete");
    assert_eq!(s.partner_score, graded.score);
    assert_eq!(s.partner_profile_url, Some(app.url(&format!("/submissions/{sid}"))));
    for k in RELEASED_KEYS {
        assert!(s.metadata.contains_key(k), "{k} in {:?}", s.metadata);
    }
    assert_eq!(s.metadata["Decision"], json!(graded.decision.clone().unwrap()));
    // The callback comes once the result is complete, and only once.
    until(Duration::from_secs(20), "the result callback", || {
        !hook.taken.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(
        hook.taken.lock().unwrap()[0],
        json!({ "partner_interview_id": id, "partner_status": "complete" })
    );
    gatehouse::ats::run_callbacks(&app.state, &reqwest::Client::new()).await.unwrap();
    assert_eq!(hook.taken.lock().unwrap().len(), 1, "called back once");

    // The other settings, each on a connection of its own, with a graded
    // submission like the one above.
    let reviewer = app.user("rita@example.test", Role::Reviewer, crate::auth::PASSWORD).await;
    let mut cases = Vec::new();
    for (results, blind, first) in
        [("never", false, "Nev"), ("after-review", false, "Aft"), ("immediately", true, "Bli")]
    {
        let gh = Greenhouse::new(&app, &connect(&app, &admin, &csrf, results, blind, "").await);
        let email = format!("{}@example.com", first.to_lowercase());
        let r = gh
            .send_test(&SendTest {
                partner_test_id: "null-status",
                candidate: candidate(first, &email),
                url: None,
            })
            .await;
        assert_eq!(r.status(), 200);
        let id = r.json::<SendTestAnswer>().await.unwrap().partner_interview_id;
        let a = app.state.db.list_assignments(None).await.unwrap();
        let a = a.iter().find(|a| a.email == email).unwrap();
        assert_eq!((a.results.as_str(), a.blind_review), (results, blind));
        let sid = format!("gh-{first}");
        let db = &app.state.db;
        db.create_submission(NewSubmission {
            id: &sid,
            assignment_id: &a.id,
            blob_sha256: &graded.blob_sha256,
            size_bytes: graded.size_bytes,
        })
        .await
        .unwrap();
        let (card, receipt) =
            (graded.scorecard_json.as_deref().unwrap(), graded.receipt_json.as_deref().unwrap());
        db.set_graded(
            &sid,
            card,
            receipt,
            graded.decision.as_deref().unwrap(),
            graded.score.unwrap(),
        )
        .await
        .unwrap();
        cases.push((results, blind, gh, id, sid));
    }
    let withheld = |s: &TestStatus, what: &str| {
        assert_eq!(s.partner_score, None, "{what}: no score");
        for k in RELEASED_KEYS {
            assert!(!s.metadata.contains_key(k), "{what}: {k} withheld: {:?}", s.metadata);
        }
    };
    for (results, blind, gh, id, _) in &cases {
        let s = gh.test_status(id).await;
        let what = format!("{results} blind={blind} before review");
        let want = if *results == "never" { "complete" } else { "awaiting_review" };
        assert_eq!(s.partner_status, want, "{what}");
        withheld(&s, &what);
    }
    // A reviewer saves a score: after-review and blind review release it;
    // never still does not.
    let reviewer_client = TestApp::client();
    let r = crate::auth::post_login(
        &app,
        &reviewer_client,
        &reviewer.email,
        crate::auth::PASSWORD,
        "/inbox",
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let html = page(&reviewer_client, app.url("/inbox")).await.text().await.unwrap();
    let rcsrf = crate::auth::csrf_of(&html);
    for (results, blind, gh, id, sid) in &cases {
        let r = reviewer_client
            .post(app.url(&format!("/submissions/{sid}/human")))
            .form(&[
                ("csrf", rcsrf.as_str()),
                ("criterion", "narrative"),
                ("level", "2"),
                ("reason", "names the blanks"),
            ])
            .send()
            .await
            .unwrap();
        assert!(r.status().is_redirection(), "{}", r.text().await.unwrap());
        let s = gh.test_status(id).await;
        let what = format!("{results} blind={blind} after review");
        assert_eq!(s.partner_status, "complete", "{what}");
        if *results == "never" {
            withheld(&s, &what);
            assert!(s.metadata["Result"].as_str().unwrap().contains("not released"));
        } else {
            let card = app.state.db.submission_by_id(sid).await.unwrap().unwrap();
            assert_eq!(s.partner_score, card.score, "{what}");
            assert!(s.metadata.contains_key("Decision"), "{what}");
        }
    }

    // response_error: Greenhouse's report of an answer it could not read.
    let r = gh
        .http
        .post(format!("{}/response_error", gh.base))
        .basic_auth(&gh.key, Some(""))
        .json(&json!({"api_call": "test_status", "errors": ["partner_profile_url is missing"], "partner_interview_id": id}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let audit = app.state.db.audit_entries(None, 100).await.unwrap();
    assert!(
        audit.iter().any(|e| e.action == "ats.response_error"
            && e.detail.contains("partner_profile_url is missing"))
    );

    // A revoked connection's key stops working at once.
    let conns = app.state.db.list_ats_connections().await.unwrap();
    let first = conns.iter().map(|c| c.id).min().unwrap();
    let r = admin
        .post(app.url(&format!("/admin/ats/{first}/revoke")))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(gh.status_response(&id).await.status(), 401);
    callbacks.abort();
}

#[tokio::test]
async fn greenhouse_send_test_is_refused_when_invites_cannot_be_emailed() {
    let app = TestApp::spawn().await;
    publish_packet(&app.state).await;
    let key = "gha_test-key-without-smtp";
    app.state
        .db
        .create_ats_connection(gatehouse::db::NewAtsConnection {
            name: "Greenhouse",
            key_hash: &gatehouse::auth::password::token_hash(key),
            results: gatehouse::db::ResultsRelease::Never,
            blind_review: false,
            deadline_days: 7,
            callback_hosts: &[],
            created_by: None,
        })
        .await
        .unwrap();
    let gh = Greenhouse::new(&app, key);
    assert_eq!(gh.list_tests().await.len(), 1, "the key works");
    let r = gh
        .send_test(&SendTest {
            partner_test_id: "null-status",
            candidate: candidate("Ada", "ada@example.com"),
            url: None,
        })
        .await;
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("cannot email invites"), "{body}");
    assert!(app.state.db.list_assignments(None).await.unwrap().is_empty(), "nothing made");
}
