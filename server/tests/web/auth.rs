//! Sign-in, sign-out, the setup link, roles, CSRF and the admin pages.

use gatehouse::auth::password::token_hash;
use gatehouse::db::Role;
use reqwest::StatusCode;

use crate::support::TestApp;

/// Admin-only POST routes (users, API tokens, assignments), which the
/// refusal tests add their own routes to.
const ADMIN_POSTS: [&str; 5] =
    ["/admin/users", "/admin/users/1", "/admin/tokens", "/admin/tokens/1/revoke", "/assignments"];

pub const PASSWORD: &str = "correct horse battery";

/// The CSRF token of the first form on a page.
pub fn csrf_of(html: &str) -> String {
    let at =
        html.find(r#"name="csrf" value=""#).unwrap_or_else(|| panic!("no csrf field in {html}"));
    let rest = &html[at + r#"name="csrf" value=""#.len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// Fetches a page as a browser would (Accept: text/html).
pub async fn page(client: &reqwest::Client, url: String) -> reqwest::Response {
    client.get(url).header("accept", "text/html").send().await.unwrap()
}

/// Posts the sign-in form with the session's CSRF token.
pub async fn post_login(
    app: &TestApp,
    client: &reqwest::Client,
    email: &str,
    pass: &str,
    next: &str,
) -> reqwest::Response {
    let html = page(client, app.url("/login")).await.text().await.unwrap();
    let csrf = csrf_of(&html);
    client
        .post(app.url("/login"))
        .form(&[("csrf", csrf.as_str()), ("email", email), ("password", pass), ("next", next)])
        .send()
        .await
        .unwrap()
}

/// A client signed in as a new account with `role`, and its CSRF token.
pub async fn signed_in(app: &TestApp, role: Role) -> (reqwest::Client, String) {
    let email = format!("{}@example.test", role.as_str());
    if app.state.db.user_by_email(&email).await.unwrap().is_none() {
        app.user(&email, role, PASSWORD).await;
    }
    let client = TestApp::client();
    let r = post_login(app, &client, &email, PASSWORD, "/packets").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let html = page(&client, app.url("/packets")).await.text().await.unwrap();
    let csrf = csrf_of(&html);
    (client, csrf)
}

/// The `location` header of a response, or "" without one.
pub fn location(r: &reqwest::Response) -> String {
    r.headers().get("location").map(|l| l.to_str().unwrap().to_string()).unwrap_or_default()
}

#[tokio::test]
async fn sign_in_with_good_and_bad_password() {
    let app = TestApp::spawn().await;
    app.user("ada@example.test", Role::Author, PASSWORD).await;
    let client = TestApp::client();

    let r = page(&client, app.url("/")).await;
    assert_eq!(location(&r), "/login");

    let r = post_login(&app, &client, "ada@example.test", "wrong password", "/packets").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("wrong email or password"));
    let r = post_login(&app, &client, "nobody@example.test", PASSWORD, "/packets").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    let r = post_login(&app, &client, "ADA@example.test", PASSWORD, "/assignments").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/assignments");
    let r = page(&client, app.url("/")).await;
    assert_eq!(location(&r), "/packets");
    let r = page(&client, app.url("/packets")).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("Sign out"));
}

#[tokio::test]
async fn sign_in_follows_only_local_next_paths() {
    let app = TestApp::spawn().await;
    app.user("ada@example.test", Role::Author, PASSWORD).await;
    let check = async |next: &str, expect: &str| {
        let client = TestApp::client();
        let r = post_login(&app, &client, "ada@example.test", PASSWORD, next).await;
        assert_eq!(location(&r), expect, "next={next}");
    };
    check("/assignments?packet=x", "/assignments?packet=x").await;
    check("https://evil.example/", "/").await;
    check("//evil.example/", "/").await;
    check("/\\evil.example", "/").await;
    check("", "/").await;
}

#[tokio::test]
async fn failed_sign_ins_are_rate_limited() {
    let app = TestApp::spawn_with(|c| c.login_attempts_per_minute = 3).await;
    app.user("ada@example.test", Role::Author, PASSWORD).await;
    let client = TestApp::client();
    for _ in 0..3 {
        let r = post_login(&app, &client, "ada@example.test", "wrong password", "/").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    let r = post_login(&app, &client, "ada@example.test", "wrong password", "/").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.text().await.unwrap().contains("too many failed sign-ins"));
    // Even the right password waits until the bucket refills.
    let r = post_login(&app, &client, "ada@example.test", PASSWORD, "/").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn sign_out_needs_csrf_and_ends_the_session() {
    let app = TestApp::spawn().await;
    let (client, csrf) = signed_in(&app, Role::Reviewer).await;
    let r = client.post(app.url("/logout")).form(&[("csrf", "wrong")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(page(&client, app.url("/packets")).await.status(), StatusCode::OK);
    let r = client.post(app.url("/logout")).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = page(&client, app.url("/packets")).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/login?next=/packets");
    assert_eq!(
        client.get(app.url("/packets")).send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn sign_in_without_csrf_is_refused() {
    let app = TestApp::spawn().await;
    app.user("ada@example.test", Role::Author, PASSWORD).await;
    let client = TestApp::client();
    let r = client
        .post(app.url("/login"))
        .form(&[("email", "ada@example.test"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn setup_link_creates_the_first_admin_once() {
    let app = TestApp::spawn().await;
    let url = gatehouse::web::auth::setup_link(&app.state)
        .await
        .unwrap()
        .expect("a link when there is no account");
    let path = url.strip_prefix(&app.base).unwrap().to_string();
    let stored = app.state.db.setting(gatehouse::web::auth::SETUP_KEY).await.unwrap().unwrap();
    assert_eq!(
        stored,
        token_hash(path.strip_prefix("/setup/").unwrap()),
        "only the hash is stored"
    );

    let client = TestApp::client();
    assert_eq!(
        page(&client, app.url("/setup/not-the-token")).await.status(),
        StatusCode::NOT_FOUND
    );
    let html = page(&client, app.url(&path)).await.text().await.unwrap();
    let csrf = csrf_of(&html);
    let form = |pass: &'static str| {
        [
            ("csrf", csrf.clone()),
            ("email", "root@example.test".into()),
            ("name", "Root".into()),
            ("password", pass.into()),
        ]
    };
    let r = client.post(app.url(&path)).form(&form("short")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("at least 8 characters"));
    let r = client.post(app.url(&path)).form(&form(PASSWORD)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let admin = app.state.db.user_by_email("root@example.test").await.unwrap().unwrap();
    assert_eq!(admin.role, Role::Admin);
    assert_eq!(page(&client, app.url("/admin/users")).await.status(), StatusCode::OK);

    // The link is dead now, for this client and any other.
    let other = TestApp::client();
    assert_eq!(page(&other, app.url(&path)).await.status(), StatusCode::NOT_FOUND);
    let r = client.post(app.url(&path)).form(&form(PASSWORD)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(app.state.db.user_count().await.unwrap(), 1);
    assert!(gatehouse::web::auth::setup_link(&app.state).await.unwrap().is_none());
}

#[tokio::test]
async fn reviewers_and_strangers_cannot_act() {
    let app = TestApp::spawn().await;
    let (reviewer, csrf) = signed_in(&app, Role::Reviewer).await;
    // A reviewer may read the library and assignments.
    assert_eq!(page(&reviewer, app.url("/packets")).await.status(), StatusCode::OK);
    assert_eq!(page(&reviewer, app.url("/assignments")).await.status(), StatusCode::OK);
    for path in ["/admin/users", "/assignments/new"] {
        assert_eq!(page(&reviewer, app.url(path)).await.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let posts: Vec<&str> = ADMIN_POSTS
        .into_iter()
        .chain([
            "/assignments/x/reissue",
            "/packets/null-status/versions/1/publish",
            "/packets/null-status/versions/1/budgets",
            "/packets/null-status/versions/1/draft",
        ])
        .collect();
    let form = [
        ("csrf", csrf.as_str()),
        ("email", "x@example.test"),
        ("name", "x"),
        ("role", "admin"),
        ("password", PASSWORD),
        ("user_id", "1"),
        ("packet", "null-status"),
        ("candidate_name", "x"),
        ("deadline", "2099-01-01T00:00"),
    ];
    for &path in &posts {
        let r = reviewer.post(app.url(path)).form(&form).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let part = reqwest::multipart::Form::new()
        .text("csrf", csrf.clone())
        .part("file", reqwest::multipart::Part::bytes(b"PK".to_vec()).file_name("p.zip"));
    let r = reviewer.post(app.url("/packets/import")).multipart(part).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // Without a session: pages redirect to sign-in, everything else is 401.
    let stranger = TestApp::client();
    let r = page(&stranger, app.url("/admin/users")).await;
    assert_eq!(location(&r), "/login?next=/admin/users");
    for &path in &posts {
        let r = stranger.post(app.url(path)).form(&form).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    assert_eq!(app.state.db.user_count().await.unwrap(), 1);
    assert!(app.state.db.list_api_tokens().await.unwrap().is_empty());
}

#[tokio::test]
async fn posts_without_or_with_a_wrong_csrf_token_change_nothing() {
    let app = TestApp::spawn().await;
    let (admin, _) = signed_in(&app, Role::Admin).await;
    let audit_before = app.state.db.audit_entries(None, 1000).await.unwrap().len();
    let posts = ADMIN_POSTS.into_iter().chain([
        "/logout",
        "/packets/null-status/versions/1/publish",
        "/packets/null-status/versions/1/prompt",
    ]);
    for csrf in [None, Some("0123456789abcdef")] {
        for path in posts.clone() {
            let mut form = vec![
                ("email", "x@example.test"),
                ("name", "x"),
                ("role", "reviewer"),
                ("password", PASSWORD),
                ("user_id", "1"),
            ];
            form.extend([
                ("packet", "null-status"),
                ("candidate_name", "x"),
                ("deadline", "2099-01-01T00:00"),
                ("prompt", "x"),
            ]);
            if let Some(c) = csrf {
                form.push(("csrf", c));
            }
            let r = admin.post(app.url(path)).form(&form).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path} with {csrf:?}");
        }
        let mut part = reqwest::multipart::Form::new()
            .part("file", reqwest::multipart::Part::bytes(b"PK".to_vec()).file_name("p.zip"));
        if let Some(c) = csrf {
            part = part.text("csrf", c.to_string());
        }
        let r = admin.post(app.url("/packets/import")).multipart(part).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
    assert_eq!(app.state.db.user_count().await.unwrap(), 1);
    assert!(app.state.db.list_api_tokens().await.unwrap().is_empty());
    assert!(app.state.db.list_packets().await.unwrap().is_empty());
    assert!(app.state.db.list_assignments(None).await.unwrap().is_empty());
    assert_eq!(app.state.db.audit_entries(None, 1000).await.unwrap().len(), audit_before);
    // Still signed in: the refused sign-out did nothing.
    assert_eq!(page(&admin, app.url("/admin/users")).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn admin_manages_users_and_api_tokens_with_an_audit_trail() {
    let app = TestApp::spawn().await;
    let (admin, csrf) = signed_in(&app, Role::Admin).await;
    let add = async |email: &str, pass: &str, role: &str| {
        admin
            .post(app.url("/admin/users"))
            .form(&[
                ("csrf", csrf.as_str()),
                ("email", email),
                ("name", "Bea"),
                ("role", role),
                ("password", pass),
            ])
            .send()
            .await
            .unwrap()
    };
    let check = async |email: &str, pass: &str, role: &str, status: StatusCode, message: &str| {
        let r = add(email, pass, role).await;
        assert_eq!(r.status(), status, "{email} {role}");
        if !message.is_empty() {
            assert!(r.text().await.unwrap().contains(message), "{message}");
        }
    };
    check("bea@example.test", "short", "author", StatusCode::BAD_REQUEST, "at least 8 characters")
        .await;
    check("not-an-email", PASSWORD, "author", StatusCode::BAD_REQUEST, "is not an email address")
        .await;
    check(
        "bea@example.test",
        PASSWORD,
        "owner",
        StatusCode::BAD_REQUEST,
        "is not admin, author or reviewer",
    )
    .await;
    check("bea@example.test", PASSWORD, "author", StatusCode::SEE_OTHER, "").await;
    check("bea@example.test", PASSWORD, "author", StatusCode::BAD_REQUEST, "already exists").await;
    let bea = app.state.db.user_by_email("bea@example.test").await.unwrap().unwrap();
    assert_eq!(bea.role, Role::Author);
    assert!(
        page(&admin, app.url("/admin/users"))
            .await
            .text()
            .await
            .unwrap()
            .contains("bea@example.test")
    );

    // Role change, then disable: Bea can no longer sign in.
    let path = format!("/admin/users/{}", bea.id);
    let r = admin
        .post(app.url(&path))
        .form(&[("csrf", csrf.as_str()), ("role", "reviewer")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(app.state.db.user_by_id(bea.id).await.unwrap().unwrap().role, Role::Reviewer);
    let r = admin
        .post(app.url(&path))
        .form(&[("csrf", csrf.as_str()), ("role", "reviewer"), ("disabled", "on")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = post_login(&app, &TestApp::client(), "bea@example.test", PASSWORD, "/").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // An admin cannot lock themselves out.
    let me = app.state.db.user_by_email("admin@example.test").await.unwrap().unwrap();
    let r = admin
        .post(app.url(&format!("/admin/users/{}", me.id)))
        .form(&[("csrf", csrf.as_str()), ("role", "reviewer")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);

    // An API token is shown once; only its hash is stored; revoking kills it.
    let r = admin
        .post(app.url("/admin/tokens"))
        .form(&[("csrf", csrf.as_str()), ("name", "ATS"), ("user_id", &me.id.to_string())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let html = page(&admin, app.url("/admin/users")).await.text().await.unwrap();
    let at = html.find(r#"<code class="api-token">"#).expect("the new token is shown");
    let token =
        html[at + r#"<code class="api-token">"#.len()..].split('<').next().unwrap().to_string();
    assert!(token.starts_with("gh_"), "{token}");
    let again = page(&admin, app.url("/admin/users")).await.text().await.unwrap();
    assert!(!again.contains(&token), "the token is shown only once");
    assert_eq!(
        app.state.db.user_by_api_token(&token_hash(&token)).await.unwrap().unwrap().id,
        me.id
    );
    assert!(app.state.db.user_by_api_token(&token).await.unwrap().is_none());
    let id = app.state.db.list_api_tokens().await.unwrap()[0].id;
    let r = admin
        .post(app.url(&format!("/admin/tokens/{id}/revoke")))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(app.state.db.user_by_api_token(&token_hash(&token)).await.unwrap().is_none());

    let actions: Vec<String> = app
        .state
        .db
        .audit_entries(None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    for a in ["user.create", "user.update", "api-token.create", "api-token.revoke"] {
        assert!(actions.iter().any(|x| x == a), "{a} in {actions:?}");
    }
}

#[tokio::test]
async fn an_admin_resets_a_password_and_sees_the_model_upstream_but_never_its_key() {
    let app = TestApp::spawn_with(|c| {
        c.model_upstream_url = Some("http://meter-user:url-secret@127.0.0.1:9/v1".into());
        c.model_upstream_key = Some("sk-never-shown".into());
    })
    .await;
    let (admin, csrf) = signed_in(&app, Role::Admin).await;
    let bea = app.user("bea@example.test", Role::Reviewer, PASSWORD).await;
    let path = app.url(&format!("/admin/users/{}/password", bea.id));
    let html = page(&admin, app.url("/admin/users")).await.text().await.unwrap();
    assert!(
        html.contains("<th>Change</th>") && !html.contains("<th></th>"),
        "every column has a heading: {html}"
    );
    assert!(html.contains(&format!("/admin/users/{}/password", bea.id)), "{html}");
    // The upstream is shown, its key and any credentials in the URL never.
    assert!(html.contains("http://127.0.0.1:9/v1") && html.contains("set (not shown)"), "{html}");
    assert!(!html.contains("sk-never-shown") && !html.contains("url-secret"), "{html}");

    // Refused without the CSRF token, with a short password, or by a non-admin.
    let r = admin.post(&path).form(&[("password", "a new password 1")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = admin
        .post(&path)
        .form(&[("csrf", csrf.as_str()), ("password", "short")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("at least 8 characters"));
    let (reviewer, rcsrf) = signed_in(&app, Role::Reviewer).await;
    let r = reviewer
        .post(&path)
        .form(&[("csrf", rcsrf.as_str()), ("password", "a new password 1")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        post_login(&app, &TestApp::client(), "bea@example.test", PASSWORD, "/").await.status(),
        StatusCode::SEE_OTHER,
        "nothing changed yet"
    );

    let r = admin
        .post(&path)
        .form(&[("csrf", csrf.as_str()), ("password", "a new password 1")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        post_login(&app, &TestApp::client(), "bea@example.test", PASSWORD, "/").await.status(),
        StatusCode::UNAUTHORIZED
    );
    let r = post_login(&app, &TestApp::client(), "bea@example.test", "a new password 1", "/").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let audit = app.state.db.audit_entries(Some(&format!("user:{}", bea.id)), 10).await.unwrap();
    assert!(audit.iter().any(|e| e.action == "user.password_reset"), "{audit:?}");
    assert!(
        !format!("{audit:?}").contains("a new password 1"),
        "the password is never in the audit log"
    );

    // With no upstream configured, the admin is told what that means.
    let plain = TestApp::spawn().await;
    let (admin, _) = signed_in(&plain, Role::Admin).await;
    let html = page(&admin, plain.url("/admin/users")).await.text().await.unwrap();
    assert!(html.contains("No model upstream is configured"), "{html}");
}
