use async_trait::async_trait;

use super::SqliteStore;
use crate::db::audit::{AuditEntry, AuditStore};
use crate::db::DbResult;
use crate::now_ms;
use crate::db::rows::audit::*;

#[async_trait]
impl AuditStore for SqliteStore {
    async fn audit(&self, actor: &str, action: &str, subject: &str, detail: &str) -> DbResult<()> {
        sqlx::query("INSERT INTO audit_log (at, actor, action, subject, detail) VALUES (?, ?, ?, ?, ?)")
            .bind(now_ms())
            .bind(actor)
            .bind(action)
            .bind(subject)
            .bind(detail)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn audit_entries(&self, subject: Option<&str>, limit: i64) -> DbResult<Vec<AuditEntry>> {
        let rows: Vec<AuditDb> = match subject {
            Some(s) => sqlx::query_as("SELECT id, at, actor, action, subject, detail FROM audit_log WHERE subject = ? ORDER BY id DESC LIMIT ?")
                .bind(s)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?,
            None => sqlx::query_as("SELECT id, at, actor, action, subject, detail FROM audit_log ORDER BY id DESC LIMIT ?")
                .bind(limit)
                .fetch_all(&self.pool)
                .await?,
        };
        Ok(rows
            .into_iter()
            .map(|r| AuditEntry { id: r.id, at: r.at, actor: r.actor, action: r.action, subject: r.subject, detail: r.detail })
            .collect())
    }

    async fn setting(&self, key: &str) -> DbResult<Option<String>> {
        sqlx::query_scalar("SELECT value FROM settings WHERE key = ?").bind(key).fetch_optional(&self.pool).await
    }

    async fn set_setting(&self, key: &str, value: &str) -> DbResult<()> {
        sqlx::query("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
            .bind(key)
            .bind(value)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
