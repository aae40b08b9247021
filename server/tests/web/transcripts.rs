//! Transcripts of the model meter (issue #11): each call's request and
//! response bodies kept in the blob store with their digests in the ledger
//! and the receipt, cut at the per-call and per-assignment caps.

use std::time::Duration;

use gatehouse::db::ModelCall;
use serde_json::{Value, json};
use sha2::Digest;

use crate::meter::{Meter, call, chat, settled, setup, spawn_upstream, stream_call};
use crate::support::{TestApp, repo_root};

fn sha(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The blob with this digest, once its writer (a task of its own) is done.
pub(crate) async fn blob(app: &TestApp, sha256: &str) -> Vec<u8> {
    let path = gatehouse::blobs::blob_path(&app.state.config.data_dir, sha256);
    for _ in 0..200 {
        if let Ok(bytes) = std::fs::read(&path) {
            return bytes;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("blob {sha256} was never written");
}

async fn response_of(app: &TestApp, c: &ModelCall) -> Value {
    let sha = c.response_body_sha256.as_deref().unwrap_or_else(|| panic!("call {} kept no response: {c:?}", c.id));
    serde_json::from_slice(&blob(app, sha).await).unwrap()
}

async fn transcript_total(m: &Meter) -> i64 {
    m.app.state.db.meter_usage(&m.assignment).await.unwrap().transcript_bytes
}

#[tokio::test]
async fn bodies_are_kept_in_the_blob_store_with_their_digests_in_the_ledger() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 2", false, |_| {}).await;
    up.set(|b| b.content = Some("def total(xs):\n    return sum(xs)\n".into()));
    let (status, answer) = call(&m.app, &m.key, &chat("write total")).await;
    assert_eq!(status, 200, "{answer}");
    // A stream with a tool call: kept reassembled from what the client got.
    let mut tools = chat("weather?");
    tools["stream"] = json!(true);
    tools["tools"] = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]);
    let r = reqwest::Client::new().post(m.app.url("/v1/chat/completions")).bearer_auth(&m.key).json(&tools).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let streamed = r.text().await.unwrap();
    assert!(!streamed.contains("\"usage\""), "{streamed}");
    // Past the calls cap: refused, and kept with the reason it got.
    let (status, refusal) = call(&m.app, &m.key, &chat("one more")).await;
    assert_eq!(status, 429, "{refusal}");

    let calls = settled(&m).await;
    assert_eq!(calls.len(), 3);
    // The request as the client sent it: its digest is the ledger's request hash.
    let sent = serde_json::to_vec(&chat("write total")).unwrap();
    assert_eq!(calls[0].request_body_sha256.as_deref(), Some(sha(&sent).as_str()));
    assert_eq!(calls[0].request_body_sha256.as_deref(), Some(calls[0].request_sha256.as_str()));
    assert_eq!(blob(&m.app, &calls[0].request_sha256).await, sent);
    assert_eq!(response_of(&m.app, &calls[0]).await, answer);
    assert_eq!(calls[0].transcript_cut, None);

    let stream = response_of(&m.app, &calls[1]).await;
    assert_eq!(stream["object"], "chat.completion");
    assert_eq!(stream["x_gatehouse_reassembled"]["chunks"], 3);
    let tool_call = &stream["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(tool_call["function"]["name"], "get_weather");
    assert_eq!(tool_call["function"]["arguments"], "{\"city\": \"Paris\"}");
    // The usage chunk the meter asked for was kept from the client, so from the transcript too.
    assert!(stream.get("usage").is_none(), "{stream}");
    assert_eq!(blob(&m.app, calls[1].request_body_sha256.as_deref().unwrap()).await, serde_json::to_vec(&tools).unwrap());

    assert_eq!(calls[2].refused.as_deref(), Some("model_calls"));
    let kept = response_of(&m.app, &calls[2]).await;
    assert_eq!(kept, refusal);
    assert_eq!(kept["error"]["cap"], "model_calls", "{kept}");
    // The totals hold exactly what the rows kept, refusals included.
    let kept_bytes: i64 = calls.iter().map(|c| c.transcript_bytes).sum();
    assert!(kept_bytes > 0);
    assert_eq!(transcript_total(&m).await, kept_bytes);
}

#[tokio::test]
async fn transcripts_are_cut_at_the_call_and_assignment_caps_and_say_so() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 10", false, |c| {
        c.transcript_call_bytes = 30;
        c.transcript_assignment_bytes = 100;
    })
    .await;
    let prompt = chat("a prompt that is longer than thirty bytes");
    let sent = serde_json::to_vec(&prompt).unwrap();
    let (status, answer) = call(&m.app, &m.key, &prompt).await;
    assert_eq!(status, 200);
    let answer_len = serde_json::to_vec(&answer).unwrap().len();
    let calls = settled(&m).await;
    let c = &calls[0];
    assert_eq!(blob(&m.app, c.request_body_sha256.as_deref().unwrap()).await, &sent[..30]);
    assert_ne!(c.request_body_sha256.as_deref(), Some(c.request_sha256.as_str()), "a cut body has its own digest");
    let cut = c.transcript_cut.as_deref().unwrap();
    assert!(cut.contains(&format!("request cut at 30 of {} bytes: the per-call transcript cap of 30 bytes", sent.len())), "{cut}");
    assert!(cut.contains("response cut at 30 of"), "{cut}");
    assert_eq!(blob(&m.app, c.response_body_sha256.as_deref().unwrap()).await.len(), 30);
    assert_eq!(c.transcript_bytes, 60);
    assert!(answer_len > 30);

    // 40 bytes of the assignment's 100 are left: the request keeps 30, the response 10.
    call(&m.app, &m.key, &prompt).await;
    let calls = settled(&m).await;
    let cut = calls[1].transcript_cut.as_deref().unwrap();
    assert!(cut.contains("response cut at 10 of") && cut.contains("the assignment's transcript budget of 100 bytes is used up"), "{cut}");
    assert_eq!(calls[1].transcript_bytes, 40);
    // Nothing left: the call still goes through, its bodies are not kept, and the row says so.
    let (status, _) = call(&m.app, &m.key, &prompt).await;
    assert_eq!(status, 200);
    let calls = settled(&m).await;
    assert_eq!((calls[2].request_body_sha256.as_deref(), calls[2].response_body_sha256.as_deref()), (None, None));
    let cut = calls[2].transcript_cut.as_deref().unwrap();
    assert!(cut.starts_with(&format!("request of {} bytes not kept: the assignment's transcript budget", sent.len())), "{cut}");
    assert_eq!(transcript_total(&m).await, 100);
}

