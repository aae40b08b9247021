//! Budgets and request rules: caps, duplicates, concurrent calls, max_tokens, refused bodies.

use std::sync::atomic::Ordering;
use std::time::Duration;

use gatehouse::db::ModelCall;
use serde_json::{Value, json};

use super::*;

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
