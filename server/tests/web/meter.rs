//! The model meter against a real local upstream: an axum server on
//! 127.0.0.1:0 answering in the OpenAI format, with configurable usage,
//! delays, error statuses and streaming.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse::config::Config;
use gatehouse::db::ModelCall;
use gatehouse::invites::{self, Invite, Invited};
use gatehouse::now_ms;
use gatehouse::state::AppState;
use serde_json::{Value, json};

use crate::support::TestApp;

const SLUG: &str = "null-status";

/// How the fake upstream answers.
#[derive(Clone, Debug)]
pub struct Behaviour {
    /// (prompt, completion) tokens reported in `usage`; None sends no usage.
    pub usage: Option<(i64, i64)>,
    pub delay: Duration,
    /// The status of every answer; not 200 answers with an error body.
    pub status: u16,
}

impl Default for Behaviour {
    fn default() -> Behaviour {
        Behaviour { usage: Some((10, 5)), delay: Duration::ZERO, status: 200 }
    }
}

#[derive(Clone, Default)]
pub struct Upstream {
    pub behaviour: Arc<Mutex<Behaviour>>,
    pub hits: Arc<AtomicUsize>,
    pub last_auth: Arc<Mutex<Option<String>>>,
}

impl Upstream {
    pub fn set(&self, f: impl FnOnce(&mut Behaviour)) {
        f(&mut self.behaviour.lock().unwrap());
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Starts the fake upstream; returns its `/v1` base URL.
pub async fn spawn_upstream() -> (String, Upstream) {
    let upstream = Upstream::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(fake_completion))
        .route("/v1/models", get(|| async { axum::Json(json!({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})) }))
        .with_state(upstream.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), upstream)
}

async fn fake_completion(State(up): State<Upstream>, headers: axum::http::HeaderMap, body: Bytes) -> Response {
    up.hits.fetch_add(1, Ordering::SeqCst);
    *up.last_auth.lock().unwrap() = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
    let b = up.behaviour.lock().unwrap().clone();
    if !b.delay.is_zero() {
        tokio::time::sleep(b.delay).await;
    }
    if b.status != 200 {
        let status = StatusCode::from_u16(b.status).unwrap();
        return (status, axum::Json(json!({"error": {"message": "upstream is unwell", "type": "server_error"}}))).into_response();
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = req["model"].as_str().unwrap_or("fake-model").to_string();
    let usage = b.usage.map(|(p, c)| json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}));
    if req["stream"].as_bool() == Some(true) {
        let mut chunks: Vec<String> = ["Hel", "lo ", "there"]
            .iter()
            .map(|t| format!("data: {}\n\n", json!({"object": "chat.completion.chunk", "model": model, "choices": [{"index": 0, "delta": {"content": t}}]})))
            .collect();
        if let Some(u) = usage {
            chunks.push(format!("data: {}\n\n", json!({"object": "chat.completion.chunk", "model": model, "choices": [], "usage": u})));
        }
        chunks.push("data: [DONE]\n\n".into());
        let stream = futures_util::stream::iter(chunks.into_iter().map(|c| Ok::<_, Infallible>(Bytes::from(c))));
        return ([("content-type", "text/event-stream")], Body::from_stream(stream)).into_response();
    }
    let mut answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there"}, "finish_reason": "stop"}],
    });
    if let Some(u) = usage {
        answer["usage"] = u;
    }
    axum::Json(answer).into_response()
}

/// Publishes a copy of null-status whose `[budgets]` are `budgets` (TOML
/// lines) and whose model waits for a red run when `waits_for_red`.
pub async fn meter_packet(state: &AppState, budgets: &str, waits_for_red: bool) {
    crate::support::publish_copy(state, SLUG, "m1", |toml| {
        let start = toml.find("[budgets]").unwrap();
        let end = toml.find("[limits]").unwrap();
        let workspace = if waits_for_red { "[workspace]\nmodel_waits_for_red = true\n\n" } else { "" };
        format!("{}[budgets]\n{budgets}\n\n{workspace}{}", &toml[..start], &toml[end..])
    })
    .await;
}

async fn invite(state: &AppState, name: &str) -> Invited {
    let email = format!("{}@example.com", name.to_lowercase());
    invites::create(state, None, Invite { slug: SLUG, candidate_name: name, email: &email, deadline: None, time_box_secs: None }).await.unwrap()
}

