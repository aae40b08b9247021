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
    let sha = c
        .response_body_sha256
        .as_deref()
        .unwrap_or_else(|| panic!("call {} kept no response: {c:?}", c.id));
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
    tools["tools"] =
        json!([{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]);
    let r = reqwest::Client::new()
        .post(m.app.url("/v1/chat/completions"))
        .bearer_auth(&m.key)
        .json(&tools)
        .send()
        .await
        .unwrap();
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
    assert_eq!(
        blob(&m.app, calls[1].request_body_sha256.as_deref().unwrap()).await,
        serde_json::to_vec(&tools).unwrap()
    );

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
    assert_ne!(
        c.request_body_sha256.as_deref(),
        Some(c.request_sha256.as_str()),
        "a cut body has its own digest"
    );
    let cut = c.transcript_cut.as_deref().unwrap();
    assert!(
        cut.contains(&format!(
            "request cut at 30 of {} bytes: the per-call transcript cap of 30 bytes",
            sent.len()
        )),
        "{cut}"
    );
    assert!(cut.contains("response cut at 30 of"), "{cut}");
    assert_eq!(blob(&m.app, c.response_body_sha256.as_deref().unwrap()).await.len(), 30);
    assert_eq!(c.transcript_bytes, 60);
    assert!(answer_len > 30);

    // 40 bytes of the assignment's 100 are left: the request keeps 30, the response 10.
    call(&m.app, &m.key, &prompt).await;
    let calls = settled(&m).await;
    let cut = calls[1].transcript_cut.as_deref().unwrap();
    assert!(
        cut.contains("response cut at 10 of")
            && cut.contains("the assignment's transcript budget of 100 bytes is used up"),
        "{cut}"
    );
    assert_eq!(calls[1].transcript_bytes, 40);
    // Nothing left: the call still goes through, its bodies are not kept, and the row says so.
    let (status, _) = call(&m.app, &m.key, &prompt).await;
    assert_eq!(status, 200);
    let calls = settled(&m).await;
    assert_eq!(
        (calls[2].request_body_sha256.as_deref(), calls[2].response_body_sha256.as_deref()),
        (None, None)
    );
    let cut = calls[2].transcript_cut.as_deref().unwrap();
    assert!(
        cut.starts_with(&format!(
            "request of {} bytes not kept: the assignment's transcript budget",
            sent.len()
        )),
        "{cut}"
    );
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
    assert!(
        calls[0]
            .transcript_cut
            .as_deref()
            .unwrap()
            .contains("transcripts are off (transcript_call_bytes = 0)")
    );
    assert_eq!(transcript_total(&m).await, 0);

    // With the defaults a stream is kept whole: its text joined from the deltas.
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 10", false, |_| {}).await;
    let (status, _, _) = stream_call(&m.app, &m.key, "stream please").await;
    assert_eq!(status, 200);
    let calls = settled(&m).await;
    assert_eq!(
        response_of(&m.app, &calls[0]).await["choices"][0]["message"]["content"],
        "Hello there"
    );
    assert_eq!(calls[0].transcript_cut, None);
}

