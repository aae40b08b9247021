//! `gatehouse backup DEST` and `gatehouse restore SRC` (SQLite).
//!
//! A backup is taken online, while the server serves and grades: the
//! database first, as one consistent snapshot (`VACUUM INTO`, a single read
//! transaction, so the copy is the database as of one instant and needs no
//! pause of the writers), then the data folder's durable parts: `blobs/`
//! (content-addressed and never changed once written, each copied with its
//! SHA-256 checked against its name) and `packets/` (the library's version
//! folders; a published version's folder never changes). Everything the
//! snapshot refers to was written before the row naming it (a blob before
//! its submission, a version's folder before its row), so it is in the
//! copy; what arrives after the snapshot may be copied too and is simply
//! not referred to. `MANIFEST.json` is written last: a folder without it is
//! not a complete backup.
//!
//! `gatehouse restore SRC` brings a backup up in a fresh data folder (the
//! configured database file and data folder must not hold one already):
//! it copies the snapshot and the folders (blobs checked again), opens the
//! database (migrating it if the binary is newer), checks its integrity,
//! and verifies every graded submission: its receipt's digest recomputes,
//! and its zip is there with the SHA-256 the receipt names.
//!
//! With Postgres the database holds every blob (and every packet version's
//! archive), so `pg_dump`/`pg_restore` is the whole backup; both commands
//! say so and stop (docs/operating.md, "Backups").

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::Connection;

use crate::config::Config;

/// The snapshot's file name in a backup folder.
pub const DATABASE_FILE: &str = "gatehouse.db";
/// Written last: its presence marks a complete backup.
pub const MANIFEST_FILE: &str = "MANIFEST.json";

/// What a backup holds (its `MANIFEST.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub backend: String,
    /// Unix ms when the snapshot was taken.
    pub taken_at: i64,
    pub database: String,
    pub submissions: u64,
    pub graded: u64,
    pub blobs: u64,
    pub blob_bytes: u64,
    pub versions: u64,
    /// Transcript blobs the snapshot names that the data folder never had
    /// (written beside a call that a crash cut short); pages say so.
    pub transcripts_missing: u64,
}

const POSTGRES: &str = "the database is Postgres, which holds every blob and packet version: back it up with `pg_dump --format=custom` and restore it with `pg_restore` into an empty database (docs/operating.md, \"Backups\")";

fn sqlite_path(url: &str) -> anyhow::Result<PathBuf> {
    if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        bail!("{POSTGRES}");
    }
    let opts: sqlx::sqlite::SqliteConnectOptions =
        url.parse().with_context(|| format!("database url {url:?}"))?;
    Ok(opts.get_filename().to_path_buf())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("async runtime")
}

/// Copies `from` to `to` through a temporary file, synced and renamed, and
/// returns the SHA-256 of the bytes copied and their count.
fn copy_file(from: &Path, to: &Path) -> anyhow::Result<(String, u64)> {
    let parent = to.parent().expect("a file in a folder");
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let mut src =
        std::fs::File::open(from).with_context(|| format!("reading {}", from.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent)
        .with_context(|| format!("writing in {}", parent.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let got = src.read(&mut buf).with_context(|| format!("reading {}", from.display()))?;
        if got == 0 {
            break;
        }
        hasher.update(&buf[..got]);
        tmp.write_all(&buf[..got]).with_context(|| format!("writing {}", to.display()))?;
        n += got as u64;
    }
    tmp.as_file().sync_all().with_context(|| format!("syncing {}", to.display()))?;
    tmp.persist(to).map_err(|e| e.error).with_context(|| format!("writing {}", to.display()))?;
    Ok((hex::encode(hasher.finalize()), n))
}

/// Copies every blob under `from` (`<aa>/<sha256>`) to `to`, checking each
/// one's content against its name; returns (count, bytes).
fn copy_blobs(from: &Path, to: &Path) -> anyhow::Result<(u64, u64)> {
    let (mut count, mut bytes) = (0, 0);
    for prefix in std::fs::read_dir(from).into_iter().flatten().flatten() {
        if !prefix.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        for entry in std::fs::read_dir(prefix.path())?.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let dest = to.join(prefix.file_name()).join(&name);
            let (sha, n) = copy_file(&entry.path(), &dest)?;
            if sha != name {
                let _ = std::fs::remove_file(&dest);
                bail!(
                    "the blob {} is damaged: its content's SHA-256 is {sha}",
                    entry.path().display()
                );
            }
            count += 1;
            bytes += n;
        }
    }
    Ok((count, bytes))
}

/// Copies the regular files and folders under `from` to `to` (links and
/// special files are not followed or copied).
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<u64> {
    let mut n = 0;
    for rel in grader::tree::list_paths(from) {
        copy_file(&from.join(&rel), &to.join(&rel))?;
        n += 1;
    }
    Ok(n)
}

/// The versions of a database: (id, state, folder, digest).
async fn versions(
    conn: &mut sqlx::SqliteConnection,
) -> anyhow::Result<Vec<(i64, String, String, String)>> {
    Ok(sqlx::query_as("SELECT id, state, dir, digest FROM packet_versions ORDER BY id")
        .fetch_all(conn)
        .await?)
}

/// Checks the copied version folders against the snapshot's digests: a
/// published version's folder never changes, so a mismatch is an error; a
/// draft edited after the snapshot is reported.
fn check_versions(
    data: &Path,
    versions: &[(i64, String, String, String)],
) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    for (id, state, dir, digest) in versions {
        let folder = data.join(dir);
        let got = grader::packet::Packet::load(&folder).map(|p| p.digest);
        match (got, state.as_str()) {
            (Ok(d), _) if d == *digest => {}
            (_, "draft") => notes.push(format!(
                "draft version {id} changed after the snapshot (its folder is the newer one)"
            )),
            (Ok(d), _) => bail!(
                "published version {id}: the folder {} has digest {d}, the database {digest}",
                folder.display()
            ),
            (Err(e), _) => bail!("published version {id}: the folder {}: {e}", folder.display()),
        }
    }
    Ok(notes)
}

