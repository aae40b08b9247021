//! `AtsStore` for both backends, written once.

macro_rules! ats_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::ats::{AtsConnection, AtsInterview, AtsStore, NewAtsConnection, NewAtsInterview};
        use crate::db::rows::ats::*;
        use crate::db::DbResult;
        use crate::now_ms;

        #[async_trait]
        impl AtsStore for $store {
            async fn create_ats_connection(&self, c: NewAtsConnection<'_>) -> DbResult<i64> {
                sqlx::query_scalar(
                    "INSERT INTO ats_connections (name, key_hash, results, blind_review, deadline_days, callback_hosts, created_by, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
                )
                .bind(c.name)
                .bind(c.key_hash)
                .bind(c.results.as_str())
                .bind(c.blind_review)
                .bind(c.deadline_days)
                .bind(c.callback_hosts.join(" "))
                .bind(c.created_by)
                .bind(now_ms())
                .fetch_one(&self.pool)
                .await
            }

            async fn list_ats_connections(&self) -> DbResult<Vec<AtsConnection>> {
                let rows: Vec<AtsConnectionRow> =
                    sqlx::query_as(&format!("SELECT {ATS_CONNECTION_COLS} FROM ats_connections ORDER BY id DESC")).fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(AtsConnection::from).collect())
            }

            async fn ats_connection_by_key(&self, key_hash: &str) -> DbResult<Option<AtsConnection>> {
                let row: Option<AtsConnectionRow> = sqlx::query_as(&format!(
                    "SELECT {ATS_CONNECTION_COLS} FROM ats_connections WHERE key_hash = $1 AND revoked_at IS NULL"
                ))
                .bind(key_hash)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(AtsConnection::from))
            }

            async fn revoke_ats_connection(&self, id: i64) -> DbResult<()> {
                sqlx::query("UPDATE ats_connections SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
                    .bind(now_ms())
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn create_ats_interview(&self, i: NewAtsInterview<'_>) -> DbResult<()> {
                sqlx::query(
                    "INSERT INTO ats_interviews (id, connection_id, assignment_id, partner_test_id, profile_url, callback_url, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(i.id)
                .bind(i.connection_id)
                .bind(i.assignment_id)
                .bind(i.partner_test_id)
                .bind(i.profile_url)
                .bind(i.callback_url)
                .bind(now_ms())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn ats_interview(&self, id: &str, connection_id: i64) -> DbResult<Option<AtsInterview>> {
                sqlx::query_as(&format!("SELECT {ATS_INTERVIEW_COLS} FROM ats_interviews WHERE id = $1 AND connection_id = $2"))
                    .bind(id)
                    .bind(connection_id)
                    .fetch_optional(&self.pool)
                    .await
            }

            async fn pending_ats_callbacks(&self, since: i64) -> DbResult<Vec<AtsInterview>> {
                sqlx::query_as(&format!(
                    "SELECT {ATS_INTERVIEW_COLS} FROM ats_interviews
                     WHERE callback_url IS NOT NULL AND callback_done_at IS NULL AND created_at >= $1 ORDER BY created_at"
                ))
                .bind(since)
                .fetch_all(&self.pool)
                .await
            }

            async fn finish_ats_callback(&self, id: &str, at: i64, error: Option<&str>) -> DbResult<()> {
                let done = error.is_none().then_some(at);
                sqlx::query("UPDATE ats_interviews SET callback_done_at = $1, callback_error = $2 WHERE id = $3")
                    .bind(done)
                    .bind(error)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }
        }
    };
}

pub(crate) use ats_store;
