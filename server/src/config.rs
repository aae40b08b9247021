//! Configuration: defaults, then `gatehouse.toml` (or the file named by
//! `GATEHOUSE_CONFIG`), then `GATEHOUSE_*` environment variables.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the server listens.
    pub listen: SocketAddr,
    /// The address candidates and reviewers reach, used in invite links.
    pub public_url: String,
    /// Database URL; `sqlite://<path>` by default.
    pub database_url: String,
    /// Blob directory: submissions, imported packets, exports.
    pub data_dir: PathBuf,
    /// The built-in packet library loaded at start (empty to skip).
    pub packets_dir: PathBuf,
    /// The built browser bundle (`target/site`); pages work without it.
    pub site_dir: PathBuf,
    /// Grading workers inside `serve`.
    pub workers: usize,
    /// Which built-in packet versions the server self-tests in the
    /// background, once per version digest and after every grading and
    /// author self-test waiting (`GATEHOUSE_BUILTIN_SELF_TEST`): `all` (the
    /// default; also `on`, `true`, `yes`), `off` (also `false`, `no`,
    /// empty), or a comma-separated list of slugs.
    #[serde(default = "default_builtin_self_test")]
    pub builtin_self_test: String,
    /// Largest accepted upload, in MiB.
    pub max_upload_mb: u64,
    /// How long a worker's claim on a job lasts without renewal, in seconds.
    pub lease_secs: u64,
    /// Failed sign-ins allowed per minute for one address or account.
    pub login_attempts_per_minute: u32,
    /// Mark session cookies `Secure`; unset, they are when `public_url` is
    /// `https://`.
    #[serde(default)]
    pub secure_cookies: Option<bool>,
    /// The bearer token `/metrics` asks for. Unset, `/metrics` answers only
    /// clients on the loopback interface.
    #[serde(default)]
    pub metrics_token: Option<String>,
    /// How long a client may take to send a request's headers, in seconds.
    #[serde(default = "default_header_timeout")]
    pub header_timeout_secs: u64,
    /// How long a request body may stall between two chunks, in seconds.
    #[serde(default = "default_body_timeout")]
    pub body_idle_timeout_secs: u64,
    /// How long a whole request body may take, however steadily it
    /// trickles, in seconds.
    #[serde(default = "default_body_total_timeout")]
    pub body_total_timeout_secs: u64,
    /// Assignments one API token may create per minute (`POST
    /// /api/v1/assignments`); beyond, 429 with `Retry-After`.
    #[serde(default = "default_api_assignments_per_minute")]
    pub api_assignments_per_minute: u32,
    /// Builds of `my-data.zip` (a candidate's copy of everything held about
    /// them) one link may ask for per hour; beyond, 429 with `Retry-After`.
    #[serde(default = "default_my_data_per_hour")]
    pub my_data_per_hour: u32,
    /// Builds of `my-data.zip` at once, over all candidates (one link has
    /// one at a time); more get 503 with `Retry-After`.
    #[serde(default = "default_concurrent_exports")]
    pub max_concurrent_exports: usize,
    /// Password checks (argon2, about 19 MiB each) running at once; further
    /// sign-ins get 503 until one ends.
    #[serde(default = "default_hash_concurrency")]
    pub password_hash_concurrency: usize,
    /// Uploads (submissions and witnessed runs) received and checked at
    /// once, over all candidates; more get 503.
    #[serde(default = "default_concurrent_uploads")]
    pub max_concurrent_uploads: usize,
    /// Witnessed sandbox runs at once, over all candidates; more get 503.
    #[serde(default = "default_concurrent_sandbox_runs")]
    pub max_concurrent_sandbox_runs: usize,
    /// Witnessed runs one assignment may record.
    #[serde(default = "default_witness_runs")]
    pub max_witness_runs: usize,
    /// Submissions of one assignment waiting for or in grading at once.
    #[serde(default = "default_pending_jobs")]
    pub max_pending_jobs: usize,
    /// Refused model calls of one assignment written to its ledger; later
    /// refusals are only counted in the metrics.
    #[serde(default = "default_refused_call_rows")]
    pub max_refused_call_rows: usize,
    /// The most bytes of one model call's request body, and separately of
    /// its response body, kept in its transcript; the rest is cut (and the
    /// ledger row says so). 0 keeps no transcripts.
    #[serde(default = "default_transcript_call_bytes")]
    pub transcript_call_bytes: u64,
    /// The most transcript bytes kept for one assignment, over all its
    /// calls; past it bodies are cut or not kept (and the row says so).
    #[serde(default = "default_transcript_assignment_bytes")]
    pub transcript_assignment_bytes: u64,
    /// The model meter's upstream: an OpenAI-compatible base URL such as
    /// `https://api.openai.com/v1` or `http://127.0.0.1:9999/v1`
    /// (`/chat/completions` and `/models` are appended). HTTPS is verified
    /// against the built-in web PKI roots and `model_ca_file`. Without one,
    /// the meter answers 503.
    #[serde(default)]
    pub model_upstream_url: Option<String>,
    /// The bearer key sent to the global upstream.
    #[serde(default)]
    pub model_upstream_key: Option<String>,
    /// Per-packet upstreams by slug, overriding the global one.
    #[serde(default)]
    pub model_upstreams: BTreeMap<String, ModelUpstream>,
    /// How long the meter waits for a non-streaming upstream answer.
    #[serde(default = "default_model_timeout")]
    pub model_timeout_secs: u64,
    /// A PEM file of CA certificates the meter trusts for HTTPS upstreams
    /// besides the built-in web PKI roots (a private gateway, a corporate
    /// proxy). `GATEHOUSE_MODEL_CA_FILE`. An unreadable file or one without
    /// a certificate stops the server at start.
    #[serde(default)]
    pub model_ca_file: Option<PathBuf>,
    /// The largest request body the meter reads; a packet's
    /// `request_bytes` budget lowers it. Larger requests are refused (413)
    /// and recorded.
    #[serde(default = "default_model_max_request_bytes")]
    pub model_max_request_bytes: u64,
    /// The most model calls one "Audit the hidden tests" may make; an
    /// author may ask for fewer.
    #[serde(default = "default_audit_max_calls")]
    pub audit_max_calls: usize,
    /// The most tokens (prompt and completion) one audit may spend.
    #[serde(default = "default_audit_max_tokens")]
    pub audit_max_tokens: i64,
    /// How often (seconds) the server and each worker process sweep what
    /// killed processes left behind and the caches nobody uses
    /// (`GATEHOUSE_SWEEP_SECS`; they also sweep once at start).
    #[serde(default = "default_sweep_secs")]
    pub sweep_secs: u64,
    /// With Postgres, how long (seconds) a blob cached in the data folder,
    /// or a packet version unpacked there, may go unused before a sweep
    /// removes it (the database still holds it; it is fetched again when
    /// needed). `GATEHOUSE_CACHE_MAX_AGE_SECS`, default 7 days.
    #[serde(default = "default_cache_max_age")]
    pub cache_max_age_secs: u64,
    /// The SMTP server invite emails go through (`GATEHOUSE_SMTP_HOST`).
    /// Unset, invites are not emailed and the link is only shown.
    #[serde(default)]
    pub smtp_host: Option<String>,
    /// Its port; unset: 587 for `starttls`, 465 for `tls`, 25 for `off`.
    #[serde(default)]
    pub smtp_port: Option<u16>,
    /// The sender, `Name <address>` or an address (`GATEHOUSE_SMTP_FROM`).
    #[serde(default)]
    pub smtp_from: Option<String>,
    /// Sign-in to the SMTP server, when it asks for one.
    #[serde(default)]
    pub smtp_user: Option<String>,
    #[serde(default)]
    pub smtp_password: Option<String>,
    /// `starttls` (default), `tls` (implicit TLS) or `off` (plain text,
    /// for a relay on the same host or tests).
    #[serde(default)]
    pub smtp_tls: Option<String>,
    /// OpenID Connect issuers people may sign in with, by a name of
    /// lowercase letters, digits and `-` (it is in the sign-in URLs:
    /// `/login/sso/<name>`). `[oidc.<name>]` in the file.
    #[serde(default)]
    pub oidc: BTreeMap<String, OidcIssuer>,
    /// Whether accounts may sign in with a password. Off, only the
    /// `break_glass_admin` may (an admin's email), so the team is not
    /// locked out when its identity provider is down.
    #[serde(default = "default_true")]
    pub password_sign_in: bool,
    /// The one account that may still sign in with a password when
    /// `password_sign_in` is off (it must be an admin).
    #[serde(default)]
    pub break_glass_admin: Option<String>,
    /// The most single sign-ins under way at once (started, not finished,
    /// under ten minutes old); more are refused with 503.
    #[serde(default = "default_sso_logins")]
    pub max_sso_logins: i64,
    /// How often, in seconds, results due to an ATS callback are looked
    /// for (`GATEHOUSE_ATS_CALLBACK_SECS`).
    #[serde(default = "default_ats_callback_secs")]
    pub ats_callback_secs: u64,
    /// How often, in milliseconds, the webhook deliverer looks for due
    /// deliveries (`GATEHOUSE_WEBHOOK_POLL_MS`).
    #[serde(default = "default_webhook_poll_ms")]
    pub webhook_poll_ms: u64,
    /// The wait after a webhook's first failed attempt, doubled after each
    /// further one up to an hour (`GATEHOUSE_WEBHOOK_RETRY_BASE_MS`).
    #[serde(default = "default_webhook_retry_base_ms")]
    pub webhook_retry_base_ms: i64,
    /// Attempts of one delivery before it is marked failed (an admin may
    /// redeliver it) (`GATEHOUSE_WEBHOOK_MAX_ATTEMPTS`).
    #[serde(default = "default_webhook_max_attempts")]
    pub webhook_max_attempts: i64,
    /// Days a webhook delivery that ended is kept (listed on the admin
    /// page) before the sweep removes it (`GATEHOUSE_WEBHOOK_KEEP_DAYS`).
    #[serde(default = "default_webhook_keep_days")]
    pub webhook_keep_days: i64,
}

