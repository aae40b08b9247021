//! The Gatehouse server: command line, web platform, database, grading queue.
//!
//! The grading itself is the `grader` crate's; this crate stores, schedules
//! and serves. Blocking grader calls run on `spawn_blocking` threads.
//!
//! INVARIANTS.
//!
//! The module graph runs one way: `web` and `meter` on top, `assignment`,
//! `routes`, `times`, `library`, `state` below, `db` at the bottom
//! (`grader/tests/it/tidy.rs` checks the crate root and each folder module).
//!
//! Handlers talk to storage only through `Db`; no SQL outside `db/`, and no
//! backend-specific type (pool, row, `Sqlite*`/`Pg*`) outside its module:
//! Postgres is `db/postgres/` and `migrations/postgres/`, no handler change.
//! The one sqlx type that crosses `db/` is `sqlx::Error` (`DbResult`), the
//! error both backends share; `AppError` converts it (and `Refusal` through
//! it), logged and answered as an internal error.
//!
//! The grader's blocking calls (grading, packet check, ingestion checks,
//! argon2) run on `spawn_blocking`, never on the async workers; untrusted bytes
//! reach a process only through the grader's sandbox.
//!
//! Tokens (invite links, API tokens, the setup link, model keys, ATS connection
//! keys, OpenID `state`s) are stored only as SHA-256 hashes; passwords only as
//! argon2id hashes (an account made by single sign-on has none, and no password
//! verifies against it). Client secrets of OpenID issuers live in the
//! configuration only, never in the database or on a page.
//!
//! The ATS learns of a result only what `ats::released` allows (the
//! assignment's `results`, and blind review until a reviewer has scored);
//! `test_status` and the callback both go through `ats::status`.
//!
//! A webhook event carries identifiers and a link only
//! (`webhooks::submission_data`), never a score or personal data; an event is a
//! row before it is a request (a restart loses none), and an attempt holds its
//! row's lease, so attempts of one delivery never overlap.
//!
//! The meter never answers for the upstream: a refused call is a JSON error
//! naming the cap or rule (with `x-should-retry: false`), an upstream failure
//! is passed through with its status, and every call, refused or not, is a
//! ledger row that is finished whatever the client does.
//!
//! A transcript never changes a call's outcome: the bodies are cut or not kept
//! (and `transcript_cut` says so), the call is answered the same;
//! `meter_totals.transcript_bytes` equals the sum of the rows'
//! `transcript_bytes`, refused rows included.
//!
//! The meter's cache (`meter_cache.rs`, in `Memo`) never lets a call through
//! that the database would refuse. It is legitimate because the meter runs in
//! exactly one server process, which makes every write it depends on. Keys: a
//! key hash maps to its row and assignment only while the key is unrevoked and
//! the assignment started; every revocation goes through `meter::revoke_keys`
//! (the author's revoke and `reissue_key`), which forgets the assignment's keys
//! after the database has them revoked, and a read that raced a revocation is
//! not kept (an epoch moves with each forgetting); the other facts read of an
//! assignment (deadline, time box, packet version, slug) are never updated, and
//! `started_at` never changes once set (assignments are never deleted; code
//! that adds such a write must forget the keys the same way). Red witnessed:
//! only "yes" is kept (an accepted red is never undone). Totals: seeded from
//! `meter_totals` under the assignment's admission lock and moved only under
//! it, after the database, by the triggers' arithmetic (`MeterUsage::admit`,
//! `MeterUsage::settle`); a refusal's row or a failed write forgets them, so
//! the next admission reads the database. The tests compare the kept totals
//! with the database's after every settled test (`settled`).
//!
//! `meter_totals` equals the sum of the counted rows (settled tokens plus the
//! reservations of rows in flight): triggers on `model_calls` keep it
//! (migration 0011: `model_calls_admit` on insert, `model_calls_settle` when a
//! row leaves status 0), so `insert_model_call` and `finish_model_call` are one
//! statement each, atomic with the totals, and a crash between admission and
//! settlement leaves a row in flight that the next start settles
//! (`settle_interrupted`). On SQLite these writes go to one writer task with a
//! connection of its own (`db/sqlite/ledger.rs`): a write that finds the queue
//! empty commits alone; writes that queued while the last batch ran commit
//! together in one transaction, each acknowledged only after that commit (so a
//! reservation is still durable before its call is forwarded); a batch with a
//! failing write is rolled back and its writes run again one by one, so each
//! write's result is the one it would have had alone. The writer connection
//! never checkpoints the WAL (`wal_autocheckpoint = 0`); every 256 of its
//! commits a passive checkpoint runs on the read pool beside it, so no ledger
//! write waits for the copy and its syncs. Admission runs in the one `serve`
//! process (the lock is in memory); `gatehouse worker` never admits calls.

pub mod assignment;
pub mod ats;
pub mod audit;
pub mod auth;
pub mod backup;
pub mod blobs;
pub mod cli;
pub mod config;
pub mod db;
pub mod erasure;
pub mod error;
pub mod export;
pub mod grading;
pub mod invites;
pub mod library;
pub mod lowly;
pub mod mail;
pub mod meter;
pub mod meter_cache;
pub mod oidc;
pub mod provenance;
pub mod queue;
pub mod routes;
pub mod serve;
pub mod similarity;
pub mod state;
pub mod sweep;
pub mod text;
pub mod times;
pub mod transcript;
pub mod web;
pub mod webhooks;

/// Milliseconds since the Unix epoch, the unit of every stored time.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