/// A meter test: the app (upstream configured unless `upstream` is None),
/// a packet and one invited candidate with their key.
struct Meter {
    app: TestApp,
    token: String,
    key: String,
    assignment: String,
}

async fn setup(upstream: Option<&str>, budgets: &str, waits_for_red: bool, tweak: impl FnOnce(&mut Config)) -> Meter {
    let url = upstream.map(str::to_string);
    let app = TestApp::spawn_with(move |c| {
        c.model_upstream_url = url;
        c.model_upstream_key = Some("sk-upstream".into());
        tweak(c);
    })
    .await;
    meter_packet(&app.state, budgets, waits_for_red).await;
    let invited = invite(&app.state, "Ada").await;
    let key = key_of(&app, &invited.token).await;
    Meter { token: invited.token, key, assignment: invited.assignment.id, app }
}

async fn key_of(app: &TestApp, token: &str) -> String {
    let status: Value = reqwest::get(app.url(&format!("/c/{token}/meter"))).await.unwrap().json().await.unwrap();
    status["key"].as_str().expect("a key").to_string()
}

fn chat(content: &str) -> Value {
    json!({"model": "fake-model", "messages": [{"role": "user", "content": content}]})
}

async fn call(app: &TestApp, key: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new().post(app.url("/v1/chat/completions")).bearer_auth(key).json(body).send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn ledger(app: &TestApp, assignment: &str) -> Vec<ModelCall> {
    app.state.db.model_calls_of(assignment).await.unwrap()
}

async fn sql(app: &TestApp, statement: &str, assignment: &str) {
    let pool = sqlx::SqlitePool::connect(&app.state.config.database_url).await.unwrap();
    sqlx::query(statement).bind(assignment).execute(&pool).await.unwrap();
    pool.close().await;
}

async fn witness_red(app: &TestApp, assignment: &str) {
    let at = now_ms();
    sql(
        app,
        &format!("INSERT INTO witness_runs (assignment_id, kind, at, accepted, exit_code, log, tree_sha256, env_json) VALUES (?, 'red', {at}, 1, 1, 'FAILED', 'abc', '{{}}')"),
        assignment,
    )
    .await;
}

#[tokio::test]
async fn models_are_listed_and_keys_checked() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    let r = reqwest::Client::new().get(m.app.url("/v1/models")).bearer_auth(&m.key).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["data"][0]["id"], "fake-model");

    let r = reqwest::Client::new().get(m.app.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let (status, body) = call(&m.app, "gh-0000000000000000000000000000000000000000", &chat("hi")).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["type"], "invalid_api_key");
    // The link token is not a model key.
    let (status, _) = call(&m.app, &m.token, &chat("hi")).await;
    assert_eq!(status, 401);
    assert_eq!(up.hits(), 0);
    assert!(ledger(&m.app, &m.assignment).await.is_empty());
    // The key follows the contract and the upstream gets the operator's key.
    assert_eq!(m.key, gatehouse::meter::model_key(1, &m.token));
    let (status, _) = call(&m.app, &m.key, &chat("hi")).await;
    assert_eq!(status, 200);
    assert_eq!(up.last_auth.lock().unwrap().as_deref(), Some("Bearer sk-upstream"));
}

#[tokio::test]
async fn model_waits_for_a_witnessed_red() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", true, |_| {}).await;
    let (status, body) = call(&m.app, &m.key, &chat("too early")).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["type"], "model_window_closed");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("the model window opens after a witnessed red run"));
    assert_eq!(up.hits(), 0);
    let status_json: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token))).await.unwrap().json().await.unwrap();
    assert_eq!(status_json["window_open"], false);

    // An unaccepted red does not open it.
    sql(&m.app, &format!("INSERT INTO witness_runs (assignment_id, kind, at, accepted, log, tree_sha256, env_json) VALUES (?, 'red', {}, 0, 'passed', 'abc', '{{}}')", now_ms()), &m.assignment).await;
    assert_eq!(call(&m.app, &m.key, &chat("still early")).await.0, 403);

    witness_red(&m.app, &m.assignment).await;
    let (status, body) = call(&m.app, &m.key, &chat("now")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(up.hits(), 1);

    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].refused.as_deref(), Some("model_window"));
    assert_eq!(calls[0].status, 403);
    assert_eq!(calls[1].refused.as_deref(), Some("model_window"));
    assert_eq!(calls[2].refused, None);
    assert_eq!(calls[2].status, 200);
    assert_eq!((calls[2].prompt_tokens, calls[2].completion_tokens, calls[2].tokens_estimated), (10, 5, false));
    assert!(calls[2].response_bytes > 0 && calls[2].request_bytes > 0);
    assert_eq!(calls[2].model, "fake-model");
}

