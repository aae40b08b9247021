//! `SessionStore` for both backends, written once: its SQL is the same on
//! SQLite and Postgres (`$n` placeholders, which both sqlx drivers bind).

macro_rules! session_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::sessions::SessionStore;
        use crate::db::DbResult;

        #[async_trait]
        impl SessionStore for $store {
            async fn load_session(&self, id: &str, now: i64) -> DbResult<Option<String>> {
                sqlx::query_scalar("SELECT data FROM sessions WHERE id = $1 AND expires_at > $2").bind(id).bind(now).fetch_optional(&self.pool).await
            }

            async fn save_session(&self, id: &str, data: &str, expires_at: i64) -> DbResult<()> {
                sqlx::query(
                    "INSERT INTO sessions (id, data, expires_at) VALUES ($1, $2, $3)
                     ON CONFLICT (id) DO UPDATE SET data = excluded.data, expires_at = excluded.expires_at",
                )
                .bind(id)
                .bind(data)
                .bind(expires_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn delete_session(&self, id: &str) -> DbResult<()> {
                sqlx::query("DELETE FROM sessions WHERE id = $1").bind(id).execute(&self.pool).await?;
                Ok(())
            }

            async fn delete_expired_sessions(&self, now: i64) -> DbResult<u64> {
                Ok(sqlx::query("DELETE FROM sessions WHERE expires_at <= $1").bind(now).execute(&self.pool).await?.rows_affected())
            }
        }
    };
}

pub(crate) use session_store;
