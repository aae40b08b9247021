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
use futures_util::StreamExt;
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
    /// Report the request's `max_tokens` as the completion tokens (the
    /// worst case a reservation holds).
    pub echo_max_tokens: bool,
    /// Answer with a tool call (`get_weather`) instead of text.
    pub tool_call: bool,
    /// A stream's pause after its first chunk.
    pub stream_pause: Duration,
    /// The answer's text instead of "Hello there" (a stream sends it in
    /// three pieces).
    pub content: Option<String>,
}

impl Default for Behaviour {
    fn default() -> Behaviour {
        Behaviour {
            usage: Some((10, 5)),
            delay: Duration::ZERO,
            status: 200,
            echo_max_tokens: false,
            tool_call: false,
            stream_pause: Duration::ZERO,
            content: None,
        }
    }
}

#[derive(Clone, Default)]
pub struct Upstream {
    pub behaviour: Arc<Mutex<Behaviour>>,
    pub hits: Arc<AtomicUsize>,
    pub last_auth: Arc<Mutex<Option<String>>>,
    /// The body of the last request, as the upstream got it.
    pub last_body: Arc<Mutex<Value>>,
    /// The same, as the bytes it got.
    pub last_raw: Arc<Mutex<String>>,
    /// The tokens the upstream reported in all its answers.
    pub reported: Arc<std::sync::atomic::AtomicI64>,
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
    use axum::serve::ListenerExt;
    let upstream = Upstream::default();
    let app = upstream_app(&upstream);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // A provider's server writes each chunk at once (no Nagle), as the meter must.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), upstream)
}

/// The fake upstream's app, for plain HTTP or TLS.
fn upstream_app(upstream: &Upstream) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(fake_completion).layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .route(
            "/v1/models",
            get(|| async {
                axum::Json(
                    json!({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}),
                )
            }),
        )
        .with_state(upstream.clone())
}

/// A certificate authority made for the test, and a server certificate for
/// 127.0.0.1 signed by it.
pub struct TestCa {
    pub ca_pem: String,
    pub server_config: Arc<tokio_rustls::rustls::ServerConfig>,
}

pub fn test_ca() -> TestCa {
    test_ca_named("Gatehouse test CA")
}

pub fn test_ca_named(name: &str) -> TestCa {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, name);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    let key =
        tokio_rustls::rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let mut config = tokio_rustls::rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca.der().clone()], key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TestCa { ca_pem: ca.pem(), server_config: Arc::new(config) }
}

/// Starts the fake upstream over TLS (a certificate signed by `ca`);
/// returns its `https://127.0.0.1:<port>/v1` base URL.
pub async fn spawn_tls_upstream(ca: &TestCa) -> (String, Upstream) {
    use hyper_util::rt::TokioIo;
    use tower::ServiceExt;
    let upstream = Upstream::default();
    let app = upstream_app(&upstream);
    let acceptor = tokio_rustls::TlsAcceptor::from(ca.server_config.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                // A client that does not trust the certificate ends here.
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| app.clone().oneshot(req),
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (format!("https://{addr}/v1"), upstream)
}

async fn fake_completion(
    State(up): State<Upstream>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    up.hits.fetch_add(1, Ordering::SeqCst);
    *up.last_auth.lock().unwrap() =
        headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
    *up.last_body.lock().unwrap() = serde_json::from_slice(&body).unwrap_or(Value::Null);
    *up.last_raw.lock().unwrap() = String::from_utf8_lossy(&body).into_owned();
    let mut b = up.behaviour.lock().unwrap().clone();
    // A request that offers tools gets a tool call.
    b.tool_call |= serde_json::from_slice::<Value>(&body).is_ok_and(|r| r.get("tools").is_some());
    if !b.delay.is_zero() {
        tokio::time::sleep(b.delay).await;
    }
    if b.status != 200 {
        let status = StatusCode::from_u16(b.status).unwrap();
        return (
            status,
            axum::Json(json!({"error": {"message": "upstream is unwell", "type": "server_error"}})),
        )
            .into_response();
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = req["model"].as_str().unwrap_or("fake-model").to_string();
    let usage = b.usage.map(|(p, c)| {
        let c = if b.echo_max_tokens { req["max_tokens"].as_i64().unwrap_or(c) } else { c };
        json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c})
    });
    let stream = req["stream"].as_bool() == Some(true);
    // Like OpenAI: a stream reports usage only when asked to.
    let usage =
        usage.filter(|_| !stream || req["stream_options"]["include_usage"].as_bool() == Some(true));
    if let Some(u) = &usage {
        up.reported.fetch_add(u["total_tokens"].as_i64().unwrap(), Ordering::SeqCst);
    }
    if stream {
        let deltas: Vec<Value> = if b.tool_call {
            vec![
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \"Par"}}]}),
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "is\"}"}}]}),
            ]
        } else {
            match &b.content {
                Some(text) => {
                    let chars: Vec<char> = text.chars().collect();
                    let third = chars.len().div_ceil(3).max(1);
                    chars
                        .chunks(third)
                        .map(|p| json!({"content": p.iter().collect::<String>()}))
                        .collect()
                }
                None => ["Hel", "lo ", "there"].iter().map(|t| json!({"content": t})).collect(),
            }
        };
        let mut chunks: Vec<String> = deltas
            .iter()
            .map(|d| format!("data: {}\n\n", json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model, "choices": [{"index": 0, "delta": d, "finish_reason": null}]})))
            .collect();
        if let Some(u) = usage {
            chunks.push(format!("data: {}\n\n", json!({"object": "chat.completion.chunk", "model": model, "choices": [], "usage": u})));
        }
        chunks.push("data: [DONE]\n\n".into());
        let pause = b.stream_pause;
        let stream = futures_util::stream::iter(chunks.into_iter().enumerate()).then(
            move |(i, c)| async move {
                // The headers go out first, the first chunk a moment later
                // (as a model thinks), the rest after `pause`.
                if !pause.is_zero() && i <= 1 {
                    tokio::time::sleep(if i == 0 { Duration::from_millis(5) } else { pause }).await;
                }
                Ok::<_, Infallible>(Bytes::from(c))
            },
        );
        return ([("content-type", "text/event-stream")], Body::from_stream(stream))
            .into_response();
    }
    let message = if b.tool_call {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]})
    } else {
        json!({"role": "assistant", "content": b.content.as_deref().unwrap_or("Hello there")})
    };
    let finish = if b.tool_call { "tool_calls" } else { "stop" };
    let mut answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
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
        let workspace =
            if waits_for_red { "[workspace]\nmodel_waits_for_red = true\n\n" } else { "" };
        format!("{}[budgets]\n{budgets}\n\n{workspace}{}", &toml[..start], &toml[end..])
    })
    .await;
}

pub(crate) async fn invite(state: &AppState, name: &str) -> Invited {
    let email = format!("{}@example.com", name.to_lowercase());
    invites::create(
        state,
        None,
        Invite {
            slug: SLUG,
            candidate_name: name,
            email: &email,
            deadline: None,
            time_box_secs: None,
        },
    )
    .await
    .unwrap()
}

