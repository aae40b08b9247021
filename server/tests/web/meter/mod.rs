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

mod access;
mod budgets;
mod clients;
mod recovery;
mod upstream;
mod wal;

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
