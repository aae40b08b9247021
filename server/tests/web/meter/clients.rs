//! Real clients unchanged: the official openai package, its retries, and curl.

use serde_json::{Value, json};

use super::*;

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
    let mut command = std::process::Command::new(crate::support::tool("python"));
    command
        .arg(&script)
        .env("GATEHOUSE_BASE", m.app.url("/v1"))
        .env("GATEHOUSE_KEY", &m.key)
        .env("GATEHOUSE_CLOSED_KEY", &closed_key);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("the tools' python runs (scripts/setup installs requirements-tools.txt)");
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
