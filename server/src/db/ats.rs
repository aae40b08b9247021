//! ATS connections (Greenhouse's Assessment Partner API) and the tests
//! they sent.

use async_trait::async_trait;
use serde::Serialize;

use super::{DbResult, ResultsRelease};

/// One ATS connection: its credential's hash and the settings of the
/// assignments it creates.
#[derive(Debug, Clone, Serialize)]
pub struct AtsConnection {
    pub id: i64,
    pub name: String,
    pub results: ResultsRelease,
    pub blind_review: bool,
    pub deadline_days: i64,
    /// The hosts (`host` or `host:port`) a result callback may go to.
    pub callback_hosts: Vec<String>,
    pub created_by: Option<i64>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

pub struct NewAtsConnection<'a> {
    pub name: &'a str,
    pub key_hash: &'a str,
    pub results: ResultsRelease,
    pub blind_review: bool,
    pub deadline_days: i64,
    pub callback_hosts: &'a [String],
    pub created_by: Option<i64>,
}

/// A test an ATS sent: `id` is the partner_interview_id it was given.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct AtsInterview {
    pub id: String,
    pub connection_id: i64,
    pub assignment_id: String,
    pub partner_test_id: String,
    pub profile_url: Option<String>,
    pub callback_url: Option<String>,
    pub callback_done_at: Option<i64>,
    pub callback_error: Option<String>,
    pub created_at: i64,
}

pub struct NewAtsInterview<'a> {
    pub id: &'a str,
    pub connection_id: i64,
    pub assignment_id: &'a str,
    pub partner_test_id: &'a str,
    pub profile_url: Option<&'a str>,
    pub callback_url: Option<&'a str>,
}

#[async_trait]
pub trait AtsStore {
    async fn create_ats_connection(&self, c: NewAtsConnection<'_>) -> DbResult<i64>;
    /// Every connection, newest first (never the key).
    async fn list_ats_connections(&self) -> DbResult<Vec<AtsConnection>>;
    /// The unrevoked connection whose key hashes to `key_hash`.
    async fn ats_connection_by_key(&self, key_hash: &str) -> DbResult<Option<AtsConnection>>;
    async fn revoke_ats_connection(&self, id: i64) -> DbResult<()>;
    async fn create_ats_interview(&self, i: NewAtsInterview<'_>) -> DbResult<()>;
    /// The interview `id` of connection `connection_id` (another
    /// connection's interviews are not found).
    async fn ats_interview(&self, id: &str, connection_id: i64) -> DbResult<Option<AtsInterview>>;
    /// Interviews with a callback not yet made, sent at or after `since`.
    async fn pending_ats_callbacks(&self, since: i64) -> DbResult<Vec<AtsInterview>>;
    /// Records a callback made (`error` None) or failed (it is tried again).
    async fn finish_ats_callback(&self, id: &str, at: i64, error: Option<&str>) -> DbResult<()>;
}
