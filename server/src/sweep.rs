//! Leftovers of killed processes and caches nobody uses, removed at start
//! and every `sweep_secs` (#29), by `serve` and by `gatehouse worker`:
//!
//! - the grader's work folders (`<tmp>/gatehouse-grade-*` and its other
//!   kinds) whose process died, host-wide, never a live one's
//!   (`grader::workdir`: a lock beside each folder);
//! - the kernel keys of run uids no live run holds (a run killed with its
//!   process never cleared its uid: `Sandbox::sweep_uid_keys`);
//! - what killed processes left in `<data_dir>/tmp/` (uploads cut short,
//!   scratch folders), never a live write (`blobs::sweep_tmp`: locked files);
//! - with Postgres, where the local folders are caches: blobs in
//!   `<data_dir>/blobs/` the database holds and nobody used for
//!   `cache_max_age_secs` (`blobs::evict_cached`), and packet versions
//!   unpacked in `<data_dir>/cache/packets/<digest>/` unused as long;
//! - `serve` only, with Postgres: packet archives of tree digests no
//!   version has (a draft's earlier edits) unused for [`DB_GRACE`], with
//!   their blobs when nothing else refers to them, and the chunks of blobs
//!   never finished (an upload whose process died) written before
//!   [`DB_GRACE`];
//! - `serve` only: webhook deliveries that ended (delivered or failed)
//!   more than `webhook_keep_days` ago;
//! - `serve` only: the data of candidates whose retention ran out
//!   (`crate::erasure::sweep_retention`, at most [`RETENTION_ROUND`] a round).
//!
//! A sweep never fails its caller: what it cannot judge or remove is
//! logged and left for the next one.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::state::AppState;

/// How long an unused packet archive, or the chunks of a blob never
/// finished, stay in the database before a sweep removes them: much longer
/// than an edit takes between storing an archive and naming its digest,
/// or an upload between two chunks.
pub const DB_GRACE: Duration = Duration::from_secs(3600);

/// The most assignments one sweep erases for retention (the rest wait for
/// the next round).
pub const RETENTION_ROUND: i64 = 200;

/// What one sweep removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub work_folders: u64,
    pub uid_keys: u64,
    pub tmp: u64,
    pub cached_blobs: u64,
    pub cached_packets: u64,
    pub archives: u64,
    pub archive_blobs: u64,
    pub chunks: u64,
    pub webhook_deliveries: u64,
    /// Assignments erased because their retention ran out.
    pub erased: u64,
}

impl Swept {
    pub fn total(&self) -> u64 {
        self.work_folders
            + self.uid_keys
            + self.tmp
            + self.cached_blobs
            + self.cached_packets
            + self.archives
            + self.archive_blobs
            + self.chunks
            + self.webhook_deliveries
            + self.erased
    }
}

/// Which process sweeps: only the server sweeps the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Worker,
}

fn unused_for(meta: &std::fs::Metadata, age: Duration) -> bool {
    meta.modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .is_some_and(|a| a >= age)
}

/// Unpacked packet versions under `<data_dir>/cache/packets/` not used for
/// `age`. Blocking.
fn evict_packets(data_dir: &Path, age: Duration) -> u64 {
    let mut removed = 0;
    let root = data_dir.join("cache").join("packets");
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else { continue };
        if meta.is_dir() && unused_for(&meta, age) && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// One sweep (see the module documentation).
pub async fn run(state: &AppState, role: Role) -> Swept {
    let mut swept = Swept::default();
    let data_dir = state.config.data_dir.clone();
    let cache_age = Duration::from_secs(state.config.cache_max_age_secs);
    let in_db = state.db.blobs_in_db();
    let judge = state.grader.clone();
    let files = tokio::task::spawn_blocking(move || {
        let work = grader::workdir::sweep(&std::env::temp_dir());
        let keys = judge.sandbox().sweep_uid_keys();
        let tmp = crate::blobs::sweep_tmp(&data_dir);
        let packets = if in_db { evict_packets(&data_dir, cache_age) } else { 0 };
        (work, keys, tmp, packets)
    })
    .await;
    match files {
        Ok((work, keys, tmp, packets)) => {
            swept.work_folders = work.folders + work.unlocked_folders;
            swept.uid_keys = keys;
            swept.tmp = tmp.total();
            swept.cached_packets = packets;
        }
        Err(e) => tracing::warn!(error = %e, "sweeping the work folders failed"),
    }
    match crate::blobs::evict_cached(&state.blobs(), cache_age).await {
        Ok(n) => swept.cached_blobs = n,
        Err(e) => tracing::warn!(error = %e, "evicting cached blobs failed"),
    }
    if role == Role::Server && in_db {
        let before = crate::now_ms() - DB_GRACE.as_millis() as i64;
        match state.db.sweep_packet_archives(before).await {
            Ok((archives, blobs)) => (swept.archives, swept.archive_blobs) = (archives, blobs),
            Err(e) => tracing::warn!(error = %e, "sweeping unused packet archives failed"),
        }
        match state.db.sweep_orphan_chunks(before).await {
            Ok(n) => swept.chunks = n,
            Err(e) => tracing::warn!(error = %e, "sweeping chunks of unfinished blobs failed"),
        }
    }
    if role == Role::Server {
        let keep = state.config.webhook_keep_days.saturating_mul(86_400_000);
        match state.db.prune_webhook_deliveries(crate::now_ms().saturating_sub(keep)).await {
            Ok(n) => swept.webhook_deliveries = n,
            Err(e) => tracing::warn!(error = %e, "pruning old webhook deliveries failed"),
        }
        swept.erased = crate::erasure::sweep_retention(state, RETENTION_ROUND).await as u64;
    }
    if swept.total() > 0 {
        tracing::info!(?swept, "removed leftovers and unused cache entries");
    }
    metrics::counter!("gatehouse_swept_total").increment(swept.total());
    swept
}

/// Sweeps every `sweep_secs` (the first one `sweep_secs` from now; the
/// process sweeps once at start itself) for as long as the runtime runs.
pub fn spawn(state: &AppState, role: Role) -> tokio::task::JoinHandle<()> {
    let state = state.clone();
    tokio::spawn(async move {
        let every = Duration::from_secs(state.config.sweep_secs.max(1));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tick.tick().await;
            run(&state, role).await;
        }
    })
}
