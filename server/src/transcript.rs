//! Reading transcripts back: the ledger rows of an assignment with the
//! bodies the meter kept (see `crate::meter::transcript`), as the pages
//! show them (`app::pages::transcript`) and as the JSON export writes them.

use app::pages::transcript::{CallView, Entry, MessageView, ToolCallView};
use serde_json::{Value, json};

use crate::db::ModelCall;
use crate::error::AppError;
use crate::state::AppState;

/// A kept body: parsed JSON, text that is not JSON (cut, or not JSON), or
/// nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Json(Value),
    Text(String),
    /// Why there is none.
    Missing(String),
}

impl Body {
    fn json(&self) -> Value {
        match self {
            Body::Json(v) => v.clone(),
            Body::Text(t) => Value::String(t.clone()),
            Body::Missing(_) => Value::Null,
        }
    }

    fn text(&self) -> Option<String> {
        match self {
            Body::Json(v) => Some(serde_json::to_string_pretty(v).unwrap_or_default()),
            Body::Text(t) => Some(t.clone()),
            Body::Missing(_) => None,
        }
    }
}

/// One call with its kept bodies.
#[derive(Debug, Clone)]
pub struct CallTranscript {
    pub call: ModelCall,
    pub request: Body,
    pub response: Body,
}

async fn body(state: &AppState, sha256: Option<&str>, in_flight: bool) -> Body {
    let Some(sha) = sha256 else {
        return Body::Missing(if in_flight {
            "the call is still in flight".into()
        } else {
            "not kept".into()
        });
    };
    let path = match state.blobs().local_copy(sha).await {
        Ok(Some(path)) => path,
        Ok(None) => return Body::Missing("its blob is not in the store (yet)".into()),
        Err(e) => return Body::Missing(format!("reading its blob failed: {e}")),
    };
    match tokio::fs::read(path).await {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => Body::Json(v),
            Err(_) => Body::Text(String::from_utf8_lossy(&bytes).into_owned()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Body::Missing("its blob is not in the store (yet)".into())
        }
        Err(e) => Body::Missing(format!("reading its blob failed: {e}")),
    }
}

/// The assignment's calls up to `upto` (Unix ms; None: all), oldest first,
/// with their bodies.
pub async fn load(
    state: &AppState,
    assignment_id: &str,
    upto: Option<i64>,
) -> Result<Vec<CallTranscript>, AppError> {
    let mut out = Vec::new();
    for call in state.db.model_calls_of(assignment_id).await? {
        if upto.is_some_and(|t| call.at > t) {
            continue;
        }
        let in_flight = call.status == 0;
        let request = body(state, call.request_body_sha256.as_deref(), false).await;
        let response = body(state, call.response_body_sha256.as_deref(), in_flight).await;
        out.push(CallTranscript { call, request, response });
    }
    Ok(out)
}

/// The transcript as the JSON export writes it: per call its ledger facts,
/// the digests, what was cut and the bodies (JSON as kept; a cut body as a
/// string; null when none was kept).
pub fn export_json(assignment_id: &str, calls: &[CallTranscript]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|t| {
            let c = &t.call;
            json!({
                "id": c.id,
                "at": grader::witness::format_ms(c.at),
                "model": c.model,
                "stream": c.stream,
                "status": c.status,
                "refused": c.refused,
                "reason": c.refused.as_ref().and(c.error.as_ref()),
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "tokens_estimated": c.tokens_estimated,
                "request_sha256": c.request_body_sha256,
                "response_sha256": c.response_body_sha256,
                "cut": c.transcript_cut,
                "request": t.request.json(),
                "response": t.response.json(),
            })
        })
        .collect();
    json!({ "assignment": assignment_id, "calls": calls })
}

fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| {
                p.get("text").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| {
                    format!("[{} part]", p.get("type").and_then(Value::as_str).unwrap_or("other"))
                })
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn message(m: &Value) -> MessageView {
    let mut tool_calls: Vec<ToolCallView> = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("function"))
        .chain(m.get("function_call"))
        .map(|f| ToolCallView {
            name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
            arguments: f.get("arguments").and_then(Value::as_str).unwrap_or_default().to_string(),
        })
        .collect();
    tool_calls.retain(|t| !t.name.is_empty() || !t.arguments.is_empty());
    let mut role = m.get("role").and_then(Value::as_str).unwrap_or("assistant").to_string();
    if let Some(id) = m.get("tool_call_id").and_then(Value::as_str) {
        role = format!("{role} ({id})");
    }
    MessageView { role, text: content_text(m.get("content")), tool_calls }
}