#[tokio::test]
async fn calls_cap_refuses_the_call_after_the_limit() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 2", false, |_| {}).await;
    assert_eq!(call(&m.app, &m.key, &chat("one")).await.0, 200);
    assert_eq!(call(&m.app, &m.key, &chat("two")).await.0, 200);
    let (status, body) = call(&m.app, &m.key, &chat("three")).await;
    assert_eq!(status, 429);
    assert_eq!(body["error"]["type"], "budget_exceeded");
    assert_eq!(body["error"]["cap"], "model_calls");
    assert_eq!(body["error"]["limit"], 2);
    assert_eq!(body["error"]["used"], 2);
    assert_eq!(up.hits(), 2);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls.last().unwrap().refused.as_deref(), Some("model_calls"));
    assert_eq!(calls.last().unwrap().status, 429);

    let status: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token))).await.unwrap().json().await.unwrap();
    assert_eq!(status["caps"][0], json!({"cap": "model_calls", "limit": 2, "used": 2, "left": 0}));
}

#[tokio::test]
async fn tokens_cap_refuses_once_used_reaches_the_limit() {
    let (url, up) = spawn_upstream().await;
    // Each answer reports 10 + 5 tokens: the second call reaches 30.
    let m = setup(Some(&url), "tokens = 30", false, |_| {}).await;
    assert_eq!(call(&m.app, &m.key, &chat("one")).await.0, 200);
    assert_eq!(call(&m.app, &m.key, &chat("two")).await.0, 200);
    let (status, body) = call(&m.app, &m.key, &chat("three")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["cap"], "tokens");
    assert_eq!(body["error"]["limit"], 30);
    assert_eq!(body["error"]["used"], 30);
    assert_eq!(up.hits(), 2);
}

#[tokio::test]
async fn request_bytes_cap_refuses_the_request_that_would_pass_it() {
    let (url, up) = spawn_upstream().await;
    let size = serde_json::to_vec(&chat("abc")).unwrap().len();
    let m = setup(Some(&url), &format!("request_bytes = {}", size * 2), false, |_| {}).await;
    assert_eq!(call(&m.app, &m.key, &chat("abc")).await.0, 200);
    assert_eq!(call(&m.app, &m.key, &chat("def")).await.0, 200);
    let (status, body) = call(&m.app, &m.key, &chat("g")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["cap"], "request_bytes");
    assert_eq!(body["error"]["used"], size * 2);
    assert_eq!(up.hits(), 2);
}

#[tokio::test]
async fn duplicates_point_at_the_first_identical_request() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 10", false, |_| {}).await;
    for content in ["same", "same", "other", "same"] {
        assert_eq!(call(&m.app, &m.key, &chat(content)).await.0, 200);
    }
    let calls = ledger(&m.app, &m.assignment).await;
    let first = calls[0].id;
    let dups: Vec<Option<i64>> = calls.iter().map(|c| c.duplicate_of).collect();
    assert_eq!(dups, vec![None, Some(first), None, Some(first)]);
    assert_eq!(calls[0].request_sha256, calls[1].request_sha256);
    assert_ne!(calls[0].request_sha256, calls[2].request_sha256);
    assert_eq!(calls[0].request_sha256.len(), 64);
}

#[tokio::test]
async fn upstream_down_is_a_recorded_502() {
    // A port that was bound and closed refuses connections.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let m = setup(Some(&format!("http://{closed}/v1")), "model_calls = 1", false, |_| {}).await;
    let (status, body) = call(&m.app, &m.key, &chat("hello?")).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["type"], "upstream_unreachable");
    assert!(body.get("choices").is_none());
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].status, 502);
    assert_eq!(calls[0].refused, None);
    assert!(calls[0].error.as_deref().unwrap().contains("upstream"), "{:?}", calls[0].error);
    // A failed upstream does not use up the budget.
    let (status, _) = call(&m.app, &m.key, &chat("again")).await;
    assert_eq!(status, 502);
}