#[tokio::test]
async fn the_receipt_lists_the_transcript_digests_and_receipts_without_them_still_verify() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 10", false, |_| {}).await;
    call(&m.app, &m.key, &chat("hi")).await;
    let calls = settled(&m).await;
    let witness =
        gatehouse::grading::witness_of(&m.app.state, &m.assignment, gatehouse::now_ms() + 1)
            .await
            .unwrap()
            .expect("a witness");
    let grader = m.app.state.grader.clone();
    let (with, without) = tokio::task::spawn_blocking(move || {
        let packet =
            grader::packet::Packet::load(&repo_root().join("packets/null-status")).unwrap();
        let work = tempfile::tempdir().unwrap();
        let zip = work.path().join("sample.zip");
        let m = &packet.manifest;
        let times: std::collections::BTreeMap<String, i64> = m
            .sample
            .times
            .iter()
            .map(|(k, v)| (k.clone(), grader::manifest::TIME_BASE + v))
            .collect();
        grader::ingest::write_zip_from_dir(
            &packet.sample_dir(),
            &zip,
            &times,
            grader::manifest::TIME_BASE,
        )
        .unwrap();
        let with = grader
            .grade_zip(
                &packet,
                &zip,
                &grader::grade::GradeOptions { witness: Some(witness), ..Default::default() },
            )
            .unwrap();
        let without =
            grader.grade_zip(&packet, &zip, &grader::grade::GradeOptions::default()).unwrap();
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

/// A graded submission of an assignment whose candidate called the model:
/// call 1 forwarded (answered with `answer`), then a witnessed red, then
/// call 2 refused by the calls cap; the null-status sample graded with the
/// witness and stored as the assignment's submission; a signed-in reviewer.
pub(crate) struct Reviewed {
    pub(crate) m: Meter,
    pub(crate) reviewer: crate::review::Browser,
    pub(crate) submission: String,
    pub(crate) calls: Vec<ModelCall>,
    pub(crate) card: grader::grade::Scorecard,
}

pub(crate) async fn reviewed(prompt: &str, answer: &str) -> Reviewed {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 1", false, |_| {}).await;
    up.set(|b| b.content = Some(answer.to_string()));
    let (status, body) = call(&m.app, &m.key, &chat(prompt)).await;
    assert_eq!(status, 200, "{body}");
    settled(&m).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    crate::meter::witness_red(&m.app, &m.assignment).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (status, _) = call(&m.app, &m.key, &chat("and once more")).await;
    assert_eq!(status, 429);
    let calls = settled(&m).await;
    for c in &calls {
        blob(&m.app, c.response_body_sha256.as_deref().unwrap()).await;
    }
    let witness =
        gatehouse::grading::witness_of(&m.app.state, &m.assignment, gatehouse::now_ms() + 1)
            .await
            .unwrap()
            .expect("a witness");
    let grader = m.app.state.grader.clone();
    let (card, zip) = tokio::task::spawn_blocking(move || {
        let packet =
            grader::packet::Packet::load(&repo_root().join("packets/null-status")).unwrap();
        let work = tempfile::tempdir().unwrap();
        let zip = work.path().join("sample.zip");
        let times: std::collections::BTreeMap<String, i64> = packet
            .manifest
            .sample
            .times
            .iter()
            .map(|(k, v)| (k.clone(), grader::manifest::TIME_BASE + v))
            .collect();
        grader::ingest::write_zip_from_dir(
            &packet.sample_dir(),
            &zip,
            &times,
            grader::manifest::TIME_BASE,
        )
        .unwrap();
        let card = grader
            .grade_zip(
                &packet,
                &zip,
                &grader::grade::GradeOptions { witness: Some(witness), ..Default::default() },
            )
            .unwrap();
        (card, std::fs::read(&zip).unwrap())
    })
    .await
    .unwrap();
    let db = &m.app.state.db;
    let sha = &card.receipt.submission.archive_sha256;
    let path = gatehouse::blobs::blob_path(&m.app.state.config.data_dir, sha);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &zip).unwrap();
    let submission = "sub-transcript-1".to_string();
    db.create_submission(gatehouse::db::NewSubmission {
        id: &submission,
        assignment_id: &m.assignment,
        blob_sha256: sha,
        size_bytes: zip.len() as i64,
    })
    .await
    .unwrap();
    db.set_graded(
        &submission,
        &serde_json::to_string(&card).unwrap(),
        &serde_json::to_string(&card.receipt).unwrap(),
        &card.scoring.decision,
        0.0,
    )
    .await
    .unwrap();
    while let Some(job) =
        db.claim_job("transcript-test", gatehouse::now_ms(), 600_000).await.unwrap()
    {
        db.finish_job(job.id, "transcript-test", true, None).await.unwrap();
    }
    let reviewer =
        crate::review::sign_in(&m.app, "rita@example.com", gatehouse::db::Role::Reviewer).await;
    Reviewed { m, reviewer, submission, calls, card }
}

impl Reviewed {
    pub(crate) async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .reviewer
            .client
            .get(self.m.app.url(path))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

fn position(page: &str, needle: &str) -> usize {
    page.find(needle).unwrap_or_else(|| panic!("{needle:?} not on the page"))
}

#[tokio::test]
async fn the_scorecard_shows_the_conversation_escaped_in_time_order_and_the_exports_carry_it() {
    let answer = "Try this <script>alert('pwned')</script> and sum(xs).";
    let r = reviewed("how do I <b>total</b>?", answer).await;
    let (status, page) = r.get(&format!("/submissions/{}", r.submission)).await;
    assert_eq!(status, 200);
    // The prompt and the answer are on the page, as text: the markup in them stays text.
    assert!(page.contains("how do I &lt;b&gt;total&lt;/b&gt;?"), "the prompt is not shown escaped");
    assert!(
        page.contains("Try this &lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;")
            || page.contains("Try this &lt;script&gt;alert('pwned')&lt;/script&gt;"),
        "the answer is not shown escaped"
    );
    assert!(!page.contains("<script>alert"), "a model answer's markup reached the page");
    assert!(!page.contains("<b>total</b>"));
    // Collapsible, one entry per call, in time order beside the witnessed run.
    let first = position(
        &page,
        &format!("data-id=\"{}\" class=\"transcript-call forwarded\"", r.calls[0].id),
    );
    let run = position(&page, "class=\"transcript-run red\"");
    let refused = position(
        &page,
        &format!("data-id=\"{}\" class=\"transcript-call refused\"", r.calls[1].id),
    );
    assert!(first < run && run < refused, "not in time order");
    assert!(page[first..].contains("<details>"));
    // The refused call with its reason.
    let reason = r.calls[1].error.as_deref().unwrap();
    assert!(
        page[refused..].contains("refused (model_calls)") && page[refused..].contains(reason),
        "the refusal and its reason are not shown"
    );

    // The JSON export carries the bodies and digests.
    let (status, json) = r.get(&format!("/submissions/{}/transcript.json", r.submission)).await;
    assert_eq!(status, 200);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["calls"][0]["request"]["messages"][0]["content"], "how do I <b>total</b>?");
    assert_eq!(json["calls"][0]["response"]["choices"][0]["message"]["content"], answer);
    assert_eq!(json["calls"][0]["response_sha256"], json!(r.calls[0].response_body_sha256));
    assert_eq!(json["calls"][1]["refused"], "model_calls");
    assert_eq!(json["calls"][1]["reason"], reason);
    // Not without a session.
    let r2 =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let anon = r2
        .get(r.m.app.url(&format!("/submissions/{}/transcript.json", r.submission)))
        .send()
        .await
        .unwrap();
    assert_ne!(anon.status(), 200);

    // The HTML receipt lists the receipt's digests; with ?transcript=1 the text too, escaped.
    assert_eq!(r.card.receipt.transcript.len(), 2);
    let (status, html) = r.get(&format!("/submissions/{}/receipt.html", r.submission)).await;
    assert_eq!(status, 200);
    for t in &r.card.receipt.transcript {
        assert!(
            html.contains(t.response_sha256.as_deref().unwrap()),
            "digest of call {} missing",
            t.call
        );
    }
    assert!(!html.contains("pwned"), "the text is included only when asked for");
    let (_, html) =
        r.get(&format!("/submissions/{}/receipt.html?transcript=1", r.submission)).await;
    assert!(
        html.contains("pwned") && !html.contains("<script>alert"),
        "the text is not included escaped"
    );
}

#[tokio::test]
async fn a_candidate_sees_their_own_transcript_and_no_one_elses() {
    let (url, up) = spawn_upstream().await;
    let ada = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    up.set(|b| b.content = Some("answer for <i>Ada</i>".into()));
    call(&ada.app, &ada.key, &chat("Ada's question")).await;
    let bob = crate::meter::invite(&ada.app.state, "Bob").await;
    let bob_key = crate::meter::key_of(&ada.app, &bob.token).await;
    up.set(|b| b.content = Some("answer for Bob".into()));
    call(&ada.app, &bob_key, &chat("Bob's question")).await;
    settled(&ada).await;
    for _ in 0..100 {
        let calls = ada.app.state.db.model_calls_of(&bob.assignment.id).await.unwrap();
        if calls.iter().all(|c| c.status != 0 && c.response_body_sha256.is_some()) {
            blob(&ada.app, calls[0].response_body_sha256.as_deref().unwrap()).await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for c in settled(&ada).await {
        blob(&ada.app, c.response_body_sha256.as_deref().unwrap()).await;
    }

    // Live, from the assignment page's link.
    let page = reqwest::get(ada.app.url(&format!("/c/{}", ada.token)))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&format!("href=\"/c/{}/transcript\"", ada.token)));
    let mine = reqwest::get(ada.app.url(&format!("/c/{}/transcript", ada.token))).await.unwrap();
    assert_eq!(mine.status(), 200);
    let mine = mine.text().await.unwrap();
    assert!(
        mine.contains("Ada&#x27;s question") || mine.contains("Ada's question"),
        "Ada's prompt is not on her page"
    );
    assert!(
        mine.contains("answer for &lt;i&gt;Ada&lt;/i&gt;"),
        "Ada's answer is not on her page, escaped"
    );
    assert!(!mine.contains("Bob"), "another candidate's transcript leaked");
    let json: Value = reqwest::get(ada.app.url(&format!("/c/{}/transcript.json", ada.token)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(json["calls"].as_array().unwrap().len(), 1);
    assert_eq!(
        json["calls"][0]["response"]["choices"][0]["message"]["content"],
        "answer for <i>Ada</i>"
    );
    // Bob's is Bob's; a made-up or another assignment's id is no way in.
    let theirs = reqwest::get(ada.app.url(&format!("/c/{}/transcript", bob.token)))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(theirs.contains("answer for Bob") && !theirs.contains("Ada"));
    for path in [
        format!("/c/{}/transcript", "x".repeat(43)),
        format!("/c/{}/transcript.json", bob.assignment.id),
    ] {
        let r = reqwest::get(ada.app.url(&path)).await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
}

#[tokio::test]
async fn provenance_marks_exactly_the_lines_copied_from_an_answer() {
    // Two lines of the sample's gate.py, with other whitespace, and lines
    // the sample also adds that are too trivial to count.
    let answer = "Here you go:\n```python\ndef _known(field: str,incident: dict, confirmed: dict) -> bool:\n\t\treturn   field in incident and not is_blank(incident[field])\n        return True\n\n)\n```";
    let r = reviewed("write _known", answer).await;
    let call = r.calls[0].id;
    let (status, page) = r.get(&format!("/submissions/{}", r.submission)).await;
    assert_eq!(status, 200);
    let marked: Vec<&str> = page
        .split("class=\"add model-written\"")
        .skip(1)
        .map(|s| &s[..s.find("</span>").unwrap()])
        .collect();
    assert_eq!(marked.len(), 2, "{marked:?}");
    assert!(
        marked[0].contains("+def _known(field: str, incident: dict, confirmed: dict) -&gt; bool:"),
        "{marked:?}"
    );
    assert!(
        marked[1].contains("return field in incident and not is_blank(incident[field])"),
        "{marked:?}"
    );
    assert!(page.contains(&format!("← model answer, call {call}")));
    // `return True` is added by the sample and is in the answer, but is trivial: not marked.
    assert!(
        page.contains("<span class=\"add\">+        return True\n</span>"),
        "the trivial line is not shown unmarked"
    );
    // Another added line no answer holds stays unmarked.
    assert!(page.contains(
        "<span class=\"add\">+def _value(field: str, incident: dict, confirmed: dict):\n</span>"
    ));
    assert!(page.contains("Model-written share of the change: 2 of "), "the share is not stated");

    // The scorecard JSON carries it per file.
    let (status, json) = r.get(&format!("/submissions/{}/scorecard.json", r.submission)).await;
    assert_eq!(status, 200);
    let json: Value = serde_json::from_str(&json).unwrap();
    let p = &json["provenance"];
    assert_eq!(p["model_lines"], 2);
    let gate =
        p["files"].as_array().unwrap().iter().find(|f| f["path"] == "gate.py").expect("gate.py");
    assert_eq!(gate["model_lines"], 2);
    let from_model: Vec<&Value> =
        gate["lines"].as_array().unwrap().iter().filter(|l| !l["call"].is_null()).collect();
    assert_eq!(from_model.len(), 2);
    assert!(from_model.iter().all(|l| l["call"] == call));
    assert!(
        gate["lines"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["text"].as_str().unwrap().trim() != "return True")
    );
    for f in p["files"].as_array().unwrap().iter().filter(|f| f["path"] != "gate.py") {
        assert_eq!(f["model_lines"], 0, "{f}");
    }
    let share = p["model_share"].as_f64().unwrap();
    assert!((share - 2.0 / p["changed_lines"].as_f64().unwrap()).abs() < 1e-9);
}

#[tokio::test]
async fn an_honest_submission_has_no_model_written_line() {
    // The model answered prose and trivial code only: nothing is marked.
    let r = reviewed("explain the gate", "Check each field first.\n}\nreturn True\npass\n").await;
    let (_, page) = r.get(&format!("/submissions/{}", r.submission)).await;
    assert!(!page.contains("model-written"));
    assert!(page.contains("Model-written share of the change: 0 of "));
    let (_, json) = r.get(&format!("/submissions/{}/scorecard.json", r.submission)).await;
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["provenance"]["model_lines"], 0);
    assert!(json["provenance"]["changed_lines"].as_u64().unwrap() > 10);
}
