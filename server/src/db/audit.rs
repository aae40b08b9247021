//! The audit log and settings.

use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub subject: String,
    pub detail: String,
}

#[async_trait]
pub trait AuditStore {
    async fn audit(&self, actor: &str, action: &str, subject: &str, detail: &str) -> DbResult<()>;
    /// Newest first; only entries about `subject` when given.
    async fn audit_entries(&self, subject: Option<&str>, limit: i64) -> DbResult<Vec<AuditEntry>>;
    async fn setting(&self, key: &str) -> DbResult<Option<String>>;
    async fn set_setting(&self, key: &str, value: &str) -> DbResult<()>;
}