/// A meter test: the app (upstream configured unless `upstream` is None),
/// a packet and one invited candidate with their key.
pub(crate) struct Meter {
    pub(crate) app: TestApp,
    pub(crate) token: String,
    pub(crate) key: String,
    pub(crate) assignment: String,
}

pub(crate) async fn setup(
    upstream: Option<&str>,
    budgets: &str,
    waits_for_red: bool,
    tweak: impl FnOnce(&mut Config),
) -> Meter {
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

pub(crate) async fn key_of(app: &TestApp, token: &str) -> String {
    let status: Value =
        reqwest::get(app.url(&format!("/c/{token}/meter"))).await.unwrap().json().await.unwrap();
    status["key"].as_str().expect("a key").to_string()
}

pub(crate) fn chat(content: &str) -> Value {
    json!({"model": "fake-model", "messages": [{"role": "user", "content": content}]})
}

pub(crate) async fn call(app: &TestApp, key: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(app.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

pub(crate) async fn ledger(app: &TestApp, assignment: &str) -> Vec<ModelCall> {
    app.state.db.model_calls_of(assignment).await.unwrap()
}

async fn sql(app: &TestApp, statement: &str, assignment: &str) {
    crate::support::raw_exec(
        &app.state.config.database_url,
        statement,
        &[crate::support::Arg::T(assignment)],
    )
    .await;
}

pub(crate) async fn witness_red(app: &TestApp, assignment: &str) {
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
    let r = reqwest::Client::new()
        .get(m.app.url("/v1/models"))
        .bearer_auth(&m.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["data"][0]["id"], "fake-model");

    let r = reqwest::Client::new().get(m.app.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let (status, body) =
        call(&m.app, "gh-0000000000000000000000000000000000000000", &chat("hi")).await;
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
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the model window opens after a witnessed red run")
    );
    assert_eq!(up.hits(), 0);
    let status_json: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
    assert_eq!(
        (calls[2].prompt_tokens, calls[2].completion_tokens, calls[2].tokens_estimated),
        (10, 5, false)
    );
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

    let status: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
    assert!(calls.iter().all(|c| c.refused.is_none() && c.counted && c.reserved_tokens == 0));
    // Error answers carry no usage and cost no tokens; the time-out is
    // charged its prompt's estimate ("slow": 1 token), marked estimated.
    assert_eq!((calls[0].prompt_tokens, calls[1].prompt_tokens), (0, 0));
    assert_eq!(
        (calls[2].prompt_tokens, calls[2].completion_tokens, calls[2].tokens_estimated),
        (1, 0, true)
    );
    // All three count against the calls cap; the upstream's own errors are
    // passed through without the meter's "do not retry".
    let status: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["caps"][0]["used"], 3);
}

pub(crate) async fn stream_call(app: &TestApp, key: &str, content: &str) -> (u16, String, String) {
    let mut body = chat(content);
    body["stream"] = json!(true);
    let r = reqwest::Client::new()
        .post(app.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
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
    // The meter asked for the usage chunk; the client, who did not, never sees it.
    assert!(
        text.contains("\"Hel\"")
            && !text.contains("\"usage\"")
            && text.trim_end().ends_with("data: [DONE]"),
        "{text}"
    );
    assert_eq!(up.last_body.lock().unwrap()["stream_options"], json!({"include_usage": true}));

    // A provider that sends no usage chunk: the tokens are estimated at ~4
    // characters each: "twelve chars" is 12 characters (3 tokens), "Hello there" 11 (3).
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
    assert_eq!(
        (calls[0].prompt_tokens, calls[0].completion_tokens, calls[0].tokens_estimated),
        (21, 3, false)
    );
    assert_eq!(
        (calls[1].prompt_tokens, calls[1].completion_tokens, calls[1].tokens_estimated),
        (3, 3, true)
    );
    assert!(calls[0].response_bytes > calls[1].response_bytes);
    let status: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
    sql(
        &m.app,
        &format!("UPDATE assignments SET deadline = {} WHERE id = ?", now_ms() - 1000),
        &m.assignment,
    )
    .await;
    let (status, body) = call(&m.app, &m.key, &chat("late")).await;
    assert_eq!(status, 401);
    assert!(body["error"]["message"].as_str().unwrap().contains("expired"), "{body}");
    let r = reqwest::Client::new()
        .get(m.app.url("/v1/models"))
        .bearer_auth(&m.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(up.hits(), 0);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls[0].refused.as_deref(), Some("expired"));
}

#[tokio::test]
async fn time_box_over_refuses_with_429() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "time_box_minutes = 1", false, |_| {}).await;
    sql(
        &m.app,
        &format!("UPDATE assignments SET started_at = {} WHERE id = ?", now_ms() - 61_000),
        &m.assignment,
    )
    .await;
    let (status, body) = call(&m.app, &m.key, &chat("late")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["cap"], "time_box_minutes");
    assert_eq!(body["error"]["limit"], 1);
}

#[tokio::test]
async fn revoked_key_is_refused_and_the_new_one_works() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    // Two calls: the first starts the assignment, after which the meter
    // keeps the key's facts in memory; the second is served from there.
    let hash = gatehouse::auth::password::token_hash(&m.key);
    for i in 0..2 {
        assert_eq!(call(&m.app, &m.key, &chat(&format!("warm {i}"))).await.0, 200);
    }
    assert!(
        m.app.state.memo.meter.key(&hash).is_ok(),
        "the key is kept after the assignment started"
    );
    let a = m.app.state.db.assignment_by_id(&m.assignment).await.unwrap().unwrap();
    let new_key = gatehouse::meter::reissue_key(&m.app.state, &a, &m.token).await.unwrap();
    assert!(m.app.state.memo.meter.key(&hash).is_err(), "revoking forgets the kept key");
    assert_eq!(new_key, gatehouse::meter::model_key(2, &m.token));
    let (status, body) = call(&m.app, &m.key, &chat("old")).await;
    assert_eq!(status, 401);
    assert!(body["error"]["message"].as_str().unwrap().contains("revoked"), "{body}");
    assert_eq!(call(&m.app, &new_key, &chat("new")).await.0, 200);
    assert_eq!(key_of(&m.app, &m.token).await, new_key);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls[2].refused.as_deref(), Some("revoked"));
    assert_eq!(calls[3].refused, None);
}

