//! Single sign-on against a real OpenID provider: the certified
//! `oidc-provider` package from npm (`server/tests/oidc/provider.mjs`,
//! installed by `scripts/setup`), started once per test binary on a
//! loopback port. Each test registers its own client at the provider (RFC
//! 7591 dynamic registration), so tests running side by side share
//! nothing; the provider's test hook re-signs the next ID token of a
//! client with changed claims or another key, which is how the refusals
//! are exercised with tokens the provider itself signs.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;

use gatehouse::config::{Config, OidcIssuer};
use gatehouse::db::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::auth::{PASSWORD, location, page, post_login};
use crate::support::{TestApp, repo_root};

/// The provider process of this test binary: its issuer URL, and its
/// standard input, whose end (when the binary exits) stops it.
struct Provider {
    issuer: String,
    _stdin: std::sync::Mutex<ChildStdin>,
    /// Never waited for: it ends with the binary, reaped by whoever adopts it.
    _child: std::sync::Mutex<Child>,
}

fn provider() -> &'static str {
    static PROVIDER: OnceLock<Provider> = OnceLock::new();
    &PROVIDER
        .get_or_init(|| {
            let dir = repo_root().join("server/tests/oidc");
            assert!(
                dir.join("node_modules/oidc-provider").is_dir(),
                "{} has no node_modules: run scripts/setup (it runs `npm ci` there)",
                dir.display()
            );
            let mut child = Command::new("node")
                .arg("provider.mjs")
                .current_dir(&dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("starting node provider.mjs (is Node.js installed?)");
            let mut line = String::new();
            let mut out = BufReader::new(child.stdout.take().unwrap());
            out.read_line(&mut line).unwrap();
            // The provider logs notices to its standard output later: it
            // is read to the end, or a closed pipe would stop the provider.
            std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the provider's first line {line:?}: {e}"));
            Provider {
                issuer: v["issuer"].as_str().unwrap().to_string(),
                _stdin: std::sync::Mutex::new(child.stdin.take().unwrap()),
                _child: std::sync::Mutex::new(child),
            }
        })
        .issuer
}

/// A client registered at the provider for an app at `base`.
pub struct Registered {
    pub client_id: String,
    pub client_secret: String,
}