/// The answers' messages of a response body (a chat completion, streamed
/// ones reassembled).
pub fn answer_messages(response: &Value) -> Vec<MessageView> {
    response
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("message"))
        .map(message)
        .collect()
}

/// What the pages show of one call.
pub fn call_view(t: &CallTranscript, since_red: String) -> CallView {
    let c = &t.call;
    let (prompt, tools_offered, raw_request) = match &t.request {
        Body::Json(v) if v.get("messages").is_some_and(Value::is_array) => {
            let tools = v
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|t| {
                    t.pointer("/function/name").and_then(Value::as_str).map(str::to_string)
                })
                .collect();
            (v["messages"].as_array().into_iter().flatten().map(message).collect(), tools, None)
        }
        other => (Vec::new(), Vec::new(), other.text()),
    };
    let (answer, raw_response) = match &t.response {
        Body::Json(v) if v.get("choices").is_some() => (answer_messages(v), None),
        // A refusal's (or an upstream error's) body: its message is the reason.
        Body::Json(v) if v.pointer("/error/message").is_some() => (Vec::new(), None),
        other => (Vec::new(), other.text()),
    };
    let error_message = match &t.response {
        Body::Json(v) => v.pointer("/error/message").and_then(Value::as_str).map(str::to_string),
        _ => None,
    };
    let missing = [("request", &t.request), ("response", &t.response)]
        .into_iter()
        .filter_map(|(what, b)| match b {
            Body::Missing(why) if !(why == "not kept" && c.transcript_cut.is_some()) => {
                Some(format!("{what}: {why}"))
            }
            _ => None,
        })
        .collect::<Vec<_>>();
    let cut = match (c.transcript_cut.clone(), missing.is_empty()) {
        (cut, true) => cut,
        (None, false) => Some(missing.join("; ")),
        (Some(cut), false) => Some(format!("{cut}; {}", missing.join("; "))),
    };
    CallView {
        id: c.id,
        at: grader::witness::format_ms(c.at),
        since_red,
        model: c.model.clone(),
        status: c.status,
        stream: c.stream,
        refused: c.refused.clone(),
        reason: error_message.or_else(|| c.error.clone()),
        prompt,
        tools_offered,
        answer,
        raw_request,
        raw_response,
        request_sha256: c.request_body_sha256.clone(),
        response_sha256: c.response_body_sha256.clone(),
        cut,
    }
}

/// `+2m05s` after the first accepted red, `3s before red`, or `no red`.
pub fn since_red(at: i64, red_at: Option<i64>) -> String {
    match red_at {
        Some(red) if at >= red => format!("+{}", crate::times::span((at - red) / 1000)),
        Some(red) => format!("{} before red", crate::times::span((red - at) / 1000)),
        None => "no red".into(),
    }
}

/// The time line of an assignment up to `upto`: its witnessed runs and its
/// calls (with their bodies), oldest first.
pub async fn entries(
    state: &AppState,
    assignment_id: &str,
    upto: Option<i64>,
) -> Result<(Vec<Entry>, Vec<CallTranscript>), AppError> {
    let runs: Vec<_> = state
        .db
        .witness_runs_of(assignment_id)
        .await?
        .into_iter()
        .filter(|r| upto.is_none_or(|t| r.at <= t))
        .collect();
    let red_at = runs
        .iter()
        .filter(|r| r.kind == grader::witness::WitnessKind::Red && r.accepted)
        .map(|r| r.at)
        .min();
    let calls = load(state, assignment_id, upto).await?;
    let mut timed: Vec<(i64, u8, i64, Entry)> = runs
        .iter()
        .map(|r| {
            (
                r.at,
                0,
                r.id,
                Entry::Run {
                    id: r.id,
                    kind: r.kind.to_string(),
                    at: grader::witness::format_ms(r.at),
                    accepted: r.accepted,
                },
            )
        })
        .collect();
    timed.extend(calls.iter().map(|t| {
        (t.call.at, 1, t.call.id, Entry::Call(Box::new(call_view(t, since_red(t.call.at, red_at)))))
    }));
    timed.sort_by_key(|(at, kind, id, _)| (*at, *kind, *id));
    Ok((timed.into_iter().map(|(_, _, _, e)| e).collect(), calls))
}