#[tokio::test]
async fn authors_revoke_the_key_and_a_reissued_link_brings_a_new_one() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    let (reviewer, reviewer_csrf) =
        crate::auth::signed_in(&m.app, gatehouse::db::Role::Reviewer).await;
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
    let audit = m
        .app
        .state
        .db
        .audit_entries(Some(&format!("assignment:{}", m.assignment)), 10)
        .await
        .unwrap();
    assert!(audit.iter().any(|e| e.action == "assignment.model_key.revoke"), "{audit:?}");

    // Reissuing the link kills the old link and brings a key derived from the new one.
    let r = author
        .post(m.app.url(&format!("/assignments/{}/reissue", m.assignment)))
        .form(&[("csrf", csrf.as_str()), ("confirm", "yes")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let invited = author
        .get(m.app.url(&format!("/assignments/{}/invited", m.assignment)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let start = invited.find("/c/").expect("the invited page shows the new link");
    let token: String =
        invited[start + 3..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
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
    let r = reqwest::Client::new()
        .get(m.app.url("/v1/models"))
        .bearer_auth(&m.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
}

#[tokio::test]
async fn per_packet_upstream_overrides_the_global_one() {
    let (url, up) = spawn_upstream().await;
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let m = setup(Some(&format!("http://{closed}/v1")), "model_calls = 5", false, move |c| {
        c.model_upstreams.insert(
            SLUG.into(),
            gatehouse::config::ModelUpstream { url, key: Some("sk-packet".into()) },
        );
    })
    .await;
    assert_eq!(call(&m.app, &m.key, &chat("hi")).await.0, 200);
    assert_eq!(up.last_auth.lock().unwrap().as_deref(), Some("Bearer sk-packet"));
}

#[tokio::test]
async fn candidate_page_shows_key_endpoint_and_budgets_left() {
    let (url, _up) = spawn_upstream().await;
    let m =
        setup(Some(&url), "model_calls = 3\ntokens = 100\ntime_box_minutes = 90", false, |_| {})
            .await;
    assert_eq!(call(&m.app, &m.key, &chat("one")).await.0, 200);
    let html =
        reqwest::get(m.app.url(&format!("/c/{}", m.token))).await.unwrap().text().await.unwrap();
    assert!(html.contains(&m.key), "the page shows the key");
    assert!(html.contains(&format!("{}/v1", m.app.base)), "the page shows the endpoint");
    assert!(
        html.contains(&format!("/c/{}/meter", m.token)),
        "the live budget polls the meter status"
    );
    let row = html.split("data-cap=\"model_calls\"").nth(1).expect("a model_calls row");
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains(">1<") && row.contains(">2<") && row.contains(">3<"),
        "used 1, left 2, limit 3: {row}"
    );
    assert!(html.contains("data-cap=\"tokens\""));

    let status: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["caps"][1], json!({"cap": "tokens", "limit": 100, "used": 15, "left": 85}));
    assert_eq!(
        status["caps"][2],
        json!({"cap": "time_box_minutes", "limit": 90, "used": 0, "left": 90})
    );
    assert_eq!(status["window_open"], true);
    assert_eq!(status["endpoint"], format!("{}/v1", m.app.base));
    // An unknown link has no meter.
    assert_eq!(reqwest::get(m.app.url("/c/nope/meter")).await.unwrap().status(), 404);
}

#[tokio::test]
async fn refused_calls_stop_growing_the_ledger_at_the_cap_and_a_call_starts_the_clock() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 50", true, |c| c.max_refused_call_rows = 3).await;
    assert!(
        m.app.state.db.assignment_by_id(&m.assignment).await.unwrap().unwrap().started_at.is_none(),
        "reading the key starts nothing"
    );
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
    assert!(
        m.app.state.db.assignment_by_id(&m.assignment).await.unwrap().unwrap().started_at.is_some(),
        "a model call starts the clock"
    );
}

// ---- Issue #11: real providers ----

async fn status_json(m: &Meter) -> Value {
    reqwest::get(m.app.url(&format!("/c/{}/meter", m.token))).await.unwrap().json().await.unwrap()
}

/// Waits until no row of the assignment is in flight.
pub(crate) async fn settled(m: &Meter) -> Vec<ModelCall> {
    for _ in 0..200 {
        let calls = ledger(&m.app, &m.assignment).await;
        if calls.iter().all(|c| c.status != 0) {
            // The totals the meter keeps in memory (moved under the
            // admission lock, after the database) agree with the database's.
            let lock = m.app.state.memo.lock_for(&m.assignment);
            let _guard = lock.lock().await;
            if let Some(kept) = m.app.state.memo.meter.totals(&m.assignment) {
                assert_eq!(
                    kept,
                    m.app.state.db.meter_usage(&m.assignment).await.unwrap(),
                    "the meter's kept totals differ from the database's"
                );
            }
            return calls;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("calls still in flight: {:?}", ledger(&m.app, &m.assignment).await);
}

fn write_ca(m_dir: &std::path::Path, pem: &str) -> std::path::PathBuf {
    let path = m_dir.join("ca.pem");
    std::fs::write(&path, pem).unwrap();
    path
}

#[tokio::test]
async fn https_upstream_is_reached_when_its_ca_is_configured() {
    let ca = test_ca();
    let (url, up) = spawn_tls_upstream(&ca).await;
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let dir = tempfile::tempdir().unwrap();
    let ca_file = write_ca(dir.path(), &ca.ca_pem);
    let m =
        setup(Some(&url), "model_calls = 5", false, move |c| c.model_ca_file = Some(ca_file)).await;
    let (status, body) = call(&m.app, &m.key, &chat("over TLS")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(up.last_auth.lock().unwrap().as_deref(), Some("Bearer sk-upstream"));
    let (status, _, text) = stream_call(&m.app, &m.key, "stream over TLS").await;
    assert_eq!(status, 200);
    assert!(text.contains("\"there\""), "{text}");
    let r = reqwest::Client::new()
        .get(m.app.url("/v1/models"))
        .bearer_auth(&m.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let calls = settled(&m).await;
    assert_eq!(
        calls.iter().map(|c| (c.status, c.prompt_tokens, c.completion_tokens)).collect::<Vec<_>>(),
        vec![(200, 10, 5), (200, 10, 5)]
    );
}

#[tokio::test]
async fn https_upstream_without_its_ca_is_a_recorded_certificate_error() {
    let ca = test_ca();
    let (url, up) = spawn_tls_upstream(&ca).await;
    // Trusting another CA (or only the web PKI) does not trust this one.
    let other = test_ca_named("Another test CA");
    let dir = tempfile::tempdir().unwrap();
    let ca_file = write_ca(dir.path(), &other.ca_pem);
    let m =
        setup(Some(&url), "model_calls = 1", false, move |c| c.model_ca_file = Some(ca_file)).await;
    let (status, body) = call(&m.app, &m.key, &chat("over TLS")).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["type"], "upstream_unreachable");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("certificate") && message.contains("UnknownIssuer"), "{message}");
    assert_eq!(up.hits(), 0);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].status, 502);
    assert!(calls[0].error.as_deref().unwrap().contains("certificate"), "{:?}", calls[0].error);
    // The upstream never saw the request: it does not use up the budget.
    assert!(!calls[0].counted);
    assert_eq!(call(&m.app, &m.key, &chat("again")).await.0, 502);
    // With no CA file only the web PKI roots are trusted: refused too.
    let m = setup(Some(&url), "model_calls = 1", false, |_| {}).await;
    let (status, body) = call(&m.app, &m.key, &chat("over TLS")).await;
    assert_eq!(status, 502, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid peer certificate: UnknownIssuer"),
        "{body}"
    );
    assert_eq!(up.hits(), 0);
}

#[tokio::test]
async fn a_ca_file_that_is_missing_or_holds_no_certificate_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let database_url = crate::support::database_url(dir.path()).await;
    let base = || Config {
        database_url: database_url.clone(),
        data_dir: dir.path().join("data"),
        packets_dir: std::path::PathBuf::new(),
        ..Config::default()
    };
    let missing = dir.path().join("nope.pem");
    let err = gatehouse::serve::state(Config { model_ca_file: Some(missing.clone()), ..base() })
        .await
        .err()
        .expect("refused");
    assert!(
        format!("{err:#}").contains("model_ca_file") && format!("{err:#}").contains("nope.pem"),
        "{err:#}"
    );
    let empty = write_ca(dir.path(), "not a certificate\n");
    let err = gatehouse::serve::state(Config { model_ca_file: Some(empty), ..base() })
        .await
        .err()
        .expect("refused");
    assert!(format!("{err:#}").contains("no PEM certificate"), "{err:#}");
    // A good bundle starts.
    let good = write_ca(dir.path(), &test_ca().ca_pem);
    assert!(gatehouse::serve::state(Config { model_ca_file: Some(good), ..base() }).await.is_ok());
}

/// Fires `n` identical-budget calls at once (each a distinct request).
async fn concurrent_calls(m: &Meter, n: usize, max_tokens: i64) -> Vec<u16> {
    let client = reqwest::Client::new();
    let futures = (0..n).map(|i| {
        let client = client.clone();
        let url = m.app.url("/v1/chat/completions");
        let key = m.key.clone();
        async move {
            let mut body = chat(&format!("call {i:03}"));
            body["max_tokens"] = json!(max_tokens);
            client.post(url).bearer_auth(key).json(&body).send().await.unwrap().status().as_u16()
        }
    });
    futures_util::future::join_all(futures).await
}

#[tokio::test]
async fn sixty_four_concurrent_calls_never_pass_a_tokens_budget_of_ten() {
    let (url, up) = spawn_upstream().await;
    // "call 000" is 8 characters: a prompt estimate of 2 tokens; with
    // max_tokens 50 each call reserves 52; the budget holds exactly 10.
    let prompt = gatehouse::meter::estimate_prompt(&chat("call 000"));
    assert_eq!(prompt, 2);
    let m = setup(Some(&url), &format!("tokens = {}", 10 * (prompt + 50)), false, |_| {}).await;
    // The upstream spends exactly what was reserved (prompt 2, completion =
    // the max_tokens it got), slowly, so every call is admitted while others
    // are in flight.
    up.set(|b| {
        b.usage = Some((prompt, 0));
        b.echo_max_tokens = true;
        b.delay = Duration::from_millis(300);
    });
    let statuses = concurrent_calls(&m, 64, 50).await;
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 10, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 54, "{statuses:?}");
    assert_eq!(up.hits(), 10, "exactly ten were forwarded");
    let calls = settled(&m).await;
    let forwarded: Vec<&ModelCall> = calls.iter().filter(|c| c.refused.is_none()).collect();
    assert_eq!(forwarded.len(), 10);
    let ledger_tokens: i64 = forwarded.iter().map(|c| c.prompt_tokens + c.completion_tokens).sum();
    assert_eq!(
        ledger_tokens,
        up.reported.load(Ordering::SeqCst),
        "the ledger sums the upstream's usage"
    );
    assert_eq!(ledger_tokens, 10 * (prompt + 50));
    assert!(forwarded.iter().all(|c| !c.tokens_estimated && c.reserved_tokens == 0));
    assert!(
        calls
            .iter()
            .filter(|c| c.refused.is_some())
            .all(|c| c.refused.as_deref() == Some("tokens") && c.status == 429)
    );
    let status = status_json(&m).await;
    assert_eq!(status["caps"][0], json!({"cap": "tokens", "limit": 520, "used": 520, "left": 0}));
}

