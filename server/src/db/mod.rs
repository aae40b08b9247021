//! The database layer. Handlers see only [`Db`], a shared `dyn Store`; each
//! backend is one module implementing every area trait: `sqlite` (one file,
//! the embedded default) and `postgres` (a shared database for a server and
//! workers on other machines), each with its own `migrations/<backend>`.
//!
//! Each area of the schema has its own trait in its own file (users,
//! packets, packet audits, assignments, submissions, jobs, audit, sessions,
//! witness runs, the meter, blobs kept in the database, sign-ins under way at
//! an OpenID issuer, ATS connections, webhook endpoints and their outbox, erasures and
//! retention), and the backend
//! implements it in a file of the same name under the backend's module.
//!
//! Where an area's SQL is portable (users, sessions, sso, ats, webhooks,
//! erasure, audit, witness runs, assignments, packet audits, submissions,
//! packets, jobs, the meter) it is written once, in `portable/<area>.rs`, as a
//! macro each backend instantiates in a module of its own (the SQL uses `$n`
//! placeholders, which sqlx's SQLite driver binds as Postgres does, and `CAST`
//! where Postgres must be told a parameter's type). What still differs between
//! the dialects is an argument of the macro, named where the backend
//! instantiates it: the insertion-order column, the queue claim's row lock and
//! re-check, the two-argument maximum, `publish`'s row lock, and the methods
//! only one backend has (Postgres's `listen_for_jobs`, in `postgres/jobs.rs`;
//! the blobs kept in Postgres, `postgres/blobs.rs`). The meter's two ledger
//! writes go through a method each backend defines, `ledger_fetch_one` and
//! `ledger_execute`, given a closure that builds the bound statement: SQLite
//! queues it for its writer task (`sqlite/ledger.rs`, which also keeps the WAL
//! bounded), Postgres runs it on its pool. `open` picks the backend by the
//! URL's scheme (`sqlite:`, `postgres:` or `postgresql:`).
//!
//! Queries are runtime `query_as` with `FromRow` rows. The column lists, and
//! the row structs where a row does not decode as the area's type itself (with
//! their conversions), are written once, in `rows/<area>.rs`, and both backends
//! use them (sqlx's derive is generic over the database, and the schemas decode
//! to the same Rust types); states and kinds decode into `app::contract`'s
//! enums (`#[sqlx(try_from = "String")]`), so a value outside the CHECK
//! constraint is a decode error, never a string compared somewhere.
//!
//! Both backends run the same statements except where the dialect or the
//! concurrency differs. On Postgres the queue's claim takes its row with `FOR
//! UPDATE OF j SKIP LOCKED` and the outer `UPDATE` re-checks that the job is
//! still claimable (SQLite has one writer, so its subquery and update are
//! atomic as they are); `publish` locks the packet's row and
//! `finish_model_call` the call's row first, where SQLite's single writer
//! serialised the read-then-write (under Postgres's READ COMMITTED two
//! transactions could otherwise both read the old value); `GREATEST` stands for
//! SQLite's two-argument `MAX`, `ON CONFLICT DO NOTHING` for `INSERT OR
//! IGNORE`. Users are found by `lower(email) = lower($1)` on both, and
//! `submissions.seq`, a BIGSERIAL, stands in for SQLite's `rowid`. Lease
//! renewal and complete-only-while-holding-the-lease are the same conditional
//! `UPDATE`s on both.
//!
//! Beyond SQL, with Postgres the database is also the blob store and wakes the
//! workers. `blobs.rs` (`BlobRows`) stores blobs as `blob_chunks(sha256, seq,
//! bytes)` rows of 1 MiB and a `blobs` row written last (a blob is complete
//! once it exists), and `packet_archives(digest, blob_sha256)`, a version
//! folder's zip by its tree digest; the SQLite backend answers `blobs_in_db()
//! == false` and keeps nothing there. A trigger on `jobs` notifies
//! `gatehouse_jobs` whenever a job becomes `queued`, and
//! `JobStore::listen_for_jobs` (Postgres: a `PgListener`) wakes the process's
//! workers; SQLite's default answers false, and its workers are woken
//! in-process and poll.

use std::sync::Arc;

pub mod assignments;
pub mod ats;
pub mod audit;
pub mod blobs;
pub mod erasure;
pub mod jobs;
pub mod meter;
pub mod packet_audits;
pub mod packets;
mod portable;
pub mod postgres;
mod rows;
pub mod sessions;
pub mod sqlite;
pub mod sso;
pub mod submissions;
pub mod users;
pub mod webhooks;
pub mod witness;

pub use assignments::{
    Assignment, AssignmentStore, DEFAULT_MAX_SUBMISSIONS, NewAssignment, ResultsRelease,
};
pub use ats::{AtsConnection, AtsInterview, AtsStore, NewAtsConnection, NewAtsInterview};
pub use audit::{AuditEntry, AuditStore};
pub use blobs::BlobRows;
pub use erasure::{
    DueErasure, EraseReason, EraseRefusal, ErasedRows, Erasure, ErasureStore, PacketRetention,
    RETENTION_SETTING, like_literal, names_address,
};
pub use jobs::{BUILTIN_CHECK_PRIORITY, GradeResult, Job, JobStore, JobWake, Lane, QueuePlace};
pub use meter::{MeterStore, MeterUsage, ModelCall, ModelKey};
pub use packet_audits::{AuditCall, AuditCounts, NewPacketAudit, PacketAudit, PacketAuditStore};
pub use packets::{NewVersion, PacketRow, PacketStore, PacketVersion, VersionState};
pub use sessions::SessionStore;
pub use sso::{OidcLogin, OidcLoginStore};
pub use submissions::{HumanScoreRow, NewSubmission, Submission, SubmissionStore};
pub use users::{ApiToken, NewUser, Role, User, UserStore};
pub use webhooks::{AttemptEnd, WebhookDelivery, WebhookEndpoint, WebhookStore};
pub use witness::{NewWitnessRun, WitnessRunRow, WitnessStore};

/// Everything a backend provides.
pub trait Store:
    UserStore
    + PacketStore
    + AssignmentStore
    + SubmissionStore
    + JobStore
    + AuditStore
    + SessionStore
    + WitnessStore
    + MeterStore
    + PacketAuditStore
    + BlobRows
    + OidcLoginStore
    + AtsStore
    + WebhookStore
    + ErasureStore
    + Send
    + Sync
{
    /// Which backend this is, for logs and `/healthz`.
    fn backend(&self) -> &'static str;
}

pub type Db = Arc<dyn Store>;

/// Opens the database named by `url` and applies its migrations.
pub async fn open(url: &str) -> anyhow::Result<Db> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(sqlite::SqliteStore::open(url).await?))
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        Ok(Arc::new(postgres::PgStore::open(url).await?))
    } else {
        anyhow::bail!(
            "database url {url:?}: expected sqlite://<path> or postgres://[user[:password]@]host[:port]/database"
        )
    }
}

/// The error every store method returns.
pub type DbResult<T> = Result<T, sqlx::Error>;
