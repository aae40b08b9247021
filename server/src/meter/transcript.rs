//! Transcripts: each metered call's request body and the response body the
//! client received, kept in the content-addressed blob store with their
//! SHA-256 in the ledger row.
//!
//! A stream is kept reassembled from the SSE chunks the client received
//! into one `chat.completion` object (content and tool calls joined from the
//! deltas, marked `"x_gatehouse_reassembled": true`); a refused call keeps
//! the error body it got, which carries the reason.
//!
//! Each body is capped at `transcript_call_bytes` and the assignment at
//! `transcript_assignment_bytes` (admission reserves the room a response
//! may take, settlement charges what was kept); what was cut is said in the
//! row's `transcript_cut`. The digest is taken in memory on the call path
//! (the body is already there); the file is written by the app's
//! `blobs::BatchWriter` (a thread writing and syncing blobs in batches),
//! so the client's answer never waits for the disk.

use axum::body::Bytes;
use serde_json::{Map, Value, json};
use sha2::Digest;

use crate::db::meter::MeterUsage;
use crate::state::AppState;

/// The room one call's transcript has, decided at admission.
#[derive(Debug, Clone, Copy, Default)]
pub struct Room {
    /// The per-body cap.
    pub call: usize,
    /// What is left of the assignment's transcript budget.
    pub left: usize,
    /// The assignment's budget (for the cut note).
    pub budget: usize,
}

impl Room {
    pub fn of(state: &AppState, usage: &MeterUsage) -> Room {
        let budget = state.config.transcript_assignment_bytes as usize;
        Room {
            call: state.config.transcript_call_bytes as usize,
            left: budget.saturating_sub(usage.transcript_bytes.max(0) as usize),
            budget,
        }
    }

    /// What is left after `used` bytes.
    pub fn after(self, used: usize) -> Room {
        Room { left: self.left.saturating_sub(used), ..self }
    }

    /// The most bytes one body may keep.
    pub fn limit(&self) -> usize {
        self.call.min(self.left)
    }
}

/// A body as kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kept {
    /// None when nothing was kept.
    pub sha256: Option<String>,
    pub bytes: usize,
    /// What was cut and why.
    pub cut: Option<String>,
}

/// Keeps at most `room.limit()` bytes of `body` (`what` is "request" or
/// "response"): the digest now, the blob by a task of its own. `whole_sha256`
/// is the body's digest when the caller has it already.
pub fn keep(
    state: &AppState,
    what: &str,
    body: Bytes,
    room: Room,
    whole_sha256: Option<&str>,
) -> Kept {
    let limit = room.limit();
    let n = body.len().min(limit);
    let cut = (n < body.len()).then(|| {
        let why = if room.call == 0 {
            "transcripts are off (transcript_call_bytes = 0)".to_string()
        } else if limit == room.call {
            format!("the per-call transcript cap of {} bytes", room.call)
        } else {
            format!("the assignment's transcript budget of {} bytes is used up", room.budget)
        };
        if n == 0 {
            format!("{what} of {} bytes not kept: {why}", body.len())
        } else {
            format!("{what} cut at {n} of {} bytes: {why}", body.len())
        }
    });
    if n == 0 && !body.is_empty() {
        return Kept { sha256: None, bytes: 0, cut };
    }
    let kept = body.slice(..n);
    let sha256 = match whole_sha256 {
        Some(s) if n == body.len() => s.to_string(),
        _ => hex::encode(sha2::Sha256::digest(&kept)),
    };
    let blobs = state.blobs();
    if blobs.in_db() {
        // Postgres keeps the blobs for workers elsewhere: the bytes go into
        // the database as well as the local store.
        let digest = sha256.clone();
        let writing = state.memo.blob_writer.writing(&digest);
        tokio::spawn(async move {
            let _writing = writing;
            if let Err(e) = blobs.put_bytes(&digest, kept).await {
                metrics::counter!("gatehouse_transcript_write_failures_total").increment(1);
                tracing::error!(error = %e, blob = %digest, "keeping a model call's transcript failed");
            }
        });
    } else {
        state.memo.blob_writer.put(&state.config.data_dir, sha256.clone(), kept);
    }
    Kept { sha256: Some(sha256), bytes: n, cut }
}

