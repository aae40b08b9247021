//! What the internet may send, bounded (#27): a body trickled a byte at a
//! time is cut at its total time, an extractor's rejection is answered in
//! the app's words, every page says not to cache it and which browser
//! features it never uses, and one API token creates a bounded number of
//! assignments a minute.

use std::time::Duration;

use gatehouse::db::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::api::api_token;
use crate::auth::signed_in;
use crate::candidate::{app_with_packet, invite};
use crate::hardening::read_until_closed;
use crate::support::TestApp;

#[tokio::test]
async fn a_body_trickled_a_byte_at_a_time_is_cut_at_its_total_time() {
    // The idle limit alone never fires: a byte comes every 300 ms.
    let app = TestApp::spawn_with(|c| {
        c.body_idle_timeout_secs = 5;
        c.body_total_timeout_secs = 2;
    })
    .await;
    let stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n";
    write.write_all(head.as_bytes()).await.unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..1000 {
            if write.write_all(b"a").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let read_all = async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 4096];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            }
        }
    };
    let done = tokio::time::timeout(Duration::from_secs(8), read_all).await;
    trickle.abort();
    assert!(done.is_ok(), "a trickled body kept its request open");
    assert!(started.elapsed() < Duration::from_secs(6), "{:?}", started.elapsed());
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 4"), "{answer}");
    // A body that arrives in time is read as before.
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let ok = read_until_closed(&mut stream, Duration::from_secs(6)).await.unwrap();
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
}

#[tokio::test]
async fn rejections_are_answered_in_the_apps_words() {
    let app = app_with_packet().await;
    let (admin, csrf) = signed_in(&app, Role::Admin).await;
    let framework = ["deserialize", "Cannot parse", "`i64`", "Invalid URL", "Failed to"];
    let clean = |text: &str| {
        for f in framework {
            assert!(!text.contains(f), "framework words {f:?} in {text}");
        }
    };
    // A query parameter that is not a number: the page (HTML) and JSON.
    let r = admin.get(app.url("/packets/null-status?version=abc")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let html = r.text().await.unwrap();
    clean(&html);
    assert!(html.contains("parameter in the address"), "{html}");
    let r = admin
        .get(app.url("/packets/null-status?version=abc"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    clean(&body.to_string());
    assert!(body["error"].as_str().unwrap().contains("query"), "{body}");
    // A path part that is not a number.
    let r = admin
        .post(app.url("/admin/webhooks/abc/disable"))
        .header("accept", "application/json")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    clean(&body.to_string());
    assert!(body["error"].as_str().unwrap().contains("part of this address"), "{body}");
    // A form field that is not a number; a form sent as something else.
    let r = admin
        .post(app.url("/assignments"))
        .header("accept", "application/json")
        .form(&[("csrf", csrf.as_str()), ("packet", "null-status"), ("time_box_minutes", "many")])
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    clean(&text);
    let r = admin
        .post(app.url("/admin/retention"))
        .header("accept", "application/json")
        .header("x-csrf-token", csrf.as_str())
        .body("days=3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let body: Value = r.json().await.unwrap();
    clean(&body.to_string());
    // The app's own refusals are untouched.
    let r = admin
        .post(app.url("/admin/retention"))
        .header("accept", "application/json")
        .form(&[("csrf", csrf.as_str()), ("days", "-4")])
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("whole number of days"), "{body}");
}

#[tokio::test]
async fn pages_are_never_cached_and_use_no_device() {
    let app = app_with_packet().await;
    let invited = invite(&app.state, "Nocache Person").await;
    let client = TestApp::client();
    for path in
        [format!("/c/{}", invited.token), format!("/c/{}/meter", invited.token), "/login".into()]
    {
        let r = client.get(app.url(&path)).send().await.unwrap();
        assert_eq!(r.headers()["cache-control"], "no-store", "{path}");
        let policy = r.headers()["permissions-policy"].to_str().unwrap();
        assert!(
            policy.contains("camera=()") && policy.contains("microphone=()"),
            "{path}: {policy}"
        );
    }
    // Static files keep their own caching.
    let r = client.get(app.url("/style/gatehouse.css")).send().await.unwrap();
    assert_eq!(r.headers()["cache-control"], "public, max-age=300");
    assert!(r.headers().contains_key("permissions-policy"));
}

#[tokio::test]
async fn one_api_token_creates_a_bounded_number_of_assignments_a_minute() {
    let app = TestApp::spawn_with(|c| c.api_assignments_per_minute = 2).await;
    crate::candidate::publish_packet(&app.state).await;
    let first = api_token(&app, "first@example.com", Role::Author).await;
    let second = api_token(&app, "second@example.com", Role::Author).await;
    let create = |token: String, n: usize| {
        let url = app.url("/api/v1/assignments");
        async move {
            let body = json!({ "packet": "null-status", "candidate_name": format!("Rate {n}"),
                               "email": format!("rate{n}@example.com") });
            TestApp::client().post(url).bearer_auth(token).json(&body).send().await.unwrap()
        }
    };
    for n in 0..2 {
        assert_eq!(create(first.clone(), n).await.status(), StatusCode::CREATED);
    }
    let r = create(first.clone(), 2).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("try again in"), "{body}");
    assert_eq!(
        app.state.db.list_assignments(None).await.unwrap().len(),
        2,
        "the refused one made nothing"
    );
    // Another token has its own bucket.
    assert_eq!(create(second, 3).await.status(), StatusCode::CREATED);
}
