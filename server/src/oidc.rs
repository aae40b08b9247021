//! The OpenID Connect relying party: discovery, the authorization request
//! (code flow with PKCE `S256`, `state` and `nonce`), the code exchange,
//! and the ID token's checks: its signature against the issuer's JWKS
//! (fetched again once when a token names a key id the cached set lacks),
//! `iss`, `aud` (and `azp` when there are several audiences), `exp`, `iat`,
//! the sign-in's `nonce`, and a verified email (from the token, or from the
//! userinfo endpoint when the token carries none).
//!
//! A leaf module: it knows nothing of accounts, sessions or the
//! configuration file; `web::sso` decides what a checked identity may do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::Digest;

/// The most bytes read of any answer from an issuer.
const MAX_BODY: usize = 1 << 20;
/// How long a discovery document is kept before it is fetched again.
const DISCOVERY_TTL: Duration = Duration::from_secs(3600);
/// How long a key set is kept (a token naming a key it lacks fetches it
/// again sooner).
const JWKS_TTL: Duration = Duration::from_secs(3600);
/// Clock skew allowed on `exp`, `iat` and `nbf`.
pub const LEEWAY_SECS: u64 = 60;

/// One issuer as the relying party needs it.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    pub discovery_url: &'a str,
    /// The issuer identifier the discovery document must state.
    pub issuer: &'a str,
    pub client_id: &'a str,
    pub client_secret: &'a str,
}

/// Why a sign-in failed. `Refused` is the token's or the person's fault
/// (403, the message says what was wrong); `Issuer` is the issuer
/// unreachable or answering something malformed (502).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SsoError {
    Refused(String),
    Issuer(String),
}

impl std::fmt::Display for SsoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SsoError::Refused(m) | SsoError::Issuer(m) => f.write_str(m),
        }
    }
}

fn refused(m: impl Into<String>) -> SsoError {
    SsoError::Refused(m.into())
}

fn issuer_err(m: impl Into<String>) -> SsoError {
    SsoError::Issuer(m.into())
}

/// The fields of a discovery document the relying party uses.
#[derive(Debug, Clone, Deserialize)]
pub struct Discovery {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    #[serde(default)]
    pub userinfo_endpoint: Option<String>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

/// What a checked ID token says of the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub subject: String,
    /// Lowercased, and verified by the issuer.
    pub email: String,
    pub name: Option<String>,
}

/// Discovery documents and key sets, per issuer, for one app.
#[derive(Default)]
pub struct Cache {
    discovery: Mutex<HashMap<String, (Arc<Discovery>, Instant)>>,
    jwks: Mutex<HashMap<String, (Arc<JwkSet>, Instant)>>,
    /// One key-set fetch at a time per issuer.
    refresh: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// How many times each key set was fetched (for tests and logs).
    fetches: Mutex<HashMap<String, u64>>,
    http: std::sync::OnceLock<reqwest::Client>,
}

impl Cache {
    /// The HTTP client for issuers: rustls with the web PKI roots, no
    /// redirects followed, ten seconds per request.
    pub fn http(&self) -> reqwest::Client {
        self.http
            .get_or_init(|| {
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(Duration::from_secs(10))
                    .build()
                    .unwrap_or_default()
            })
            .clone()
    }

    /// How many times the key set at `jwks_uri` was fetched.
    pub fn jwks_fetches(&self, jwks_uri: &str) -> u64 {
        self.fetches.lock().unwrap_or_else(|e| e.into_inner()).get(jwks_uri).copied().unwrap_or(0)
    }
}

/// Refuses a URL an issuer's traffic may not go to: anything but `https://`,
/// and `http://` on a loopback address (a test issuer on this machine).
pub fn check_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    let host = parsed.host_str().unwrap_or("").trim_start_matches('[').trim_end_matches(']');
    let loopback = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    };
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(format!("{url:?} must be https:// (plain http:// only on a loopback address)")),
    }
}

async fn read_json<T: serde::de::DeserializeOwned>(
    what: &str,
    url: &str,
    response: reqwest::Response,
) -> Result<T, SsoError> {
    let status = response.status();
    let body = read_body(what, url, response).await?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        return Err(issuer_err(format!("the issuer's {what} at {url} answered {status}: {text}")));
    }
    serde_json::from_slice(&body).map_err(|e| {
        issuer_err(format!("the issuer's {what} from {url} is not what OpenID Connect says: {e}"))
    })
}