#[tokio::test]
async fn upstream_errors_and_timeouts_pass_through() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |c| c.model_timeout_secs = 1).await;
    up.set(|b| b.status = 500);
    let (status, body) = call(&m.app, &m.key, &chat("hi")).await;
    assert_eq!(status, 500);
    assert_eq!(body["error"]["message"], "upstream is unwell");
    up.set(|b| b.status = 429);
    assert_eq!(call(&m.app, &m.key, &chat("hi")).await.0, 429);
    up.set(|b| {
        b.status = 200;
        b.delay = Duration::from_millis(1500);
    });
    let (status, body) = call(&m.app, &m.key, &chat("slow")).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["type"], "upstream_timeout");
    let calls = ledger(&m.app, &m.assignment).await;
    let statuses: Vec<i64> = calls.iter().map(|c| c.status).collect();
    assert_eq!(statuses, vec![500, 429, 504]);
    assert!(calls[0].error.as_deref().unwrap().contains("upstream is unwell"));
    assert!(calls.iter().all(|c| c.refused.is_none() && c.prompt_tokens == 0));
}

async fn stream_call(app: &TestApp, key: &str, content: &str) -> (u16, String, String) {
    let mut body = chat(content);
    body["stream"] = json!(true);
    let r = reqwest::Client::new().post(app.url("/v1/chat/completions")).bearer_auth(key).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    let ctype = r.headers().get("content-type").unwrap().to_str().unwrap().to_string();
    (status, ctype, r.text().await.unwrap())
}

#[tokio::test]
async fn streams_pass_through_with_token_accounting() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "tokens = 1000", false, |_| {}).await;
    up.set(|b| b.usage = Some((21, 3)));
    let (status, ctype, text) = stream_call(&m.app, &m.key, "stream please").await;
    assert_eq!(status, 200);
    assert!(ctype.starts_with("text/event-stream"), "{ctype}");
    assert!(text.contains("\"Hel\"") && text.contains("\"usage\"") && text.trim_end().ends_with("data: [DONE]"), "{text}");

    // Without a usage chunk the tokens are estimated at ~4 characters each:
    // "twelve chars" is 12 characters (3 tokens), "Hello there" 11 (3).
    up.set(|b| b.usage = None);
    let (status, _, text) = stream_call(&m.app, &m.key, "twelve chars").await;
    assert_eq!(status, 200);
    assert!(!text.contains("usage"));

    // The row is written when the stream ends; wait for it.
    let mut calls = Vec::new();
    for _ in 0..50 {
        calls = ledger(&m.app, &m.assignment).await;
        if calls.iter().all(|c| c.status != 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(calls.iter().all(|c| c.stream));
    assert_eq!((calls[0].prompt_tokens, calls[0].completion_tokens, calls[0].tokens_estimated), (21, 3, false));
    assert_eq!((calls[1].prompt_tokens, calls[1].completion_tokens, calls[1].tokens_estimated), (3, 3, true));
    assert!(calls[0].response_bytes > calls[1].response_bytes);
    let status: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token))).await.unwrap().json().await.unwrap();
    assert_eq!(status["caps"][0]["used"], 30);
}

#[tokio::test]
async fn a_key_meters_only_its_own_assignment() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 1", false, |_| {}).await;
    let other = invite(&m.app.state, "Grace").await;
    let other_key = key_of(&m.app, &other.token).await;
    assert_ne!(other_key, m.key);
    assert_eq!(call(&m.app, &other_key, &chat("mine")).await.0, 200);
    // The other key's budget is spent; it never spends this one's.
    assert_eq!(call(&m.app, &other_key, &chat("mine again")).await.0, 429);
    assert_eq!(call(&m.app, &m.key, &chat("first")).await.0, 200);
    assert_eq!(up.hits(), 2);
    let mine = ledger(&m.app, &m.assignment).await;
    let theirs = ledger(&m.app, &other.assignment.id).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(theirs.len(), 2);
    assert!(theirs.iter().all(|c| c.assignment_id == other.assignment.id));
    // The same body in two assignments is no duplicate.
    assert_eq!(mine[0].duplicate_of, None);
}

