use async_trait::async_trait;
use sqlx::FromRow;

use super::SqliteStore;
use crate::db::DbResult;
use crate::db::meter::{MeterStore, MeterUsage, ModelCall, ModelCallOutcome, ModelKey, NewModelCall};

#[derive(FromRow)]
struct ModelCallDb {
    id: i64,
    assignment_id: String,
    at: i64,
    model: String,
    stream: i64,
    request_bytes: i64,
    response_bytes: i64,
    prompt_tokens: i64,
    completion_tokens: i64,
    tokens_estimated: i64,
    latency_ms: i64,
    status: i64,
    error: Option<String>,
    refused: Option<String>,
    request_sha256: String,
    duplicate_of: Option<i64>,
}

impl From<ModelCallDb> for ModelCall {
    fn from(r: ModelCallDb) -> ModelCall {
        ModelCall {
            id: r.id,
            assignment_id: r.assignment_id,
            at: r.at,
            model: r.model,
            stream: r.stream != 0,
            request_bytes: r.request_bytes,
            response_bytes: r.response_bytes,
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.completion_tokens,
            tokens_estimated: r.tokens_estimated != 0,
            latency_ms: r.latency_ms,
            status: r.status,
            error: r.error,
            refused: r.refused,
            request_sha256: r.request_sha256,
            duplicate_of: r.duplicate_of,
        }
    }
}

#[derive(FromRow)]
struct ModelKeyDb {
    id: i64,
    assignment_id: String,
    generation: i64,
    key_hash: String,
    created_at: i64,
    revoked_at: Option<i64>,
}

impl From<ModelKeyDb> for ModelKey {
    fn from(r: ModelKeyDb) -> ModelKey {
        ModelKey {
            id: r.id,
            assignment_id: r.assignment_id,
            generation: r.generation,
            key_hash: r.key_hash,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        }
    }
}

const KEY_COLUMNS: &str = "id, assignment_id, generation, key_hash, created_at, revoked_at";

#[async_trait]
impl MeterStore for SqliteStore {
    async fn refused_call_count(&self, assignment_id: &str) -> DbResult<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM model_calls WHERE assignment_id = ? AND refused IS NOT NULL").bind(assignment_id).fetch_one(&self.pool).await
    }

    async fn model_calls_of(&self, assignment_id: &str) -> DbResult<Vec<ModelCall>> {
        let rows: Vec<ModelCallDb> = sqlx::query_as(
            "SELECT id, assignment_id, at, model, stream, request_bytes, response_bytes, prompt_tokens, completion_tokens,
                tokens_estimated, latency_ms, status, error, refused, request_sha256, duplicate_of
             FROM model_calls WHERE assignment_id = ? ORDER BY at, id",
        )
        .bind(assignment_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(ModelCall::from).collect())
    }

    async fn insert_model_call(&self, c: NewModelCall<'_>) -> DbResult<i64> {
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO model_calls (assignment_id, at, model, stream, request_bytes, status, error, refused, request_sha256, duplicate_of)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?,
                (SELECT MIN(id) FROM model_calls WHERE assignment_id = ? AND request_sha256 = ?))
             RETURNING id",
        )
        .bind(c.assignment_id)
        .bind(c.at)
        .bind(c.model)
        .bind(i64::from(c.stream))
        .bind(c.request_bytes)
        .bind(c.status)
        .bind(c.error)
        .bind(c.refused)
        .bind(c.request_sha256)
        .bind(c.assignment_id)
        .bind(c.request_sha256)
        .fetch_one(&self.pool)
        .await?;
        Ok(id)
    }

    async fn finish_model_call(&self, id: i64, o: ModelCallOutcome) -> DbResult<()> {
        sqlx::query(
            "UPDATE model_calls SET status = ?, response_bytes = ?, prompt_tokens = ?, completion_tokens = ?, tokens_estimated = ?,
                latency_ms = ?, error = ? WHERE id = ?",
        )
        .bind(o.status)
        .bind(o.response_bytes)
        .bind(o.prompt_tokens)
        .bind(o.completion_tokens)
        .bind(i64::from(o.tokens_estimated))
        .bind(o.latency_ms)
        .bind(o.error)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn meter_usage(&self, assignment_id: &str) -> DbResult<MeterUsage> {
        let (calls, tokens, request_bytes): (i64, i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), COALESCE(SUM(prompt_tokens + completion_tokens), 0), COALESCE(SUM(request_bytes), 0)
             FROM model_calls WHERE assignment_id = ? AND refused IS NULL AND status < 500",
        )
        .bind(assignment_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(MeterUsage { calls, tokens, request_bytes })
    }

    async fn model_key_by_hash(&self, key_hash: &str) -> DbResult<Option<ModelKey>> {
        let row: Option<ModelKeyDb> = sqlx::query_as(&format!("SELECT {KEY_COLUMNS} FROM model_keys WHERE key_hash = ?"))
            .bind(key_hash)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(ModelKey::from))
    }

    async fn model_keys_of(&self, assignment_id: &str) -> DbResult<Vec<ModelKey>> {
        let rows: Vec<ModelKeyDb> =
            sqlx::query_as(&format!("SELECT {KEY_COLUMNS} FROM model_keys WHERE assignment_id = ? ORDER BY generation"))
                .bind(assignment_id)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(ModelKey::from).collect())
    }

    async fn create_model_key(&self, assignment_id: &str, generation: i64, key_hash: &str, at: i64) -> DbResult<()> {
        sqlx::query("INSERT OR IGNORE INTO model_keys (assignment_id, generation, key_hash, created_at) VALUES (?, ?, ?, ?)")
            .bind(assignment_id)
            .bind(generation)
            .bind(key_hash)
            .bind(at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn revoke_model_key(&self, id: i64, at: i64) -> DbResult<()> {
        sqlx::query("UPDATE model_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").bind(at).bind(id).execute(&self.pool).await?;
        Ok(())
    }

    async fn red_witnessed_at(&self, assignment_id: &str) -> DbResult<Option<i64>> {
        let (at,): (Option<i64>,) =
            sqlx::query_as("SELECT MIN(at) FROM witness_runs WHERE assignment_id = ? AND kind = 'red' AND accepted = 1")
                .bind(assignment_id)
                .fetch_one(&self.pool)
                .await?;
        Ok(at)
    }
}