/// A response's body, at most `MAX_BODY` bytes.
async fn read_body(
    what: &str,
    url: &str,
    mut response: reqwest::Response,
) -> Result<Vec<u8>, SsoError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| issuer_err(format!("reading the issuer's {what} from {url} failed: {e}")))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(issuer_err(format!(
                "the issuer's {what} from {url} is over {} KiB",
                MAX_BODY >> 10
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    what: &str,
    url: &str,
) -> Result<T, SsoError> {
    check_url(url).map_err(issuer_err)?;
    let response =
        http.get(url).header(reqwest::header::ACCEPT, "application/json").send().await.map_err(
            |e| issuer_err(format!("the issuer's {what} at {url} could not be reached: {e}")),
        )?;
    read_json(what, url, response).await
}

/// The issuer's discovery document (cached an hour). Its `issuer` must be
/// the configured one, and every endpoint https (or loopback).
pub async fn discover(
    http: &reqwest::Client,
    cache: &Cache,
    client: Client<'_>,
) -> Result<Arc<Discovery>, SsoError> {
    if let Some((d, at)) =
        cache.discovery.lock().unwrap_or_else(|e| e.into_inner()).get(client.discovery_url)
        && at.elapsed() < DISCOVERY_TTL
    {
        return Ok(d.clone());
    }
    let d: Discovery = get_json(http, "discovery document", client.discovery_url).await?;
    if d.issuer.trim_end_matches('/') != client.issuer.trim_end_matches('/') {
        return Err(issuer_err(format!(
            "the discovery document at {} names the issuer {:?}, not {:?}",
            client.discovery_url, d.issuer, client.issuer
        )));
    }
    for url in [&d.authorization_endpoint, &d.token_endpoint, &d.jwks_uri] {
        check_url(url).map_err(|e| issuer_err(format!("the discovery document: {e}")))?;
    }
    let d = Arc::new(d);
    cache
        .discovery
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(client.discovery_url.to_string(), (d.clone(), Instant::now()));
    Ok(d)
}

/// A PKCE verifier's `S256` challenge.
pub fn pkce_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// The authorization request the browser is sent to.
pub fn authorization_url(
    d: &Discovery,
    client: Client<'_>,
    redirect_uri: &str,
    state: &str,
    nonce: &str,
    verifier: &str,
) -> Result<String, SsoError> {
    let mut url = reqwest::Url::parse(&d.authorization_endpoint)
        .map_err(|e| issuer_err(format!("the authorization endpoint: {e}")))?;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", client.client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("scope", "openid email profile")
        .append_pair("state", state)
        .append_pair("nonce", nonce)
        .append_pair("code_challenge", &pkce_challenge(verifier))
        .append_pair("code_challenge_method", "S256");
    Ok(url.into())
}

#[derive(Deserialize)]
struct TokenResponse {
    id_token: Option<String>,
    access_token: Option<String>,
}

#[derive(Deserialize)]
struct TokenError {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// Exchanges the code for tokens (with the PKCE verifier), authenticating
/// with the client secret (`client_secret_basic`, or `client_secret_post`
/// when that is all the issuer takes).
async fn exchange(
    http: &reqwest::Client,
    d: &Discovery,
    client: Client<'_>,
    code: &str,
    redirect_uri: &str,
    verifier: &str,
) -> Result<TokenResponse, SsoError> {
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("code_verifier", verifier),
    ];
    let post_only = d.token_endpoint_auth_methods_supported.as_ref().is_some_and(|m| {
        m.iter().any(|m| m == "client_secret_post") && !m.iter().any(|m| m == "client_secret_basic")
    });
    let mut request = http.post(&d.token_endpoint);
    if post_only {
        form.push(("client_id", client.client_id));
        form.push(("client_secret", client.client_secret));
    } else {
        // RFC 6749 2.3.1: both parts form-urlencoded before Basic.
        let enc =
            |s: &str| serde_urlencoded::to_string([("", s)]).unwrap_or_default()[1..].to_string();
        request = request.basic_auth(enc(client.client_id), Some(enc(client.client_secret)));
    }
    let response = request.form(&form).send().await.map_err(|e| {
        issuer_err(format!("the token endpoint {} could not be reached: {e}", d.token_endpoint))
    })?;
    if response.status().is_client_error() {
        let status = response.status();
        let body = read_body("token error", &d.token_endpoint, response).await?;
        let e: TokenError = serde_json::from_slice(&body)
            .unwrap_or(TokenError { error: status.to_string(), error_description: None });
        return Err(refused(format!(
            "the issuer refused the sign-in code ({}{}); start again",
            e.error,
            e.error_description.map(|d| format!(": {d}")).unwrap_or_default()
        )));
    }
    read_json("token response", &d.token_endpoint, response).await
}

/// The key set, fetched when not cached (or `stale_before` is later than
/// the cached copy: a token named a key it lacks).
async fn key_set(
    http: &reqwest::Client,
    cache: &Cache,
    d: &Discovery,
    stale_before: Option<Instant>,
) -> Result<Arc<JwkSet>, SsoError> {
    let cached = || {
        cache
            .jwks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&d.jwks_uri)
            .filter(|(_, at)| at.elapsed() < JWKS_TTL && stale_before.is_none_or(|s| *at > s))
            .map(|(k, _)| k.clone())
    };
    if let Some(k) = cached() {
        return Ok(k);
    }
    let lock = cache
        .refresh
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(d.jwks_uri.clone())
        .or_default()
        .clone();
    let _one_at_a_time = lock.lock().await;
    // Another sign-in may have fetched it while this one waited.
    if let Some(k) = cached() {
        return Ok(k);
    }
    let set: JwkSet = get_json(http, "key set (JWKS)", &d.jwks_uri).await?;
    let set = Arc::new(set);
    cache
        .jwks
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(d.jwks_uri.clone(), (set.clone(), Instant::now()));
    *cache
        .fetches
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(d.jwks_uri.clone())
        .or_default() += 1;
    Ok(set)
}

/// The ID token's claims that are checked or used.
#[derive(Debug, Deserialize)]
struct IdClaims {
    sub: String,
    #[serde(default)]
    aud: Audience,
    #[serde(default)]
    azp: Option<String>,
    #[serde(default)]
    nonce: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    email_verified: Option<serde_json::Value>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
    #[default]
    None,
}

impl Audience {
    fn list(&self) -> Vec<&str> {
        match self {
            Audience::One(a) => vec![a.as_str()],
            Audience::Many(v) => v.iter().map(String::as_str).collect(),
            Audience::None => Vec::new(),
        }
    }
}

/// `email_verified` as issuers send it: `true`, or the text "true".
fn is_true(v: Option<&serde_json::Value>) -> bool {
    match v {
        Some(serde_json::Value::Bool(b)) => *b,
        Some(serde_json::Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// The unverified payload of a JWT, only to name values in a refusal.
fn payload_for_message(token: &str) -> serde_json::Value {
    token
        .split('.')
        .nth(1)
        .and_then(|p| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null)
}

const ALGORITHMS: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// Checks an ID token: signature, `iss`, `aud`/`azp`, `exp`, `iat`, `nonce`.
async fn check_id_token(
    http: &reqwest::Client,
    cache: &Cache,
    d: &Discovery,
    client: Client<'_>,
    token: &str,
    nonce: &str,
) -> Result<IdClaims, SsoError> {
    let header = jsonwebtoken::decode_header(token)
        .map_err(|e| refused(format!("the ID token is not a signed JWT: {e}")))?;
    if !ALGORITHMS.contains(&header.alg) {
        return Err(refused(format!(
            "the ID token is signed with {:?}; only the issuer's public-key algorithms (RS*, PS*, ES256, ES384) are accepted",
            header.alg
        )));
    }
    let asked = Instant::now();
    let find = |set: &JwkSet| match &header.kid {
        Some(kid) => set.find(kid).cloned(),
        None if set.keys.len() == 1 => set.keys.first().cloned(),
        None => None,
    };
    let mut jwk = find(&*key_set(http, cache, d, None).await?);
    if jwk.is_none() {
        // A key id the cached set lacks: the issuer may have rotated its
        // keys since. Fetch the set again (once) before refusing.
        jwk = find(&*key_set(http, cache, d, Some(asked)).await?);
    }
    let Some(jwk) = jwk else {
        return Err(refused(format!(
            "the ID token is signed with a key ({}) the issuer does not publish at {}",
            header.kid.as_deref().unwrap_or("no key id"),
            d.jwks_uri
        )));
    };
    let key = DecodingKey::from_jwk(&jwk).map_err(|e| {
        issuer_err(format!("the issuer's key {:?} cannot be used: {e}", jwk.common.key_id))
    })?;
    let mut v = Validation::new(header.alg);
    v.leeway = LEEWAY_SECS;
    v.set_issuer(&[&d.issuer]);
    v.set_audience(&[client.client_id]);
    v.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
    let claims = match jsonwebtoken::decode::<IdClaims>(token, &key, &v) {
        Ok(data) => data.claims,
        Err(e) => return Err(refused(token_error(&e, token, d, client))),
    };
    let audiences = claims.aud.list();
    if audiences.len() > 1 && claims.azp.as_deref() != Some(client.client_id) {
        return Err(refused(format!(
            "the ID token has several audiences ({}) and its azp is {:?}, not this client ({})",
            audiences.join(", "),
            claims.azp,
            client.client_id
        )));
    }
    match claims.nonce.as_deref() {
        Some(n) if eq(n, nonce) => {}
        other => {
            return Err(refused(format!(
                "the ID token's nonce ({}) is not the one this sign-in sent: a token from another sign-in is not accepted; start again",
                other.map(|n| format!("{n:?}")).unwrap_or_else(|| "missing".into())
            )));
        }
    }
    Ok(claims)
}

/// A sentence for a token the library refused.
fn token_error(
    e: &jsonwebtoken::errors::Error,
    token: &str,
    d: &Discovery,
    client: Client<'_>,
) -> String {
    use jsonwebtoken::errors::ErrorKind;
    let p = payload_for_message(token);
    match e.kind() {
        ErrorKind::ExpiredSignature => format!(
            "the ID token has expired (exp {}, more than {LEEWAY_SECS} s ago); start again",
            p["exp"]
        ),
        ErrorKind::ImmatureSignature => {
            "the ID token is not valid yet (nbf is in the future)".into()
        }
        ErrorKind::InvalidAudience => format!(
            "the ID token was issued to another client (aud {}), not this one ({})",
            p["aud"], client.client_id
        ),
        ErrorKind::InvalidIssuer => {
            format!(
                "the ID token was issued by {}, not the configured issuer {:?}",
                p["iss"], d.issuer
            )
        }
        ErrorKind::InvalidSignature => {
            "the ID token's signature does not verify against the issuer's key".into()
        }
        ErrorKind::MissingRequiredClaim(c) => format!("the ID token has no {c:?} claim"),
        _ => format!("the ID token is not valid: {e}"),
    }
}

/// Compares two secrets in constant time.
pub fn eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[derive(Deserialize)]
struct UserInfo {
    sub: String,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    email_verified: Option<serde_json::Value>,
    #[serde(default)]
    name: Option<String>,
}

/// Finishes a sign-in: exchanges `code`, checks the ID token against
/// `nonce`, and returns the person, whose email the issuer verified.
pub async fn finish(
    http: &reqwest::Client,
    cache: &Cache,
    client: Client<'_>,
    code: &str,
    redirect_uri: &str,
    verifier: &str,
    nonce: &str,
) -> Result<Identity, SsoError> {
    let d = discover(http, cache, client).await?;
    let tokens = exchange(http, &d, client, code, redirect_uri, verifier).await?;
    let id_token = tokens
        .id_token
        .ok_or_else(|| issuer_err("the issuer's token response has no id_token (is the openid scope allowed for this client?)"))?;
    let mut claims = check_id_token(http, cache, &d, client, &id_token, nonce).await?;
    if claims.email.is_none() {
        // Some issuers put the profile only behind the userinfo endpoint.
        let (Some(url), Some(access)) = (d.userinfo_endpoint.as_deref(), tokens.access_token)
        else {
            return Err(refused(
                "the issuer gave no email address for this account (ask for the email scope)",
            ));
        };
        check_url(url).map_err(issuer_err)?;
        let response = http.get(url).bearer_auth(access).send().await.map_err(|e| {
            issuer_err(format!("the issuer's userinfo endpoint {url} could not be reached: {e}"))
        })?;
        let info: UserInfo = read_json("userinfo", url, response).await?;
        if info.sub != claims.sub {
            return Err(refused("the issuer's userinfo is for another subject than the ID token"));
        }
        claims.email = info.email;
        claims.email_verified = info.email_verified;
        claims.name = claims.name.or(info.name);
    }
    let email = claims.email.unwrap_or_default().trim().to_lowercase();
    if !email.contains('@') {
        return Err(refused(
            "the issuer gave no email address for this account (ask for the email scope)",
        ));
    }
    if !is_true(claims.email_verified.as_ref()) {
        return Err(refused(format!(
            "the issuer has not verified the email address {email}; accounts are matched by verified email only, so verify it with your identity provider first"
        )));
    }
    Ok(Identity { subject: claims.sub, email, name: claims.name.filter(|n| !n.trim().is_empty()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuer_urls_are_https_or_loopback() {
        for ok in [
            "https://login.example.com/.well-known/openid-configuration",
            "http://127.0.0.1:4000/.well-known/openid-configuration",
            "http://localhost:4000/x",
            "http://[::1]:4000/x",
        ] {
            assert_eq!(check_url(ok), Ok(()), "{ok}");
        }
        for bad in ["http://login.example.com/x", "http://10.0.0.1/x", "ftp://127.0.0.1/x", "nope"]
        {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_pkce_challenge_is_rfc_7636s() {
        // RFC 7636, appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn email_verified_is_true_or_the_text_true() {
        use serde_json::json;
        assert!(is_true(Some(&json!(true))));
        assert!(is_true(Some(&json!("true"))));
        for no in [json!(false), json!("false"), json!(1), json!(null)] {
            assert!(!is_true(Some(&no)), "{no}");
        }
        assert!(!is_true(None));
    }
}
