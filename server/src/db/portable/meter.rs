//! `MeterStore` for both backends, written once: its SQL is the same on
//! SQLite and Postgres (`$n` placeholders, which both sqlx drivers bind;
//! `CAST` where Postgres must be told a parameter's type). The ledger's
//! two writes (a call admitted, a call settled) go through the backend's
//! `ledger_fetch_one` / `ledger_execute`, given a closure that builds the
//! bound statement: SQLite queues them for its one writer connection and
//! commits those that queued together in one transaction (`sqlite/ledger.rs`),
//! Postgres runs them on its pool. `meter_totals` is kept by the triggers of
//! migration 0011 on both.

macro_rules! meter_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::DbResult;
        use crate::db::meter::{MeterStore, MeterUsage, ModelCall, ModelCallOutcome, ModelKey, NewModelCall};
        use crate::db::rows::meter::*;

        #[async_trait]
        impl MeterStore for $store {
            async fn refused_call_count(&self, assignment_id: &str) -> DbResult<i64> {
                sqlx::query_scalar("SELECT COUNT(*) FROM model_calls WHERE assignment_id = $1 AND refused IS NOT NULL").bind(assignment_id).fetch_one(&self.pool).await
            }

            async fn model_calls_of(&self, assignment_id: &str) -> DbResult<Vec<ModelCall>> {
                let rows: Vec<ModelCallDb> = sqlx::query_as(&format!("SELECT {CALL_COLUMNS} FROM model_calls WHERE assignment_id = $1 ORDER BY at, id"))
                    .bind(assignment_id)
                    .fetch_all(&self.pool)
                    .await?;
                Ok(rows.into_iter().map(ModelCall::from).collect())
            }

            async fn pending_model_calls(&self) -> DbResult<Vec<ModelCall>> {
                let rows: Vec<ModelCallDb> = sqlx::query_as(&format!("SELECT {CALL_COLUMNS} FROM model_calls WHERE status = 0 ORDER BY id"))
                    .fetch_all(&self.pool)
                    .await?;
                Ok(rows.into_iter().map(ModelCall::from).collect())
            }

            async fn insert_model_call(&self, c: NewModelCall<'_>) -> DbResult<i64> {
                // One statement: the trigger `model_calls_admit` (migration 0011)
                // adds the row to `meter_totals` in it (on Postgres locking the
                // assignment's totals row until commit).
                const INSERT: &str = "INSERT INTO model_calls (assignment_id, at, model, stream, request_bytes, status, error, refused, request_sha256,
                        prompt_tokens, tokens_estimated, reserved_tokens, counted, client_retry,
                        request_body_sha256, response_body_sha256, transcript_cut, transcript_bytes, duplicate_of)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
                        (SELECT MIN(id) FROM model_calls WHERE assignment_id = $19 AND request_sha256 = $20))
                     RETURNING id";
                let own = |s: Option<&str>| s.map(str::to_owned);
                let (assignment_id, model, request_sha256) = (c.assignment_id.to_owned(), c.model.to_owned(), c.request_sha256.to_owned());
                let (error, refused, request_body, response_body, cut) =
                    (own(c.error), own(c.refused), own(c.request_body_sha256), own(c.response_body_sha256), own(c.transcript_cut));
                let (at, stream, request_bytes, status, prompt, counted, retry, transcript_bytes) =
                    (c.at, i64::from(c.stream), c.request_bytes, c.status, c.prompt_estimate, c.counted, c.client_retry, c.transcript_bytes);
                let reserved = if counted { c.reserved_tokens } else { 0 };
                let row = self
                    .ledger_fetch_one(Box::new(move || {
                        sqlx::query(INSERT)
                            .bind(assignment_id.clone())
                            .bind(at)
                            .bind(model.clone())
                            .bind(stream)
                            .bind(request_bytes)
                            .bind(status)
                            .bind(error.clone())
                            .bind(refused.clone())
                            .bind(request_sha256.clone())
                            .bind(prompt)
                            .bind(i64::from(prompt > 0))
                            .bind(reserved)
                            .bind(i64::from(counted))
                            .bind(retry)
                            .bind(request_body.clone())
                            .bind(response_body.clone())
                            .bind(cut.clone())
                            .bind(transcript_bytes)
                            .bind(assignment_id.clone())
                            .bind(request_sha256.clone())
                    }))
                    .await?;
                sqlx::Row::try_get(&row, 0)
            }

            async fn finish_model_call(&self, id: i64, o: ModelCallOutcome) -> DbResult<bool> {
                // One statement: the trigger `model_calls_settle` (migration 0011)
                // moves the totals in it, only when this call was still in flight.
                const FINISH: &str = "UPDATE model_calls SET status = $1, response_bytes = $2, prompt_tokens = $3, completion_tokens = $4, tokens_estimated = $5,
                        latency_ms = $6, error = $7, counted = counted * $8, reserved_tokens = 0,
                        response_body_sha256 = $9, transcript_bytes = COALESCE(CAST($10 AS BIGINT), transcript_bytes),
                        transcript_cut = CASE WHEN CAST($11 AS TEXT) IS NULL THEN transcript_cut WHEN transcript_cut IS NULL THEN CAST($11 AS TEXT) ELSE transcript_cut || '; ' || CAST($11 AS TEXT) END
                     WHERE id = $12 AND status = 0";
                let done = self
                    .ledger_execute(Box::new(move || {
                        sqlx::query(FINISH)
                            .bind(o.status)
                            .bind(o.response_bytes)
                            .bind(o.prompt_tokens)
                            .bind(o.completion_tokens)
                            .bind(i64::from(o.tokens_estimated))
                            .bind(o.latency_ms)
                            .bind(o.error.clone())
                            .bind(i64::from(o.counted))
                            .bind(o.response_body_sha256.clone())
                            .bind(o.transcript_bytes)
                            .bind(o.transcript_cut.clone())
                            .bind(id)
                    }))
                    .await?
                    .rows_affected();
                Ok(done == 1)
            }

            async fn meter_usage(&self, assignment_id: &str) -> DbResult<MeterUsage> {
                let row: Option<(i64, i64, i64, i64)> =
                    sqlx::query_as("SELECT calls, tokens, request_bytes, transcript_bytes FROM meter_totals WHERE assignment_id = $1")
                    .bind(assignment_id)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(row.map(|(calls, tokens, request_bytes, transcript_bytes)| MeterUsage { calls, tokens, request_bytes, transcript_bytes }).unwrap_or_default())
            }

            async fn model_key_by_hash(&self, key_hash: &str) -> DbResult<Option<ModelKey>> {
                let row: Option<ModelKeyDb> = sqlx::query_as(&format!("SELECT {KEY_COLUMNS} FROM model_keys WHERE key_hash = $1"))
                    .bind(key_hash)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(row.map(ModelKey::from))
            }

            async fn model_keys_of(&self, assignment_id: &str) -> DbResult<Vec<ModelKey>> {
                let rows: Vec<ModelKeyDb> =
                    sqlx::query_as(&format!("SELECT {KEY_COLUMNS} FROM model_keys WHERE assignment_id = $1 ORDER BY generation"))
                        .bind(assignment_id)
                        .fetch_all(&self.pool)
                        .await?;
                Ok(rows.into_iter().map(ModelKey::from).collect())
            }

            async fn create_model_key(&self, assignment_id: &str, generation: i64, key_hash: &str, at: i64) -> DbResult<()> {
                sqlx::query("INSERT INTO model_keys (assignment_id, generation, key_hash, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING")
                    .bind(assignment_id)
                    .bind(generation)
                    .bind(key_hash)
                    .bind(at)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn revoke_model_key(&self, id: i64, at: i64) -> DbResult<()> {
                sqlx::query("UPDATE model_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL").bind(at).bind(id).execute(&self.pool).await?;
                Ok(())
            }

            async fn red_witnessed_at(&self, assignment_id: &str) -> DbResult<Option<i64>> {
                let (at,): (Option<i64>,) =
                    sqlx::query_as("SELECT MIN(at) FROM witness_runs WHERE assignment_id = $1 AND kind = 'red' AND accepted = 1")
                        .bind(assignment_id)
                        .fetch_one(&self.pool)
                        .await?;
                Ok(at)
            }
        }
    };
}

pub(crate) use meter_store;
