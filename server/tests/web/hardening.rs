//! Platform hardening (issue #10): each attack tried over HTTP against the
//! real app, and the honest request next to it still working.

use std::time::Duration;

use base64::Engine;
use gatehouse::db::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::api::api_token;
use crate::auth::{PASSWORD, location, page, post_login};
use crate::candidate::{SLUG, app_with_packet, publish_packet};
use crate::support::{TestApp, publish_copy_with};

#[tokio::test]
async fn next_with_a_tab_newline_or_backslash_is_not_followed() {
    let app = TestApp::spawn().await;
    app.user("ada@example.test", Role::Author, PASSWORD).await;
    for (next, expect) in [
        ("/\t/evil.example", "/"),
        ("/\n/evil.example", "/"),
        ("/\r\n/evil.example", "/"),
        ("\t//evil.example", "/"),
        ("/\\/evil.example", "/"),
        ("/\u{0}/evil.example", "/"),
        ("javascript:alert(1)", "/"),
        ("/assignments?packet=null-status", "/assignments?packet=null-status"),
        ("/queue", "/queue"),
    ] {
        let client = TestApp::client();
        let r = post_login(&app, &client, "ada@example.test", PASSWORD, next).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "next={next:?}");
        assert_eq!(location(&r), expect, "next={next:?}");
    }
    // The sign-in page does not carry a hostile next into its form either.
    let html = page(&TestApp::client(), app.url("/login?next=%2F%09%2Fevil.example"))
        .await
        .text()
        .await
        .unwrap();
    assert!(!html.contains("evil.example"), "{html}");
    // The landing page by role ("/" sends a reviewer to the inbox, others to packets).
    assert!(html.contains(r#"name="next" value="/""#), "{html}");
}

#[tokio::test]
async fn prompt_links_and_images_keep_only_safe_schemes() {
    let app = TestApp::spawn().await;
    publish_copy_with(&app.state, SLUG, "1", |dir| {
        let prompt = dir.join("prompt.md");
        let mut text = std::fs::read_to_string(&prompt).unwrap();
        text.push_str(
            "\n\n[Start here](javascript:alert(document.cookie)) [Also](JaVaScRiPt:alert(1)) [Enc](jav&#x61;script:alert(2))\n\
             ![pic](data:image/svg+xml;base64,PHN2Zz4=) <vbscript:msgbox(1)>\n\
             [Docs](https://docs.example.test/guide) [Mail](mailto:hiring@example.test) [Local](notes.md)\n",
        );
        std::fs::write(prompt, text).unwrap();
    })
    .await;
    let invited = crate::candidate::invite(&app.state, "Alice Candidate").await;
    let html = page(&TestApp::client(), app.url(&format!("/c/{}", invited.token)))
        .await
        .text()
        .await
        .unwrap();
    let lower = html.to_lowercase();
    for bad in ["javascript:", "data:image", "vbscript:"] {
        assert!(
            !lower.contains(&format!("href=\"{bad}")) && !lower.contains(&format!("src=\"{bad}")),
            "{bad} kept in {html}"
        );
    }
    assert!(html.contains("Start here"), "the unsafe link's text is kept: {html}");
    assert!(html.contains(r#"href="https://docs.example.test/guide""#), "{html}");
    assert!(html.contains(r#"href="mailto:hiring@example.test""#), "{html}");
    assert!(html.contains(r#"href="notes.md""#), "{html}");
}

fn inline_scripts(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find("<script") {
        rest = &rest[i..];
        let open_end = rest.find('>').unwrap();
        let close = rest.find("</script>").unwrap();
        if !rest[..open_end].contains(" src=") && close > open_end + 1 {
            out.push(rest[open_end + 1..close].to_string());
        }
        rest = &rest[close..];
    }
    out
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let app = TestApp::spawn().await;
    let client = TestApp::client();
    let answers = [
        page(&client, app.url("/login")).await,
        client.get(app.url("/healthz")).send().await.unwrap(),
        page(&client, app.url("/no/such/page")).await,
        client.get(app.url("/style/gatehouse.css")).send().await.unwrap(),
        client.post(app.url("/api/v1/assignments")).json(&json!({})).send().await.unwrap(),
        page(&client, app.url("/c/not-a-token")).await,
    ];
    for r in answers {
        let h = r.headers();
        let url = r.url().to_string();
        let csp = h
            .get("content-security-policy")
            .unwrap_or_else(|| panic!("no CSP on {url}"))
            .to_str()
            .unwrap()
            .to_string();
        for part in [
            "default-src 'none'",
            "script-src 'self' 'wasm-unsafe-eval'",
            "frame-ancestors 'none'",
            "object-src 'none'",
            "base-uri 'none'",
        ] {
            assert!(csp.contains(part), "{url}: {csp}");
        }
        assert!(!csp.contains("unsafe-inline"), "{url}: {csp}");
        assert_eq!(h.get("referrer-policy").unwrap(), "no-referrer", "{url}");
        assert_eq!(h.get("x-content-type-options").unwrap(), "nosniff", "{url}");
        assert_eq!(h.get("x-frame-options").unwrap(), "DENY", "{url}");
    }
    // The one inline script a page carries (the island bootstrap) is the one
    // the policy's hash allows.
    let r = page(&client, app.url("/login")).await;
    let csp = r.headers().get("content-security-policy").unwrap().to_str().unwrap().to_string();
    let html = r.text().await.unwrap();
    for script in inline_scripts(&html) {
        let hash = base64::engine::general_purpose::STANDARD
            .encode(sha2::Sha256::digest(script.as_bytes()));
        assert!(
            csp.contains(&format!("'sha256-{hash}'")),
            "inline script not allowed by {csp}: {script}"
        );
    }
}

fn set_cookies(r: &reqwest::Response) -> Vec<String> {
    r.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn cookies_are_secure_when_the_public_url_is_https() {
    for (url, secure) in [("https://grader.example.test", true), ("", false)] {
        let app = TestApp::spawn_with(|c| {
            if !url.is_empty() {
                c.public_url = url.into();
            }
        })
        .await;
        app.user("ada@example.test", Role::Author, PASSWORD).await;
        // A client without a cookie store: a Secure cookie is not sent back
        // over plain HTTP, so the test carries it by hand.
        let client =
            reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let r = client.get(app.url("/login")).header("accept", "text/html").send().await.unwrap();
        let cookies = set_cookies(&r);
        let login = cookies
            .iter()
            .find(|c| c.starts_with("gatehouse_login="))
            .unwrap_or_else(|| panic!("{cookies:?}"))
            .clone();
        let html = r.text().await.unwrap();
        let csrf = crate::auth::csrf_of(&html);
        let pair = login.split(';').next().unwrap().to_string();
        let r = client
            .post(app.url("/login"))
            .header("cookie", pair)
            .form(&[
                ("csrf", csrf.as_str()),
                ("email", "ada@example.test"),
                ("password", PASSWORD),
                ("next", "/packets"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        let session = set_cookies(&r)
            .into_iter()
            .find(|c| c.starts_with("gatehouse_session="))
            .expect("a session cookie");
        for cookie in [&login, &session] {
            assert_eq!(cookie.contains("; Secure"), secure, "{url}: {cookie}");
            assert!(cookie.contains("HttpOnly"), "{cookie}");
        }
    }
}

/// Every session record's JSON, read from the database itself.
async fn session_rows(app: &TestApp) -> Vec<(String, i64)> {
    crate::support::raw_text_int_rows(
        &app.state.config.database_url,
        "SELECT data, expires_at FROM sessions",
    )
    .await
}

#[tokio::test]
async fn opening_the_sign_in_page_stores_no_session_and_sign_in_purges_expired_ones() {
    let app = TestApp::spawn().await;
    app.user("ada@example.test", Role::Author, PASSWORD).await;
    for _ in 0..5 {
        let r = page(&TestApp::client(), app.url("/login")).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert!(
            !set_cookies(&r).iter().any(|c| c.starts_with("gatehouse_session=")),
            "{:?}",
            set_cookies(&r)
        );
    }
    assert!(session_rows(&app).await.is_empty(), "a cookieless GET /login stored a session");
    // Sign-in still works, with its CSRF check: a wrong token is refused.
    let client = TestApp::client();
    let _ = page(&client, app.url("/login")).await;
    let r = client
        .post(app.url("/login"))
        .form(&[
            ("csrf", "0".repeat(64).as_str()),
            ("email", "ada@example.test"),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    app.state.db.save_session("long-expired", "{}", 1_000).await.unwrap();
    app.state.db.save_session("just-expired", "{}", gatehouse::now_ms() - 1).await.unwrap();
    assert_eq!(session_rows(&app).await.len(), 2);
    let r = post_login(&app, &client, "ada@example.test", PASSWORD, "/packets").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let rows = session_rows(&app).await;
    assert_eq!(rows.len(), 1, "expired sessions are purged at sign-in: {rows:?}");
    assert!(rows[0].1 > gatehouse::now_ms());
}

#[tokio::test]
async fn new_api_tokens_and_invite_urls_never_reach_a_session_record() {
    let app = app_with_packet().await;
    let (admin, csrf) = crate::auth::signed_in(&app, Role::Admin).await;
    let r = admin
        .post(app.url("/admin/tokens"))
        .form(&[("csrf", csrf.as_str()), ("name", "ATS"), ("user_id", "1")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = admin
        .post(app.url("/assignments"))
        .form(&[
            ("csrf", csrf.as_str()),
            ("packet", SLUG),
            ("candidate_name", "Cy Candidate"),
            ("email", "cy@example.test"),
            ("deadline", "2099-01-01T12:30"),
            ("time_box_minutes", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let invited_page = location(&r);
    for (data, _) in session_rows(&app).await {
        assert!(
            !data.contains("gh_") && !data.contains("/c/"),
            "a secret is stored in a session: {data}"
        );
    }
    // Each is still shown once.
    let html = page(&admin, app.url("/admin/users")).await.text().await.unwrap();
    assert!(html.contains(r#"<code class="api-token">gh_"#), "{html}");
    assert!(
        !page(&admin, app.url("/admin/users"))
            .await
            .text()
            .await
            .unwrap()
            .contains(r#"<code class="api-token">"#)
    );
    let html = page(&admin, app.url(&invited_page)).await.text().await.unwrap();
    assert!(html.contains(&format!("{}/c/", app.base)), "{html}");
    assert!(
        !page(&admin, app.url(&invited_page))
            .await
            .text()
            .await
            .unwrap()
            .contains(&format!("{}/c/", app.base))
    );
}

#[tokio::test]
async fn a_multibyte_deadline_is_a_clear_400_not_a_panic() {
    let app = app_with_packet().await;
    let token = api_token(&app, "author@example.test", Role::Author).await;
    let client = TestApp::client();
    // "+00é0": the old hand-written parser sliced the offset at byte 3..4,
    // inside the "é", and panicked.
    for deadline in [
        "2030-01-31T17:00:00+00é0",
        "2030-01-31T17:00:0é",
        "2030-01-31T17:00:00+0é:00",
        "2030-01-3é17:00:00Z",
        "ééééééééééééééééééééé",
    ] {
        let body = json!({ "packet": SLUG, "candidate_name": "Grace", "email": "grace@example.test", "deadline": deadline });
        let r = client
            .post(app.url("/api/v1/assignments"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{deadline}");
        let error = r.json::<Value>().await.unwrap()["error"].as_str().unwrap().to_string();
        assert!(error.contains("RFC 3339") && error.contains(deadline), "{error}");
    }
    let body = json!({ "packet": SLUG, "candidate_name": "Grace", "email": "grace@example.test", "deadline": "2099-01-31T17:00:00+01:00" });
    let r = client
        .post(app.url("/api/v1/assignments"))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let a = app.state.db.assignment_by_id(&id).await.unwrap().unwrap();
    assert_eq!(a.deadline, 4_073_558_400_000);
}

#[tokio::test]
async fn a_panicking_handler_answers_500_and_the_server_keeps_serving() {
    async fn boom() -> String {
        // The kind of bug the deadline parser had: a byte slice inside a char.
        let s = std::hint::black_box("é");
        s[..1].to_string()
    }
    let app =
        TestApp::spawn_routes(|_| {}, |r| r.route("/test/boom", axum::routing::get(boom))).await;
    let client = TestApp::client();
    let r = client.get(app.url("/test/boom")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(r.headers().get("content-security-policy").is_some());
    let text = r.text().await.unwrap();
    assert!(!text.contains("byte index"), "the panic's detail is not shown: {text}");
    assert_eq!(client.get(app.url("/healthz")).send().await.unwrap().status(), StatusCode::OK);
}

/// Reads what the server sends until it closes the connection or `limit`
/// passes; `None` when it was still open at the limit.
pub(crate) async fn read_until_closed(
    stream: &mut tokio::net::TcpStream,
    limit: Duration,
) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok()?;
    Some(String::from_utf8_lossy(&got).into_owned())
}

#[tokio::test]
async fn a_client_slow_to_send_its_headers_is_disconnected() {
    let app = TestApp::spawn_with(|c| c.header_timeout_secs = 1).await;
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let closed = read_until_closed(&mut stream, Duration::from_secs(6)).await;
    assert!(closed.is_some(), "a half-sent header kept the connection open");
    // A whole request on a fresh connection is answered.
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut stream, Duration::from_secs(6)).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_stalled_request_body_is_cut_off() {
    let app = TestApp::spawn_with(|c| c.body_idle_timeout_secs = 1).await;
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nemail=a";
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let answer = read_until_closed(&mut stream, Duration::from_secs(8)).await;
    assert!(answer.is_some(), "a stalled body kept the request open");
    assert!(started.elapsed() < Duration::from_secs(6));
    let answer = answer.unwrap();
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 4") || answer.starts_with("HTTP/1.1 5"),
        "{answer}"
    );
}

#[tokio::test]
async fn metrics_ask_for_the_configured_bearer_token() {
    let app = TestApp::spawn_with(|c| c.metrics_token = Some("metrics-s3cret".into())).await;
    let client = TestApp::client();
    assert_eq!(
        client.get(app.url("/metrics")).send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        client.get(app.url("/metrics")).bearer_auth("wrong").send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let r = client.get(app.url("/metrics")).bearer_auth("metrics-s3cret").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Without a token the local client (this test) may read them.
    let open = TestApp::spawn().await;
    assert_eq!(client.get(open.url("/metrics")).send().await.unwrap().status(), StatusCode::OK);
}

/// A route's path with its parameters filled in.
fn concrete(path: &str, token: &str) -> String {
    path.replace("{token}", token)
        .replace("{id}", "1")
        .replace("{slug}", SLUG)
        .replace("{index}", "0")
        .replace("{audit}", "1")
        .replace("{kind}", "red")
        .replace("{*path}", "gatehouse.js")
}

#[tokio::test]
async fn every_unsafe_request_with_a_session_cookie_needs_the_csrf_token() {
    let app = TestApp::spawn().await;
    let version = publish_packet(&app.state).await;
    assert_eq!(version.id, 1);
    let (admin, csrf) = crate::auth::signed_in(&app, Role::Admin).await;
    let paths = gatehouse::web::routes().paths().to_vec();
    assert!(paths.len() >= 45, "the route table holds only {} paths: {paths:?}", paths.len());
    for p in [
        "/logout",
        "/admin/tokens",
        "/assignments/{id}/reissue",
        "/packets/{slug}/versions/{id}/check",
        "/packets/{slug}/versions/{id}/audit",
        "/packets/{slug}/versions/{id}/audits/{audit}/keep",
        "/v1/chat/completions",
    ] {
        assert!(paths.contains(&p), "{p} is missing from the route table");
    }
    let audit_before = app.state.db.audit_entries(None, 1000).await.unwrap().len();
    let (mut checked, mut exempt) = (0, 0);
    for path in &paths {
        let url = app.url(&concrete(path, "not-a-link-token"));
        // The sign-in form and the setup link check their own token (see
        // opening_the_sign_in_page_stores_no_session... and auth.rs): refused
        // here too, by their handlers.
        let is_exempt = !gatehouse::web::session::csrf_checked_by_layer(path);
        for method in [
            reqwest::Method::POST,
            reqwest::Method::PUT,
            reqwest::Method::PATCH,
            reqwest::Method::DELETE,
        ] {
            let fields = [
                ("role", "admin"),
                ("name", "x"),
                ("email", "x@example.test"),
                ("password", PASSWORD),
                ("prompt", "x"),
            ];
            let attempts = [
                admin.request(method.clone(), &url).form(&fields),
                admin
                    .request(method.clone(), &url)
                    .form(&fields)
                    .header("x-csrf-token", "0123456789abcdef"),
                admin.request(method.clone(), &url).form(&[("csrf", "0123456789abcdef")]),
                admin
                    .request(method.clone(), &url)
                    .multipart(reqwest::multipart::Form::new().text("name", "x")),
                admin.request(method.clone(), &url).multipart(
                    reqwest::multipart::Form::new().text("csrf", "wrong").text("name", "x"),
                ),
            ];
            for attempt in attempts {
                let r = attempt.send().await.unwrap();
                let status = r.status();
                let text = r.text().await.unwrap();
                if is_exempt {
                    // The session carries no authority here: the path's
                    // token or a bearer is the credential.
                    assert!(
                        status.is_client_error(),
                        "{method} {path} acted on the session alone: {status} {text}"
                    );
                    exempt += 1;
                } else {
                    assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {text}");
                    assert!(text.contains("CSRF"), "{method} {path}: {text}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 150 && exempt >= 40, "checked {checked}, exempt {exempt}");
    assert_eq!(
        app.state.db.audit_entries(None, 1000).await.unwrap().len(),
        audit_before,
        "a refused request changed something"
    );
    assert_eq!(app.state.db.user_count().await.unwrap(), 1);
    // The right token passes, as a form field or a multipart field.
    let r = admin
        .post(app.url("/admin/tokens"))
        .form(&[("csrf", csrf.as_str()), ("name", "ci"), ("user_id", "1")])
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success() || r.status().is_redirection(), "{}", r.status());
    let part = reqwest::multipart::Form::new()
        .text("csrf", csrf.clone())
        .part("file", reqwest::multipart::Part::bytes(b"PK".to_vec()).file_name("p.zip"));
    let r = admin.post(app.url("/packets/import")).multipart(part).send().await.unwrap();
    assert_ne!(r.status(), StatusCode::FORBIDDEN, "multipart with the token was refused");
    let r = admin.post(app.url("/logout")).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

/// `n` clients, each with its own session and CSRF token, ready to sign in.
async fn login_forms(app: &TestApp, n: usize) -> Vec<(reqwest::Client, String)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let client = TestApp::client();
        let html = page(&client, app.url("/login")).await.text().await.unwrap();
        let csrf = crate::auth::csrf_of(&html);
        out.push((client, csrf));
    }
    out
}

async fn sign_in_all(
    app: &TestApp,
    forms: Vec<(reqwest::Client, String)>,
    email: &str,
    pass: &str,
) -> Vec<StatusCode> {
    let mut tasks = Vec::new();
    for (client, csrf) in forms {
        let (url, email, pass) = (app.url("/login"), email.to_string(), pass.to_string());
        tasks.push(tokio::spawn(async move {
            let form = [
                ("csrf", csrf.as_str()),
                ("email", email.as_str()),
                ("password", pass.as_str()),
                ("next", "/packets"),
            ];
            client.post(url).form(&form).send().await.unwrap().status()
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// An app with ada's account and the given bounds on password hashing and
/// failed sign-ins, and the statuses of 40 sign-ins with a wrong password
/// sent at once.
async fn forty_wrong_guesses_at_once(
    hash_concurrency: usize,
    attempts_per_minute: u32,
) -> (TestApp, Vec<StatusCode>) {
    let app = TestApp::spawn_with(|c| {
        c.password_hash_concurrency = hash_concurrency;
        c.login_attempts_per_minute = attempts_per_minute;
    })
    .await;
    app.user("ada@example.test", Role::Author, PASSWORD).await;
    let forms = login_forms(&app, 40).await;
    let statuses = sign_in_all(&app, forms, "ada@example.test", "wrong password").await;
    (app, statuses)
}

#[tokio::test]
async fn parallel_sign_ins_beyond_the_hashing_bound_get_503() {
    let (app, statuses) = forty_wrong_guesses_at_once(2, 1000).await;
    let busy = statuses.iter().filter(|s| **s == StatusCode::SERVICE_UNAVAILABLE).count();
    let checked = statuses.iter().filter(|s| **s == StatusCode::UNAUTHORIZED).count();
    eprintln!(
        "40 parallel sign-ins, 2 hashing permits: {checked} checked (401), {busy} refused busy (503)"
    );
    assert_eq!(busy + checked, 40, "{statuses:?}");
    assert!(busy >= 1 && checked >= 1, "busy {busy}, checked {checked}");
    // Once the checks end, sign-in works again.
    let r = post_login(&app, &TestApp::client(), "ada@example.test", PASSWORD, "/queue").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn the_failed_sign_in_limit_holds_under_parallel_load() {
    let (app, statuses) = forty_wrong_guesses_at_once(64, 5).await;
    let wrong = statuses.iter().filter(|s| **s == StatusCode::UNAUTHORIZED).count();
    let limited = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    eprintln!(
        "40 parallel wrong guesses, limit 5/min: {wrong} answered 401, {limited} answered 429"
    );
    assert_eq!(wrong, 5, "exactly the limit is answered 'wrong password': {statuses:?}");
    assert_eq!(limited, 35, "{statuses:?}");
    // Even the right password waits now.
    let r = post_login(&app, &TestApp::client(), "ada@example.test", PASSWORD, "/queue").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_draft_cannot_change_under_its_running_self_test_and_publishes_only_what_was_checked() {
    let app = TestApp::spawn().await;
    let (client, csrf) = crate::auth::signed_in(&app, Role::Author).await;
    // The tiny packet, whose self-test waits 2 s in each hidden run: long
    // enough to post an edit while it runs.
    let id = crate::library::import_tiny_draft(&app, &client, &csrf, 2, |_, b| Some(b)).await;
    let digest = app.state.db.version_by_id(id).await.unwrap().unwrap().digest;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let base = format!("/packets/tiny-answer/versions/{id}");
    let r = client
        .post(app.url(&format!("{base}/publish")))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let started = std::time::Instant::now();
    while app.state.db.version_by_id(id).await.unwrap().unwrap().check_state != "running" {
        assert!(started.elapsed() < Duration::from_secs(60), "the self-test never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = client
        .post(app.url(&format!("{base}/prompt")))
        .form(&[("csrf", csrf.as_str()), ("prompt", "# Changed while checking\n")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT, "an edit during the self-test was taken");
    assert!(r.text().await.unwrap().contains("self-test is running"));
    while app.state.db.version_by_id(id).await.unwrap().unwrap().check_state == "running" {
        assert!(started.elapsed() < Duration::from_secs(300), "the self-test never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The worker stores the check, then publishes (separate statements), so
    // the version publishes a moment after its check ends.
    let v = loop {
        let v = app.state.db.version_by_id(id).await.unwrap().unwrap();
        if v.state == gatehouse::db::VersionState::Published
            || started.elapsed() > Duration::from_secs(300)
        {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(v.digest, digest, "the folder is the checked one");
    assert_eq!(v.state, gatehouse::db::VersionState::Published, "the checked draft publishes");

    // A check stored for a digest the version no longer has does not pass,
    // and such a version cannot publish.
    let other = crate::library::import_draft(&app, &client, &csrf, |_, b| Some(b)).await;
    app.state.db.update_draft(other, "0000-a-later-digest").await.unwrap();
    app.state.db.finish_check(other, "passed", "{}", Some(&digest)).await.unwrap();
    let v = app.state.db.version_by_id(other).await.unwrap().unwrap();
    assert_eq!(v.check_state, "failed");
    assert!(!app.state.db.publish(other).await.unwrap());
}

#[tokio::test]
async fn markup_from_a_submission_is_escaped_wherever_it_is_shown() {
    let app = app_with_packet().await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let a = crate::candidate::invite(&app.state, "Alice <i>Candidate</i>").await;
    let src = crate::candidate::packet_src();
    let read = |p: &str| std::fs::read(src.join(p)).unwrap();
    let test = b"def test_markup():\n    print(\"<script>alert('log')</script>\")\n    assert False, \"<img src=x onerror=alert('junit')>\"\n".to_vec();
    let mut transcript = read("sample/transcript.jsonl");
    transcript.extend_from_slice(b"{\"role\": \"<script>alert('ledger')</script>\", \"tool\": \"<svg onload=alert('tool')>\"}\n");
    let notes = b"# Notes <script>alert('notes')</script>\n".to_vec();
    let entries: Vec<(&str, Vec<u8>)> = vec![
        ("gate.py", read("sample/gate.py")),
        ("NOTES.md", notes),
        ("transcript.jsonl", transcript),
        ("test_gate.py", test),
        ("<b>bold</b>.md", b"<script>alert('file')</script>".to_vec()),
    ];
    let refs: Vec<(&str, &[u8])> = entries.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let r =
        crate::candidate::upload(&app.base, &a.token, crate::candidate::zip_of(&refs), true).await;
    let status = r.status();
    let body = r.text().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_string();
    let s = crate::candidate::wait_final(&app.state, &id, Duration::from_secs(180)).await;
    assert_eq!(s.state.as_str(), "graded", "{:?}", s.error);
    let (reviewer, _) = crate::auth::signed_in(&app, Role::Reviewer).await;
    let mut pages = Vec::new();
    for path in [
        format!("/submissions/{id}"),
        format!("/submissions/{id}/receipt"),
        format!("/submissions/{id}/receipt.html"),
        format!("/assignments/{}", a.assignment.id),
    ] {
        let r = page(&reviewer, app.url(&path)).await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        pages.push((path, r.text().await.unwrap()));
    }
    let r = page(&TestApp::client(), app.url(&format!("/c/{}/submissions/{id}", a.token))).await;
    pages.push(("candidate receipt".into(), r.text().await.unwrap()));
    for (path, html) in &pages {
        for raw in [
            "<script>alert(",
            "<img src=x onerror",
            "<b>bold</b>",
            "<svg onload",
            "<i>Candidate</i>",
        ] {
            assert!(!html.contains(raw), "{path} shows raw {raw:?}");
        }
    }
    let all: String = pages.iter().map(|(_, h)| h.as_str()).collect();
    assert!(
        all.contains("Alice &lt;i&gt;Candidate&lt;/i&gt;"),
        "the candidate's name is shown escaped"
    );
    assert!(
        all.contains("&lt;script&gt;alert(") || all.contains("&lt;img src=x onerror"),
        "no submitted markup reached a page at all, so the check proves nothing"
    );
}
