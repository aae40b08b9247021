//! Forwarding to the upstream and accounting for what came back. Upstream
//! failures are passed through with their status (502 when the upstream
//! could not be reached, 504 on a timeout), never replaced by an answer.
//!
//! Forwarding runs in its own task, so a client that leaves never leaves a row
//! unfinished; streams pass through chunk by chunk, stripping the usage chunk
//! the meter asked for and holding `[DONE]` back until the call is settled
//! (`StreamFilter`). Settlement replaces the reservation by the provider's
//! usage in the row and the totals, once (`finish_model_call` only settles a
//! status-0 row), under the assignment's lock, which also moves the kept
//! totals. What a stopped server left in flight is settled at the next `serve`
//! start (`super::interrupted`).

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;

use super::OpenAiError;
use crate::db::meter::ModelCallOutcome;
use crate::error::AppError;
use crate::state::AppState;

/// How much of a response the meter keeps to read usage from.
const KEEP_BYTES: usize = 16 << 20;

/// A forwarded call being answered.
pub struct Call {
    pub state: AppState,
    /// The pending `model_calls` row.
    pub id: i64,
    /// Its assignment, and what admission added to the assignment's
    /// totals (settlement moves the meter's kept totals as the database's).
    pub assignment_id: String,
    pub reserved_tokens: i64,
    pub request_bytes: i64,
    pub transcript_bytes: i64,
    pub stream: bool,
    /// The meter asked for the stream's usage chunk; it is kept from the client.
    pub strip_usage: bool,
    /// The request body as forwarded, for estimating tokens.
    pub request: Option<Value>,
    /// The prompt's estimated tokens (what admission reserved besides max_tokens).
    pub prompt_estimate: i64,
    pub started: Instant,
    /// The request bytes its transcript kept, and their blob.
    pub request_kept: usize,
    pub request_blob: Option<String>,
    /// The room admission reserved for the response's transcript.
    pub response_room: super::transcript::Room,
}

/// How a forwarded call ended, for the ledger.
enum End {
    /// The upstream answered (whatever its status).
    Answered,
    /// The upstream never saw the request (the connection failed).
    NotSent,
    /// The request was sent and no complete answer came (time-out, broken
    /// connection): charged the prompt's estimate.
    Lost,
}

impl Call {
    /// `seen` is the body the client received (a stream: reassembled), kept
    /// as the call's response transcript.
    async fn finish(
        &self,
        status: StatusCode,
        response: &[u8],
        response_bytes: usize,
        error: Option<String>,
        end: End,
        seen: Bytes,
    ) {
        let usage = match end {
            End::Answered if status.is_success() => {
                usage_of(self.stream, self.request.as_ref(), response)
            }
            // An error answer counts only the usage it reports (providers
            // do not bill failed calls).
            End::Answered => reported_usage(self.stream, response).unwrap_or_default(),
            End::NotSent => Usage::default(),
            End::Lost => reported_usage(self.stream, response).unwrap_or(Usage {
                prompt: self.prompt_estimate,
                completion: estimate(&completion_text(self.stream, response)),
                estimated: true,
            }),
        };
        let kept = super::transcript::keep(&self.state, "response", seen, self.response_room, None);
        let response_blob = kept.sha256.clone();
        let outcome = ModelCallOutcome {
            status: i64::from(status.as_u16()),
            response_bytes: response_bytes as i64,
            prompt_tokens: usage.prompt,
            completion_tokens: usage.completion,
            tokens_estimated: usage.estimated,
            latency_ms: self.started.elapsed().as_millis() as i64,
            error,
            counted: !matches!(end, End::NotSent),
            response_body_sha256: kept.sha256,
            transcript_cut: kept.cut,
            transcript_bytes: Some((self.request_kept + kept.bytes) as i64),
        };
        // Under the admission lock, so the kept totals move in the order
        // the database's do.
        let lock = self.state.memo.lock_for(&self.assignment_id);
        let guard = lock.lock().await;
        let mut moved = crate::db::meter::MeterUsage::default();
        moved.settle(self.reserved_tokens, self.request_bytes, self.transcript_bytes, &outcome);
        match self.state.db.finish_model_call(self.id, outcome).await {
            Ok(true) => self.state.memo.meter.move_totals(&self.assignment_id, |t| *t += moved),
            // The row is gone: the candidate was erased while the call was
            // in flight. Its transcripts, written or on their way, go too
            // (waited for without the admission lock).
            Ok(false) => {
                drop(guard);
                let blobs: Vec<&str> = [&self.request_blob, &response_blob]
                    .into_iter()
                    .flatten()
                    .map(String::as_str)
                    .collect();
                let removed = crate::erasure::forget_late_blobs(&self.state, &blobs).await;
                tracing::debug!(
                    call = self.id,
                    removed,
                    "a model call settled after its row was erased"
                );
            }
            Err(e) => {
                self.state.memo.meter.forget_totals(&self.assignment_id);
                tracing::error!(error = %e, call = self.id, "recording a model call failed");
            }
        }
        metrics::counter!("gatehouse_model_tokens_total")
            .increment((usage.prompt + usage.completion).max(0) as u64);
    }

