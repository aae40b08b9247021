//! What every handler and worker shares.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use grader::grade::Grader;
use grader::packet::Packet;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::config::Config;
use crate::db::Db;

#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub db: Db,
    /// The grader, shared by the workers and the packet self-test; its calls
    /// block and run on `spawn_blocking` threads.
    pub grader: Arc<Grader>,
    pub metrics: PrometheusHandle,
    /// Global bounds on work any candidate can cause (uploads, sandbox runs).
    pub gates: Arc<Gates>,
    /// The model meter's upstream client (one connection pool; rustls with
    /// the web PKI roots and the configured `model_ca_file`).
    pub model_client: reqwest::Client,
    /// What this app keeps between requests (never process-wide statics, so
    /// two apps in one process, as in tests, share nothing).
    pub memo: Arc<Memo>,
    /// Whether pages load the hydrate bundle (`<site_dir>/pkg/gatehouse.js`
    /// and its wasm were found when the app was built). Pages work without
    /// it: every form is a plain form.
    pub hydrate: bool,
}

impl AppState {
    /// Tells this app's idle workers that a job is waiting; workers also
    /// poll, so jobs enqueued by other processes are found too.
    /// The blob store: the data folder, and the database when it keeps
    /// the blobs (Postgres).
    pub fn blobs(&self) -> crate::blobs::Blobs {
        crate::blobs::Blobs::new(&self.config.data_dir, self.db.clone())
    }

    pub fn wake_workers(&self) {
        self.memo.wake.notify_waiters();
    }
}

/// Whether the hydrate bundle is built in `site_dir`.
pub fn hydrate_bundle_built(site_dir: &std::path::Path) -> bool {
    let built = site_dir.join("pkg/gatehouse.js").is_file()
        && site_dir.join("pkg/gatehouse_bg.wasm").is_file();
    if !built {
        tracing::info!(site_dir = %site_dir.display(), "no hydrate bundle; pages are served without scripts (build it with `cargo run -p site --release`)");
    }
    built
}

/// Per-app memory: loaded packets and per-assignment locks.
#[derive(Default)]
pub struct Memo {
    /// Published packet versions by id; a version's folder never changes,
    /// so it is loaded (and its files hashed) once.
    packets: Mutex<HashMap<i64, Arc<Packet>>>,
    /// One lock per assignment, for the meter's admission.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Assignments with a witnessed run in progress: one at a time each.
    running: Mutex<HashSet<String>>,
    /// Wakes this app's idle grading workers when a job is enqueued.
    pub(crate) wake: tokio::sync::Notify,
    /// Fingerprints of submissions and starters, and similar pairs.
    pub similarity: crate::similarity::Cache,
    /// Writes the meter's transcripts to the blob store in batches.
    pub blob_writer: crate::blobs::BatchWriter,
    /// The meter's keys, witnessed reds and running totals (see
    /// `crate::meter_cache` for what invalidates each).
    pub meter: crate::meter_cache::MeterCache,
    /// OpenID issuers' discovery documents and key sets.
    pub oidc: crate::oidc::Cache,
    /// How long this process's last gradings took (newest last), for the
    /// candidate's estimate of the wait.
    gradings: Mutex<std::collections::VecDeque<std::time::Duration>>,
    /// Assignments created through the API, per token hash (built on first
    /// use from `api_assignments_per_minute`).
    pub api_creates: std::sync::OnceLock<governor::DefaultKeyedRateLimiter<String>>,
    /// Builds of `my-data.zip`, per assignment (built on first use from
    /// `my_data_per_hour`).
    pub exports: std::sync::OnceLock<governor::DefaultKeyedRateLimiter<String>>,
}

/// Gradings whose duration the estimate reads.
const GRADINGS_KEPT: usize = 20;

/// Holds a slot of one assignment until dropped: its witnessed run
/// (`Slot::take`), or its `my-data.zip` build (`Slot::take_named`).
pub struct Slot {
    memo: Arc<Memo>,
    assignment_id: String,
}

impl Slot {
    /// The slot of `assignment_id`, unless a run of it holds the slot now.
    pub fn take(memo: &Arc<Memo>, assignment_id: &str) -> Option<Slot> {
        let mut set = memo.running.lock().unwrap_or_else(|e| e.into_inner());
        set.insert(assignment_id.to_string())
            .then(|| Slot { memo: memo.clone(), assignment_id: assignment_id.to_string() })
    }

