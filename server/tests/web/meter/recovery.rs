//! Calls cut short (abandoned, server stopped or killed mid-call), and the per-call queries.

use std::time::Duration;

use gatehouse::config::Config;
use serde_json::json;

use super::*;

#[tokio::test]
async fn a_call_in_flight_when_the_server_stopped_is_settled_at_start() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "tokens = 1000", false, |_| {}).await;
    up.set(|b| b.delay = Duration::from_secs(2));
    let (app_url, key) = (m.app.url("/v1/chat/completions"), m.key.clone());
    let pending = tokio::spawn(async move {
        let mut body = chat("a long question");
        body["max_tokens"] = json!(500);
        reqwest::Client::new()
            .post(app_url)
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    let mut in_flight = Vec::new();
    for _ in 0..100 {
        in_flight = ledger(&m.app, &m.assignment).await;
        if !in_flight.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(in_flight[0].status, 0);
    assert_eq!(in_flight[0].reserved_tokens, 504, "prompt estimate 4 + max_tokens 500");
    assert_eq!(
        status_json(&m).await["caps"][0]["used"],
        504,
        "the reservation is held while in flight"
    );
    // What start-up does after a crash: every call still in flight is settled.
    assert_eq!(gatehouse::meter::settle_interrupted(&m.app.state).await.unwrap(), 1);
    let row = &ledger(&m.app, &m.assignment).await[0];
    assert_eq!(
        (
            row.status,
            row.prompt_tokens,
            row.completion_tokens,
            row.tokens_estimated,
            row.reserved_tokens
        ),
        (499, 4, 0, true, 0)
    );
    assert!(row.error.as_deref().unwrap().contains("server stopped"), "{:?}", row.error);
    assert_eq!(
        status_json(&m).await["caps"][0]["used"],
        4,
        "the reservation is released, the prompt charged"
    );
    // The late answer of that call changes nothing (it was settled).
    assert_eq!(pending.await.unwrap(), 200);
    let row = &ledger(&m.app, &m.assignment).await[0];
    assert_eq!(row.status, 499);
    assert_eq!(status_json(&m).await["caps"][0]["used"], 4);
    // Nothing is in flight: a second start settles nothing.
    assert_eq!(gatehouse::meter::settle_interrupted(&m.app.state).await.unwrap(), 0);
}

#[tokio::test]
async fn a_non_streaming_call_the_client_abandons_is_still_finished() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "tokens = 1000", false, |_| {}).await;
    up.set(|b| b.delay = Duration::from_millis(600));
    let r = reqwest::Client::new()
        .post(m.app.url("/v1/chat/completions"))
        .bearer_auth(&m.key)
        .timeout(Duration::from_millis(150))
        .json(&chat("gave up"))
        .send()
        .await;
    assert!(r.is_err(), "the client gave up");
    let calls = settled(&m).await;
    assert_eq!(
        (
            calls[0].status,
            calls[0].prompt_tokens,
            calls[0].completion_tokens,
            calls[0].tokens_estimated
        ),
        (200, 10, 5, false)
    );
    assert_eq!(status_json(&m).await["caps"][0]["used"], 15);
}

#[tokio::test]
async fn per_call_queries_use_indexes_not_the_ledger() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    let url = m.app.state.config.database_url.clone();
    let (dup, refused, totals) = if url.starts_with("postgres") {
        // The test tables are nearly empty, where a sequential scan is
        // cheapest; with it priced out, the plan shows which index serves.
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::query("SET enable_seqscan = off").execute(&mut conn).await.unwrap();
        let mut plans = Vec::new();
        for q in [
            "SELECT MIN(id) FROM model_calls WHERE assignment_id = 'a' AND request_sha256 = 'x'",
            "SELECT COUNT(*) FROM model_calls WHERE assignment_id = 'a' AND refused IS NOT NULL",
            "SELECT calls, tokens, request_bytes FROM meter_totals WHERE assignment_id = 'a'",
        ] {
            let rows: Vec<(String,)> =
                sqlx::query_as(&format!("EXPLAIN {q}")).fetch_all(&mut conn).await.unwrap();
            plans.push(rows.into_iter().map(|r| r.0).collect::<Vec<_>>().join("; "));
        }
        conn.close().await.unwrap();
        assert!(plans[2].contains("Index Scan using meter_totals_pkey"), "{}", plans[2]);
        (plans[0].clone(), plans[1].clone(), plans[2].clone())
    } else {
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        let plan = |q: &'static str| {
            let pool = pool.clone();
            async move {
                let rows: Vec<(i64, i64, i64, String)> =
                    sqlx::query_as(&format!("EXPLAIN QUERY PLAN {q}"))
                        .fetch_all(&pool)
                        .await
                        .unwrap();
                rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("; ")
            }
        };
        let dup = plan(
            "SELECT MIN(id) FROM model_calls WHERE assignment_id = 'a' AND request_sha256 = 'x'",
        )
        .await;
        let refused = plan(
            "SELECT COUNT(*) FROM model_calls WHERE assignment_id = 'a' AND refused IS NOT NULL",
        )
        .await;
        let totals =
            plan("SELECT calls, tokens, request_bytes FROM meter_totals WHERE assignment_id = 'a'")
                .await;
        pool.close().await;
        assert!(totals.contains("USING INDEX"), "{totals}");
        (dup, refused, totals)
    };
    assert!(dup.contains("model_calls_by_request"), "{dup}");
    assert!(refused.contains("model_calls_refused"), "{refused}");
    assert!(!totals.contains("model_calls"), "{totals}");
    // And the totals agree with the ledger they summarise.
    for i in 0..3 {
        assert_eq!(call(&m.app, &m.key, &chat(&format!("q{i}"))).await.0, 200);
    }
    let calls = settled(&m).await;
    let usage = m.app.state.db.meter_usage(&m.assignment).await.unwrap();
    // Admission read them from memory, moved by each admission and settlement.
    assert_eq!(m.app.state.memo.meter.totals(&m.assignment), Some(usage));
    assert_eq!(usage.calls, calls.len() as i64);
    assert_eq!(
        usage.tokens,
        calls.iter().map(|c| c.prompt_tokens + c.completion_tokens).sum::<i64>()
    );
    assert_eq!(usage.request_bytes, calls.iter().map(|c| c.request_bytes).sum::<i64>());
}