/// One OpenID Connect issuer (Okta, Microsoft Entra ID, Google Workspace,
/// Keycloak, ...).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcIssuer {
    /// What the sign-in button says ("Sign in with <label>"); the name
    /// when unset.
    #[serde(default)]
    pub label: Option<String>,
    /// `https://<issuer>/.well-known/openid-configuration`; the document
    /// must name the issuer this URL is under. Plain `http://` only on a
    /// loopback address.
    pub discovery_url: String,
    pub client_id: String,
    pub client_secret: String,
    /// Email domains whose people get an account on their first sign-in
    /// (with `default_role`); anyone else needs an account made by an
    /// admin first.
    #[serde(default)]
    pub allowed_domains: Vec<String>,
    /// The role of an account made on a first sign-in: `reviewer`
    /// (default), `author` or `admin`.
    #[serde(default = "default_sso_role")]
    pub default_role: String,
}

impl OidcIssuer {
    /// The issuer's identifier: the discovery URL without
    /// `/.well-known/openid-configuration`.
    pub fn issuer(&self) -> &str {
        self.discovery_url
            .trim_end_matches('/')
            .trim_end_matches("/.well-known/openid-configuration")
    }

    pub fn label<'a>(&'a self, name: &'a str) -> &'a str {
        self.label.as_deref().filter(|l| !l.trim().is_empty()).unwrap_or(name)
    }

