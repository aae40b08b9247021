//! The model meter's overhead: N sequential non-streaming calls straight to
//! a local upstream and N through the meter (the real app on port 0 with a
//! temporary SQLite file), then the meter's throughput with concurrent
//! clients. Prints p50/p99 of both, the latency the meter adds and the
//! ratio. Run with `cargo bench -p server --bench meter`; `METER_N` and
//! `METER_CLIENTS` change the counts.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use gatehouse::config::Config;
use gatehouse::db::NewVersion;
use gatehouse::invites::{self, Invite};
use serde_json::{Value, json};

const SLUG: &str = "null-status";

/// A minimal OpenAI-format upstream with usage in every answer.
async fn upstream() -> String {
    let answer = json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    });
    let app = Router::new().route("/v1/chat/completions", post(move || {
        let answer = answer.clone();
        async move { axum::Json(answer) }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn sequential(client: &reqwest::Client, url: &str, key: Option<&str>, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let body = json!({"model": "bench", "messages": [{"role": "user", "content": format!("question {i}")}]});
        let mut req = client.post(url).json(&body);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let started = Instant::now();
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
        let _ = r.bytes().await.unwrap();
        out.push(started.elapsed());
    }
    out.sort();
    out
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("METER_N").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let clients: usize = std::env::var("METER_CLIENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(16);
    let upstream_url = upstream().await;

    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        database_url: format!("sqlite://{}", dir.path().join("gatehouse.db").display()),
        data_dir: dir.path().join("data"),
        packets_dir: PathBuf::new(),
        model_upstream_url: Some(upstream_url.clone()),
        ..Config::default()
    };
    let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = gatehouse::serve::state(config).await.unwrap();
    tokio::spawn({
        let app = gatehouse::web::router(state.clone());
        async move { axum::serve(listener, app).await.unwrap() }
    });

    // A packet whose caps are high enough never to refuse, so every call
    // takes the full path: budget check under the lock, ledger row, usage.
    let rel = format!("packets/{SLUG}/bench/{SLUG}");
    let pdir = state.config.data_dir.join(&rel);
    grader::tree::copy_path(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets").join(SLUG), &pdir).expect("copying the packet");
    let toml = std::fs::read_to_string(pdir.join("packet.toml")).unwrap();
    let (start, end) = (toml.find("[budgets]").unwrap(), toml.find("[limits]").unwrap());
    let toml = format!("{}[budgets]\nmodel_calls = 100000000\ntokens = 100000000000\nrequest_bytes = 100000000000\n\n{}", &toml[..start], &toml[end..]);
    std::fs::write(pdir.join("packet.toml"), toml).unwrap();
    state
        .db
        .create_version(NewVersion { slug: SLUG, title: "bench", builtin: false, dir: &rel, digest: "bench", created_by: None, publish: true })
        .await
        .unwrap();
    let invited = invites::create(&state, None, Invite { slug: SLUG, candidate_name: "Bench", email: "bench@example.com", deadline: None, time_box_secs: None })
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let status: Value = client.get(format!("http://{addr}/c/{}/meter", invited.token)).send().await.unwrap().json().await.unwrap();
    let key = status["key"].as_str().unwrap().to_string();

    let direct_url = format!("{upstream_url}/chat/completions");
    let meter_url = format!("http://{addr}/v1/chat/completions");
    // Warm both paths (connections, caches).
    sequential(&client, &direct_url, None, 50).await;
    sequential(&client, &meter_url, Some(&key), 50).await;

    let direct = sequential(&client, &direct_url, None, n).await;
    let metered = sequential(&client, &meter_url, Some(&key), n).await;
    let (d50, d99) = (percentile(&direct, 0.50), percentile(&direct, 0.99));
    let (m50, m99) = (percentile(&metered, 0.50), percentile(&metered, 0.99));
    println!("model meter benchmark: {n} sequential non-streaming calls each");
    println!("  direct to upstream   p50 {:7.3} ms   p99 {:7.3} ms", ms(d50), ms(d99));
    println!("  through the meter    p50 {:7.3} ms   p99 {:7.3} ms", ms(m50), ms(m99));
    println!(
        "  added by the meter   p50 {:7.3} ms   p99 {:7.3} ms   (ratio p50 {:.2}x, p99 {:.2}x)",
        ms(m50) - ms(d50),
        ms(m99) - ms(d99),
        ms(m50) / ms(d50),
        ms(m99) / ms(d99)
    );
    println!("  target: under 2 ms added at p50: {}", if ms(m50) - ms(d50) < 2.0 { "met" } else { "NOT met" });

    // Throughput: `clients` concurrent clients for 5 s, one key (so every
    // call contends for the same assignment's budget lock).
    for (label, url, key) in [("direct to upstream", direct_url.clone(), None), ("through the meter", meter_url.clone(), Some(key.clone()))] {
        let done = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut tasks = Vec::new();
        for c in 0..clients {
            let (client, url, key, done) = (client.clone(), url.clone(), key.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                let mut i = 0u64;
                while Instant::now() < deadline {
                    let body = json!({"model": "bench", "messages": [{"role": "user", "content": format!("client {c} question {i}")}]});
                    let mut req = client.post(&url).json(&body);
                    if let Some(k) = &key {
                        req = req.bearer_auth(k);
                    }
                    let r = req.send().await.unwrap();
                    assert_eq!(r.status(), 200);
                    let _ = r.bytes().await.unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let count = done.load(Ordering::Relaxed);
        println!("  throughput {label:<20} {clients} clients x 5 s: {count} calls, {:.0} calls/s", count as f64 / 5.0);
    }
    let recorded = state.db.model_calls_of(&invited.assignment.id).await.unwrap().len();
    println!("  ledger rows recorded: {recorded}");
}