    /// The slot `what` of `assignment_id` (apart from its witnessed run's).
    pub fn take_named(memo: &Arc<Memo>, what: &str, assignment_id: &str) -> Option<Slot> {
        Slot::take(memo, &format!("{what}:{assignment_id}"))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.memo.running.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.assignment_id);
    }
}

/// Locks kept before idle ones (held by nobody) are dropped.
const LOCKS_KEPT: usize = 1024;

impl Memo {
    pub fn packet(&self, version_id: i64) -> Option<Arc<Packet>> {
        self.packets.lock().unwrap_or_else(|e| e.into_inner()).get(&version_id).cloned()
    }

    pub fn keep_packet(&self, version_id: i64, packet: Arc<Packet>) {
        self.packets.lock().unwrap_or_else(|e| e.into_inner()).insert(version_id, packet);
    }

    /// The lock of `key`. The table does not grow without bound: past
    /// `LOCKS_KEPT` entries, the locks nobody holds or waits for are dropped
    /// (a dropped one is made afresh when next asked for, and no one can be
    /// holding the old one).
    pub fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        if locks.len() >= LOCKS_KEPT && !locks.contains_key(key) {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        locks.entry(key.to_string()).or_default().clone()
    }

    /// Records how long one grading took.
    pub fn record_grading(&self, took: std::time::Duration) {
        let mut g = self.gradings.lock().unwrap_or_else(|e| e.into_inner());
        if g.len() >= GRADINGS_KEPT {
            g.pop_front();
        }
        g.push_back(took);
    }

    /// The median of the recent gradings' durations, if there were any.
    pub fn typical_grading(&self) -> Option<std::time::Duration> {
        let mut g: Vec<_> =
            self.gradings.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect();
        g.sort();
        g.get(g.len() / 2).copied()
    }

    /// How many locks are kept (for tests).
    pub fn locks_kept(&self) -> usize {
        self.locks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Global bounds shared by every candidate: concurrent uploads being
/// received and checked, and concurrent witnessed sandbox runs. When one is
/// full the request is refused with 503 at once, never queued.
pub struct Gates {
    pub uploads: Arc<tokio::sync::Semaphore>,
    pub sandbox_runs: Arc<tokio::sync::Semaphore>,
    /// Builds of `my-data.zip`.
    pub exports: Arc<tokio::sync::Semaphore>,
}

impl Gates {
    pub fn new(config: &Config) -> Gates {
        Gates {
            uploads: Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_uploads.max(1))),
            sandbox_runs: Arc::new(tokio::sync::Semaphore::new(
                config.max_concurrent_sandbox_runs.max(1),
            )),
            exports: Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_exports.max(1))),
        }
    }

    /// A permit from `gate`, or a 503 naming `what` is busy.
    pub fn try_take(
        gate: &Arc<tokio::sync::Semaphore>,
        what: &str,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, crate::error::AppError> {
        gate.clone().try_acquire_owned().map_err(|_| {
            crate::error::AppError::Unavailable(format!(
                "the server is busy with other {what}; try again in a minute"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_locks_are_dropped_and_held_ones_kept() {
        let memo = Memo::default();
        let held = memo.lock_for("held");
        for i in 0..LOCKS_KEPT * 2 {
            drop(memo.lock_for(&format!("a{i}")));
        }
        assert!(memo.locks_kept() <= LOCKS_KEPT, "{}", memo.locks_kept());
        assert!(Arc::ptr_eq(&held, &memo.lock_for("held")), "a held lock is never replaced");
        assert!(Arc::ptr_eq(&memo.lock_for("x"), &memo.lock_for("x")));
    }

    #[test]
    fn one_witnessed_run_slot_per_assignment() {
        let memo = Arc::new(Memo::default());
        let slot = Slot::take(&memo, "a").expect("free");
        assert!(Slot::take(&memo, "a").is_none(), "taken while held");
        assert!(Slot::take(&memo, "b").is_some(), "another assignment is apart");
        drop(slot);
        assert!(Slot::take(&memo, "a").is_some(), "free again once dropped");
        let other = Arc::new(Memo::default());
        let _held = Slot::take(&memo, "c").expect("free");
        assert!(Slot::take(&other, "c").is_some(), "two apps share nothing");
    }
}