    /// Whether an account may be made for `email` on its first sign-in.
    pub fn allows(&self, email: &str) -> bool {
        let Some((_, domain)) = email.rsplit_once('@') else { return false };
        self.allowed_domains
            .iter()
            .any(|d| d.trim().trim_start_matches('@').eq_ignore_ascii_case(domain))
    }
}

fn default_true() -> bool {
    true
}

fn default_sso_role() -> String {
    "reviewer".into()
}

fn default_sso_logins() -> i64 {
    10_000
}

fn default_ats_callback_secs() -> u64 {
    30
}

fn default_webhook_poll_ms() -> u64 {
    1000
}

/// 5 s, then 10 s, 20 s, ... up to an hour: twelve attempts span about
/// seven hours.
fn default_webhook_retry_base_ms() -> i64 {
    5_000
}

fn default_webhook_max_attempts() -> i64 {
    12
}

fn default_webhook_keep_days() -> i64 {
    30
}

/// Which built-in packets the server self-tests in the background.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuiltinSelfTest {
    All,
    Off,
    /// These slugs only.
    Only(Vec<String>),
}

impl BuiltinSelfTest {
    pub fn wants(&self, slug: &str) -> bool {
        match self {
            BuiltinSelfTest::All => true,
            BuiltinSelfTest::Off => false,
            BuiltinSelfTest::Only(slugs) => slugs.iter().any(|s| s == slug),
        }
    }
}

