//! `SubmissionStore` for both backends, written once: its SQL is the same on
//! SQLite and Postgres (`$n` placeholders, which both sqlx drivers bind)
//! but for the column that orders submissions by insertion (SQLite's
//! `rowid`, Postgres' `seq`), which each backend names.

macro_rules! submission_store {
    ($store:ty, $seq:literal) => {
        use async_trait::async_trait;

        use app::contract::SubmissionState;

        use crate::db::submissions::{HumanScoreRow, NewSubmission, Submission, SubmissionStore};
        use crate::db::DbResult;
        use crate::now_ms;
        use crate::db::rows::submissions::*;

        /// The column that orders submissions by insertion.
                const SEQ: &str = $seq;

        #[async_trait]
        impl SubmissionStore for $store {
            async fn create_submission(&self, s: NewSubmission<'_>) -> DbResult<Submission> {
                let mut tx = self.pool.begin().await?;
                let now = now_ms();
                sqlx::query(
                    "INSERT INTO submissions (id, assignment_id, blob_sha256, size_bytes, received_at, state) VALUES ($1, $2, $3, $4, $5, 'queued')",
                )
                .bind(s.id)
                .bind(s.assignment_id)
                .bind(s.blob_sha256)
                .bind(s.size_bytes)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                // The grading's turn (see `jobs.turn`): the grading jobs its
                // assignment had before it.
                sqlx::query(
                    "INSERT INTO jobs (kind, subject, created_at, turn) VALUES ('grade', $1, $2, (
                        SELECT COUNT(*) FROM jobs o JOIN submissions os ON os.id = o.subject
                        WHERE o.kind = 'grade' AND os.assignment_id = $3))",
                )
                .bind(s.id)
                .bind(now)
                .bind(s.assignment_id)
                .execute(&mut *tx)
                .await?;
                // An assignment erased meanwhile takes nothing (the
                // erasure holds the row until it commits).
                let open = sqlx::query("UPDATE assignments SET state = 'submitted' WHERE id = $1 AND erased_at IS NULL")
                    .bind(s.assignment_id)
                    .execute(&mut *tx)
                    .await?;
                if open.rows_affected() == 0 {
                    return Err(sqlx::Error::RowNotFound);
                }
                let row: Submission = sqlx::query_as(&format!("{SELECT} WHERE s.id = $1")).bind(s.id).fetch_one(&mut *tx).await?;
                tx.commit().await?;
                Ok(row)
            }

            async fn submission_by_id(&self, id: &str) -> DbResult<Option<Submission>> {
                let row: Option<Submission> = sqlx::query_as(&format!("{SELECT} WHERE s.id = $1")).bind(id).fetch_optional(&self.pool).await?;
                Ok(row)
            }

            async fn submissions_of(&self, assignment_id: &str) -> DbResult<Vec<Submission>> {
                let rows: Vec<Submission> = sqlx::query_as(&format!("{SELECT} WHERE s.assignment_id = $1 ORDER BY s.received_at DESC, s.{SEQ} DESC"))
                    .bind(assignment_id)
                    .fetch_all(&self.pool)
                    .await?;
                Ok(rows)
            }

            async fn latest_submissions_for_packet(&self, slug: &str) -> DbResult<Vec<Submission>> {
                let rows: Vec<Submission> = sqlx::query_as(&format!(
                    "{SELECT} JOIN assignments a ON a.id = s.assignment_id JOIN packet_versions v ON v.id = a.packet_version_id
                     JOIN packets p ON p.id = v.packet_id
                     WHERE p.slug = $1 AND s.{SEQ} = (SELECT MAX(o.{SEQ}) FROM submissions o WHERE o.assignment_id = s.assignment_id)
                     ORDER BY s.received_at"
                ))
                .bind(slug)
                .fetch_all(&self.pool)
                .await?;
                Ok(rows)
            }

            async fn set_submission_state(&self, id: &str, state: SubmissionState, error: Option<&str>) -> DbResult<()> {
                let mut tx = self.pool.begin().await?;
                sqlx::query("UPDATE submissions SET state = $1, error = $2 WHERE id = $3").bind(state.as_str()).bind(error).bind(id).execute(&mut *tx).await?;
                let assignment_state = match state {
                    SubmissionState::Grading => Some("grading"),
                    SubmissionState::Failed => Some("failed"),
                    SubmissionState::Queued => Some("submitted"),
                    SubmissionState::Graded | SubmissionState::Refused => None,
                };
                if let Some(a) = assignment_state {
                    sqlx::query("UPDATE assignments SET state = $1 WHERE id = (SELECT assignment_id FROM submissions WHERE id = $2)")
                        .bind(a)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await
            }

            async fn set_graded(&self, id: &str, scorecard_json: &str, receipt_json: &str, decision: &str, score: f64) -> DbResult<()> {
                let mut tx = self.pool.begin().await?;
                sqlx::query(
                    "UPDATE submissions SET state = 'graded', error = NULL, scorecard_json = $1, receipt_json = $2, decision = $3, score = $4, graded_at = $5
                     WHERE id = $6",
                )
                .bind(scorecard_json)
                .bind(receipt_json)
                .bind(decision)
                .bind(score)
                .bind(now_ms())
                .bind(id)
                .execute(&mut *tx)
                .await?;
                sqlx::query("UPDATE assignments SET state = 'graded' WHERE id = (SELECT assignment_id FROM submissions WHERE id = $1)")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await
            }

            async fn add_human_score(&self, submission_id: &str, criterion: &str, level: i64, reason: &str, reviewer_id: i64) -> DbResult<()> {
                sqlx::query("INSERT INTO human_scores (submission_id, criterion, level, reason, reviewer_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
                    .bind(submission_id)
                    .bind(criterion)
                    .bind(level)
                    .bind(reason)
                    .bind(reviewer_id)
                    .bind(now_ms())
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn human_scores(&self, submission_id: &str) -> DbResult<Vec<HumanScoreRow>> {
                let rows: Vec<HumanScoreRow> = sqlx::query_as(
                    "SELECT h.id, h.submission_id, h.criterion, h.level, h.reason, h.reviewer_id, u.name AS reviewer_name, h.created_at
                     FROM human_scores h JOIN users u ON u.id = h.reviewer_id WHERE h.submission_id = $1 ORDER BY h.id",
                )
                .bind(submission_id)
                .fetch_all(&self.pool)
                .await?;
                Ok(rows)
            }

            async fn update_scorecard(&self, id: &str, scorecard_json: &str, receipt_json: &str, decision: &str, score: Option<f64>) -> DbResult<bool> {
                let done = sqlx::query(
                    "UPDATE submissions SET scorecard_json = $1, receipt_json = $2, decision = $3, score = $4 WHERE id = $5 AND state = 'graded'",
                )
                .bind(scorecard_json)
                .bind(receipt_json)
                .bind(decision)
                .bind(score)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }
        }
    };
}

pub(crate) use submission_store;
