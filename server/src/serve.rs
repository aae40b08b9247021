//! `gatehouse serve` and the account commands: open the configured database
//! and blob directory, load the built-in packets, start the workers and the
//! web server.
//!
//! `state` builds the shared `AppState` (`crate::state`): the config, the `Db`,
//! one `Grader`, the metrics handle, `Gates` (the global semaphores on
//! concurrent uploads and witnessed sandbox runs), the meter's upstream client,
//! and `Memo`: the app's packet cache (`library::packet_of`, an `Arc<Packet>`
//! per published version, loaded and hashed once), the meter's per-assignment
//! locks (idle ones dropped past 1,024) and its cache (`meter_cache`), the
//! witnessed-run slots and the workers' wake-up `Notify`
//! (`AppState::wake_workers`); and `hydrate`, whether the site bundle was
//! found. Never process-wide statics, so two apps in one process share nothing.
//!
//! At start `serve` loads the built-in packets, removes unfinished uploads,
//! settles the model calls a stopped server left in flight, starts the workers
//! and the axum server. `library::load_builtin` also queues the background
//! self-test of each built-in version (`builtin_self_test`: `all` by default,
//! `off`, or a list of slugs; the web tests turn it off unless they test it): a
//! `check` job of `BUILTIN_CHECK_PRIORITY`, once per version digest (a version
//! whose check ran, failed or is pending is not queued again on a restart).
//! `worker` runs workers only, with no web listener, against the same database;
//! `queue::spawn_workers_until` stops them claiming on SIGTERM, and the jobs in
//! flight get one lease length to finish. `serve_app` is the accept loop (hyper
//! HTTP/1 with a header read timeout and the peer address).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use grader::grade::Grader;
use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::net::TcpListener;

use crate::auth::password;
use crate::config::Config;
use crate::db::{self, NewUser, Role};
use crate::state::AppState;

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GATEHOUSE_LOG")
        .unwrap_or_else(|_| "info,sqlx=warn".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).try_init();
}

/// Builds the shared state for `config`: database (migrated), grader, metrics.
pub async fn state(config: Config) -> anyhow::Result<AppState> {
    config.builtin_checks().map_err(anyhow::Error::msg)?;
    config.check_sign_in().map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let db = db::open(&config.database_url).await?;
    let grader =
        tokio::task::spawn_blocking(Grader::for_host).await?.context("preparing the sandbox")?;
    // One global recorder per process; tests build several states in one
    // process and share it (and its handle, so each `/metrics` shows it).
    static METRICS: std::sync::OnceLock<metrics_exporter_prometheus::PrometheusHandle> =
        std::sync::OnceLock::new();
    let handle = METRICS
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone();
    let gates = Arc::new(crate::state::Gates::new(&config));
    let model_client = crate::meter::upstream_client(&config)?;
    let hydrate = crate::state::hydrate_bundle_built(&config.site_dir);
    Ok(AppState {
        config: Arc::new(config),
        db,
        grader: Arc::new(grader),
        metrics: handle,
        gates,
        model_client,
        memo: Arc::default(),
        hydrate,
    })
}

pub fn serve(config_file: Option<&Path>) -> anyhow::Result<ExitCode> {
    init_tracing();
    let config = Config::load(config_file).context("reading the configuration")?;
    runtime()?.block_on(async move {
        let state = state(config).await?;
        // What killed processes left (unfinished uploads, work folders of
        // gradings, caches nobody uses) is removed now and every
        // `sweep_secs`; a live process's files are never touched.
        crate::sweep::run(&state, crate::sweep::Role::Server).await;
        crate::sweep::spawn(&state, crate::sweep::Role::Server);
        // Model calls left in flight by an earlier run are settled before
        // any new call is admitted.
        crate::meter::settle_interrupted(&state).await.context("settling model calls an earlier run left in flight")?;
        crate::queue::spawn_workers(&state, state.config.workers);
        crate::ats::spawn_callbacks(state.clone());
        // Webhook deliveries queued by this server, its workers or another
        // run before a restart.
        crate::webhooks::spawn(state.clone());
        // Expired sessions are deleted hourly (and at each sign-in).
        let purge = state.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(3600));
            loop {
                every.tick().await;
                crate::web::session::purge_expired(&purge).await;
            }
        });
        let listener = tokio::net::TcpListener::bind(state.config.listen)
            .await
            .with_context(|| format!("binding {}", state.config.listen))?;
        let addr = listener.local_addr()?;
        tracing::info!(%addr, database = state.db.backend(), "gatehouse listening");
        let added = crate::library::load_builtin(&state).await.context("loading the built-in packets")?;
        tracing::info!(added, dir = %state.config.packets_dir.display(), "built-in packets loaded");
        let archived = crate::library::archive_stored_versions(&state).await.context("archiving stored packet versions")?;
        if archived > 0 {
            tracing::info!(archived, "stored packet versions archived into the database");
        }
        // A server brought up on a restored database with an empty data
        // folder unpacks its library from the archives.
        let unpacked = crate::library::restore_library_folders(&state).await.context("restoring the packet library from the database")?;
        if unpacked > 0 {
            tracing::info!(unpacked, "packet version folders restored from their archives");
        }
        if let Some(link) = crate::web::auth::setup_link(&state).await? {
            println!(
                "No accounts yet. Create the first admin with:\n  gatehouse user add --role admin --email you@example.com\n(the password is printed once, or read from $GATEHOUSE_PASSWORD)\nor open this one-time setup link:\n  {link}"
            );
        }
        println!("Gatehouse is serving on http://{addr}");
        let header_timeout = Duration::from_secs(state.config.header_timeout_secs.max(1));
        let app = crate::web::router(state);
        serve_app(listener, app, header_timeout, shutdown_signal()).await;
        Ok(ExitCode::SUCCESS)
    })
}

