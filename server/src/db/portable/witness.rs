//! `WitnessStore` for both backends, written once: its SQL is the same on
//! SQLite and Postgres (`$n` placeholders, which both sqlx drivers bind).

macro_rules! witness_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::DbResult;
        use crate::db::witness::{NewWitnessRun, WitnessRunRow, WitnessStore};
        use crate::db::rows::witness::*;

        #[async_trait]
        impl WitnessStore for $store {
            async fn add_witness_run(&self, run: NewWitnessRun<'_>) -> DbResult<WitnessRunRow> {
                let mut tx = self.pool.begin().await?;
                // First, so the row lock orders this run after an erasure
                // that holds it (see `erase_assignment`).
                let open = sqlx::query(
                    "UPDATE assignments SET started_at = COALESCE(started_at, $1),
                        state = CASE WHEN state = 'invited' THEN 'started' ELSE state END
                     WHERE id = $2 AND erased_at IS NULL",
                )
                .bind(run.at)
                .bind(run.assignment_id)
                .execute(&mut *tx)
                .await?;
                if open.rows_affected() == 0 {
                    return Err(sqlx::Error::RowNotFound);
                }
                let row: WitnessDb = sqlx::query_as(
                    "INSERT INTO witness_runs (assignment_id, kind, at, accepted, exit_code, log, tree_sha256, env_json, refusal)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                     RETURNING id, assignment_id, kind, at, accepted, exit_code, log, tree_sha256, env_json, refusal",
                )
                .bind(run.assignment_id)
                .bind(run.kind.as_str())
                .bind(run.at)
                .bind(i64::from(run.accepted))
                .bind(run.exit_code)
                .bind(run.log)
                .bind(run.tree_sha256)
                .bind(run.env_json)
                .bind(run.refusal)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(row.into())
            }

            async fn witness_runs_of(&self, assignment_id: &str) -> DbResult<Vec<WitnessRunRow>> {
                let rows: Vec<WitnessDb> =
                    sqlx::query_as(&format!("{SELECT} WHERE assignment_id = $1 ORDER BY at, id")).bind(assignment_id).fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn first_accepted_red_at(&self, assignment_id: &str) -> DbResult<Option<i64>> {
                sqlx::query_scalar("SELECT MIN(at) FROM witness_runs WHERE assignment_id = $1 AND kind = 'red' AND accepted = 1")
                    .bind(assignment_id)
                    .fetch_one(&self.pool)
                    .await
            }

            async fn set_witnessed(&self, submission_id: &str, witnessed_json: &str) -> DbResult<()> {
                sqlx::query("UPDATE submissions SET witnessed_json = $1 WHERE id = $2").bind(witnessed_json).bind(submission_id).execute(&self.pool).await?;
                Ok(())
            }

            async fn witnessed_of(&self, submission_id: &str) -> DbResult<Option<String>> {
                let v: Option<Option<String>> =
                    sqlx::query_scalar("SELECT witnessed_json FROM submissions WHERE id = $1").bind(submission_id).fetch_optional(&self.pool).await?;
                Ok(v.flatten())
            }
        }
    };
}

pub(crate) use witness_store;
