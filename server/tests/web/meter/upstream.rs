//! The upstream: errors and timeouts, streams and their usage, HTTPS with a configured CA.

use std::time::Duration;

use gatehouse::config::Config;
use serde_json::{Value, json};

use super::*;

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