    async fn failed(self, e: reqwest::Error) -> Response {
        let message = format!("the model upstream failed: {}", error_chain(&e));
        let error = OpenAiError(if e.is_timeout() {
            AppError::GatewayTimeout(message.clone()).coded("upstream_timeout")
        } else {
            AppError::BadGateway(message.clone()).coded("upstream_unreachable")
        });
        let status = error.0.status();
        let end = if e.is_connect() { End::NotSent } else { End::Lost };
        let seen = Bytes::from(serde_json::to_vec(&error.body()).expect("JSON serializes"));
        self.finish(status, &[], 0, Some(message), end, seen).await;
        error.into_response()
    }
}

/// The error with its causes, e.g. "error sending request: connection refused".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        // hyper and rustls repeat their cause in their own message.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

fn content_type(resp: &reqwest::Response) -> Option<HeaderValue> {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
}

/// Forwards a chat completion and answers with what the upstream said. The
/// call runs in its own task, so its row is finished with the upstream's
/// answer even when the client goes away before it comes.
pub async fn forward(call: Call, base: String, key: Option<String>, body: Bytes) -> Response {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let _ = tx.send(forward_now(call, &base, key.as_deref(), body).await);
    });
    rx.await.unwrap_or_else(|_| {
        OpenAiError(AppError::Internal(anyhow::anyhow!(
            "the meter's call to the upstream ended unexpectedly"
        )))
        .into_response()
    })
}

async fn forward_now(call: Call, base: &str, key: Option<&str>, body: Bytes) -> Response {
    let url = format!("{}/chat/completions", base.trim_end_matches('/'));
    let mut request = call
        .state
        .model_client
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body);
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
    call.finish(status, &bytes, bytes.len(), error, End::Answered, bytes.clone()).await;
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

/// Filters a stream event by event on its way to the client: removes the
/// usage-only chunk (`"choices": []` with a `usage`) when the meter asked
/// for it, and holds back the `[DONE]` event (and anything after it) until
/// `finish`, so the call is settled before the client can see the stream
/// end and send the next one. Everything else passes unchanged. Keeps an
/// incomplete event until its end arrives.
#[derive(Default)]
pub struct StreamFilter {
    strip_usage: bool,
    pending: Vec<u8>,
    held: Vec<u8>,
}

impl StreamFilter {
    pub fn new(strip_usage: bool) -> StreamFilter {
        StreamFilter { strip_usage, ..StreamFilter::default() }
    }

    /// The complete events of `pending + chunk` the client may have now.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if !self.held.is_empty() {
            self.held.extend_from_slice(chunk);
            return Vec::new();
        }
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some((end, sep)) = event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end + sep).collect();
            if is_done(&event[..end]) {
                self.held = event;
                self.held.append(&mut self.pending);
                break;
            }
            if !(self.strip_usage && is_usage_only(&event[..end])) {
                out.extend_from_slice(&event);
            }
        }
        out
    }

    /// What is left when the stream ends: an unterminated last event and
    /// the held `[DONE]`.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut rest = std::mem::take(&mut self.pending);
        if self.strip_usage && is_usage_only(&rest) {
            rest.clear();
        }
        rest.append(&mut self.held);
        rest
    }
}

