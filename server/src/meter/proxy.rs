//! Forwarding to the upstream and accounting for what came back. Upstream
//! failures are passed through with their status (502 when the upstream
//! could not be reached, 504 on a timeout), never replaced by an answer.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;

use super::MeterError;
use crate::db::meter::ModelCallOutcome;
use crate::state::AppState;

/// How much of a response the meter keeps to read usage from.
const KEEP_BYTES: usize = 16 << 20;

/// The one upstream client, sharing its connection pool across calls.
fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .expect("the upstream HTTP client")
    })
}

/// A forwarded call being answered.
pub struct Call {
    pub state: AppState,
    /// The pending `model_calls` row.
    pub id: i64,
    pub stream: bool,
    /// The request body as JSON, for estimating prompt tokens.
    pub request: Option<Value>,
    pub started: Instant,
}

impl Call {
    async fn finish(&self, status: StatusCode, response: &[u8], response_bytes: usize, error: Option<String>) {
        let usage = if status.is_success() { usage_of(self.stream, self.request.as_ref(), response) } else { Usage::default() };
        let outcome = ModelCallOutcome {
            status: i64::from(status.as_u16()),
            response_bytes: response_bytes as i64,
            prompt_tokens: usage.prompt,
            completion_tokens: usage.completion,
            tokens_estimated: usage.estimated,
            latency_ms: self.started.elapsed().as_millis() as i64,
            error,
        };
        if let Err(e) = self.state.db.finish_model_call(self.id, outcome).await {
            tracing::error!(error = %e, call = self.id, "recording a model call failed");
        }
        metrics::counter!("gatehouse_model_tokens_total").increment((usage.prompt + usage.completion).max(0) as u64);
    }

    async fn failed(self, e: reqwest::Error) -> Response {
        let (status, kind) = if e.is_timeout() {
            (StatusCode::GATEWAY_TIMEOUT, "upstream_timeout")
        } else {
            (StatusCode::BAD_GATEWAY, "upstream_unreachable")
        };
        let message = format!("the model upstream failed: {}", error_chain(&e));
        self.finish(status, &[], 0, Some(message.clone())).await;
        MeterError::new(status, kind, message).into_response()
    }
}

/// The error with its causes, e.g. "error sending request: connection refused".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

fn content_type(resp: &reqwest::Response) -> Option<HeaderValue> {
    resp.headers().get(header::CONTENT_TYPE).and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
}

/// Forwards a chat completion and answers with what the upstream said.
pub async fn forward(call: Call, base: &str, key: Option<&str>, body: Bytes) -> Response {
    let url = format!("{}/chat/completions", base.trim_end_matches('/'));
    let mut request = client().post(url).header(header::CONTENT_TYPE, "application/json").body(body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if !call.stream {
        request = request.timeout(Duration::from_secs(call.state.config.model_timeout_secs));
    }
    let resp = match request.send().await {
        Ok(r) => r,
        Err(e) => return call.failed(e).await,
    };
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let ctype = content_type(&resp);
    if call.stream && status.is_success() {
        return stream_through(call, status, ctype, resp);
    }
    let bytes = match resp.bytes().await {
        Ok(b) => b,
        Err(e) => return call.failed(e).await,
    };
    let error = (!status.is_success()).then(|| upstream_error(status, &bytes));
    call.finish(status, &bytes, bytes.len(), error).await;
    let mut response = (status, bytes).into_response();
    if let Some(ct) = ctype {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response
}

/// The recorded error of an upstream answer that was not a success.
fn upstream_error(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(500)]);
    format!("the upstream answered {status}: {text}")
}

