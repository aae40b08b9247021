//! `PacketAuditStore` for both backends, written once: its SQL is the same on
//! SQLite and Postgres (`$n` placeholders, which both sqlx drivers bind).

macro_rules! packet_audit_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::DbResult;
        use crate::db::packet_audits::{AuditCall, AuditCounts, NewPacketAudit, PacketAudit, PacketAuditStore};
        use crate::now_ms;
        use crate::db::rows::packet_audits::*;

        #[async_trait]
        impl PacketAuditStore for $store {
            async fn queue_packet_audit(&self, new: NewPacketAudit<'_>) -> DbResult<(i64, i64)> {
                let mut tx = self.pool.begin().await?;
                let now = now_ms();
                let id: i64 = sqlx::query_scalar(
                    "INSERT INTO packet_audits (version_id, requested_by, mode, functions, mutants, model, max_calls, max_tokens, digest, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
                )
                .bind(new.version_id)
                .bind(new.requested_by)
                .bind(new.mode)
                .bind(new.functions)
                .bind(new.mutants)
                .bind(new.model)
                .bind(new.max_calls)
                .bind(new.max_tokens)
                .bind(new.digest)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
                // One attempt: an audit that fails does not run (and call a model) again.
                let job: i64 = sqlx::query_scalar("INSERT INTO jobs (kind, subject, max_attempts, created_at) VALUES ('audit', $1, 1, $2) RETURNING id")
                    .bind(id.to_string())
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok((id, job))
            }

            async fn packet_audit(&self, id: i64) -> DbResult<Option<PacketAudit>> {
                let row: Option<PacketAudit> = sqlx::query_as(&format!("SELECT {COLS} FROM packet_audits WHERE id = $1")).bind(id).fetch_optional(&self.pool).await?;
                Ok(row)
            }

            async fn packet_audits_of(&self, version_id: i64, limit: i64) -> DbResult<Vec<PacketAudit>> {
                let rows: Vec<PacketAudit> = sqlx::query_as(&format!("SELECT {COLS} FROM packet_audits WHERE version_id = $1 ORDER BY id DESC LIMIT $2"))
                    .bind(version_id)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                Ok(rows)
            }

            async fn start_packet_audit(&self, id: i64) -> DbResult<()> {
                sqlx::query("UPDATE packet_audits SET state = 'running', started_at = $1, error = NULL WHERE id = $2").bind(now_ms()).bind(id).execute(&self.pool).await?;
                Ok(())
            }

            async fn finish_packet_audit(&self, id: i64, report_json: &str, c: AuditCounts) -> DbResult<()> {
                sqlx::query(
                    "UPDATE packet_audits SET state = 'done', report_json = $1, killed = $2, survived = $3, crashed = $4, invalid = $5, error = NULL, finished_at = $6
                     WHERE id = $7",
                )
                .bind(report_json)
                .bind(c.killed)
                .bind(c.survived)
                .bind(c.crashed)
                .bind(c.invalid)
                .bind(now_ms())
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn fail_packet_audit(&self, id: i64, error: &str) -> DbResult<()> {
                let mut tx = self.pool.begin().await?;
                let now = now_ms();
                sqlx::query("UPDATE packet_audits SET state = 'failed', error = $1, finished_at = $2 WHERE id = $3").bind(error).bind(now).bind(id).execute(&mut *tx).await?;
                // A call still in flight never got its answer: its row stays,
                // marked interrupted (the upstream may have charged for it).
                sqlx::query("UPDATE packet_audit_calls SET outcome = 'interrupted', ended_at = $1, error = $2 WHERE audit_id = $3 AND outcome = 'in-flight'")
                    .bind(now)
                    .bind(format!("the call was in flight when the audit stopped ({error}); its answer, and what the upstream charged, are unknown"))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await
            }

            async fn clear_audit_calls(&self, audit_id: i64) -> DbResult<()> {
                sqlx::query("DELETE FROM packet_audit_calls WHERE audit_id = $1").bind(audit_id).execute(&self.pool).await?;
                Ok(())
            }

            async fn record_audit_call(&self, c: &AuditCall) -> DbResult<()> {
                // The row of call `n` of the audit, written when its request
                // leaves (in flight) and again when it ends: updated when it
                // is there, else inserted, in one transaction.
                let mut tx = self.pool.begin().await?;
                let updated = sqlx::query(
                    "UPDATE packet_audit_calls SET version_id = $2, author_id = $3, function = $5, model = $6, outcome = $7, status = $8,
                        prompt_tokens = $9, completion_tokens = $10, tokens_estimated = $11, request_bytes = $12, response_bytes = $13,
                        started_at = $14, ended_at = $15, error = $16
                     WHERE audit_id = $1 AND n = $4",
                );
                let insert = sqlx::query(
                    "INSERT INTO packet_audit_calls (audit_id, version_id, author_id, n, function, model, outcome, status, prompt_tokens, completion_tokens,
                        tokens_estimated, request_bytes, response_bytes, started_at, ended_at, error)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
                );
                let mut done = false;
                for q in [updated, insert] {
                    if done {
                        break;
                    }
                    let r = q
                        .bind(c.audit_id)
                        .bind(c.version_id)
                        .bind(c.author_id)
                        .bind(c.n)
                        .bind(&c.function)
                        .bind(&c.model)
                        .bind(&c.outcome)
                        .bind(c.status)
                        .bind(c.prompt_tokens)
                        .bind(c.completion_tokens)
                        .bind(i64::from(c.tokens_estimated))
                        .bind(c.request_bytes)
                        .bind(c.response_bytes)
                        .bind(c.started_at)
                        .bind(c.ended_at)
                        .bind(&c.error)
                        .execute(&mut *tx)
                        .await?;
                    done = r.rows_affected() > 0;
                }
                tx.commit().await
            }

            async fn audit_calls(&self, audit_id: i64) -> DbResult<Vec<AuditCall>> {
                let rows: Vec<CallDb> = sqlx::query_as(
                    "SELECT audit_id, version_id, author_id, n, function, model, outcome, status, prompt_tokens, completion_tokens, tokens_estimated,
                        request_bytes, response_bytes, started_at, ended_at, error
                     FROM packet_audit_calls WHERE audit_id = $1 ORDER BY n, id",
                )
                .bind(audit_id)
                .fetch_all(&self.pool)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|r| AuditCall {
                        audit_id: r.audit_id,
                        version_id: r.version_id,
                        author_id: r.author_id,
                        n: r.n,
                        function: r.function,
                        model: r.model,
                        outcome: r.outcome,
                        status: r.status,
                        prompt_tokens: r.prompt_tokens,
                        completion_tokens: r.completion_tokens,
                        tokens_estimated: r.tokens_estimated != 0,
                        request_bytes: r.request_bytes,
                        response_bytes: r.response_bytes,
                        started_at: r.started_at,
                        ended_at: r.ended_at,
                        error: r.error,
                    })
                    .collect())
            }
        }
    };
}

pub(crate) use packet_audit_store;
