//! A real server per test: port 0, a fresh database (a SQLite file in a
#![allow(dead_code)]
//! temporary directory, or with `GATEHOUSE_TEST_DATABASE=postgres` a new
//! database in the binary's throwaway Postgres cluster, see
//! `tests/common/postgres.rs`), a data directory in the temporary
//! directory, the real sandboxed grader (one for the whole binary,
//! [`shared_grader`], as a platform's workers share theirs).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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

/// The backend this run tests: `postgres` when `GATEHOUSE_TEST_DATABASE=postgres`, else `sqlite`.
pub fn backend() -> &'static str {
    if crate::postgres::selected() { "postgres" } else { "sqlite" }
}

/// A fresh database for one test: `dir/gatehouse.db`, or a new database in
/// the test Postgres.
pub async fn database_url(dir: &Path) -> String {
    if crate::postgres::selected() {
        crate::postgres::fresh_database_url().await
    } else {
        format!("sqlite://{}", dir.join("gatehouse.db").display())
    }
}

/// A value bound to a statement of [`raw_exec`].
pub enum Arg<'a> {
    I(i64),
    T(&'a str),
    OptI(Option<i64>),
    OptT(Option<&'a str>),
}

/// SQL written with SQLite's `?` placeholders, numbered `$1, $2, ...` for Postgres.
pub fn dialect(url: &str, sql: &str) -> String {
    if !url.starts_with("postgres") {
        return sql.to_string();
    }
    let mut n = 0;
    sql.chars()
        .map(|c| {
            if c == '?' {
                n += 1;
                format!("${n}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `query` with each of `args` bound in turn, on either backend (the two
/// drivers' query types differ, so this is a macro, not a function).
macro_rules! bind_args {
    ($query:expr, $args:expr) => {{
        let mut q = $query;
        for a in $args {
            q = match a {
                Arg::I(v) => q.bind(*v),
                Arg::T(v) => q.bind(*v),
                Arg::OptI(v) => q.bind(*v),
                Arg::OptT(v) => q.bind(*v),
            };
        }
        q
    }};
}

/// Runs one statement straight on the test's database (a test that sets up
/// rows the app has no way to write), either backend.
pub async fn raw_exec(url: &str, sql: &str, args: &[Arg<'_>]) {
    let sql = dialect(url, sql);
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        bind_args!(sqlx::query(&sql), args)
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        pool.close().await;
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        bind_args!(sqlx::query(&sql), args)
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        pool.close().await;
    }
}

/// Rows of (text, integer) read straight from the test's database.
pub async fn raw_text_int_rows(url: &str, sql: &str) -> Vec<(String, i64)> {
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let rows = sqlx::query_as(sql).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let rows = sqlx::query_as(sql).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    }
}

/// A program of the tests' Python tools (`.tools-venv/bin/<name>`, made by
/// scripts/setup from requirements-tools.txt).
pub fn tool(name: &str) -> PathBuf {
    let path = repo_root().join(".tools-venv/bin").join(name);
    assert!(path.exists(), "{} is missing: run scripts/setup", path.display());
    path
}

/// The grader every test app of this process uses, as the workers of one
/// platform share theirs: the environment is probed and each packet
/// version's sample calibrated once for the binary, not once per test (a
/// grader depends on no setting of the app's configuration). Tests that
/// need a measurement of their own publish a version of their own (another
/// digest).
pub fn shared_grader() -> std::sync::Arc<grader::grade::Grader> {
    static GRADER: std::sync::OnceLock<std::sync::Arc<grader::grade::Grader>> =
        std::sync::OnceLock::new();
    GRADER
        .get_or_init(|| {
            std::sync::Arc::new(grader::grade::Grader::for_host().expect("preparing the sandbox"))
        })
        .clone()
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
            database_url: database_url(dir.path()).await,
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
        let mut state = gatehouse::serve::state(config).await.expect("app state");
        state.grader = shared_grader();
        let app = gatehouse::web::with_layers(
            extra(gatehouse::web::routes().into_router()),
            state.clone(),
        );
        let header_timeout =
            std::time::Duration::from_secs(state.config.header_timeout_secs.max(1));
        let server = tokio::spawn(gatehouse::serve::serve_app(
            listener,
            app,
            header_timeout,
            std::future::pending(),
        ));
        TestApp { addr, base: format!("http://{addr}"), state, dir, server }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Creates an account directly in the database.
    pub async fn user(&self, email: &str, role: Role, pass: &str) -> User {
        let hash = password::hash_async(pass.to_string()).await.unwrap();
        self.state
            .db
            .create_user(NewUser {
                email,
                name: email.split('@').next().unwrap(),
                role,
                password_hash: &hash,
            })
            .await
            .unwrap()
    }

    /// A client with its own cookie jar that does not follow redirects.
    pub fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
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
pub async fn publish_copy(
    state: &AppState,
    slug: &str,
    key: &str,
    edit: impl FnOnce(String) -> String,
) -> PacketVersion {
    publish_copy_with(state, slug, key, |dir| {
        let manifest = dir.join("packet.toml");
        std::fs::write(&manifest, edit(std::fs::read_to_string(&manifest).unwrap())).unwrap();
    })
    .await
}

/// As [`publish_copy`], with `edit` free to change any file of the copy.
pub async fn publish_copy_with(
    state: &AppState,
    slug: &str,
    key: &str,
    edit: impl FnOnce(&std::path::Path),
) -> PacketVersion {
    let rel = format!("packets/{slug}/{key}/{slug}");
    let dir = state.config.data_dir.join(&rel);
    grader::tree::copy_path(&repo_root().join("packets").join(slug), &dir)
        .expect("copying the packet");
    edit(&dir);
    let packet = grader::packet::Packet::load(&dir).expect("the copied packet loads");
    // As the library does: with Postgres the folder also goes into the
    // database, for workers elsewhere.
    gatehouse::library::keep_archive(state, &dir, &packet.digest)
        .await
        .expect("archiving the packet version");
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