#[tokio::test]
async fn expired_assignment_refuses_its_key() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    sql(&m.app, &format!("UPDATE assignments SET deadline = {} WHERE id = ?", now_ms() - 1000), &m.assignment).await;
    let (status, body) = call(&m.app, &m.key, &chat("late")).await;
    assert_eq!(status, 401);
    assert!(body["error"]["message"].as_str().unwrap().contains("expired"), "{body}");
    let r = reqwest::Client::new().get(m.app.url("/v1/models")).bearer_auth(&m.key).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(up.hits(), 0);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls[0].refused.as_deref(), Some("expired"));
}

#[tokio::test]
async fn time_box_over_refuses_with_429() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "time_box_minutes = 1", false, |_| {}).await;
    sql(&m.app, &format!("UPDATE assignments SET started_at = {} WHERE id = ?", now_ms() - 61_000), &m.assignment).await;
    let (status, body) = call(&m.app, &m.key, &chat("late")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["cap"], "time_box_minutes");
    assert_eq!(body["error"]["limit"], 1);
}

#[tokio::test]
async fn revoked_key_is_refused_and_the_new_one_works() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    let a = m.app.state.db.assignment_by_id(&m.assignment).await.unwrap().unwrap();
    let new_key = gatehouse::meter::reissue_key(&m.app.state, &a, &m.token).await.unwrap();
    assert_eq!(new_key, gatehouse::meter::model_key(2, &m.token));
    let (status, body) = call(&m.app, &m.key, &chat("old")).await;
    assert_eq!(status, 401);
    assert!(body["error"]["message"].as_str().unwrap().contains("revoked"), "{body}");
    assert_eq!(call(&m.app, &new_key, &chat("new")).await.0, 200);
    assert_eq!(key_of(&m.app, &m.token).await, new_key);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls[0].refused.as_deref(), Some("revoked"));
    assert_eq!(calls[1].refused, None);
}

#[tokio::test]
async fn authors_revoke_the_key_and_a_reissued_link_brings_a_new_one() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    let (reviewer, reviewer_csrf) = crate::auth::signed_in(&m.app, gatehouse::db::Role::Reviewer).await;
    let (author, csrf) = crate::auth::signed_in(&m.app, gatehouse::db::Role::Author).await;
    let page = |client: &reqwest::Client| {
        let client = client.clone();
        let url = m.app.url(&format!("/assignments/{}", m.assignment));
        async move { client.get(url).send().await.unwrap().text().await.unwrap() }
    };
    // A reviewer sees no action and cannot revoke; an author sees both forms.
    assert!(!page(&reviewer).await.contains("revoke-model-key"));
    let revoke = m.app.url(&format!("/assignments/{}/model-key/revoke", m.assignment));
    let r = reviewer.post(&revoke).form(&[("csrf", reviewer_csrf.as_str())]).send().await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(page(&author).await.contains("revoke-model-key"));
    let r = author.post(&revoke).form(&[("csrf", "wrong")]).send().await.unwrap();
    assert_eq!(r.status(), 403, "a wrong CSRF token changes nothing");
    assert_eq!(call(&m.app, &m.key, &chat("still on")).await.0, 200);

    let r = author.post(&revoke).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(r.status(), 303);
    let (status, body) = call(&m.app, &m.key, &chat("after revoke")).await;
    assert_eq!(status, 401);
    assert!(body["error"]["message"].as_str().unwrap().contains("revoked"), "{body}");
    assert!(!page(&author).await.contains("revoke-model-key"), "no active key is left to revoke");
    let audit = m.app.state.db.audit_entries(Some(&format!("assignment:{}", m.assignment)), 10).await.unwrap();
    assert!(audit.iter().any(|e| e.action == "assignment.model_key.revoke"), "{audit:?}");

    // Reissuing the link kills the old link and brings a key derived from the new one.
    let r = author.post(m.app.url(&format!("/assignments/{}/reissue", m.assignment))).form(&[("csrf", csrf.as_str()), ("confirm", "yes")]).send().await.unwrap();
    assert_eq!(r.status(), 303);
    let invited = author.get(m.app.url(&format!("/assignments/{}/invited", m.assignment))).send().await.unwrap().text().await.unwrap();
    let start = invited.find("/c/").expect("the invited page shows the new link");
    let token: String = invited[start + 3..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    assert_eq!(token.len(), 64, "{invited}");
    assert_ne!(token, m.token);
    let new_key = key_of(&m.app, &token).await;
    assert_eq!(call(&m.app, &new_key, &chat("new link")).await.0, 200);
    assert_eq!(call(&m.app, &m.key, &chat("old key")).await.0, 401);
}