/// `gatehouse serve` as a child process over `dir`, metering to `upstream`.
fn serve_child(
    dir: &std::path::Path,
    database_url: &str,
    port: u16,
    upstream: &str,
) -> std::process::Child {
    let log =
        std::fs::OpenOptions::new().create(true).append(true).open(dir.join("child.log")).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        // The test binary's own GATEHOUSE_TEST_DATABASE is no setting of the app.
        .env_remove("GATEHOUSE_TEST_DATABASE")
        .env_remove("GATEHOUSE_TEST_PG_STATEMENTS")
        .arg("serve")
        .current_dir(dir)
        .env("GATEHOUSE_LISTEN", format!("127.0.0.1:{port}"))
        .env("GATEHOUSE_PUBLIC_URL", format!("http://127.0.0.1:{port}"))
        .env("GATEHOUSE_DATABASE_URL", database_url)
        .env("GATEHOUSE_DATA_DIR", dir.join("data"))
        .env("GATEHOUSE_PACKETS_DIR", "")
        .env("GATEHOUSE_WORKERS", "0")
        .env("GATEHOUSE_MODEL_UPSTREAM_URL", upstream)
        .env("GATEHOUSE_LOG", "info,sqlx=warn")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

async fn wait_healthy(port: u16, dir: &std::path::Path) {
    for _ in 0..300 {
        if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await
            && r.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the child did not start: {}",
        std::fs::read_to_string(dir.join("child.log")).unwrap_or_default()
    );
}

#[tokio::test]
async fn a_kill_9_mid_call_leaves_no_stuck_reservation() {
    let (url, up) = spawn_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let database_url = crate::support::database_url(dir.path()).await;
    let config = Config {
        database_url: database_url.clone(),
        data_dir: dir.path().join("data"),
        packets_dir: std::path::PathBuf::new(),
        ..Config::default()
    };
    let state = gatehouse::serve::state(config).await.unwrap();
    meter_packet(&state, "tokens = 1000", false).await;
    let invited = invite(&state, "Ada").await;
    let (_, key) = gatehouse::meter::current_key(&state, &invited.assignment, &invited.token)
        .await
        .unwrap()
        .unwrap();
    let assignment = invited.assignment.id.clone();

    let mut child = serve_child(dir.path(), &database_url, port, &url);
    wait_healthy(port, dir.path()).await;
    up.set(|b| b.delay = Duration::from_secs(3));
    let endpoint = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let pending = tokio::spawn({
        let (endpoint, key) = (endpoint.clone(), key.clone());
        async move {
            let mut body = chat("a long question");
            body["max_tokens"] = json!(500);
            reqwest::Client::new().post(endpoint).bearer_auth(key).json(&body).send().await
        }
    });
    for _ in 0..200 {
        if !state.db.model_calls_of(&assignment).await.unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        state.db.meter_usage(&assignment).await.unwrap().tokens,
        504,
        "the reservation is held"
    );
    // The request's transcript blob is written beside the call: wait for
    // it, so the charge it keeps is not nothing.
    let request_sha = state.db.model_calls_of(&assignment).await.unwrap()[0]
        .request_body_sha256
        .clone()
        .expect("the request is kept");
    for _ in 0..500 {
        if state.blobs().local_copy(&request_sha).await.unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(pending.await.unwrap().is_err(), "the server died mid-call");
    let row = &state.db.model_calls_of(&assignment).await.unwrap()[0];
    assert_eq!((row.status, row.reserved_tokens), (0, 504), "the killed server left it in flight");
    // Its transcript charge: the request kept and room for the response.
    // (The request's blob is written beside the call; the kill came after
    // or before it reached the disk, which the settlement must tell.)
    let request_kept = match state.blobs().local_copy(&request_sha).await.unwrap() {
        Some(p) => std::fs::metadata(p).unwrap().len() as i64,
        None => 0,
    };
    assert!(request_kept > 0, "the request's blob was written");
    assert!(row.transcript_bytes > request_kept, "room reserved for the response: {row:?}");
    assert_eq!(
        state.db.meter_usage(&assignment).await.unwrap().transcript_bytes,
        row.transcript_bytes
    );

    // The next start settles it before admitting any call.
    up.set(|b| b.delay = Duration::ZERO);
    let mut child = serve_child(dir.path(), &database_url, port, &url);
    wait_healthy(port, dir.path()).await;
    let row = &state.db.model_calls_of(&assignment).await.unwrap()[0];
    assert_eq!(
        (row.status, row.prompt_tokens, row.reserved_tokens, row.tokens_estimated),
        (499, 4, 0, true)
    );
    assert_eq!(state.db.meter_usage(&assignment).await.unwrap().tokens, 4);
    // The response's room is released: only the request kept stays charged.
    assert_eq!(row.transcript_bytes, request_kept, "{row:?}");
    assert_eq!(
        state.db.meter_usage(&assignment).await.unwrap().transcript_bytes,
        request_kept,
        "the totals release it too"
    );
    let r = reqwest::Client::new()
        .post(&endpoint)
        .bearer_auth(&key)
        .json(&chat("after the restart"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let _ = child.kill();
    let _ = child.wait();
}