/// Passes an SSE answer through chunk by chunk, and records the call when
/// the upstream ends (or the client goes away).
fn stream_through(call: Call, status: StatusCode, ctype: Option<HeaderValue>, resp: reqwest::Response) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(async move {
        let mut upstream = resp.bytes_stream();
        let mut kept = Vec::new();
        let mut total = 0usize;
        let mut error = None;
        while let Some(chunk) = upstream.next().await {
            match chunk {
                Ok(bytes) => {
                    total += bytes.len();
                    if kept.len() < KEEP_BYTES {
                        kept.extend_from_slice(&bytes);
                    }
                    if tx.send(Ok(bytes)).await.is_err() {
                        error = Some("the client went away before the stream ended".to_string());
                        break;
                    }
                }
                Err(e) => {
                    let message = format!("the upstream stream broke: {}", error_chain(&e));
                    let _ = tx.send(Err(std::io::Error::other(message.clone()))).await;
                    error = Some(message);
                    break;
                }
            }
        }
        drop(tx);
        call.finish(status, &kept, total, error).await;
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) }));
    let mut response = (status, body).into_response();
    let ct = ctype.unwrap_or_else(|| HeaderValue::from_static("text/event-stream"));
    response.headers_mut().insert(header::CONTENT_TYPE, ct);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /models` of the upstream, passed through.
pub async fn models(state: &AppState, base: &str, key: Option<&str>) -> Response {
    let url = format!("{}/models", base.trim_end_matches('/'));
    let mut request = client().get(url).timeout(Duration::from_secs(state.config.model_timeout_secs));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let result = async {
        let resp = request.send().await?;
        let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let ctype = content_type(&resp);
        Ok::<_, reqwest::Error>((status, ctype, resp.bytes().await?))
    }
    .await;
    match result {
        Ok((status, ctype, bytes)) => {
            let mut response = (status, bytes).into_response();
            if let Some(ct) = ctype {
                response.headers_mut().insert(header::CONTENT_TYPE, ct);
            }
            response
        }
        Err(e) => {
            let status = if e.is_timeout() { StatusCode::GATEWAY_TIMEOUT } else { StatusCode::BAD_GATEWAY };
            MeterError::new(status, "upstream_unreachable", format!("the model upstream failed: {}", error_chain(&e))).into_response()
        }
    }
}

/// Tokens of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt: i64,
    pub completion: i64,
    pub estimated: bool,
}

/// About four characters per token, rounded up.
fn estimate(text: &str) -> i64 {
    (text.chars().count() as i64 + 3) / 4
}

fn usage_field(v: &Value) -> Option<(i64, i64)> {
    let u = v.get("usage").filter(|u| u.is_object())?;
    let prompt = u.get("prompt_tokens").and_then(Value::as_i64)?;
    let completion = u.get("completion_tokens").and_then(Value::as_i64).unwrap_or(0);
    Some((prompt, completion))
}

/// The text of the request's messages (string contents and text parts).
fn prompt_text(request: Option<&Value>) -> String {
    let mut out = String::new();
    for m in request.and_then(|r| r.get("messages")).and_then(Value::as_array).into_iter().flatten() {
        match m.get("content") {
            Some(Value::String(s)) => out.push_str(s),
            Some(Value::Array(parts)) => {
                for p in parts {
                    if let Some(t) = p.get("text").and_then(Value::as_str) {
                        out.push_str(t);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Usage from the upstream's answer: its `usage` (for a stream, the last
/// chunk carrying one), else estimated from the request's and the
/// answer's text.
pub fn usage_of(stream: bool, request: Option<&Value>, response: &[u8]) -> Usage {
    let mut reported = None;
    let mut completion_text = String::new();
    if stream {
        for line in String::from_utf8_lossy(response).lines() {
            let Some(data) = line.strip_prefix("data:").map(str::trim) else { continue };
            if data == "[DONE]" {
                continue;
            }
            let Ok(chunk) = serde_json::from_str::<Value>(data) else { continue };
            if let Some(u) = usage_field(&chunk) {
                reported = Some(u);
            }
            for c in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
                if let Some(t) = c.get("delta").and_then(|d| d.get("content")).and_then(Value::as_str) {
                    completion_text.push_str(t);
                }
            }
        }
    } else if let Ok(answer) = serde_json::from_slice::<Value>(response) {
        reported = usage_field(&answer);
        for c in answer.get("choices").and_then(Value::as_array).into_iter().flatten() {
            if let Some(t) = c.get("message").and_then(|m| m.get("content")).and_then(Value::as_str) {
                completion_text.push_str(t);
            }
        }
    }
    match reported {
        Some((prompt, completion)) => Usage { prompt, completion, estimated: false },
        None => Usage { prompt: estimate(&prompt_text(request)), completion: estimate(&completion_text), estimated: true },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_from_the_last_stream_chunk_or_estimated() {
        let sse = b"data: {\"choices\":[{\"delta\":{\"content\":\"abcd\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        assert_eq!(usage_of(true, None, sse), Usage { prompt: 7, completion: 2, estimated: false });
        let sse = b"data: {\"choices\":[{\"delta\":{\"content\":\"abcdefgh\"}}]}\n\ndata: [DONE]\n\n";
        let req = serde_json::json!({"messages": [{"role": "user", "content": "12345"}]});
        assert_eq!(usage_of(true, Some(&req), sse), Usage { prompt: 2, completion: 2, estimated: true });
        let answer = br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;
        assert_eq!(usage_of(false, None, answer), Usage { prompt: 3, completion: 1, estimated: false });
    }
}