/// Joins the cut notes of the request and the response.
pub fn cuts(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

/// A choice being reassembled: its message fields (the role), the content
/// so far, the tool calls by index, the finish reason.
type Choice = (Map<String, Value>, String, Vec<Map<String, Value>>, Value);

/// One chat completion reassembled from the SSE chunks of a stream: the
/// first chunk's `id`, `model` and `created`, per choice the role, the
/// content joined, the tool calls joined by index (id, name, arguments) and
/// the finish reason, and the usage when a chunk carried one.
pub fn reassemble(sse: &[u8]) -> Vec<u8> {
    let mut head = Map::new();
    let mut choices: std::collections::BTreeMap<i64, Choice> = Default::default();
    let mut usage = Value::Null;
    let mut chunks = 0;
    for line in String::from_utf8_lossy(sse).lines() {
        let Some(data) = line.strip_prefix("data:").map(str::trim) else { continue };
        let Ok(chunk) = serde_json::from_str::<Value>(data) else { continue };
        chunks += 1;
        for key in ["id", "model", "created", "system_fingerprint"] {
            if let Some(v) = chunk.get(key).filter(|v| !v.is_null())
                && !head.contains_key(key)
            {
                head.insert(key.into(), v.clone());
            }
        }
        if chunk.get("usage").is_some_and(Value::is_object) {
            usage = chunk["usage"].clone();
        }
        for c in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            let index = c.get("index").and_then(Value::as_i64).unwrap_or(0);
            let (meta, content, calls, finish) = choices.entry(index).or_default();
            if let Some(f) = c.get("finish_reason").filter(|f| !f.is_null()) {
                *finish = f.clone();
            }
            let Some(delta) = c.get("delta") else { continue };
            if let Some(role) = delta.get("role").filter(|r| r.is_string()) {
                meta.insert("role".into(), role.clone());
            }
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                content.push_str(text);
            }
            for tc in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let i = tc
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(calls.len().saturating_sub(1) as u64)
                    as usize;
                while calls.len() <= i {
                    calls.push(Map::new());
                }
                let call = &mut calls[i];
                for key in ["id", "type"] {
                    if let Some(v) = tc.get(key).and_then(Value::as_str) {
                        call.insert(key.into(), Value::String(v.into()));
                    }
                }
                let f = call
                    .entry("function")
                    .or_insert_with(|| json!({ "name": "", "arguments": "" }));
                for key in ["name", "arguments"] {
                    if let Some(piece) =
                        tc.pointer(&format!("/function/{key}")).and_then(Value::as_str)
                        && let Some(Value::String(s)) = f.get_mut(key)
                    {
                        s.push_str(piece);
                    }
                }
            }
        }
    }
    let choices: Vec<Value> = choices
        .into_iter()
        .map(|(index, (meta, content, calls, finish))| {
            let mut message = Map::new();
            message.insert(
                "role".into(),
                meta.get("role").cloned().unwrap_or_else(|| json!("assistant")),
            );
            message.insert(
                "content".into(),
                if content.is_empty() && !calls.is_empty() {
                    Value::Null
                } else {
                    Value::String(content)
                },
            );
            if !calls.is_empty() {
                message.insert(
                    "tool_calls".into(),
                    Value::Array(calls.into_iter().map(Value::Object).collect()),
                );
            }
            json!({ "index": index, "message": message, "finish_reason": finish })
        })
        .collect();
    let mut out = head;
    out.insert("object".into(), json!("chat.completion"));
    out.insert("choices".into(), Value::Array(choices));
    if !usage.is_null() {
        out.insert("usage".into(), usage);
    }
    out.insert("x_gatehouse_reassembled".into(), json!({ "chunks": chunks }));
    serde_json::to_vec(&Value::Object(out)).expect("JSON serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_reassembled_with_its_tool_calls() {
        let sse = concat!(
            "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t\",\"type\":\"function\",\"function\":{\"name\":\"ru\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"n\",\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n"
        );
        let v: Value = serde_json::from_slice(&reassemble(sse.as_bytes())).unwrap();
        assert_eq!(v["id"], "c1");
        assert_eq!(v["model"], "m");
        let m = &v["choices"][0]["message"];
        assert_eq!(m["content"], "Hello");
        assert_eq!(m["tool_calls"][0]["function"]["name"], "run");
        assert_eq!(m["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(v["x_gatehouse_reassembled"]["chunks"], 4);
        assert!(v.get("usage").is_none());
    }
}