/// Serves `app` on `listener` until `shutdown` resolves: HTTP/1.1, each
/// request carrying its peer's address as `ConnectInfo` (the sign-in rate
/// limit and `/metrics` read it), and a client that has not sent its whole
/// header within `header_timeout` is disconnected (hyper enforces this only
/// with a timer, which `axum::serve` does not give it). Body stalls are cut
/// by the router's body timeout layer.
pub async fn serve_app(
    listener: TcpListener,
    app: axum::Router,
    header_timeout: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => return,
        };
        // Without TCP_NODELAY, Nagle's algorithm and the client's delayed
        // ACK hold small writes (the first SSE line of a stream) ~40 ms.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, %peer, "setting TCP_NODELAY failed");
        }
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
                    app.clone().oneshot(req)
                },
            );
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
        });
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = ctrl_c => {},
        _ = term.recv() => {},
    }
}

/// `gatehouse worker`: grading workers only (no web listener), against the
/// configured database (with Postgres nothing else is shared: blobs and
/// packet versions come from the database into this data folder's cache).
/// On SIGTERM or Ctrl-C the workers stop claiming and the jobs in flight
/// get one lease length to finish; a job still running then is abandoned,
/// its lease expires and another worker claims it again.
pub fn worker(config_file: Option<&Path>, count: Option<usize>) -> anyhow::Result<ExitCode> {
    init_tracing();
    let config = Config::load(config_file).context("reading the configuration")?;
    let rt = runtime()?;
    let code = rt.block_on(async move {
        let state = state(config).await?;
        let n = count.unwrap_or(state.config.workers).max(1);
        crate::sweep::run(&state, crate::sweep::Role::Worker).await;
        crate::sweep::spawn(&state, crate::sweep::Role::Worker);
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let workers = crate::queue::spawn_workers_until(&state, n, stop);
        println!("Gatehouse grading workers: {n} (database: {})", state.db.backend());
        shutdown_signal().await;
        tracing::info!("stopping: no new jobs are claimed; jobs in flight may finish");
        let _ = stop_tx.send(true);
        let grace = Duration::from_secs(state.config.lease_secs.max(1));
        if tokio::time::timeout(grace, futures_util::future::join_all(workers)).await.is_err() {
            tracing::warn!(
                "jobs still running after {}s are abandoned; their leases expire",
                grace.as_secs()
            );
        }
        Ok::<_, anyhow::Error>(ExitCode::SUCCESS)
    })?;
    // Grading threads still running are not waited for.
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(code)
}

pub fn add_user(
    config_file: Option<&Path>,
    email: &str,
    name: Option<&str>,
    role: &str,
) -> anyhow::Result<ExitCode> {
    let config = Config::load(config_file).context("reading the configuration")?;
    let role = Role::parse(role).context("role must be admin, author or reviewer")?;
    if !email.contains('@') {
        anyhow::bail!("{email:?} is not an email address");
    }
    runtime()?.block_on(async move {
        let db = db::open(&config.database_url).await?;
        if db.user_by_email(email).await?.is_some() {
            anyhow::bail!("an account for {email} already exists");
        }
        let (secret, generated) = match std::env::var("GATEHOUSE_PASSWORD") {
            Ok(p) if p.len() >= 8 => (p, false),
            Ok(_) => anyhow::bail!("GATEHOUSE_PASSWORD must be at least 8 characters"),
            Err(_) => (password::random_token()[..20].to_string(), true),
        };
        let hash = password::hash_async(secret.clone()).await?;
        let user = db
            .create_user(NewUser { email, name: name.unwrap_or(email), role, password_hash: &hash })
            .await?;
        println!("created {} account {} (id {})", role.as_str(), user.email, user.id);
        if generated {
            println!("password: {secret}\n(shown once; sign in at {}/login)", config.public_url);
        }
        Ok(ExitCode::SUCCESS)
    })
}