/// One upstream of the model meter.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelUpstream {
    pub url: String,
    #[serde(default)]
    pub key: Option<String>,
}

fn default_builtin_self_test() -> String {
    "all".into()
}

fn default_model_max_request_bytes() -> u64 {
    4 << 20
}

fn default_audit_max_calls() -> usize {
    8
}

fn default_audit_max_tokens() -> i64 {
    60_000
}

fn default_model_timeout() -> u64 {
    300
}

fn default_sweep_secs() -> u64 {
    900
}

fn default_cache_max_age() -> u64 {
    7 * 24 * 3600
}

fn default_header_timeout() -> u64 {
    10
}

fn default_body_timeout() -> u64 {
    30
}

fn default_body_total_timeout() -> u64 {
    900
}

fn default_api_assignments_per_minute() -> u32 {
    60
}

fn default_my_data_per_hour() -> u32 {
    10
}

fn default_concurrent_exports() -> usize {
    2
}

fn default_hash_concurrency() -> usize {
    4
}

fn default_concurrent_uploads() -> usize {
    8
}

fn default_concurrent_sandbox_runs() -> usize {
    2
}

fn default_witness_runs() -> usize {
    30
}

fn default_refused_call_rows() -> usize {
    200
}

fn default_transcript_call_bytes() -> u64 {
    256 << 10
}

fn default_transcript_assignment_bytes() -> u64 {
    16 << 20
}