#[tokio::test]
async fn no_upstream_is_a_503() {
    let m = setup(None, "model_calls = 5", false, |_| {}).await;
    let (status, body) = call(&m.app, &m.key, &chat("anyone?")).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["type"], "upstream_not_configured");
    let r = reqwest::Client::new().get(m.app.url("/v1/models")).bearer_auth(&m.key).send().await.unwrap();
    assert_eq!(r.status(), 503);
}

#[tokio::test]
async fn per_packet_upstream_overrides_the_global_one() {
    let (url, up) = spawn_upstream().await;
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let m = setup(Some(&format!("http://{closed}/v1")), "model_calls = 5", false, move |c| {
        c.model_upstreams.insert(SLUG.into(), gatehouse::config::ModelUpstream { url, key: Some("sk-packet".into()) });
    })
    .await;
    assert_eq!(call(&m.app, &m.key, &chat("hi")).await.0, 200);
    assert_eq!(up.last_auth.lock().unwrap().as_deref(), Some("Bearer sk-packet"));
}

#[tokio::test]
async fn candidate_page_shows_key_endpoint_and_budgets_left() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 3\ntokens = 100\ntime_box_minutes = 90", false, |_| {}).await;
    assert_eq!(call(&m.app, &m.key, &chat("one")).await.0, 200);
    let html = reqwest::get(m.app.url(&format!("/c/{}", m.token))).await.unwrap().text().await.unwrap();
    assert!(html.contains(&m.key), "the page shows the key");
    assert!(html.contains(&format!("{}/v1", m.app.base)), "the page shows the endpoint");
    assert!(html.contains(&format!("/c/{}/meter", m.token)), "the live budget polls the meter status");
    let row = html.split("data-cap=\"model_calls\"").nth(1).expect("a model_calls row");
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains(">1<") && row.contains(">2<") && row.contains(">3<"), "used 1, left 2, limit 3: {row}");
    assert!(html.contains("data-cap=\"tokens\""));

    let status: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token))).await.unwrap().json().await.unwrap();
    assert_eq!(status["caps"][1], json!({"cap": "tokens", "limit": 100, "used": 15, "left": 85}));
    assert_eq!(status["caps"][2], json!({"cap": "time_box_minutes", "limit": 90, "used": 0, "left": 90}));
    assert_eq!(status["window_open"], true);
    assert_eq!(status["endpoint"], format!("{}/v1", m.app.base));
    // An unknown link has no meter.
    assert_eq!(reqwest::get(m.app.url("/c/nope/meter")).await.unwrap().status(), 404);
}

#[tokio::test]
async fn refused_calls_stop_growing_the_ledger_at_the_cap_and_a_call_starts_the_clock() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 50", true, |c| c.max_refused_call_rows = 3).await;
    assert!(m.app.state.db.assignment_by_id(&m.assignment).await.unwrap().unwrap().started_at.is_none(), "reading the key starts nothing");
    for i in 0..8 {
        let (status, body) = call(&m.app, &m.key, &chat(&format!("too early {i}"))).await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"]["type"], "model_window_closed", "{body}");
    }
    let rows = ledger(&m.app, &m.assignment).await;
    assert_eq!(rows.len(), 3, "only the first refusals are written: {}", rows.len());
    assert!(rows.iter().all(|r| r.refused.as_deref() == Some("model_window")));
    assert_eq!(up.hits(), 0);
    // Using the key (even refused) started the time box.
    assert!(m.app.state.db.assignment_by_id(&m.assignment).await.unwrap().unwrap().started_at.is_some(), "a model call starts the clock");
}