/// `gatehouse backup DEST`.
pub fn backup(config_file: Option<&Path>, dest: &Path) -> anyhow::Result<ExitCode> {
    let config = Config::load(config_file).context("reading the configuration")?;
    let db_path = sqlite_path(&config.database_url)?;
    anyhow::ensure!(db_path.is_file(), "no database at {}", db_path.display());
    if dest.exists()
        && std::fs::read_dir(dest)
            .with_context(|| format!("reading {}", dest.display()))?
            .next()
            .is_some()
    {
        bail!("{} is not empty: a backup goes into a new or empty folder", dest.display());
    }
    std::fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    let snapshot = dest.join(DATABASE_FILE);
    let rt = runtime()?;
    let taken_at = crate::now_ms();
    let (subs, graded, versions, transcripts) = rt.block_on(async {
        // One read transaction: the database as of one instant.
        let opts: sqlx::sqlite::SqliteConnectOptions = config.database_url.parse()?;
        let mut conn = sqlx::SqliteConnection::connect_with(&opts.read_only(true))
            .await
            .with_context(|| format!("opening {}", db_path.display()))?;
        sqlx::query("VACUUM INTO $1")
            .bind(snapshot.to_string_lossy().into_owned())
            .execute(&mut conn)
            .await
            .with_context(|| format!("writing the snapshot {}", snapshot.display()))?;
        conn.close().await?;
        let mut snap = sqlx::SqliteConnection::connect_with(
            &sqlx::sqlite::SqliteConnectOptions::new().filename(&snapshot).read_only(true),
        )
        .await?;
        let subs: Vec<(String, String)> =
            sqlx::query_as("SELECT blob_sha256, state FROM submissions").fetch_all(&mut snap).await?;
        let graded = subs.iter().filter(|(_, s)| s == "graded").count() as u64;
        let transcripts: Vec<String> = sqlx::query_scalar(
            "SELECT request_body_sha256 FROM model_calls WHERE request_body_sha256 IS NOT NULL
             UNION SELECT response_body_sha256 FROM model_calls WHERE response_body_sha256 IS NOT NULL",
        )
        .fetch_all(&mut snap)
        .await?;
        let versions = versions(&mut snap).await?;
        snap.close().await?;
        anyhow::Ok((subs, graded, versions, transcripts))
    })?;
    let blobs_dir = crate::blobs::blobs_dir(&config.data_dir);
    let (blobs, blob_bytes) = copy_blobs(&blobs_dir, &crate::blobs::blobs_dir(dest))?;
    for (sha, _) in &subs {
        anyhow::ensure!(
            crate::blobs::blob_path(dest, sha).is_file(),
            "the zip {sha} of a submission is not in the data folder {}",
            config.data_dir.display()
        );
    }
    let transcripts_missing =
        transcripts.iter().filter(|sha| !crate::blobs::blob_path(dest, sha).is_file()).count()
            as u64;
    copy_tree(&config.data_dir.join("packets"), &dest.join("packets"))?;
    let notes = check_versions(dest, &versions)?;
    let manifest = Manifest {
        format: 1,
        backend: "sqlite".into(),
        taken_at,
        database: DATABASE_FILE.into(),
        submissions: subs.len() as u64,
        graded,
        blobs,
        blob_bytes,
        versions: versions.len() as u64,
        transcripts_missing,
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dest)?;
    tmp.write_all(serde_json::to_string_pretty(&manifest)?.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(dest.join(MANIFEST_FILE)).map_err(|e| e.error)?;
    std::fs::File::open(dest)?.sync_all()?;
    for n in notes {
        println!("note: {n}");
    }
    println!(
        "backed up to {}: {} submissions ({} graded), {} blobs ({} bytes), {} packet versions",
        dest.display(),
        manifest.submissions,
        manifest.graded,
        manifest.blobs,
        manifest.blob_bytes,
        manifest.versions
    );
    Ok(ExitCode::SUCCESS)
}

/// `gatehouse restore SRC`.
pub fn restore(config_file: Option<&Path>, src: &Path) -> anyhow::Result<ExitCode> {
    let config = Config::load(config_file).context("reading the configuration")?;
    let db_path = sqlite_path(&config.database_url)?;
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(src.join(MANIFEST_FILE)).with_context(|| {
            format!("{} is not a complete backup (no {MANIFEST_FILE})", src.display())
        })?)
        .with_context(|| format!("reading {}", src.join(MANIFEST_FILE).display()))?;
    anyhow::ensure!(
        manifest.format == 1 && manifest.backend == "sqlite",
        "{}: a backup of format {} for {}, not one this binary restores",
        src.display(),
        manifest.format,
        manifest.backend
    );
    if db_path.exists() {
        bail!("{} exists: restore goes into a fresh data folder and database", db_path.display());
    }
    for sub in ["blobs", "packets"] {
        let d = config.data_dir.join(sub);
        if std::fs::read_dir(&d).is_ok_and(|mut e| e.next().is_some()) {
            bail!("{} is not empty: restore goes into a fresh data folder", d.display());
        }
    }
    copy_file(&src.join(&manifest.database), &db_path)?;
    let (blobs, _) =
        copy_blobs(&crate::blobs::blobs_dir(src), &crate::blobs::blobs_dir(&config.data_dir))?;
    copy_tree(&src.join("packets"), &config.data_dir.join("packets"))?;
    let rt = runtime()?;
    let (subs, graded) = rt.block_on(async {
        // Opening migrates a snapshot taken by an older binary.
        let db = crate::db::open(&config.database_url).await?;
        drop(db);
        let mut conn = sqlx::SqliteConnection::connect(&config.database_url).await?;
        let ok: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await?;
        anyhow::ensure!(ok == "ok", "the restored database fails its integrity check: {ok}");
        let rows: Vec<(String, String, String, Option<String>)> =
            sqlx::query_as("SELECT id, blob_sha256, state, receipt_json FROM submissions")
                .fetch_all(&mut conn)
                .await?;
        let versions = versions(&mut conn).await?;
        conn.close().await?;
        let mut graded = 0;
        for (id, sha, state, receipt) in &rows {
            let zip = crate::blobs::blob_path(&config.data_dir, sha);
            anyhow::ensure!(zip.is_file(), "submission {id}: its zip {sha} is missing");
            if state != "graded" {
                continue;
            }
            let receipt: grader::grade::Receipt =
                serde_json::from_str(receipt.as_deref().unwrap_or_default())
                    .with_context(|| format!("submission {id}: its receipt does not parse"))?;
            let digest = grader::grade::receipt_digest(&receipt);
            anyhow::ensure!(
                digest == receipt.digest,
                "submission {id}: its receipt's digest {} recomputes as {digest}",
                receipt.digest
            );
            anyhow::ensure!(
                receipt.submission.archive_sha256 == *sha,
                "submission {id}: its receipt names the zip {}, not {sha}",
                receipt.submission.archive_sha256
            );
            graded += 1;
        }
        for n in check_versions(&config.data_dir, &versions)? {
            println!("note: {n}");
        }
        anyhow::Ok((rows.len(), graded))
    })?;
    println!(
        "restored {} (taken at {} ms): {subs} submissions, {graded} graded with their receipts verified, {blobs} blobs checked, into {}",
        src.display(),
        manifest.taken_at,
        config.data_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