#[tokio::test]
async fn a_transcript_cap_of_zero_keeps_nothing_and_a_stream_is_kept_whole() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 10", false, |c| c.transcript_call_bytes = 0).await;
    let (status, _) = call(&m.app, &m.key, &chat("hi")).await;
    assert_eq!(status, 200);
    let calls = settled(&m).await;
    assert_eq!(calls[0].request_body_sha256, None);
    assert!(calls[0].transcript_cut.as_deref().unwrap().contains("transcripts are off (transcript_call_bytes = 0)"));
    assert_eq!(transcript_total(&m).await, 0);

    // With the defaults a stream is kept whole: its text joined from the deltas.
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 10", false, |_| {}).await;
    let (status, _, _) = stream_call(&m.app, &m.key, "stream please").await;
    assert_eq!(status, 200);
    let calls = settled(&m).await;
    assert_eq!(response_of(&m.app, &calls[0]).await["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(calls[0].transcript_cut, None);
}

#[tokio::test]
async fn the_receipt_lists_the_transcript_digests_and_receipts_without_them_still_verify() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 10", false, |_| {}).await;
    call(&m.app, &m.key, &chat("hi")).await;
    let calls = settled(&m).await;
    let witness = gatehouse::grading::witness_of(&m.app.state, &m.assignment, gatehouse::now_ms() + 1).await.unwrap().expect("a witness");
    let grader = m.app.state.grader.clone();
    let (with, without) = tokio::task::spawn_blocking(move || {
        let packet = grader::packet::Packet::load(&repo_root().join("packets/null-status")).unwrap();
        let work = tempfile::tempdir().unwrap();
        let zip = work.path().join("sample.zip");
        let m = &packet.manifest;
        let times: std::collections::BTreeMap<String, i64> = m.sample.times.iter().map(|(k, v)| (k.clone(), grader::manifest::TIME_BASE + v)).collect();
        grader::ingest::write_zip_from_dir(&packet.sample_dir(), &zip, &times, grader::manifest::TIME_BASE).unwrap();
        let with = grader.grade_zip(&packet, &zip, &grader::grade::GradeOptions { witness: Some(witness), ..Default::default() }).unwrap();
        let without = grader.grade_zip(&packet, &zip, &grader::grade::GradeOptions::default()).unwrap();
        (with.receipt, without.receipt)
    })
    .await
    .unwrap();
    assert_eq!(with.transcript.len(), 1);
    assert_eq!(with.transcript[0].call, calls[0].id);
    assert_eq!(with.transcript[0].request_sha256, calls[0].request_body_sha256);
    assert_eq!(with.transcript[0].response_sha256, calls[0].response_body_sha256);
    // The digest covers the transcript digests and verifies after a round trip.
    let json = serde_json::to_string(&with).unwrap();
    let back: grader::grade::Receipt = serde_json::from_str(&json).unwrap();
    assert_eq!(grader::grade::receipt_digest(&back), with.digest);
    let mut tampered = back.clone();
    tampered.transcript[0].response_sha256 = Some("0".repeat(64));
    assert_ne!(grader::grade::receipt_digest(&tampered), with.digest);
    // A receipt without transcripts (as every receipt before them) has no
    // `transcript` key and keeps verifying.
    let json = serde_json::to_string(&without).unwrap();
    assert!(!json.contains("\"transcript\""), "{json}");
    let back: grader::grade::Receipt = serde_json::from_str(&json).unwrap();
    assert_eq!(grader::grade::receipt_digest(&back), without.digest);
}
