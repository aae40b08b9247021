//! `AuditStore` for both backends, written once: its SQL is the same on
//! SQLite and Postgres (`$n` placeholders, which both sqlx drivers bind).

macro_rules! audit_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::audit::{AuditEntry, AuditStore};
        use crate::db::DbResult;
        use crate::now_ms;

        #[async_trait]
        impl AuditStore for $store {
            async fn audit(&self, actor: &str, action: &str, subject: &str, detail: &str) -> DbResult<()> {
                sqlx::query("INSERT INTO audit_log (at, actor, action, subject, detail) VALUES ($1, $2, $3, $4, $5)")
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
                let rows: Vec<AuditEntry> = match subject {
                    Some(s) => sqlx::query_as("SELECT id, at, actor, action, subject, detail FROM audit_log WHERE subject = $1 ORDER BY id DESC LIMIT $2")
                        .bind(s)
                        .bind(limit)
                        .fetch_all(&self.pool)
                        .await?,
                    None => sqlx::query_as("SELECT id, at, actor, action, subject, detail FROM audit_log ORDER BY id DESC LIMIT $1")
                        .bind(limit)
                        .fetch_all(&self.pool)
                        .await?,
                };
                Ok(rows)
            }

            async fn setting(&self, key: &str) -> DbResult<Option<String>> {
                sqlx::query_scalar("SELECT value FROM settings WHERE key = $1").bind(key).fetch_optional(&self.pool).await
            }

            async fn set_setting(&self, key: &str, value: &str) -> DbResult<()> {
                sqlx::query("INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
                    .bind(key)
                    .bind(value)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }
        }
    };
}

pub(crate) use audit_store;
