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
    RETENTION_SETTING,
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
