//! `ErasureStore` for both backends, written once.

macro_rules! erasure_store {
    ($store:ty, $db:ty, compact: $compact:expr) => {
        use async_trait::async_trait;

        use crate::db::erasure::{
            DueErasure, EraseReason, EraseRefusal, ErasedRows, Erasure, ErasureStore, PacketRetention,
        };
        use crate::db::DbResult;

        const ERASURE_SELECT: &str = "SELECT e.id, e.assignment_id, p.slug, v.version, e.actor, e.reason, e.at,
                e.submissions, e.witness_runs, e.model_calls, e.rows_removed, e.blobs_removed, e.bytes_removed,
                e.final_score, e.final_decision
             FROM erasures e JOIN packet_versions v ON v.id = e.packet_version_id JOIN packets p ON p.id = v.packet_id";

        /// The rows of one assignment, in the order they are deleted
        /// (children first); `$1` is the assignment id.
        const DELETES: [&str; 9] = [
            "DELETE FROM human_scores WHERE submission_id IN (SELECT id FROM submissions WHERE assignment_id = $1)",
            "DELETE FROM jobs WHERE kind = 'grade' AND subject IN (SELECT id FROM submissions WHERE assignment_id = $1)",
            "DELETE FROM webhook_deliveries WHERE payload LIKE '%\"assignment_id\":\"' || $1 || '\"%'",
            "DELETE FROM submissions WHERE assignment_id = $1",
            "DELETE FROM witness_runs WHERE assignment_id = $1",
            "DELETE FROM model_calls WHERE assignment_id = $1",
            "DELETE FROM meter_totals WHERE assignment_id = $1",
            "DELETE FROM model_keys WHERE assignment_id = $1",
            "UPDATE ats_interviews SET profile_url = NULL, callback_error = NULL WHERE assignment_id = $1",
        ];

        /// The grading jobs of an assignment's submissions still queued or
        /// running; `$1` is the assignment id.
        const GRADING: &str = "SELECT COUNT(*) FROM jobs j JOIN submissions s ON s.id = j.subject
             WHERE j.kind = 'grade' AND s.assignment_id = $1 AND j.state IN ('queued', 'running')";

        /// Deletes blob `sha`'s database rows unless something refers to it;
        /// `Some(size)` (the size when the database held it) when nothing did.
        async fn forget_if_unused(
            tx: &mut sqlx::Transaction<'_, $db>,
            sha: &str,
        ) -> DbResult<Option<Option<i64>>>
        {
            let used: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM submissions WHERE blob_sha256 = $1)
                     OR EXISTS (SELECT 1 FROM witness_runs WHERE tree_sha256 = $1)
                     OR EXISTS (SELECT 1 FROM model_calls WHERE request_body_sha256 = $1 OR response_body_sha256 = $1)
                     OR EXISTS (SELECT 1 FROM packet_archives WHERE blob_sha256 = $1)",
            )
            .bind(sha)
            .fetch_one(&mut **tx)
            .await?;
            if used {
                return Ok(None);
            }
            let size: Option<i64> = sqlx::query_scalar("DELETE FROM blobs WHERE sha256 = $1 RETURNING size")
                .bind(sha)
                .fetch_optional(&mut **tx)
                .await?;
            sqlx::query("DELETE FROM blob_chunks WHERE sha256 = $1").bind(sha).execute(&mut **tx).await?;
            Ok(Some(size))
        }

        #[async_trait]
        impl ErasureStore for $store {
            async fn grading_of(&self, assignment_id: &str) -> DbResult<bool> {
                let n: i64 = sqlx::query_scalar(GRADING).bind(assignment_id).fetch_one(&self.pool).await?;
                Ok(n > 0)
            }

            async fn restore_model_keys(&self, assignment_id: &str, revoked_at: i64) -> DbResult<u64> {
                let r = sqlx::query(
                    "UPDATE model_keys SET revoked_at = NULL WHERE assignment_id = $1 AND revoked_at = $2
                        AND EXISTS (SELECT 1 FROM assignments WHERE id = $1 AND erased_at IS NULL)",
                )
                .bind(assignment_id)
                .bind(revoked_at)
                .execute(&self.pool)
                .await?;
                Ok(r.rows_affected())
            }

            async fn forget_unused_blob(&self, sha256: &str) -> DbResult<Option<Option<i64>>> {
                let mut tx = self.pool.begin().await?;
                let gone = forget_if_unused(&mut tx, sha256).await?;
                tx.commit().await?;
                Ok(gone)
            }

            async fn erase_assignment(
                &self,
                id: &str,
                actor: &str,
                reason: EraseReason,
                now: i64,
            ) -> DbResult<Result<ErasedRows, EraseRefusal>> {
                let mut tx = self.pool.begin().await?;
                // First, so an upload racing the erasure waits for it and
                // then finds the assignment erased (`create_submission`).
                let marked = sqlx::query("UPDATE assignments SET erased_at = $1 WHERE id = $2 AND erased_at IS NULL")
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                if marked.rows_affected() == 0 {
                    let at: Option<Option<i64>> = sqlx::query_scalar("SELECT erased_at FROM assignments WHERE id = $1")
                        .bind(id)
                        .fetch_optional(&mut *tx)
                        .await?;
                    return Ok(Err(match at {
                        Some(Some(at)) => EraseRefusal::AlreadyErased { at },
                        _ => EraseRefusal::NotFound,
                    }));
                }
                let grading: i64 = sqlx::query_scalar(GRADING).bind(id).fetch_one(&mut *tx).await?;
                if grading > 0 {
                    tx.rollback().await?;
                    return Ok(Err(EraseRefusal::Grading));
                }
                let (link_hash, version_id, email): (String, i64, String) =
                    sqlx::query_as("SELECT token_hash, packet_version_id, email FROM assignments WHERE id = $1")
                        .bind(id)
                        .fetch_one(&mut *tx)
                        .await?;
                let last: Option<(Option<f64>, Option<String>)> = sqlx::query_as(
                    "SELECT score, decision FROM submissions WHERE assignment_id = $1 AND state = 'graded'
                     ORDER BY graded_at DESC LIMIT 1",
                )
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                let (final_score, final_decision) = last.unwrap_or((None, None));
                let blobs: Vec<String> = sqlx::query_scalar(
                    "SELECT blob_sha256 FROM submissions WHERE assignment_id = $1
                     UNION SELECT request_body_sha256 FROM model_calls WHERE assignment_id = $1 AND request_body_sha256 IS NOT NULL
                     UNION SELECT response_body_sha256 FROM model_calls WHERE assignment_id = $1 AND response_body_sha256 IS NOT NULL",
                )
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
                let count = |table: &'static str| {
                    format!("SELECT COUNT(*) FROM {table} WHERE assignment_id = $1")
                };
                let submissions: i64 = sqlx::query_scalar(&count("submissions")).bind(id).fetch_one(&mut *tx).await?;
                let witness_runs: i64 = sqlx::query_scalar(&count("witness_runs")).bind(id).fetch_one(&mut *tx).await?;
                let model_calls: i64 = sqlx::query_scalar(&count("model_calls")).bind(id).fetch_one(&mut *tx).await?;
                // The audit entries about the assignment and its
                // submissions keep who did what and when, not the detail
                // (which names the candidate: the invite, the email sent).
                let redacted = sqlx::query(
                    "UPDATE audit_log SET detail = '[erased]'
                     WHERE detail <> '[erased]' AND (subject = 'assignment:' || $1
                        OR subject IN (SELECT 'submission:' || id FROM submissions WHERE assignment_id = $1))",
                )
                .bind(id)
                .execute(&mut *tx)
                .await?;
                let mut rows = redacted.rows_affected() as i64;
                // And every other entry naming their email as a whole
                // address (not inside another one: `names_address`); `LIKE`
                // only narrows the rows read.
                if !email.trim().is_empty() {
                    let naming: Vec<(i64, String)> = sqlx::query_as(
                        "SELECT id, detail FROM audit_log
                         WHERE detail <> '[erased]' AND lower(detail) LIKE '%' || lower($1) || '%' ESCAPE '\\'",
                    )
                    .bind(crate::erasure::like_literal(email.trim()))
                    .fetch_all(&mut *tx)
                    .await?;
                    for (entry, detail) in naming {
                        if crate::erasure::names_address(&detail, &email) {
                            sqlx::query("UPDATE audit_log SET detail = '[erased]' WHERE id = $1")
                                .bind(entry)
                                .execute(&mut *tx)
                                .await?;
                            rows += 1;
                        }
                    }
                }
                for sql in DELETES {
                    rows += sqlx::query(sql).bind(id).execute(&mut *tx).await?.rows_affected() as i64;
                }
                // The tombstone: no name, no email, a link hash no token
                // has (the old one is kept in `erasures`, to say "erased").
                sqlx::query(
                    "UPDATE assignments SET candidate_name = 'Erased candidate', email = '', token_hash = 'erased:' || id
                     WHERE id = $1",
                )
                .bind(id)
                .execute(&mut *tx)
                .await?;
                // The blobs nothing refers to any more.
                let mut gone = Vec::new();
                for sha in blobs {
                    if let Some(size) = forget_if_unused(&mut tx, &sha).await? {
                        gone.push((sha, size));
                    }
                }
                sqlx::query(
                    "INSERT INTO erasures (assignment_id, packet_version_id, actor, reason, at, link_hash, submissions,
                        witness_runs, model_calls, rows_removed, blobs_removed, bytes_removed, final_score, final_decision)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0, $12, $13)",
                )
                .bind(id)
                .bind(version_id)
                .bind(actor)
                .bind(reason.as_str())
                .bind(now)
                .bind(&link_hash)
                .bind(submissions)
                .bind(witness_runs)
                .bind(model_calls)
                .bind(rows)
                .bind(gone.len() as i64)
                .bind(final_score)
                .bind(final_decision)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(Ok(ErasedRows { submissions, witness_runs, model_calls, rows, blobs: gone }))
            }

            async fn set_erasure_bytes(&self, assignment_id: &str, blobs: i64, bytes: i64) -> DbResult<()> {
                sqlx::query("UPDATE erasures SET blobs_removed = $1, bytes_removed = $2 WHERE assignment_id = $3")
                    .bind(blobs)
                    .bind(bytes)
                    .bind(assignment_id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn erasures(&self, slug: Option<&str>, limit: i64) -> DbResult<Vec<Erasure>> {
                sqlx::query_as(&format!(
                    "{ERASURE_SELECT} WHERE ($1 IS NULL OR p.slug = $1) ORDER BY e.at DESC, e.id DESC LIMIT $2"
                ))
                .bind(slug)
                .bind(limit)
                .fetch_all(&self.pool)
                .await
            }

            async fn erasure_by_link(&self, link_hash: &str) -> DbResult<Option<Erasure>> {
                sqlx::query_as(&format!("{ERASURE_SELECT} WHERE e.link_hash = $1"))
                    .bind(link_hash)
                    .fetch_optional(&self.pool)
                    .await
            }

            async fn erasure_of(&self, assignment_id: &str) -> DbResult<Option<Erasure>> {
                sqlx::query_as(&format!("{ERASURE_SELECT} WHERE e.assignment_id = $1"))
                    .bind(assignment_id)
                    .fetch_optional(&self.pool)
                    .await
            }

            async fn due_erasures(&self, global_days: Option<i64>, until: i64, limit: i64) -> DbResult<Vec<DueErasure>> {
                sqlx::query_as(
                    "SELECT assignment_id, slug, deadline, days, due_at FROM (
                        SELECT a.id AS assignment_id, p.slug, a.deadline, COALESCE(p.retention_days, $1) AS days,
                               a.deadline + COALESCE(p.retention_days, $1) * 86400000 AS due_at
                        FROM assignments a JOIN packet_versions v ON v.id = a.packet_version_id JOIN packets p ON p.id = v.packet_id
                        WHERE a.erased_at IS NULL AND COALESCE(p.retention_days, $1) IS NOT NULL
                     ) d WHERE due_at <= $2 ORDER BY due_at, assignment_id LIMIT $3",
                )
                .bind(global_days)
                .bind(until)
                .bind(limit)
                .fetch_all(&self.pool)
                .await
            }

            async fn packet_retentions(&self) -> DbResult<Vec<PacketRetention>> {
                sqlx::query_as("SELECT slug, title, retention_days FROM packets ORDER BY slug").fetch_all(&self.pool).await
            }

            async fn compact_after_erasure(&self) -> DbResult<()> {
                let sql: &str = $compact;
                if !sql.is_empty() {
                    sqlx::query(sql).execute(&self.pool).await?;
                }
                Ok(())
            }

            async fn set_packet_retention(&self, slug: &str, days: Option<i64>) -> DbResult<bool> {
                let r = sqlx::query("UPDATE packets SET retention_days = $1 WHERE slug = $2")
                    .bind(days)
                    .bind(slug)
                    .execute(&self.pool)
                    .await?;
                Ok(r.rows_affected() == 1)
            }
        }
    };
}

pub(crate) use erasure_store;
