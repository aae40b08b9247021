//! What the meter keeps in memory between calls, so a call's admission
//! reads nothing from the database: the facts behind a model key, whether
//! an assignment's red run was witnessed, and the assignment's running
//! totals. The meter runs in exactly one server process (docs/operating.md,
//! "Scaling out"), so this process sees every write that changes them.
//!
//! The invariants, each with what keeps it:
//! - **Keys**: a key hash maps to its `model_keys` row and its assignment.
//!   Every revocation goes through [`crate::meter::revoke_keys`], which revokes in
//!   the database and then forgets the assignment's keys here, so the very
//!   next call reads the revoked row. An entry is kept only for a key not
//!   revoked and an assignment already started: the other facts the meter
//!   reads of an assignment (deadline, time box, packet version, slug) are
//!   never updated, and `started_at` never changes once set. A read that
//!   raced a revocation is not kept (the epoch moved while it read).
//! - **Red witnessed**: only "yes" is kept; an accepted red run is never
//!   undone, and "not yet" is read afresh every call.
//! - **Totals**: the assignment's `meter_totals` row as of this process's
//!   last write of it, seeded from the database on first use and then moved
//!   only under the assignment's admission lock by the same writes the
//!   database's triggers apply (admission adds its row; settlement replaces
//!   the reservation with what was used). Admission checks the caps against
//!   them, then inserts (and commits) the reservation row before forwarding,
//!   as before; a failed write forgets the entry, so the next call reads the
//!   database again.
//!
//! Each map is bounded: past `KEPT` entries it is cleared and refilled
//! from the database as calls come.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::db::meter::MeterUsage;
use crate::db::{Assignment, ModelKey};

/// Entries kept in each map before it is cleared.
const KEPT: usize = 4096;

/// A valid key of a started assignment.
#[derive(Debug)]
pub struct Keyed {
    pub key: ModelKey,
    pub assignment: Assignment,
}

#[derive(Default)]
struct Keys {
    /// Moves with every forgetting, so a read that began before it is not kept.
    epoch: u64,
    by_hash: HashMap<String, Arc<Keyed>>,
}

#[derive(Default)]
pub struct MeterCache {
    keys: Mutex<Keys>,
    red: Mutex<HashSet<String>>,
    totals: Mutex<HashMap<String, MeterUsage>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl MeterCache {
    /// The cached facts of a key hash, or the epoch to pass to [`Self::keep_key`].
    pub fn key(&self, hash: &str) -> Result<Arc<Keyed>, u64> {
        let keys = lock(&self.keys);
        keys.by_hash.get(hash).cloned().ok_or(keys.epoch)
    }

    /// Keeps what was read for `hash` when nothing was forgotten since
    /// `epoch`, the key is not revoked and the assignment has started.
    pub fn keep_key(&self, hash: &str, epoch: u64, keyed: Arc<Keyed>) {
        if keyed.key.revoked_at.is_some() || keyed.assignment.started_at.is_none() {
            return;
        }
        let mut keys = lock(&self.keys);
        if keys.epoch != epoch {
            return;
        }
        if keys.by_hash.len() >= KEPT {
            keys.by_hash.clear();
        }
        keys.by_hash.insert(hash.to_string(), keyed);
    }

    /// Forgets every key of the assignment (call after revoking in the database).
    pub fn forget_keys_of(&self, assignment_id: &str) {
        let mut keys = lock(&self.keys);
        keys.epoch += 1;
        keys.by_hash.retain(|_, k| k.key.assignment_id != assignment_id);
    }

    pub fn red_witnessed(&self, assignment_id: &str) -> bool {
        lock(&self.red).contains(assignment_id)
    }

    pub fn keep_red_witnessed(&self, assignment_id: &str) {
        let mut red = lock(&self.red);
        if red.len() >= KEPT {
            red.clear();
        }
        red.insert(assignment_id.to_string());
    }

    /// The assignment's totals, when kept. Only under its admission lock.
    pub fn totals(&self, assignment_id: &str) -> Option<MeterUsage> {
        lock(&self.totals).get(assignment_id).copied()
    }

    /// Keeps the assignment's totals. Only under its admission lock.
    pub fn keep_totals(&self, assignment_id: &str, usage: MeterUsage) {
        let mut totals = lock(&self.totals);
        if totals.len() >= KEPT && !totals.contains_key(assignment_id) {
            totals.clear();
        }
        totals.insert(assignment_id.to_string(), usage);
    }

    /// Moves the kept totals, if any, by `f`. Only under the admission lock.
    pub fn move_totals(&self, assignment_id: &str, f: impl FnOnce(&mut MeterUsage)) {
        if let Some(t) = lock(&self.totals).get_mut(assignment_id) {
            f(t);
        }
    }

    /// Forgets the totals (a write whose outcome is unknown): the next
    /// admission reads them from the database.
    pub fn forget_totals(&self, assignment_id: &str) {
        lock(&self.totals).remove(assignment_id);
    }
}