fn is_done(event: &[u8]) -> bool {
    String::from_utf8_lossy(event)
        .lines()
        .any(|l| l.strip_prefix("data:").is_some_and(|d| d.trim() == "[DONE]"))
}

/// Where the first event of `buf` ends: (index of its blank line, length of
/// the separator).
fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn is_usage_only(event: &[u8]) -> bool {
    let text = String::from_utf8_lossy(event);
    let data: String =
        text.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
    let Ok(chunk) = serde_json::from_str::<Value>(&data) else { return false };
    chunk.get("usage").is_some_and(Value::is_object)
        && chunk.get("choices").and_then(Value::as_array).is_some_and(|c| c.is_empty())
}

/// Passes an SSE answer through chunk by chunk (less the usage chunk the
/// meter asked for), and records the call when the upstream ends (or the
/// client goes away).
fn stream_through(
    call: Call,
    status: StatusCode,
    ctype: Option<HeaderValue>,
    resp: reqwest::Response,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(async move {
        let mut upstream = resp.bytes_stream();
        let mut kept = Vec::new();
        let mut total = 0usize;
        let mut error = None;
        let mut end = End::Answered;
        let mut filter = StreamFilter::new(call.strip_usage);
        let mut client_gone = false;
        // What the client received, for the transcript.
        let mut sent = Vec::new();
        while let Some(chunk) = upstream.next().await {
            match chunk {
                Ok(bytes) => {
                    total += bytes.len();
                    if kept.len() < KEEP_BYTES {
                        kept.extend_from_slice(&bytes);
                    }
                    if client_gone {
                        // The upstream's usage still comes: read on to it.
                        continue;
                    }
                    let out = Bytes::from(filter.push(&bytes));
                    if sent.len() < KEEP_BYTES {
                        sent.extend_from_slice(&out);
                    }
                    if !out.is_empty() && tx.send(Ok(out)).await.is_err() {
                        error = Some("the client went away before the stream ended".to_string());
                        client_gone = true;
                    }
                }
                Err(e) => {
                    error = Some(format!("the upstream stream broke: {}", error_chain(&e)));
                    end = End::Lost;
                    break;
                }
            }
        }
        // Settled before the client sees the end: its next call is
        // admitted against what this one really used.
        let rest = filter.finish();
        let broke = matches!(end, End::Lost).then(|| error.clone()).flatten();
        if !client_gone {
            sent.extend_from_slice(&rest);
        }
        let seen = Bytes::from(super::transcript::reassemble(&sent));
        call.finish(status, &kept, total, error, end, seen).await;
        if !rest.is_empty() && !client_gone {
            let _ = tx.send(Ok(Bytes::from(rest))).await;
        }
        if let Some(message) = broke {
            let _ = tx.send(Err(std::io::Error::other(message))).await;
        }
        drop(tx);
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    let mut response = (status, body).into_response();
    let ct = ctype.unwrap_or_else(|| HeaderValue::from_static("text/event-stream"));
    response.headers_mut().insert(header::CONTENT_TYPE, ct);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /models` of the upstream, passed through.
pub async fn models(state: &AppState, base: &str, key: Option<&str>) -> Response {
    let url = format!("{}/models", base.trim_end_matches('/'));
    let mut request =
        state.model_client.get(url).timeout(Duration::from_secs(state.config.model_timeout_secs));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let result = async {
        let resp = request.send().await?;
        let status =
            StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
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
            let message = format!("the model upstream failed: {}", error_chain(&e));
            let error = if e.is_timeout() {
                AppError::GatewayTimeout(message)
            } else {
                AppError::BadGateway(message)
            };
            OpenAiError(error.coded("upstream_unreachable")).into_response()
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
    usage_numbers(v.get("usage")?)
}

fn usage_numbers(u: &Value) -> Option<(i64, i64)> {
    if !u.is_object() {
        return None;
    }
    let prompt = u.get("prompt_tokens").and_then(Value::as_i64)?;
    let completion = u.get("completion_tokens").and_then(Value::as_i64).unwrap_or(0);
    Some((prompt, completion))
}

/// Appends the text of a message's content (a string or text parts) and of
/// its tool calls (names and arguments, the legacy `function_call` too).
fn message_text(m: &Value, out: &mut String) {
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
    let calls = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("function"));
    for f in calls.chain(m.get("function_call")) {
        for key in ["name", "arguments"] {
            if let Some(t) = f.get(key).and_then(Value::as_str) {
                out.push_str(t);
            }
        }
    }
}

/// The estimated prompt tokens of a request: its messages (text, tool
/// calls and their arguments) and the tool and function definitions it
/// sends, at about four characters a token.
pub fn estimate_prompt(request: &Value) -> i64 {
    let mut text = String::new();
    for m in request.get("messages").and_then(Value::as_array).into_iter().flatten() {
        message_text(m, &mut text);
    }
    for key in ["tools", "functions", "response_format"] {
        if let Some(v) = request.get(key).filter(|v| !v.is_null()) {
            text.push_str(&v.to_string());
        }
    }
    estimate(&text)
}

/// The answer's text: content and tool calls (streams: reassembled from
/// the deltas).
fn completion_text(stream: bool, response: &[u8]) -> String {
    let mut out = String::new();
    if stream {
        for chunk in sse_chunks(response) {
            for c in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
                if let Some(d) = c.get("delta") {
                    message_text(d, &mut out);
                }
            }
        }
    } else if let Ok(answer) = serde_json::from_slice::<Value>(response) {
        for c in answer.get("choices").and_then(Value::as_array).into_iter().flatten() {
            if let Some(m) = c.get("message") {
                message_text(m, &mut out);
            }
        }
    }
    out
}

/// The JSON `data:` chunks of an SSE answer.
fn sse_chunks(response: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(response)
        .lines()
        .filter_map(|line| line.strip_prefix("data:").map(str::trim))
        .filter(|data| *data != "[DONE]")
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .collect()
}

/// The usage the upstream reported (for a stream, the last chunk carrying one).
fn reported_usage(stream: bool, response: &[u8]) -> Option<Usage> {
    let reported = if stream {
        sse_chunks(response).iter().filter_map(usage_field).next_back()
    } else {
        // Only `usage` is built; the rest of the answer is skipped over.
        #[derive(serde::Deserialize)]
        struct UsageOnly {
            usage: Option<Value>,
        }
        match serde_json::from_slice::<UsageOnly>(response) {
            Ok(answer) => answer.usage.as_ref().and_then(usage_numbers),
            // (Not an object, or `usage` twice: read as any JSON.)
            Err(_) => serde_json::from_slice::<Value>(response).ok().as_ref().and_then(usage_field),
        }
    };
    reported.map(|(prompt, completion)| Usage { prompt, completion, estimated: false })
}

/// Usage from the upstream's answer: its `usage` (for a stream, the last
/// chunk carrying one), else estimated from the request (messages, tools)
/// and the answer (content, tool calls).
pub fn usage_of(stream: bool, request: Option<&Value>, response: &[u8]) -> Usage {
    reported_usage(stream, response).unwrap_or_else(|| Usage {
        prompt: request.map(estimate_prompt).unwrap_or(0),
        completion: estimate(&completion_text(stream, response)),
        estimated: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_from_the_last_stream_chunk_or_estimated() {
        let sse = b"data: {\"choices\":[{\"delta\":{\"content\":\"abcd\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        assert_eq!(usage_of(true, None, sse), Usage { prompt: 7, completion: 2, estimated: false });
        let sse =
            b"data: {\"choices\":[{\"delta\":{\"content\":\"abcdefgh\"}}]}\n\ndata: [DONE]\n\n";
        let req = serde_json::json!({"messages": [{"role": "user", "content": "12345"}]});
        assert_eq!(
            usage_of(true, Some(&req), sse),
            Usage { prompt: 2, completion: 2, estimated: true }
        );
        let answer = br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;
        assert_eq!(
            usage_of(false, None, answer),
            Usage { prompt: 3, completion: 1, estimated: false }
        );
    }

    #[test]
    fn estimates_count_tools_and_tool_call_arguments() {
        let text = |v: serde_json::Value| estimate_prompt(&v);
        assert_eq!(
            text(serde_json::json!({"messages": [{"role": "user", "content": "12345678"}]})),
            2
        );
        // Tool definitions count as their JSON text.
        let tools = serde_json::json!([{"type": "function", "function": {"name": "f"}}]);
        let with_tools = serde_json::json!({"messages": [{"role": "user", "content": "12345678"}], "tools": tools});
        assert_eq!(text(with_tools), (8 + tools.to_string().len() as i64 + 3) / 4);
        // An assistant's earlier tool call (name and arguments) and text parts count.
        let history = serde_json::json!({"messages": [
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "abcd", "arguments": "{\"x\":1}"}}]},
            {"role": "user", "content": [{"type": "text", "text": "1234"}]},
        ]});
        assert_eq!(text(history), 4);
        // A non-streaming tool-call answer without usage: the arguments are the completion.
        let answer = br#"{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"abcd","arguments":"1234"}}]}}]}"#;
        assert_eq!(
            usage_of(false, None, answer),
            Usage { prompt: 0, completion: 2, estimated: true }
        );
        // A streamed one: the deltas' pieces are joined.
        let sse = b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"abcd\",\"arguments\":\"\"}}]}}]}\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"1234\"}}]}}]}\n\ndata: [DONE]\n\n";
        assert_eq!(usage_of(true, None, sse), Usage { prompt: 0, completion: 2, estimated: true });
    }

    #[test]
    fn the_usage_chunk_is_stripped_across_chunk_boundaries() {
        let content = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n";
        let usage =
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n";
        let done = "data: [DONE]\n\n";
        let whole = format!("{content}{usage}{done}");
        // Cut at every byte: the client always gets content and [DONE], never the usage chunk.
        for cut in 0..whole.len() {
            let mut s = StreamFilter::new(true);
            let mut out = s.push(&whole.as_bytes()[..cut]);
            out.extend(s.push(&whole.as_bytes()[cut..]));
            out.extend(s.finish());
            assert_eq!(String::from_utf8(out).unwrap(), format!("{content}{done}"), "cut at {cut}");
        }
        // CRLF framing, and an unterminated last event, pass too.
        let mut s = StreamFilter::new(true);
        let crlf =
            format!("{}{}", content.replace("\n\n", "\r\n\r\n"), usage.replace("\n\n", "\r\n\r\n"));
        let mut out = s.push(crlf.as_bytes());
        out.extend(s.push(b"data: [DONE]"));
        out.extend(s.finish());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{}data: [DONE]", content.replace("\n\n", "\r\n\r\n"))
        );
        // A usage carried with choices (not usage-only) is left alone.
        let mut s = StreamFilter::new(true);
        let both = "data: {\"choices\":[{\"delta\":{}}],\"usage\":{\"prompt_tokens\":1}}\n\n";
        assert_eq!(s.push(both.as_bytes()), both.as_bytes());
    }

    #[test]
    fn done_and_what_follows_it_wait_for_finish() {
        let check = |strip: bool, chunks: &[&str], now: &str, at_end: &str| {
            let mut f = StreamFilter::new(strip);
            let mut out = Vec::new();
            for c in chunks {
                out.extend(f.push(c.as_bytes()));
            }
            assert_eq!(String::from_utf8(out).unwrap(), now, "{chunks:?}");
            assert_eq!(String::from_utf8(f.finish()).unwrap(), at_end, "{chunks:?}");
        };
        let content = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
        let usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\n";
        check(false, &[content, "data: [DONE]\n\n"], content, "data: [DONE]\n\n");
        check(
            false,
            &[content, "data: [DO", "NE]\n\n: trailing\n\n"],
            content,
            "data: [DONE]\n\n: trailing\n\n",
        );
        check(
            false,
            &[content, usage, "data: [DONE]\n\n"],
            &format!("{content}{usage}"),
            "data: [DONE]\n\n",
        );
        check(true, &[content, usage, "data: [DONE]\n\n"], content, "data: [DONE]\n\n");
        check(false, &[content], content, "");
        // Content that merely mentions [DONE] is not the end.
        let mention = "data: {\"choices\":[{\"delta\":{\"content\":\"[DONE]\"}}]}\n\n";
        check(false, &[mention], mention, "");
    }
}
