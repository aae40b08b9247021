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
    /// Largest accepted upload, in MiB.
    pub max_upload_mb: u64,
    /// How long a worker's claim on a job lasts without renewal, in seconds.
    pub lease_secs: u64,
    /// Failed sign-ins allowed per minute for one address or account.
    pub login_attempts_per_minute: u32,
    /// Mark session cookies `Secure` (set when served over HTTPS).
    pub secure_cookies: bool,
    /// The model meter's upstream: an OpenAI-compatible base URL such as
    /// `http://127.0.0.1:9999/v1` (plain HTTP; `/chat/completions` and
    /// `/models` are appended). Without one, the meter answers 503.
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
}

/// One upstream of the model meter.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelUpstream {
    pub url: String,
    #[serde(default)]
    pub key: Option<String>,
}

fn default_model_timeout() -> u64 {
    300
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
            max_upload_mb: 256,
            lease_secs: 60,
            login_attempts_per_minute: 10,
            secure_cookies: false,
            model_upstream_url: None,
            model_upstream_key: None,
            model_upstreams: BTreeMap::new(),
            model_timeout_secs: default_model_timeout(),
        }
    }
}

impl Config {
    /// Loads the configuration; `file` overrides `GATEHOUSE_CONFIG`, which
    /// overrides `./gatehouse.toml` (read only when present).
    pub fn load(file: Option<&Path>) -> Result<Config, figment::Error> {
        let file = file
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("GATEHOUSE_CONFIG").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("gatehouse.toml"));
        Figment::from(Serialized::defaults(Config::default()))
            .merge(Toml::file(file))
            .merge(Env::prefixed("GATEHOUSE_").ignore(&["CONFIG", "SANDBOX_PHASES", "LOG", "PASSWORD"]))
            .extract()
    }

    /// The upstream (base URL, key) for a packet: its own, else the global.
    pub fn model_upstream(&self, slug: &str) -> Option<(String, Option<String>)> {
        if let Some(u) = self.model_upstreams.get(slug) {
            return Some((u.url.clone(), u.key.clone()));
        }
        self.model_upstream_url.clone().filter(|u| !u.is_empty()).map(|u| (u, self.model_upstream_key.clone()))
    }

    pub fn max_upload_bytes(&self) -> u64 {
        self.max_upload_mb << 20
    }
}
