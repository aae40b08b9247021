use async_trait::async_trait;

use super::SqliteStore;
use crate::db::submissions::{HumanScoreRow, NewSubmission, Submission, SubmissionStore};
use crate::db::DbResult;
use crate::now_ms;
use crate::db::rows::submissions::*;

#[async_trait]
impl SubmissionStore for SqliteStore {
    async fn create_submission(&self, s: NewSubmission<'_>) -> DbResult<Submission> {
        let mut tx = self.pool.begin().await?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO submissions (id, assignment_id, blob_sha256, size_bytes, received_at, state) VALUES (?, ?, ?, ?, ?, 'queued')",
        )
        .bind(s.id)
        .bind(s.assignment_id)
        .bind(s.blob_sha256)
        .bind(s.size_bytes)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO jobs (kind, subject, created_at) VALUES ('grade', ?, ?)").bind(s.id).bind(now).execute(&mut *tx).await?;
        sqlx::query("UPDATE assignments SET state = 'submitted' WHERE id = ?").bind(s.assignment_id).execute(&mut *tx).await?;
        let row: SubmissionDb = sqlx::query_as(&format!("{SELECT} WHERE s.id = ?")).bind(s.id).fetch_one(&mut *tx).await?;
        tx.commit().await?;
        Ok(row.into())
    }

    async fn submission_by_id(&self, id: &str) -> DbResult<Option<Submission>> {
        let row: Option<SubmissionDb> = sqlx::query_as(&format!("{SELECT} WHERE s.id = ?")).bind(id).fetch_optional(&self.pool).await?;
        Ok(row.map(Submission::from))
    }

    async fn submissions_of(&self, assignment_id: &str) -> DbResult<Vec<Submission>> {
        let rows: Vec<SubmissionDb> = sqlx::query_as(&format!("{SELECT} WHERE s.assignment_id = ? ORDER BY s.received_at DESC, s.rowid DESC"))
            .bind(assignment_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Submission::from).collect())
    }

    async fn latest_submissions_for_packet(&self, slug: &str) -> DbResult<Vec<Submission>> {
        let rows: Vec<SubmissionDb> = sqlx::query_as(&format!(
            "{SELECT} JOIN assignments a ON a.id = s.assignment_id JOIN packet_versions v ON v.id = a.packet_version_id
             JOIN packets p ON p.id = v.packet_id
             WHERE p.slug = ? AND s.rowid = (SELECT MAX(o.rowid) FROM submissions o WHERE o.assignment_id = s.assignment_id)
             ORDER BY s.received_at"
        ))
        .bind(slug)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(Submission::from).collect())
    }

    async fn set_submission_state(&self, id: &str, state: &str, error: Option<&str>) -> DbResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE submissions SET state = ?, error = ? WHERE id = ?").bind(state).bind(error).bind(id).execute(&mut *tx).await?;
        let assignment_state = match state {
            "grading" => Some("grading"),
            "failed" => Some("failed"),
            "queued" => Some("submitted"),
            _ => None,
        };
        if let Some(a) = assignment_state {
            sqlx::query("UPDATE assignments SET state = ? WHERE id = (SELECT assignment_id FROM submissions WHERE id = ?)")
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
            "UPDATE submissions SET state = 'graded', error = NULL, scorecard_json = ?, receipt_json = ?, decision = ?, score = ?, graded_at = ?
             WHERE id = ?",
        )
        .bind(scorecard_json)
        .bind(receipt_json)
        .bind(decision)
        .bind(score)
        .bind(now_ms())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE assignments SET state = 'graded' WHERE id = (SELECT assignment_id FROM submissions WHERE id = ?)")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    async fn add_human_score(&self, submission_id: &str, criterion: &str, level: i64, reason: &str, reviewer_id: i64) -> DbResult<()> {
        sqlx::query("INSERT INTO human_scores (submission_id, criterion, level, reason, reviewer_id, created_at) VALUES (?, ?, ?, ?, ?, ?)")
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
        let rows: Vec<HumanDb> = sqlx::query_as(
            "SELECT h.id, h.submission_id, h.criterion, h.level, h.reason, h.reviewer_id, u.name AS reviewer_name, h.created_at
             FROM human_scores h JOIN users u ON u.id = h.reviewer_id WHERE h.submission_id = ? ORDER BY h.id",
        )
        .bind(submission_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| HumanScoreRow {
                id: r.id,
                submission_id: r.submission_id,
                criterion: r.criterion,
                level: r.level,
                reason: r.reason,
                reviewer_id: r.reviewer_id,
                reviewer_name: r.reviewer_name,
                created_at: r.created_at,
            })
            .collect())
    }

    async fn update_scorecard(&self, id: &str, scorecard_json: &str, receipt_json: &str, decision: &str, score: Option<f64>) -> DbResult<bool> {
        let done = sqlx::query(
            "UPDATE submissions SET scorecard_json = ?, receipt_json = ?, decision = ?, score = ? WHERE id = ? AND state = 'graded'",
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