#[tokio::test]
async fn sixty_four_concurrent_calls_never_pass_a_calls_budget_of_ten() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 10\ntokens = 100000", false, |_| {}).await;
    up.set(|b| b.delay = Duration::from_millis(100));
    let statuses = concurrent_calls(&m, 64, 20).await;
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 10, "{statuses:?}");
    assert_eq!(up.hits(), 10);
    let calls = settled(&m).await;
    let tokens: i64 = calls.iter().map(|c| c.prompt_tokens + c.completion_tokens).sum();
    assert_eq!(tokens, up.reported.load(Ordering::SeqCst));
    assert_eq!(status_json(&m).await["caps"][1]["used"], 150);
}

#[tokio::test]
async fn max_tokens_is_lowered_to_what_is_left_or_filled_in() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "tokens = 100", false, |_| {}).await;
    let prompt = gatehouse::meter::estimate_prompt(&chat("hi"));
    // Asking for more than the budget holds: lowered to what is left.
    let mut body = chat("hi");
    body["max_tokens"] = json!(10_000);
    assert_eq!(call(&m.app, &m.key, &body).await.0, 200);
    assert_eq!(up.last_body.lock().unwrap()["max_tokens"], 100 - prompt);
    // 15 were used: a call without max_tokens gets what is left.
    assert_eq!(call(&m.app, &m.key, &chat("hi")).await.0, 200);
    assert_eq!(up.last_body.lock().unwrap()["max_tokens"], 100 - 15 - prompt);
    // `max_completion_tokens` is lowered in place; a small ask is sent as is.
    let mut body = chat("hi");
    body["max_completion_tokens"] = json!(5_000);
    assert_eq!(call(&m.app, &m.key, &body).await.0, 200);
    let sent = up.last_body.lock().unwrap().clone();
    assert_eq!(sent["max_completion_tokens"], 100 - 30 - prompt);
    assert!(sent.get("max_tokens").is_none(), "{sent}");
    let mut body = chat("hi");
    body["max_tokens"] = json!(3);
    assert_eq!(call(&m.app, &m.key, &body).await.0, 200);
    assert_eq!(up.last_body.lock().unwrap()["max_tokens"], 3);
    // A prompt larger than what is left is refused before it is sent.
    let (status, body) = call(&m.app, &m.key, &chat(&"x".repeat(400))).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["cap"], "tokens");
    assert!(body["error"]["message"].as_str().unwrap().contains("about 100 tokens"), "{body}");
    assert_eq!(up.hits(), 4);
    // A max_tokens that is no integer is replaced by the limit (never
    // sent beside it, where the upstream would read the last one).
    let mut body = chat("hi");
    body["max_tokens"] = json!("lots");
    assert_eq!(call(&m.app, &m.key, &body).await.0, 200);
    let raw = up.last_raw.lock().unwrap().clone();
    assert_eq!(raw.matches("max_tokens").count(), 1, "{raw}");
    assert_eq!(up.last_body.lock().unwrap()["max_tokens"], 100 - 60 - prompt);
}

