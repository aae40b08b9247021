//! Browser sessions, stored for `tower-sessions` through
//! [`crate::web::session::DbSessionStore`].

use async_trait::async_trait;

use super::DbResult;

#[async_trait]
pub trait SessionStore {
    /// The record's JSON, if the session exists and has not expired at `now`.
    async fn load_session(&self, id: &str, now: i64) -> DbResult<Option<String>>;
    async fn save_session(&self, id: &str, data: &str, expires_at: i64) -> DbResult<()>;
    async fn delete_session(&self, id: &str) -> DbResult<()>;
    async fn delete_expired_sessions(&self, now: i64) -> DbResult<u64>;
}