async fn register(base: &str) -> Registered {
    let r = reqwest::Client::new()
        .post(format!("{}/reg", provider()))
        .json(&json!({
            "redirect_uris": [format!("{base}/login/sso/test/callback")],
            "client_name": "gatehouse test",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let v: Value = r.json().await.unwrap();
    Registered {
        client_id: v["client_id"].as_str().unwrap().into(),
        client_secret: v["client_secret"].as_str().unwrap().into(),
    }
}

/// An app with the test provider as issuer `test` ("Test IdP"): accounts
/// made for `acme.test` with the author role. `tweak` adjusts the rest.
pub async fn sso_app(tweak: impl FnOnce(&mut Config)) -> (TestApp, Registered) {
    // The redirect URI is registered before the app starts, so its port
    // is chosen first.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let reg = register(&base).await;
    let issuer = OidcIssuer {
        label: Some("Test IdP".into()),
        discovery_url: format!("{}/.well-known/openid-configuration", provider()),
        client_id: reg.client_id.clone(),
        client_secret: reg.client_secret.clone(),
        allowed_domains: vec!["acme.test".into()],
        default_role: "author".into(),
    };
    let app = TestApp::spawn_with(move |c| {
        c.listen = format!("127.0.0.1:{port}").parse().unwrap();
        c.public_url = base;
        c.oidc.insert("test".into(), issuer);
        tweak(c);
    })
    .await;
    (app, reg)
}

/// Changes the next ID token the provider gives this client.
async fn tamper(reg: &Registered, change: Value) {
    let mut body = change;
    body["client_id"] = json!(reg.client_id);
    let r = reqwest::Client::new()
        .post(format!("{}/test/tamper", provider()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// Follows one redirect by hand (the client follows none).
async fn follow(client: &reqwest::Client, r: &reqwest::Response, from: &str) -> reqwest::Response {
    assert!(r.status().is_redirection(), "expected a redirect from {from}, got {}", r.status());
    let to = reqwest::Url::parse(from).unwrap().join(&location(r)).unwrap();
    client.get(to).send().await.unwrap()
}

/// Signs in through the provider as `email` over plain HTTP, as a browser
/// would: Gatehouse's start, the provider's authorization and sign-in
/// form, and back. Returns the callback's URL and Gatehouse's answer to it.
pub async fn sso_sign_in(
    app: &TestApp,
    client: &reqwest::Client,
    email: &str,
) -> (String, reqwest::Response) {
    let start = app.url("/login/sso/test?next=/packets");
    let r = client.get(&start).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let auth = location(&r);
    assert!(auth.starts_with(provider()), "{auth}");
    for (k, want) in [("code_challenge_method", "S256"), ("response_type", "code")] {
        assert!(auth.contains(&format!("{k}={want}")), "{auth}");
    }
    for k in ["state=", "nonce=", "code_challenge="] {
        assert!(auth.contains(k), "{k} in {auth}");
    }
    let r = client.get(&auth).send().await.unwrap();
    let interaction = reqwest::Url::parse(&auth).unwrap().join(&location(&r)).unwrap();
    let r = client.post(interaction.clone()).form(&[("email", email)]).send().await.unwrap();
    assert!(r.status().is_redirection(), "{}", r.text().await.unwrap());
    // The provider resumes the authorization, then redirects to us.
    let mut r = follow(client, &r, interaction.as_str()).await;
    let mut at = interaction.to_string();
    loop {
        let next = reqwest::Url::parse(&at).unwrap().join(&location(&r)).unwrap().to_string();
        if next.starts_with(&app.base) {
            let answer = client.get(&next).send().await.unwrap();
            return (next, answer);
        }
        assert!(r.status().is_redirection(), "the provider stopped at {at}: {}", r.status());
        r = client.get(&next).send().await.unwrap();
        at = next;
    }
}

/// Asserts Gatehouse refused the sign-in with 403 and a message holding `want`.
async fn refused(r: reqwest::Response, want: &str) {
    let status = r.status();
    let body = r.text().await.unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains(want), "expected {want:?} in the refusal:\n{body}");
}

/// Who the client is signed in as, from the packets page.
async fn signed_in_as(app: &TestApp, client: &reqwest::Client) -> Option<String> {
    let r = page(client, app.url("/packets")).await;
    if r.status() != StatusCode::OK {
        return None;
    }
    let html = r.text().await.unwrap();
    let user = app.state.db.list_users().await.unwrap();
    user.into_iter().map(|u| u.email).find(|e| html.contains(e.as_str()))
}

#[tokio::test]
async fn sso_signs_in_by_verified_email_and_makes_accounts_only_for_allowed_domains() {
    let (app, _reg) = sso_app(|_| {}).await;
    app.user("bob@elsewhere.test", Role::Reviewer, PASSWORD).await;

    // The sign-in page offers the provider.
    let html = page(&TestApp::client(), app.url("/login")).await.text().await.unwrap();
    assert!(html.contains("Sign in with Test IdP") && html.contains("/login/sso/test?next="));

    // An existing account signs in by its verified email, whatever its domain.
    let client = TestApp::client();
    let (_, r) = sso_sign_in(&app, &client, "Bob@Elsewhere.test").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    assert_eq!(location(&r), "/packets");
    assert_eq!(signed_in_as(&app, &client).await.as_deref(), Some("bob@elsewhere.test"));

    // A new person of an allowed domain gets an account with the default role.
    let client = TestApp::client();
    let (callback, r) = sso_sign_in(&app, &client, "alice.liddell@acme.test").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    let alice = app.state.db.user_by_email("alice.liddell@acme.test").await.unwrap().unwrap();
    assert_eq!((alice.role, alice.name.as_str()), (Role::Author, "alice liddell"));
    assert_eq!(signed_in_as(&app, &client).await.as_deref(), Some("alice.liddell@acme.test"));
    // Made without a password: the password form does not sign her in.
    let r = post_login(&app, &TestApp::client(), "alice.liddell@acme.test", "", "/").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // The callback again (the same state and code): refused, state is good once.
    refused(client.get(&callback).send().await.unwrap(), "already used").await;

    // Anyone else needs an account first.
    let (_, r) = sso_sign_in(&app, &TestApp::client(), "eve@evil.test").await;
    refused(r, "there is no account for eve@evil.test").await;
    assert!(app.state.db.user_by_email("eve@evil.test").await.unwrap().is_none());

    // An email the provider has not verified matches nothing and makes nothing.
    let (_, r) = sso_sign_in(&app, &TestApp::client(), "unverified.carol@acme.test").await;
    refused(r, "has not verified the email address unverified.carol@acme.test").await;
    assert!(app.state.db.user_by_email("unverified.carol@acme.test").await.unwrap().is_none());

    // A disabled account stays out.
    app.state.db.set_user_role(alice.id, Role::Author, true).await.unwrap();
    let (_, r) = sso_sign_in(&app, &TestApp::client(), "alice.liddell@acme.test").await;
    refused(r, "is disabled").await;

    // A state started in one browser is refused in another.
    let a = TestApp::client();
    let r = a.get(app.url("/login/sso/test")).send().await.unwrap();
    let st = reqwest::Url::parse(&location(&r))
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.to_string())
        .unwrap();
    let url = app.url(&format!("/login/sso/test/callback?code=x&state={st}"));
    refused(TestApp::client().get(&url).send().await.unwrap(), "started in another browser").await;
    // ...and, taken once, is gone for the browser that started it too.
    refused(a.get(&url).send().await.unwrap(), "already used").await;

    // Sign-ins under way are bounded: past `max_sso_logins`, 503.
    let (small, _) = sso_app(|c| c.max_sso_logins = 2).await;
    for _ in 0..2 {
        let r = TestApp::client().get(small.url("/login/sso/test")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
    }
    let r = TestApp::client().get(small.url("/login/sso/test")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.text().await.unwrap().contains("too many sign-ins are under way"));
    let audit = app.state.db.audit_entries(None, 50).await.unwrap();
    assert!(audit.iter().any(|e| e.action == "user.create" && e.actor == "oidc:test"));
}

#[tokio::test]
async fn sso_refuses_id_tokens_with_a_wrong_audience_expiry_nonce_issuer_or_key() {
    let (app, reg) = sso_app(|_| {}).await;
    app.user("dan@acme.test", Role::Reviewer, PASSWORD).await;
    let past = 1_000_000_000; // 2001
    let cases: [(&str, Value, &str); 6] = [
        ("wrong audience", json!({"claims": {"aud": "someone-else"}}), "issued to another client"),
        ("expired", json!({"claims": {"exp": past, "iat": past - 60}}), "the ID token has expired"),
        ("wrong nonce", json!({"claims": {"nonce": "from-another-sign-in"}}), "nonce"),
        (
            "another issuer",
            json!({"claims": {"iss": "https://impostor.example"}}),
            "not the configured issuer",
        ),
        ("unpublished key", json!({"key": "unpublished"}), "a key (unpublished-"),
        (
            "several audiences, azp not ours",
            json!({"claims": {"aud": [reg.client_id.clone(), "other"], "azp": "other"}}),
            "several audiences",
        ),
    ];
    for (what, change, want) in cases {
        tamper(&reg, change).await;
        let client = TestApp::client();
        let (_, r) = sso_sign_in(&app, &client, "dan@acme.test").await;
        let status = r.status();
        let body = r.text().await.unwrap();
        assert_eq!(status, StatusCode::FORBIDDEN, "{what}: {body}");
        assert!(body.contains(want), "{what}: expected {want:?} in\n{body}");
        assert_eq!(signed_in_as(&app, &client).await, None, "{what}: not signed in");
    }

    // The same sign-in with the token as the provider made it goes through.
    let client = TestApp::client();
    let (_, r) = sso_sign_in(&app, &client, "dan@acme.test").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    assert_eq!(signed_in_as(&app, &client).await.as_deref(), Some("dan@acme.test"));

    // A key rotation: the token names a key the cached set lacks, the set
    // is fetched again once, and the sign-in goes through.
    let jwks = format!("{}/jwks", provider());
    let before = app.state.memo.oidc.jwks_fetches(&jwks);
    tamper(&reg, json!({"key": "fresh"})).await;
    let (_, r) = sso_sign_in(&app, &TestApp::client(), "dan@acme.test").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    assert_eq!(app.state.memo.oidc.jwks_fetches(&jwks), before + 1, "fetched again once");
    // A known key costs no fetch.
    let (_, r) = sso_sign_in(&app, &TestApp::client(), "dan@acme.test").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(app.state.memo.oidc.jwks_fetches(&jwks), before + 1, "no fetch for a known key");

    // A token without the email: it is read from the userinfo endpoint.
    tamper(&reg, json!({"remove": ["email", "email_verified"]})).await;
    let client = TestApp::client();
    let (_, r) = sso_sign_in(&app, &client, "dan@acme.test").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", r.text().await.unwrap());
    assert_eq!(signed_in_as(&app, &client).await.as_deref(), Some("dan@acme.test"));
}

#[tokio::test]
async fn password_sign_in_can_be_off_for_all_but_the_break_glass_admin() {
    let (app, _reg) = sso_app(|c| {
        c.password_sign_in = false;
        c.break_glass_admin = Some("root@acme.test".into());
    })
    .await;
    let root = app.user("root@acme.test", Role::Admin, PASSWORD).await;
    app.user("other-admin@acme.test", Role::Admin, PASSWORD).await;
    let html = page(&TestApp::client(), app.url("/login")).await.text().await.unwrap();
    assert!(html.contains("Password sign-in is turned off"), "{html}");

    let r = post_login(&app, &TestApp::client(), "other-admin@acme.test", PASSWORD, "/").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("password sign-in is turned off"));
    let r = post_login(&app, &TestApp::client(), "ROOT@acme.test", PASSWORD, "/").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "the break-glass admin still signs in");
    // ...only while an admin.
    app.state.db.set_user_role(root.id, Role::Author, false).await.unwrap();
    let r = post_login(&app, &TestApp::client(), "root@acme.test", PASSWORD, "/").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Single sign-on still works for everyone.
    let (_, r) = sso_sign_in(&app, &TestApp::client(), "other-admin@acme.test").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);

    // Settings that would lock everyone out are refused at start, by name.
    for (tweak, want) in [
        ((|c: &mut Config| c.password_sign_in = false) as fn(&mut Config), "set break_glass_admin"),
        (
            |c: &mut Config| {
                c.password_sign_in = false;
                c.break_glass_admin = Some("root@acme.test".into());
                c.oidc.clear();
            },
            "no [oidc.<name>] issuer",
        ),
        (
            |c: &mut Config| {
                let i = c.oidc.get_mut("test").unwrap();
                i.discovery_url = "http://idp.example/.well-known/openid-configuration".into();
            },
            "oidc.test.discovery_url",
        ),
        (|c: &mut Config| c.oidc.get_mut("test").unwrap().default_role = "owner".into(), "owner"),
    ] {
        let mut c = (*app.state.config).clone();
        c.password_sign_in = true;
        c.break_glass_admin = None;
        tweak(&mut c);
        let e = c.check_sign_in().unwrap_err();
        assert!(e.contains(want), "{e}");
    }
    assert_eq!((*app.state.config).clone().check_sign_in(), Ok(()));
}

#[tokio::test]
async fn sso_in_headless_chromium() {
    use crate::webdriver::{Browser, exclusive};
    let (app, _reg) = sso_app(|_| {}).await;
    let _one = exclusive().await;
    let b = Browser::new(&app.base).await;
    b.goto("/login").await;
    b.snapshot("sso-login").await;
    b.click("ul.sso a").await;
    // The provider's own sign-in page.
    b.wait("#email").await;
    assert!(b.path().await.starts_with("/interaction/"));
    b.fill("#email", "erin@acme.test").await;
    b.click("#continue").await;
    b.wait_path("/packets").await;
    let text = b.text("body").await;
    assert!(text.contains("Signed in as erin@acme.test through Test IdP"), "{text}");
    assert!(app.state.db.user_by_email("erin@acme.test").await.unwrap().is_some());
    b.close().await;
}