/// A body with a key twice could mean one `max_tokens` to the meter (the
/// last, as serde_json reads it) and another to an upstream that reads the
/// first: it is forwarded as the meter read it, one key each. A body with
/// nothing to change goes byte for byte.
#[tokio::test]
async fn a_body_with_a_key_twice_is_forwarded_as_the_meter_read_it() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "tokens = 100\nmodels = [\"fake-model\"]", false, |_| {}).await;
    let send = |raw: String| {
        let (app, key) = (&m.app, &m.key);
        async move {
            let r = reqwest::Client::new()
                .post(app.url("/v1/chat/completions"))
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(raw)
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        }
    };
    let plain = serde_json::to_string(&chat("hi")).unwrap();
    let twice = format!("{},\"max_tokens\":1000000,\"max_tokens\":5}}", &plain[..plain.len() - 1]);
    assert_eq!(send(twice.clone()).await, 200);
    let raw = up.last_raw.lock().unwrap().clone();
    assert_eq!(raw.matches("max_tokens").count(), 1, "{raw}");
    assert_eq!(up.last_body.lock().unwrap()["max_tokens"], 5, "{raw}");
    // Nested too: the usage option the meter read is the one sent.
    let nested = format!(
        "{},\"max_tokens\":5,\"stream_options\":{{\"include_usage\":true,\"include_usage\":true}}}}",
        &plain[..plain.len() - 1]
    );
    assert_eq!(send(nested).await, 200);
    let raw = up.last_raw.lock().unwrap().clone();
    assert_eq!(raw.matches("include_usage").count(), 1, "{raw}");
    // Only a filled-in max_tokens to add: the model the allowlist passed
    // (the last) is the one sent, never a first one beside it.
    let model_twice = format!("{{\"model\":\"gpt-9-ultra\",{}", &plain[1..]);
    assert_eq!(send(model_twice).await, 200);
    let raw = up.last_raw.lock().unwrap().clone();
    assert_eq!(raw.matches("\"model\"").count(), 1, "{raw}");
    let sent = up.last_body.lock().unwrap().clone();
    assert_eq!(
        (sent["model"].as_str(), sent["max_tokens"].is_i64()),
        (Some("fake-model"), true),
        "{raw}"
    );
    // Nothing to change: the client's own bytes, spacing and all.
    let spaced = format!("{},  \"max_tokens\" : 5 }}", &plain[..plain.len() - 1]);
    assert_eq!(send(spaced.clone()).await, 200);
    assert_eq!(*up.last_raw.lock().unwrap(), spaced);
    // The transcript keeps what the client sent.
    let calls = settled(&m).await;
    assert_eq!(calls.len(), 4);
    assert_eq!(
        calls[0].request_sha256,
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(twice.as_bytes()))
    );
}

#[tokio::test]
async fn no_tokens_budget_leaves_max_tokens_alone() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    assert_eq!(call(&m.app, &m.key, &chat("hi")).await.0, 200);
    let sent = up.last_body.lock().unwrap().clone();
    assert_eq!(sent, chat("hi"), "the body is forwarded unchanged");
}

#[tokio::test]
async fn a_call_in_flight_when_the_server_stopped_is_settled_at_start() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "tokens = 1000", false, |_| {}).await;
    up.set(|b| b.delay = Duration::from_secs(2));
    let (app_url, key) = (m.app.url("/v1/chat/completions"), m.key.clone());
    let pending = tokio::spawn(async move {
        let mut body = chat("a long question");
        body["max_tokens"] = json!(500);
        reqwest::Client::new()
            .post(app_url)
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    let mut in_flight = Vec::new();
    for _ in 0..100 {
        in_flight = ledger(&m.app, &m.assignment).await;
        if !in_flight.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(in_flight[0].status, 0);
    assert_eq!(in_flight[0].reserved_tokens, 504, "prompt estimate 4 + max_tokens 500");
    assert_eq!(
        status_json(&m).await["caps"][0]["used"],
        504,
        "the reservation is held while in flight"
    );
    // What start-up does after a crash: every call still in flight is settled.
    assert_eq!(gatehouse::meter::settle_interrupted(&m.app.state).await.unwrap(), 1);
    let row = &ledger(&m.app, &m.assignment).await[0];
    assert_eq!(
        (
            row.status,
            row.prompt_tokens,
            row.completion_tokens,
            row.tokens_estimated,
            row.reserved_tokens
        ),
        (499, 4, 0, true, 0)
    );
    assert!(row.error.as_deref().unwrap().contains("server stopped"), "{:?}", row.error);
    assert_eq!(
        status_json(&m).await["caps"][0]["used"],
        4,
        "the reservation is released, the prompt charged"
    );
    // The late answer of that call changes nothing (it was settled).
    assert_eq!(pending.await.unwrap(), 200);
    let row = &ledger(&m.app, &m.assignment).await[0];
    assert_eq!(row.status, 499);
    assert_eq!(status_json(&m).await["caps"][0]["used"], 4);
    // Nothing is in flight: a second start settles nothing.
    assert_eq!(gatehouse::meter::settle_interrupted(&m.app.state).await.unwrap(), 0);
}

#[tokio::test]
async fn a_stream_that_asked_for_usage_gets_it_and_one_without_a_provider_usage_is_estimated_with_tools()
 {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "tokens = 1000", false, |_| {}).await;
    // The client asked for usage: it gets the chunk.
    let mut body = chat("with usage");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let r = reqwest::Client::new()
        .post(m.app.url("/v1/chat/completions"))
        .bearer_auth(&m.key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert!(text.contains("\"usage\""), "{text}");
    // Settled before the stream ended: the next call is admitted against
    // what this one used, not its reservation of the whole budget.
    let row = &ledger(&m.app, &m.assignment).await[0];
    assert_eq!((row.status, row.reserved_tokens), (200, 0), "settled when the client saw the end");
    // A tool call, streamed by a provider that sends no usage: estimated
    // from the tools and the call's arguments.
    up.set(|b| {
        b.usage = None;
        b.tool_call = true;
    });
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let mut body = chat("weather?");
    body["stream"] = json!(true);
    body["tools"] = tools.clone();
    let r = reqwest::Client::new()
        .post(m.app.url("/v1/chat/completions"))
        .bearer_auth(&m.key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert!(text.contains("get_weather"), "{text}");
    let calls = settled(&m).await;
    assert_eq!(
        (calls[0].prompt_tokens, calls[0].completion_tokens, calls[0].tokens_estimated),
        (10, 5, false)
    );
    let expected_prompt = ("weather?".len() + tools.to_string().len()).div_ceil(4) as i64;
    // "get_weather" + {"city": "Paris"} = 11 + 17 characters.
    assert_eq!(
        (calls[1].prompt_tokens, calls[1].completion_tokens, calls[1].tokens_estimated),
        (expected_prompt, 7, true)
    );
}

#[tokio::test]
async fn budget_refusals_tell_clients_not_to_retry() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 1", false, |_| {}).await;
    let send = || {
        reqwest::Client::new()
            .post(m.app.url("/v1/chat/completions"))
            .bearer_auth(&m.key)
            .json(&chat("hi"))
            .send()
    };
    let r = send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("x-should-retry").is_none(), "an answer carries no retry advice");
    let r = send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers().get("x-should-retry").unwrap(), "false");
    assert!(r.headers().get("retry-after").is_none(), "no invitation to retry");
    // An upstream's own 429 passes through as it came.
    let (url2, up2) = spawn_upstream().await;
    let m2 = setup(Some(&url2), "model_calls = 5", false, |_| {}).await;
    up2.set(|b| b.status = 429);
    let r = reqwest::Client::new()
        .post(m2.app.url("/v1/chat/completions"))
        .bearer_auth(&m2.key)
        .json(&chat("hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("x-should-retry").is_none());
    assert_eq!(up.hits(), 1);
}

#[tokio::test]
async fn sdk_retries_of_a_refusal_are_recorded_as_the_librarys() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 1", false, |_| {}).await;
    assert_eq!(call(&m.app, &m.key, &chat("once")).await.0, 200);
    for n in 0..3 {
        let r = reqwest::Client::new()
            .post(m.app.url("/v1/chat/completions"))
            .bearer_auth(&m.key)
            .header("x-stainless-retry-count", n.to_string())
            .json(&chat("past the cap"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 429);
    }
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls.iter().map(|c| c.client_retry).collect::<Vec<_>>(), vec![0, 0, 1, 2]);
    assert_eq!(calls[2].duplicate_of, Some(calls[1].id));
}

#[tokio::test]
async fn a_non_streaming_call_the_client_abandons_is_still_finished() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "tokens = 1000", false, |_| {}).await;
    up.set(|b| b.delay = Duration::from_millis(600));
    let r = reqwest::Client::new()
        .post(m.app.url("/v1/chat/completions"))
        .bearer_auth(&m.key)
        .timeout(Duration::from_millis(150))
        .json(&chat("gave up"))
        .send()
        .await;
    assert!(r.is_err(), "the client gave up");
    let calls = settled(&m).await;
    assert_eq!(
        (
            calls[0].status,
            calls[0].prompt_tokens,
            calls[0].completion_tokens,
            calls[0].tokens_estimated
        ),
        (200, 10, 5, false)
    );
    assert_eq!(status_json(&m).await["caps"][0]["used"], 15);
}

