//! `AssignmentStore` for both backends, written once: its SQL is the same on
//! SQLite and Postgres (`$n` placeholders, which both sqlx drivers bind).

macro_rules! assignment_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::assignments::{Assignment, AssignmentStore, NewAssignment, ResultsRelease};
        use crate::db::DbResult;
        use crate::now_ms;
        use crate::db::rows::assignments::*;

        #[async_trait]
        impl AssignmentStore for $store {
            async fn create_assignment(&self, a: NewAssignment<'_>) -> DbResult<Assignment> {
                sqlx::query(
                    "INSERT INTO assignments (id, packet_version_id, candidate_name, email, deadline, time_box_secs, seed, token_hash, created_by, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                )
                .bind(a.id)
                .bind(a.packet_version_id)
                .bind(a.candidate_name)
                .bind(a.email)
                .bind(a.deadline)
                .bind(a.time_box_secs)
                .bind(a.seed)
                .bind(a.token_hash)
                .bind(a.created_by)
                .bind(now_ms())
                .execute(&self.pool)
                .await?;
                let row: AssignmentDb = sqlx::query_as(&format!("{SELECT} WHERE a.id = $1")).bind(a.id).fetch_one(&self.pool).await?;
                Ok(row.into())
            }

            async fn assignment_by_id(&self, id: &str) -> DbResult<Option<Assignment>> {
                let row: Option<AssignmentDb> = sqlx::query_as(&format!("{SELECT} WHERE a.id = $1")).bind(id).fetch_optional(&self.pool).await?;
                Ok(row.map(Assignment::from))
            }

            async fn assignment_by_token_hash(&self, token_hash: &str) -> DbResult<Option<Assignment>> {
                let row: Option<AssignmentDb> =
                    sqlx::query_as(&format!("{SELECT} WHERE a.token_hash = $1")).bind(token_hash).fetch_optional(&self.pool).await?;
                Ok(row.map(Assignment::from))
            }

            async fn list_assignments(&self, slug: Option<&str>) -> DbResult<Vec<Assignment>> {
                let rows: Vec<AssignmentDb> = match slug {
                    Some(slug) => {
                        sqlx::query_as(&format!("{SELECT} WHERE p.slug = $1 ORDER BY a.created_at DESC")).bind(slug).fetch_all(&self.pool).await?
                    }
                    None => sqlx::query_as(&format!("{SELECT} ORDER BY a.created_at DESC")).fetch_all(&self.pool).await?,
                };
                Ok(rows.into_iter().map(Assignment::from).collect())
            }

            async fn start_assignment(&self, id: &str, at: i64) -> DbResult<()> {
                sqlx::query(
                    "UPDATE assignments SET started_at = COALESCE(started_at, $1),
                        state = CASE WHEN state = 'invited' THEN 'started' ELSE state END WHERE id = $2 AND erased_at IS NULL",
                )
                .bind(at)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn set_assignment_state(&self, id: &str, state: &str) -> DbResult<()> {
                sqlx::query("UPDATE assignments SET state = $1 WHERE id = $2").bind(state).bind(id).execute(&self.pool).await?;
                Ok(())
            }

            async fn set_assignment_policy(&self, id: &str, results: ResultsRelease, max_submissions: i64) -> DbResult<()> {
                sqlx::query("UPDATE assignments SET results = $1, max_submissions = $2 WHERE id = $3")
                    .bind(results.as_str())
                    .bind(max_submissions)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn set_blind_review(&self, id: &str, blind: bool) -> DbResult<()> {
                sqlx::query("UPDATE assignments SET blind_review = $1 WHERE id = $2").bind(blind).bind(id).execute(&self.pool).await?;
                Ok(())
            }

            async fn reissue_token(&self, id: &str, token_hash: &str) -> DbResult<()> {
                sqlx::query("UPDATE assignments SET token_hash = $1 WHERE id = $2").bind(token_hash).bind(id).execute(&self.pool).await?;
                Ok(())
            }
        }
    };
}

pub(crate) use assignment_store;