fn default_pending_jobs() -> usize {
    2
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: "127.0.0.1:8080".parse().expect("valid address"),
            public_url: "http://127.0.0.1:8080".into(),
            database_url: "sqlite://.gatehouse-data/gatehouse.db".into(),
            data_dir: ".gatehouse-data".into(),
            packets_dir: "packets".into(),
            site_dir: "target/site".into(),
            workers: 1,
            builtin_self_test: default_builtin_self_test(),
            max_upload_mb: 256,
            lease_secs: 60,
            login_attempts_per_minute: 10,
            secure_cookies: None,
            metrics_token: None,
            header_timeout_secs: default_header_timeout(),
            body_idle_timeout_secs: default_body_timeout(),
            body_total_timeout_secs: default_body_total_timeout(),
            api_assignments_per_minute: default_api_assignments_per_minute(),
            my_data_per_hour: default_my_data_per_hour(),
            max_concurrent_exports: default_concurrent_exports(),
            password_hash_concurrency: default_hash_concurrency(),
            max_concurrent_uploads: default_concurrent_uploads(),
            max_concurrent_sandbox_runs: default_concurrent_sandbox_runs(),
            max_witness_runs: default_witness_runs(),
            max_pending_jobs: default_pending_jobs(),
            max_refused_call_rows: default_refused_call_rows(),
            transcript_call_bytes: default_transcript_call_bytes(),
            transcript_assignment_bytes: default_transcript_assignment_bytes(),
            audit_max_calls: default_audit_max_calls(),
            audit_max_tokens: default_audit_max_tokens(),
            model_upstream_url: None,
            model_upstream_key: None,
            model_upstreams: BTreeMap::new(),
            model_timeout_secs: default_model_timeout(),
            model_ca_file: None,
            model_max_request_bytes: default_model_max_request_bytes(),
            smtp_host: None,
            smtp_port: None,
            smtp_from: None,
            smtp_user: None,
            smtp_password: None,
            smtp_tls: None,
            oidc: BTreeMap::new(),
            password_sign_in: true,
            break_glass_admin: None,
            max_sso_logins: default_sso_logins(),
            ats_callback_secs: default_ats_callback_secs(),
            webhook_poll_ms: default_webhook_poll_ms(),
            webhook_retry_base_ms: default_webhook_retry_base_ms(),
            webhook_max_attempts: default_webhook_max_attempts(),
            webhook_keep_days: default_webhook_keep_days(),
            sweep_secs: default_sweep_secs(),
            cache_max_age_secs: default_cache_max_age(),
        }
    }
}