#[tokio::test]
async fn models_outside_the_packets_list_are_refused_and_recorded() {
    let (url, up) = spawn_upstream().await;
    let m = setup(
        Some(&url),
        "model_calls = 5\nmodels = [\"fake-model\", \"fake-mini\"]",
        false,
        |_| {},
    )
    .await;
    assert_eq!(call(&m.app, &m.key, &chat("allowed")).await.0, 200);
    let mut body = chat("not allowed");
    body["model"] = json!("gpt-9-ultra");
    let (status, answer) = call(&m.app, &m.key, &body).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["type"], "model_not_allowed");
    assert_eq!(answer["error"]["allowed"], json!(["fake-model", "fake-mini"]));
    assert!(answer["error"]["message"].as_str().unwrap().contains("\"gpt-9-ultra\""), "{answer}");
    assert_eq!(up.hits(), 1);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(
        (calls[1].refused.as_deref(), calls[1].status, calls[1].model.as_str()),
        (Some("model"), 400, "gpt-9-ultra")
    );
}

#[tokio::test]
async fn packet_max_tokens_default_and_ceiling_apply() {
    let (url, up) = spawn_upstream().await;
    let m = setup(
        Some(&url),
        "model_calls = 5\nmax_tokens_default = 256\nmax_tokens_ceiling = 1024",
        false,
        |_| {},
    )
    .await;
    assert_eq!(call(&m.app, &m.key, &chat("default")).await.0, 200);
    assert_eq!(up.last_body.lock().unwrap()["max_tokens"], 256);
    let mut body = chat("too many");
    body["max_tokens"] = json!(4096);
    assert_eq!(call(&m.app, &m.key, &body).await.0, 200);
    assert_eq!(up.last_body.lock().unwrap()["max_tokens"], 1024);
    body["max_tokens"] = json!(100);
    assert_eq!(call(&m.app, &m.key, &body).await.0, 200);
    assert_eq!(up.last_body.lock().unwrap()["max_tokens"], 100);
}

#[tokio::test]
async fn a_request_over_the_size_cap_is_a_recorded_413() {
    let (url, up) = spawn_upstream().await;
    // No packet cap: the configured maximum applies.
    let m = setup(Some(&url), "model_calls = 5", false, |c| c.model_max_request_bytes = 4096).await;
    assert_eq!(call(&m.app, &m.key, &chat(&"a".repeat(3000))).await.0, 200);
    let (status, body) = call(&m.app, &m.key, &chat(&"a".repeat(5000))).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["type"], "request_too_large");
    assert_eq!(body["error"]["limit"], 4096);
    assert_eq!(up.hits(), 1);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls[1].refused.as_deref(), Some("request_size"));
    assert_eq!(calls[1].status, 413);
    assert!(calls[1].request_bytes > 5000, "{}", calls[1].request_bytes);
    // A packet's request_bytes budget is also the per-request cap, even above axum's default 2 MiB.
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "request_bytes = 3000000", false, |c| {
        c.model_max_request_bytes = 8 << 20
    })
    .await;
    assert_eq!(call(&m.app, &m.key, &chat(&"b".repeat(2_500_000))).await.0, 200);
    let (status, _) = call(&m.app, &m.key, &chat(&"b".repeat(3_100_000))).await;
    assert_eq!(status, 413);
}

#[tokio::test]
async fn a_body_that_is_not_json_is_refused_and_recorded() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    let r = reqwest::Client::new()
        .post(m.app.url("/v1/chat/completions"))
        .bearer_auth(&m.key)
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(up.hits(), 0);
    assert_eq!(ledger(&m.app, &m.assignment).await[0].refused.as_deref(), Some("invalid_request"));
}

#[tokio::test]
async fn the_official_openai_package_works_unchanged() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    // A second version whose model waits for a red run, and a candidate on it.
    crate::support::publish_copy(&m.app.state, SLUG, "m2", |toml| {
        toml.replace("[budgets]", "[workspace]\nmodel_waits_for_red = true\n\n[budgets]")
    })
    .await;
    let closed = invite(&m.app.state, "Grace").await;
    let closed_key = key_of(&m.app, &closed.token).await;
    let script = crate::support::repo_root().join("server/tests/web/openai_client.py");
    let mut command = std::process::Command::new("python3");
    command
        .arg(&script)
        .env("GATEHOUSE_BASE", m.app.url("/v1"))
        .env("GATEHOUSE_KEY", &m.key)
        .env("GATEHOUSE_CLOSED_KEY", &closed_key);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("python3 runs (scripts/setup installs requirements-host.txt)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().count(), 7, "{stdout}");
    // Five forwarded, one refusal, recorded once: the SDK did not retry it.
    assert_eq!(up.hits(), 5);
    let calls = settled(&m).await;
    assert_eq!(calls.len(), 6, "{calls:?}");
    assert_eq!(calls[5].refused.as_deref(), Some("model_calls"));
    // The stream that did not ask for usage was counted from the provider's.
    assert!(
        calls[..5].iter().all(|c| c.status == 200
            && !c.tokens_estimated
            && c.prompt_tokens + c.completion_tokens == 15),
        "{calls:?}"
    );
    let closed_calls = ledger(&m.app, &closed.assignment.id).await;
    assert_eq!(closed_calls.len(), 1);
    assert_eq!(closed_calls[0].refused.as_deref(), Some("model_window"));
}

/// Runs `curl` with `args` and returns (status line's code, headers, body).
async fn curl(args: Vec<String>) -> (u16, String, String) {
    let shown = args.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args(["-sS", "--max-time", "30", "-D", "-"])
            .args(&args)
            .output()
    })
    .await
    .unwrap()
    .expect("curl runs (scripts/setup installs it)");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert!(
        out.status.success(),
        "curl {shown:?} failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    (code, head.to_ascii_lowercase(), body.to_string())
}

