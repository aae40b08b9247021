//! A real server per test: port 0, a fresh SQLite file and data directory in
#![allow(dead_code)]
//! a temporary directory, the real sandboxed grader.

use std::net::SocketAddr;
use std::path::PathBuf;

use gatehouse::auth::password;
use gatehouse::config::Config;
use gatehouse::db::{NewUser, NewVersion, PacketVersion, Role, User};
use gatehouse::state::AppState;

pub struct TestApp {
    pub addr: SocketAddr,
    pub base: String,
    pub state: AppState,
    pub dir: tempfile::TempDir,
    server: tokio::task::JoinHandle<()>,
}

/// The repository root, for `packets/` and `target/site`.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

impl TestApp {
    /// Starts the app with no built-in packets loaded.
    pub async fn spawn() -> TestApp {
        TestApp::spawn_with(|_| {}).await
    }

    /// Starts the app after `tweak` adjusts its configuration.
    pub async fn spawn_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
        TestApp::spawn_routes(tweak, |r| r).await
    }

    /// Starts the app with routes of the test's own added before the layers.
    pub async fn spawn_routes(
        tweak: impl FnOnce(&mut Config),
        extra: impl FnOnce(axum::Router<AppState>) -> axum::Router<AppState>,
    ) -> TestApp {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            database_url: format!("sqlite://{}", dir.path().join("gatehouse.db").display()),
            data_dir: dir.path().join("data"),
            packets_dir: PathBuf::new(),
            site_dir: repo_root().join("target/site"),
            // No background self-tests of built-in packets unless a test
            // asks for them (`library::load_builtin` would queue them).
            builtin_self_test: "off".into(),
            ..Config::default()
        };
        tweak(&mut config);
        let listener = tokio::net::TcpListener::bind(config.listen).await.expect("bind port 0");
        let addr = listener.local_addr().unwrap();
        if config.public_url == Config::default().public_url {
            config.public_url = format!("http://{addr}");
        }
        let state = gatehouse::serve::state(config).await.expect("app state");
        let app = gatehouse::web::with_layers(extra(gatehouse::web::routes().into_router()), state.clone());
        let header_timeout = std::time::Duration::from_secs(state.config.header_timeout_secs.max(1));
        let server = tokio::spawn(gatehouse::serve::serve_app(listener, app, header_timeout, std::future::pending()));
        TestApp { addr, base: format!("http://{addr}"), state, dir, server }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Creates an account directly in the database.
    pub async fn user(&self, email: &str, role: Role, pass: &str) -> User {
        let hash = password::hash_async(pass.to_string()).await.unwrap();
        self.state.db.create_user(NewUser { email, name: email.split('@').next().unwrap(), role, password_hash: &hash }).await.unwrap()
    }

    /// A client with its own cookie jar that does not follow redirects.
    pub fn client() -> reqwest::Client {
        reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Copies `packets/<slug>` into the app's data directory as
/// `packets/<slug>/<key>/<slug>` (`Packet::load` wants the folder named after
/// the slug), lets `edit` rewrite its `packet.toml`, and publishes it.
pub async fn publish_copy(state: &AppState, slug: &str, key: &str, edit: impl FnOnce(String) -> String) -> PacketVersion {
    publish_copy_with(state, slug, key, |dir| {
        let manifest = dir.join("packet.toml");
        std::fs::write(&manifest, edit(std::fs::read_to_string(&manifest).unwrap())).unwrap();
    })
    .await
}

/// As [`publish_copy`], with `edit` free to change any file of the copy.
pub async fn publish_copy_with(state: &AppState, slug: &str, key: &str, edit: impl FnOnce(&std::path::Path)) -> PacketVersion {
    let rel = format!("packets/{slug}/{key}/{slug}");
    let dir = state.config.data_dir.join(&rel);
    grader::tree::copy_path(&repo_root().join("packets").join(slug), &dir).expect("copying the packet");
    edit(&dir);
    let packet = grader::packet::Packet::load(&dir).expect("the copied packet loads");
    state
        .db
        .create_version(NewVersion {
            slug,
            title: &packet.manifest.packet.title,
            builtin: false,
            dir: &rel,
            digest: &packet.digest,
            created_by: None,
            publish: true,
        })
        .await
        .unwrap()
}
