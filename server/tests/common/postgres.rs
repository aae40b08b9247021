//! A throwaway Postgres for the tests (included with `#[path]`): one cluster
//! per test binary run, started on first use from Debian's `postgresql`
//! (`initdb`, `pg_ctl`; `scripts/setup` installs it) in a temporary folder,
//! listening only on a Unix socket in that folder; a fresh database per
//! test. When the binary runs as root the cluster belongs to `nobody`
//! (Postgres refuses to run as root). A watchdog process stops the cluster
//! (SIGQUIT, an immediate shutdown) and removes the folder once the test
//! binary has exited, however it exited.
//!
//! `GATEHOUSE_TEST_PG_STATEMENTS=<file>` logs every statement the cluster
//! runs and leaves that log at `<file>` when the binary exits: the
//! statements a run sent, to compare what two selections of tests cover
//! on Postgres (`scripts/pg-statements`).

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::Connection;

const NOBODY: u32 = 65534;
const USER: &str = "gatehouse";

struct Cluster {
    /// The temporary folder: the data directory, the socket and the log.
    dir: PathBuf,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
static NEXT_DB: AtomicU64 = AtomicU64::new(0);

/// Whether the tests of this run use Postgres: `GATEHOUSE_TEST_DATABASE=postgres`.
pub fn selected() -> bool {
    match std::env::var("GATEHOUSE_TEST_DATABASE").as_deref() {
        Ok("postgres") => true,
        Ok("sqlite") | Ok("") | Err(_) => false,
        Ok(other) => panic!("GATEHOUSE_TEST_DATABASE={other:?}: expected sqlite or postgres"),
    }
}

/// The URL of a new, empty database in the shared cluster (started on
/// first use).
pub async fn fresh_database_url() -> String {
    let cluster = match CLUSTER.get_or_init(start) {
        Ok(c) => c,
        Err(e) => panic!("starting the test Postgres: {e}"),
    };
    let name = format!("t{}_{}", std::process::id(), NEXT_DB.fetch_add(1, Ordering::Relaxed));
    let mut admin = sqlx::PgConnection::connect(&cluster.url("postgres"))
        .await
        .expect("connecting to the test Postgres");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .expect("CREATE DATABASE");
    admin.close().await.ok();
    note_database(&name);
    cluster.url(&name)
}

/// With `GATEHOUSE_TEST_PG_STATEMENTS=<file>`, appends `<database>\t<test>`
/// to `<file>.dbs` (libtest names each test's thread after the test), so
/// the logged statements can be told apart by test.
fn note_database(name: &str) {
    use std::io::Write;
    let Some(file) = std::env::var_os("GATEHOUSE_TEST_PG_STATEMENTS") else { return };
    let mut path = file;
    path.push(".dbs");
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", Path::new(&path).display()));
    writeln!(f, "{name}\t{test}").unwrap_or_else(|e| panic!("{}: {e}", Path::new(&path).display()));
}

impl Cluster {
    fn url(&self, db: &str) -> String {
        format!("postgres://{USER}@localhost/{db}?host={}", self.dir.display())
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd.output().map_err(|e| {
        format!("{what}: {e} (is Debian's postgresql installed? scripts/setup installs it)")
    })?;
    if !out.status.success() {
        return Err(format!(
            "{what}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// `initdb` and `pg_ctl` on PATH, else Debian's versioned folder.
pub fn tool(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    on_path
        .or_else(|| {
            let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
                .ok()?
                .flatten()
                .map(|e| e.path().join("bin").join(name))
                .filter(|p| p.is_file())
                .collect();
            found.sort();
            found.pop()
        })
        .unwrap_or_else(|| PathBuf::from(name))
}

fn as_owner(cmd: &mut Command, root: bool) -> &mut Command {
    if root {
        cmd.uid(NOBODY).gid(NOBODY);
    }
    cmd
}

fn start() -> Result<Cluster, String> {
    let root = std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false);
    let dir = tempfile::Builder::new()
        .prefix("gatehouse-pg-")
        .tempdir_in("/tmp")
        .map_err(|e| format!("temporary folder: {e}"))?
        .keep();
    if root {
        std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY))
            .map_err(|e| format!("chown {}: {e}", dir.display()))?;
    }
    let data = dir.join("data");
    watchdog(&dir, &data)?;
    run(
        as_owner(
            Command::new(tool("initdb")).arg("-D").arg(&data).args([
                "-A",
                "trust",
                "-U",
                USER,
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]),
            root,
        )
        .stdin(Stdio::null()),
        "initdb",
    )?;
    let mut opts = format!(
        "-k {} -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400 -c shared_buffers=32MB",
        dir.display()
    );
    if std::env::var_os("GATEHOUSE_TEST_PG_STATEMENTS").is_some() {
        opts.push_str(" -c log_statement=all -c log_line_prefix='%m [%p] db=%d '");
    }
    run(
        as_owner(
            Command::new(tool("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-o")
                .arg(opts)
                .arg("-l")
                .arg(dir.join("log"))
                .args(["-w", "start"]),
            root,
        )
        .stdin(Stdio::null()),
        "pg_ctl start",
    )
    .map_err(|e| {
        format!("{e}\nlog: {}", std::fs::read_to_string(dir.join("log")).unwrap_or_default())
    })?;
    Ok(Cluster { dir })
}

/// A process in its own session that waits for this test binary to exit,
/// then stops the cluster and removes its folder.
fn watchdog(dir: &Path, data: &Path) -> Result<(), String> {
    let script = r#"while kill -0 "$0" 2>/dev/null; do sleep 0.3; done
pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null
i=0; while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
[ -z "$3" ] || cp "$2/log" "$3"
rm -rf "$2""#;
    let keep = std::env::var_os("GATEHOUSE_TEST_PG_STATEMENTS").unwrap_or_default();
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).arg(std::process::id().to_string()).arg(data).arg(dir).arg(keep);
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
    cmd.spawn().map_err(|e| format!("starting the cleanup watchdog: {e}"))?;
    Ok(())
}