/// The curl command line of a chat completion with `body`, as a shell user
/// would type it.
fn curl_chat(m: &Meter, key: &str, body: &Value) -> Vec<String> {
    [
        "-H".into(),
        format!("Authorization: Bearer {key}"),
        "-H".into(),
        "Content-Type: application/json".into(),
        "-d".into(),
        body.to_string(),
        m.app.url("/v1/chat/completions"),
    ]
    .into_iter()
    .collect()
}

#[tokio::test]
async fn curl_works_unchanged_and_sees_the_documented_errors() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 2", false, |_| {}).await;
    // Non-streaming: the provider's answer and usage.
    let (code, _, body) = curl(curl_chat(&m, &m.key, &chat("hello"))).await;
    assert_eq!(code, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(answer["usage"]["total_tokens"], 15);
    // Streaming (`-N`): server-sent events ending in [DONE], without the
    // usage chunk the meter asked the provider for.
    let mut stream = chat("hello again");
    stream["stream"] = json!(true);
    let mut args = vec!["-N".to_string()];
    args.extend(curl_chat(&m, &m.key, &stream));
    let (code, head, body) = curl(args).await;
    assert_eq!(code, 200, "{body}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    let events: Vec<&str> = body.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(events.last(), Some(&"[DONE]"), "{body}");
    let text: String = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).unwrap())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_string))
        .collect();
    assert_eq!(text, "Hello there");
    assert!(!body.contains("\"usage\""), "the meter's own usage chunk reached the client: {body}");
    // Past the cap: 429 budget_exceeded naming the cap, marked final.
    let (code, head, body) = curl(curl_chat(&m, &m.key, &chat("one too many"))).await;
    assert_eq!(code, 429, "{body}");
    assert!(head.contains("x-should-retry: false"), "{head}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (
            error["error"]["type"].as_str(),
            error["error"]["cap"].as_str(),
            error["error"]["limit"].as_i64()
        ),
        (Some("budget_exceeded"), Some("model_calls"), Some(2))
    );
    // An unknown key: 401 invalid_api_key; no key at all: the same, saying how.
    let (code, _, body) = curl(curl_chat(&m, &format!("gh-{}", "0".repeat(40)), &chat("hi"))).await;
    assert_eq!(code, 401, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["type"], "invalid_api_key");
    let (code, _, body) =
        curl(vec!["-d".into(), chat("hi").to_string(), m.app.url("/v1/chat/completions")]).await;
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    // Two forwarded, and the refusal recorded once.
    assert_eq!(up.hits(), 2);
    let calls = settled(&m).await;
    assert_eq!(
        calls.iter().map(|c| (c.status, c.refused.as_deref())).collect::<Vec<_>>(),
        vec![(200, None), (200, None), (429, Some("model_calls"))]
    );
}

#[tokio::test]
async fn the_first_chunk_of_a_stream_is_not_held_on_a_reused_connection() {
    let (url, up) = spawn_upstream().await;
    let upstream_addr: std::net::SocketAddr =
        url.trim_start_matches("http://").trim_end_matches("/v1").parse().unwrap();
    let m = setup(Some(&url), "model_calls = 50", false, |_| {}).await;
    // The upstream sends its headers, its first chunk 5 ms later and the
    // rest 300 ms later: the first chunk must not wait for the client's
    // (delayed) ACK of the headers. Nagle's algorithm would hold it ~40 ms
    // on every hop whose socket lacks TCP_NODELAY; a timing bound alone
    // cannot tell that apart from a loaded machine, so the sockets are
    // asked directly while the connections are open.
    up.set(|b| b.stream_pause = Duration::from_millis(300));
    let client = reqwest::Client::new();
    let mut firsts = Vec::new();
    let mut sockets = Vec::new();
    for i in 0..6 {
        let mut body = chat(&format!("stream {i}"));
        body["stream"] = json!(true);
        let sent = std::time::Instant::now();
        let mut r = client
            .post(m.app.url("/v1/chat/completions"))
            .bearer_auth(&m.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let first = r.chunk().await.unwrap().expect("a first chunk");
        let took = sent.elapsed();
        assert!(String::from_utf8_lossy(&first).contains("Hel"), "{first:?}");
        // Mid-stream: the meter's accepted socket (local end: the app) and
        // its socket to the upstream (remote end: the upstream) are open.
        sockets.extend(tcp_nodelay_of(|local, peer| local == m.app.addr || peer == upstream_addr));
        while r.chunk().await.unwrap().is_some() {}
        // The first request opens the connection; the rest reuse it.
        if i > 0 {
            firsts.push(took);
        }
    }
    let served = sockets.iter().any(|s| s.0 == m.app.addr);
    let upstream = sockets.iter().any(|s| s.1 == upstream_addr);
    assert!(served && upstream, "the meter's sockets were not found: {sockets:?}");
    assert!(
        sockets.iter().all(|s| s.2),
        "a socket of the meter lacks TCP_NODELAY (local, peer, nodelay): {sockets:?}"
    );
    // And the chunk really came before the rest (not buffered to the end).
    firsts.sort();
    let median = firsts[firsts.len() / 2];
    assert!(median < Duration::from_millis(250), "first chunk after {firsts:?}");
}

/// (local address, peer address, TCP_NODELAY) of this process's open TCP
/// sockets that `wanted(local, peer)` picks, read from `/proc/self/fd`.
fn tcp_nodelay_of(
    wanted: impl Fn(std::net::SocketAddr, std::net::SocketAddr) -> bool,
) -> Vec<(std::net::SocketAddr, std::net::SocketAddr, bool)> {
    use std::os::fd::FromRawFd;
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if !std::fs::read_link(entry.path())
            .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
        {
            continue;
        }
        // SAFETY: the descriptor is only borrowed (ManuallyDrop never
        // closes it); a non-TCP socket answers the calls below with errors.
        let s = std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
        if let (Ok(local), Ok(peer), Ok(nodelay)) = (s.local_addr(), s.peer_addr(), s.nodelay())
            && wanted(local, peer)
        {
            out.push((local, peer, nodelay));
        }
    }
    out
}