impl Config {
    /// Loads the configuration; `file` overrides `GATEHOUSE_CONFIG`, which
    /// overrides `./gatehouse.toml` (read only when present).
    pub fn load(file: Option<&Path>) -> Result<Config, Box<figment::Error>> {
        let file = file
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("GATEHOUSE_CONFIG").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("gatehouse.toml"));
        Figment::from(Serialized::defaults(Config::default()))
            .merge(Toml::file(file))
            .merge(Env::prefixed("GATEHOUSE_").ignore(&[
                "CONFIG",
                "SANDBOX_PHASES",
                "LOG",
                "PASSWORD",
                "AUDIT_API_KEY",
            ]))
            .extract()
            .map_err(Box::new)
    }

    /// The upstream (base URL, key) for a packet: its own, else the global.
    pub fn model_upstream(&self, slug: &str) -> Option<(String, Option<String>)> {
        if let Some(u) = self.model_upstreams.get(slug) {
            return Some((u.url.clone(), u.key.clone()));
        }
        self.model_upstream_url
            .clone()
            .filter(|u| !u.is_empty())
            .map(|u| (u, self.model_upstream_key.clone()))
    }

    /// Whether session cookies are `Secure`: the setting, else whether the
    /// public URL is HTTPS.
    pub fn secure_cookies(&self) -> bool {
        self.secure_cookies.unwrap_or_else(|| {
            self.public_url.trim_start().to_ascii_lowercase().starts_with("https://")
        })
    }

    /// Which built-in packets the server self-tests in the background, as
    /// `builtin_self_test` says; an error names what is wrong with it.
    pub fn builtin_checks(&self) -> Result<BuiltinSelfTest, String> {
        let text = self.builtin_self_test.trim();
        match text.to_ascii_lowercase().as_str() {
            "all" | "on" | "true" | "yes" => return Ok(BuiltinSelfTest::All),
            "off" | "false" | "no" | "" => return Ok(BuiltinSelfTest::Off),
            _ => {}
        }
        let mut slugs = Vec::new();
        for part in text.split(',').map(str::trim) {
            let valid = !part.is_empty()
                && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !valid {
                return Err(format!(
                    "builtin_self_test (GATEHOUSE_BUILTIN_SELF_TEST) is {text:?}: expected \"all\", \"off\" or a comma-separated list of packet slugs (lowercase letters, digits and '-'), and {part:?} is not a slug"
                ));
            }
            slugs.push(part.to_string());
        }
        Ok(BuiltinSelfTest::Only(slugs))
    }

    /// What is wrong with the sign-in settings (`oidc`, `password_sign_in`,
    /// `break_glass_admin`), naming the setting; checked at start.
    pub fn check_sign_in(&self) -> Result<(), String> {
        for (name, issuer) in &self.oidc {
            let slug = !name.is_empty()
                && name.len() <= 40
                && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !slug {
                return Err(format!(
                    "oidc.{name}: the name of an issuer is lowercase letters, digits and '-' (it is in the sign-in URL)"
                ));
            }
            crate::oidc::check_url(&issuer.discovery_url)
                .map_err(|e| format!("oidc.{name}.discovery_url: {e}"))?;
            if issuer.client_id.trim().is_empty() || issuer.client_secret.is_empty() {
                return Err(format!("oidc.{name}: client_id and client_secret are both needed"));
            }
            if crate::db::Role::parse(issuer.default_role.trim()).is_none() {
                return Err(format!(
                    "oidc.{name}.default_role is {:?}: expected reviewer, author or admin",
                    issuer.default_role
                ));
            }
        }
        let break_glass = self.break_glass_admin.as_deref().map(str::trim).unwrap_or("");
        if !self.password_sign_in && !break_glass.contains('@') {
            return Err("password_sign_in is off: set break_glass_admin to an admin's email, so the team can still sign in when the identity provider is down".into());
        }
        if !self.password_sign_in && self.oidc.is_empty() {
            return Err("password_sign_in is off but no [oidc.<name>] issuer is configured: no one but the break-glass admin could sign in".into());
        }
        Ok(())
    }

    /// Whether `email` may sign in with a password.
    pub fn password_allowed(&self, email: &str) -> bool {
        self.password_sign_in
            || self
                .break_glass_admin
                .as_deref()
                .is_some_and(|b| b.trim().eq_ignore_ascii_case(email.trim()))
    }

    pub fn max_upload_bytes(&self) -> u64 {
        self.max_upload_mb << 20
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    #[test]
    fn secure_cookies_follow_an_https_public_url_unless_set() {
        let check = |url: &str, set: Option<bool>, expect: bool| {
            let c = Config { public_url: url.into(), secure_cookies: set, ..Config::default() };
            assert_eq!(c.secure_cookies(), expect, "{url} {set:?}");
        };
        check("https://grader.example", None, true);
        check("HTTPS://grader.example", None, true);
        check("http://127.0.0.1:8080", None, false);
        check("https://grader.example", Some(false), false);
        check("http://127.0.0.1:8080", Some(true), true);
    }

    #[test]
    fn builtin_self_test_is_all_off_or_a_list_of_slugs() {
        use super::BuiltinSelfTest;
        let parse = |text: &str| {
            Config { builtin_self_test: text.into(), ..Config::default() }.builtin_checks()
        };
        assert_eq!(Config::default().builtin_checks(), Ok(BuiltinSelfTest::All), "on by default");
        assert_eq!(parse(" OFF "), Ok(BuiltinSelfTest::Off));
        assert_eq!(
            (parse("true"), parse("no")),
            (Ok(BuiltinSelfTest::All), Ok(BuiltinSelfTest::Off)),
            "the usual words for on and off"
        );
        assert_eq!(parse(""), Ok(BuiltinSelfTest::Off));
        let only = parse("null-status, token-bucket").unwrap();
        assert_eq!(only, BuiltinSelfTest::Only(vec!["null-status".into(), "token-bucket".into()]));
        assert!(only.wants("token-bucket") && !only.wants("ledger"));
        assert!(BuiltinSelfTest::All.wants("ledger") && !BuiltinSelfTest::Off.wants("ledger"));
        let e = parse("null-status,,yes please").unwrap_err();
        assert!(
            e.contains("GATEHOUSE_BUILTIN_SELF_TEST") && e.contains("\"\" is not a slug"),
            "{e}"
        );
        let e = parse("Null_Status").unwrap_err();
        assert!(e.contains("\"Null_Status\" is not a slug"), "{e}");
    }
}
