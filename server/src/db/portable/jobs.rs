//! `JobStore` for both backends, written once. Its SQL is the same on SQLite
//! and Postgres (`$n` placeholders, which both sqlx drivers bind) except
//! where the dialect or the concurrency differs, which each backend names:
//!
//! - `claim_lock`, what the claim's subquery adds after `LIMIT 1` to lock
//!   the row it picks (Postgres: `FOR UPDATE OF j SKIP LOCKED`; SQLite has
//!   one writer, so its subquery and update are atomic as they are);
//! - `claim_recheck`, what the claim's outer `UPDATE` adds to its `WHERE`
//!   (Postgres re-checks that the job is still claimable);
//! - `greatest`, the two-argument maximum (`MAX` on SQLite, `GREATEST` on
//!   Postgres);
//! - `own`, the methods only that backend has (Postgres: `listen_for_jobs`).

macro_rules! job_store {
    (
        $store:ty,
        claim_lock: $claim_lock:literal,
        claim_recheck: $claim_recheck:literal,
        greatest: $greatest:literal,
        own: { $($own:tt)* } $(,)?
    ) => {
        use async_trait::async_trait;

        use app::contract::JobKind;

        use crate::db::jobs::{GradeResult, Job, JobStore, Released};
        use crate::db::DbResult;
        use crate::now_ms;
        use crate::db::rows::jobs::COLS;

        /// A new job's turn among the gradings (`jobs.turn`, migration
        /// 0016): how many grading jobs the assignment of submission `$2`
        /// has so far (0 for a self-test or an audit, `$1` being the kind).
        /// Fixed at enqueue, so a claim orders by a stored column and walks
        /// `jobs_pending_order` instead of counting for every pending job.
        const TURN: &str = "CASE WHEN $1 = 'grade' THEN (
                            SELECT COUNT(*) FROM jobs o JOIN submissions os ON os.id = o.subject
                            JOIN submissions me ON me.assignment_id = os.assignment_id
                            WHERE o.kind = 'grade' AND me.id = $2) ELSE 0 END";

        #[async_trait]
        impl JobStore for $store {
            async fn enqueue_with_priority(&self, kind: JobKind, subject: &str, priority: i64) -> DbResult<i64> {
                sqlx::query_scalar(&format!("INSERT INTO jobs (kind, subject, priority, created_at, turn) VALUES ($1, $2, $3, $4, {TURN}) RETURNING id"))
                    .bind(kind.as_str())
                    .bind(subject)
                    .bind(priority)
                    .bind(now_ms())
                    .fetch_one(&self.pool)
                    .await
            }

            async fn claim_job_in(&self, owner: &str, now: i64, lease_ms: i64, lane: crate::db::jobs::Lane) -> DbResult<Option<Job>> {
                // Fair across assignments: a grading job ranks by its turn
                // (how many earlier grading jobs its assignment has), then by
                // age, so one candidate's ten submissions take turns with
                // everyone else's first (round robin) instead of queueing
                // ahead of them. Self-tests and audits have turn 0. Above both, the job's priority; and only
                // the priorities of the worker's lane (the built-in
                // library's background self-tests have a lane of their own).
                let (low, high) = lane.priorities();
                sqlx::query_as(&format!(
                    "UPDATE jobs SET state = 'running', lease_owner = $1, lease_until = $2 + $3, attempts = attempts + 1
                     WHERE id = (
                        SELECT j.id FROM jobs j
                        WHERE j.state IN ('queued', 'running')
                            AND (j.state = 'queued' OR (j.state = 'running' AND j.lease_until < $2))
                            AND j.priority >= $4 AND j.priority <= $5
                        ORDER BY j.priority DESC, j.turn, j.id
                        LIMIT 1 {})
                     {}
                     RETURNING {COLS}",
                    $claim_lock, $claim_recheck
                ))
                .bind(owner)
                .bind(now)
                .bind(lease_ms)
                .bind(low)
                .bind(high)
                .fetch_optional(&self.pool)
                .await
            }

            async fn queue_place(&self, id: i64) -> DbResult<Option<crate::db::jobs::QueuePlace>> {
                // The claim's order, over the foreground lane's pending jobs.
                let (low, _) = crate::db::jobs::Lane::Foreground.priorities();
                let row: Option<(i64, i64)> = sqlx::query_as(&format!(
                    "WITH pending AS (
                        SELECT j.id, j.state, j.priority, j.turn
                        FROM jobs j
                        WHERE j.state IN ('queued', 'running') AND j.priority >= $2
                     )
                     SELECT
                        (SELECT COUNT(*) FROM pending o WHERE o.state = 'queued' AND o.id <> me.id
                            AND (o.priority > me.priority OR (o.priority = me.priority
                                AND (o.turn < me.turn OR (o.turn = me.turn AND o.id < me.id))))),
                        (SELECT COUNT(*) FROM pending r WHERE r.state = 'running')
                     FROM pending me WHERE me.id = $1 AND me.state = 'queued'"
                ))
                .bind(id)
                .bind(low)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(|(ahead, running)| crate::db::jobs::QueuePlace { ahead, running }))
            }

            async fn raise_priority(&self, id: i64, priority: i64) -> DbResult<bool> {
                let r = sqlx::query(concat!("UPDATE jobs SET priority = ", $greatest, "(priority, $1) WHERE id = $2 AND state = 'queued'"))
                    .bind(priority)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn renew_lease(&self, id: i64, owner: &str, until: i64) -> DbResult<bool> {
                let r = sqlx::query("UPDATE jobs SET lease_until = $1 WHERE id = $2 AND lease_owner = $3 AND state = 'running'")
                    .bind(until)
                    .bind(id)
                    .bind(owner)
                    .execute(&self.pool)
                    .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn finish_job(&self, id: i64, owner: &str, ok: bool, error: Option<&str>) -> DbResult<bool> {
                let r = sqlx::query(
                    "UPDATE jobs SET state = $1, last_error = COALESCE($2, last_error), finished_at = $3, lease_owner = NULL, lease_until = NULL
                     WHERE id = $4 AND lease_owner = $5 AND state = 'running'",
                )
                .bind(if ok { "done" } else { "failed" })
                .bind(error)
                .bind(now_ms())
                .bind(id)
                .bind(owner)
                .execute(&self.pool)
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn release_job(&self, id: i64, owner: &str, error: &str) -> DbResult<Released> {
                let state: Option<String> = sqlx::query_scalar(
                    "UPDATE jobs SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                        last_error = $1, lease_owner = NULL, lease_until = NULL,
                        finished_at = CASE WHEN attempts >= max_attempts THEN $2 ELSE NULL END
                     WHERE id = $3 AND lease_owner = $4 AND state = 'running' RETURNING state",
                )
                .bind(error)
                .bind(now_ms())
                .bind(id)
                .bind(owner)
                .fetch_optional(&self.pool)
                .await?;
                Released::from_returned(state.as_deref())
            }

            async fn release_job_uncounted(&self, id: i64, owner: &str, error: &str) -> DbResult<Released> {
                let state: Option<String> = sqlx::query_scalar(
                    "UPDATE jobs SET state = 'queued', attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,
                        last_error = $1, lease_owner = NULL, lease_until = NULL, finished_at = NULL
                     WHERE id = $2 AND lease_owner = $3 AND state = 'running' RETURNING state",
                )
                .bind(error)
                .bind(id)
                .bind(owner)
                .fetch_optional(&self.pool)
                .await?;
                Released::from_returned(state.as_deref())
            }

            async fn job_by_id(&self, id: i64) -> DbResult<Option<Job>> {
                sqlx::query_as(&format!("SELECT {COLS} FROM jobs WHERE id = $1")).bind(id).fetch_optional(&self.pool).await
            }

            async fn jobs_for(&self, kind: JobKind, subject: &str) -> DbResult<Vec<Job>> {
                sqlx::query_as(&format!("SELECT {COLS} FROM jobs WHERE kind = $1 AND subject = $2 ORDER BY id"))
                    .bind(kind.as_str())
                    .bind(subject)
                    .fetch_all(&self.pool)
                    .await
            }

            async fn pending_jobs(&self) -> DbResult<Vec<Job>> {
                sqlx::query_as(&format!("SELECT {COLS} FROM jobs WHERE state IN ('queued', 'running') ORDER BY id")).fetch_all(&self.pool).await
            }

            async fn recent_jobs(&self, limit: i64) -> DbResult<Vec<Job>> {
                sqlx::query_as(&format!("SELECT {COLS} FROM jobs ORDER BY id DESC LIMIT $1")).bind(limit).fetch_all(&self.pool).await
            }

            async fn complete_grade_job(&self, job_id: i64, owner: &str, submission_id: &str, result: GradeResult<'_>) -> DbResult<bool> {
                let mut tx = self.pool.begin().await?;
                let now = now_ms();
                let done = sqlx::query(
                    "UPDATE jobs SET state = 'done', finished_at = $1, lease_owner = NULL, lease_until = NULL
                     WHERE id = $2 AND lease_owner = $3 AND state = 'running'",
                )
                .bind(now)
                .bind(job_id)
                .bind(owner)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                let assignment_state = match result {
                    GradeResult::Graded { scorecard_json, receipt_json, decision, score } => {
                        sqlx::query(
                            "UPDATE submissions SET state = 'graded', error = NULL, refusal = NULL, scorecard_json = $1, receipt_json = $2,
                                decision = $3, score = $4, graded_at = $5 WHERE id = $6",
                        )
                        .bind(scorecard_json)
                        .bind(receipt_json)
                        .bind(decision)
                        .bind(score)
                        .bind(now)
                        .bind(submission_id)
                        .execute(&mut *tx)
                        .await?;
                        "graded"
                    }
                    GradeResult::Refused { reason } => {
                        sqlx::query("UPDATE submissions SET state = 'refused', refusal = $1, graded_at = $2 WHERE id = $3")
                            .bind(reason)
                            .bind(now)
                            .bind(submission_id)
                            .execute(&mut *tx)
                            .await?;
                        "failed"
                    }
                };
                sqlx::query("UPDATE assignments SET state = $1 WHERE id = (SELECT assignment_id FROM submissions WHERE id = $2)")
                    .bind(assignment_state)
                    .bind(submission_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(true)
            }

            $($own)*
        }
    };
}

pub(crate) use job_store;