#[tokio::test]
async fn per_call_queries_use_indexes_not_the_ledger() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    let url = m.app.state.config.database_url.clone();
    let (dup, refused, totals) = if url.starts_with("postgres") {
        // The test tables are nearly empty, where a sequential scan is
        // cheapest; with it priced out, the plan shows which index serves.
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::query("SET enable_seqscan = off").execute(&mut conn).await.unwrap();
        let mut plans = Vec::new();
        for q in [
            "SELECT MIN(id) FROM model_calls WHERE assignment_id = 'a' AND request_sha256 = 'x'",
            "SELECT COUNT(*) FROM model_calls WHERE assignment_id = 'a' AND refused IS NOT NULL",
            "SELECT calls, tokens, request_bytes FROM meter_totals WHERE assignment_id = 'a'",
        ] {
            let rows: Vec<(String,)> =
                sqlx::query_as(&format!("EXPLAIN {q}")).fetch_all(&mut conn).await.unwrap();
            plans.push(rows.into_iter().map(|r| r.0).collect::<Vec<_>>().join("; "));
        }
        conn.close().await.unwrap();
        assert!(plans[2].contains("Index Scan using meter_totals_pkey"), "{}", plans[2]);
        (plans[0].clone(), plans[1].clone(), plans[2].clone())
    } else {
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        let plan = |q: &'static str| {
            let pool = pool.clone();
            async move {
                let rows: Vec<(i64, i64, i64, String)> =
                    sqlx::query_as(&format!("EXPLAIN QUERY PLAN {q}"))
                        .fetch_all(&pool)
                        .await
                        .unwrap();
                rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("; ")
            }
        };
        let dup = plan(
            "SELECT MIN(id) FROM model_calls WHERE assignment_id = 'a' AND request_sha256 = 'x'",
        )
        .await;
        let refused = plan(
            "SELECT COUNT(*) FROM model_calls WHERE assignment_id = 'a' AND refused IS NOT NULL",
        )
        .await;
        let totals =
            plan("SELECT calls, tokens, request_bytes FROM meter_totals WHERE assignment_id = 'a'")
                .await;
        pool.close().await;
        assert!(totals.contains("USING INDEX"), "{totals}");
        (dup, refused, totals)
    };
    assert!(dup.contains("model_calls_by_request"), "{dup}");
    assert!(refused.contains("model_calls_refused"), "{refused}");
    assert!(!totals.contains("model_calls"), "{totals}");
    // And the totals agree with the ledger they summarise.
    for i in 0..3 {
        assert_eq!(call(&m.app, &m.key, &chat(&format!("q{i}"))).await.0, 200);
    }
    let calls = settled(&m).await;
    let usage = m.app.state.db.meter_usage(&m.assignment).await.unwrap();
    // Admission read them from memory, moved by each admission and settlement.
    assert_eq!(m.app.state.memo.meter.totals(&m.assignment), Some(usage));
    assert_eq!(usage.calls, calls.len() as i64);
    assert_eq!(
        usage.tokens,
        calls.iter().map(|c| c.prompt_tokens + c.completion_tokens).sum::<i64>()
    );
    assert_eq!(usage.request_bytes, calls.iter().map(|c| c.request_bytes).sum::<i64>());
}

/// `gatehouse serve` as a child process over `dir`, metering to `upstream`.
fn serve_child(
    dir: &std::path::Path,
    database_url: &str,
    port: u16,
    upstream: &str,
) -> std::process::Child {
    let log =
        std::fs::OpenOptions::new().create(true).append(true).open(dir.join("child.log")).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        // The test binary's own GATEHOUSE_TEST_DATABASE is no setting of the app.
        .env_remove("GATEHOUSE_TEST_DATABASE")
        .arg("serve")
        .current_dir(dir)
        .env("GATEHOUSE_LISTEN", format!("127.0.0.1:{port}"))
        .env("GATEHOUSE_PUBLIC_URL", format!("http://127.0.0.1:{port}"))
        .env("GATEHOUSE_DATABASE_URL", database_url)
        .env("GATEHOUSE_DATA_DIR", dir.join("data"))
        .env("GATEHOUSE_PACKETS_DIR", "")
        .env("GATEHOUSE_WORKERS", "0")
        .env("GATEHOUSE_MODEL_UPSTREAM_URL", upstream)
        .env("GATEHOUSE_LOG", "info,sqlx=warn")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

async fn wait_healthy(port: u16, dir: &std::path::Path) {
    for _ in 0..300 {
        if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await
            && r.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the child did not start: {}",
        std::fs::read_to_string(dir.join("child.log")).unwrap_or_default()
    );
}

#[tokio::test]
async fn a_kill_9_mid_call_leaves_no_stuck_reservation() {
    let (url, up) = spawn_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let database_url = crate::support::database_url(dir.path()).await;
    let config = Config {
        database_url: database_url.clone(),
        data_dir: dir.path().join("data"),
        packets_dir: std::path::PathBuf::new(),
        ..Config::default()
    };
    let state = gatehouse::serve::state(config).await.unwrap();
    meter_packet(&state, "tokens = 1000", false).await;
    let invited = invite(&state, "Ada").await;
    let (_, key) = gatehouse::meter::current_key(&state, &invited.assignment, &invited.token)
        .await
        .unwrap()
        .unwrap();
    let assignment = invited.assignment.id.clone();

    let mut child = serve_child(dir.path(), &database_url, port, &url);
    wait_healthy(port, dir.path()).await;
    up.set(|b| b.delay = Duration::from_secs(3));
    let endpoint = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let pending = tokio::spawn({
        let (endpoint, key) = (endpoint.clone(), key.clone());
        async move {
            let mut body = chat("a long question");
            body["max_tokens"] = json!(500);
            reqwest::Client::new().post(endpoint).bearer_auth(key).json(&body).send().await
        }
    });
    for _ in 0..200 {
        if !state.db.model_calls_of(&assignment).await.unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        state.db.meter_usage(&assignment).await.unwrap().tokens,
        504,
        "the reservation is held"
    );
    // The request's transcript blob is written beside the call: wait for
    // it, so the charge it keeps is not nothing.
    let request_sha = state.db.model_calls_of(&assignment).await.unwrap()[0]
        .request_body_sha256
        .clone()
        .expect("the request is kept");
    for _ in 0..500 {
        if state.blobs().local_copy(&request_sha).await.unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(pending.await.unwrap().is_err(), "the server died mid-call");
    let row = &state.db.model_calls_of(&assignment).await.unwrap()[0];
    assert_eq!((row.status, row.reserved_tokens), (0, 504), "the killed server left it in flight");
    // Its transcript charge: the request kept and room for the response.
    // (The request's blob is written beside the call; the kill came after
    // or before it reached the disk, which the settlement must tell.)
    let request_kept = match state.blobs().local_copy(&request_sha).await.unwrap() {
        Some(p) => std::fs::metadata(p).unwrap().len() as i64,
        None => 0,
    };
    assert!(request_kept > 0, "the request's blob was written");
    assert!(row.transcript_bytes > request_kept, "room reserved for the response: {row:?}");
    assert_eq!(
        state.db.meter_usage(&assignment).await.unwrap().transcript_bytes,
        row.transcript_bytes
    );

    // The next start settles it before admitting any call.
    up.set(|b| b.delay = Duration::ZERO);
    let mut child = serve_child(dir.path(), &database_url, port, &url);
    wait_healthy(port, dir.path()).await;
    let row = &state.db.model_calls_of(&assignment).await.unwrap()[0];
    assert_eq!(
        (row.status, row.prompt_tokens, row.reserved_tokens, row.tokens_estimated),
        (499, 4, 0, true)
    );
    assert_eq!(state.db.meter_usage(&assignment).await.unwrap().tokens, 4);
    // The response's room is released: only the request kept stays charged.
    assert_eq!(row.transcript_bytes, request_kept, "{row:?}");
    assert_eq!(
        state.db.meter_usage(&assignment).await.unwrap().transcript_bytes,
        request_kept,
        "the totals release it too"
    );
    let r = reqwest::Client::new()
        .post(&endpoint)
        .bearer_auth(&key)
        .json(&chat("after the restart"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let _ = child.kill();
    let _ = child.wait();
}
