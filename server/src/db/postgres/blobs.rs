use async_trait::async_trait;

use super::PgStore;
use crate::db::DbResult;
use crate::db::blobs::BlobRows;

#[async_trait]
impl BlobRows for PgStore {
    fn blobs_in_db(&self) -> bool {
        true
    }

    async fn blob_meta(&self, sha256: &str) -> DbResult<Option<(i64, i64)>> {
        sqlx::query_as("SELECT size, chunks FROM blobs WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await
    }

    async fn put_blob_chunk(&self, sha256: &str, seq: i64, bytes: &[u8]) -> DbResult<()> {
        sqlx::query("INSERT INTO blob_chunks (sha256, seq, bytes, written_at) VALUES ($1, $2, $3, $4) ON CONFLICT (sha256, seq) DO UPDATE SET written_at = EXCLUDED.written_at")
            .bind(sha256)
            .bind(seq)
            .bind(bytes)
            .bind(crate::now_ms())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn finish_blob(&self, sha256: &str, size: i64, chunks: i64, now: i64) -> DbResult<()> {
        sqlx::query("INSERT INTO blobs (sha256, size, chunks, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (sha256) DO NOTHING")
            .bind(sha256)
            .bind(size)
            .bind(chunks)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn blob_chunk(&self, sha256: &str, seq: i64) -> DbResult<Option<Vec<u8>>> {
        sqlx::query_scalar("SELECT bytes FROM blob_chunks WHERE sha256 = $1 AND seq = $2")
            .bind(sha256)
            .bind(seq)
            .fetch_optional(&self.pool)
            .await
    }

    async fn set_packet_archive(&self, digest: &str, blob_sha256: &str) -> DbResult<()> {
        sqlx::query("INSERT INTO packet_archives (digest, blob_sha256, used_at) VALUES ($1, $2, $3) ON CONFLICT (digest) DO UPDATE SET used_at = EXCLUDED.used_at")
            .bind(digest)
            .bind(blob_sha256)
            .bind(crate::now_ms())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn packet_archive(&self, digest: &str) -> DbResult<Option<String>> {
        sqlx::query_scalar("SELECT blob_sha256 FROM packet_archives WHERE digest = $1")
            .bind(digest)
            .fetch_optional(&self.pool)
            .await
    }

    async fn touch_packet_archive(&self, digest: &str, now: i64) -> DbResult<()> {
        sqlx::query("UPDATE packet_archives SET used_at = $1 WHERE digest = $2 AND used_at < $1")
            .bind(now)
            .bind(digest)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn delete_blob(&self, sha256: &str) -> DbResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM blobs WHERE sha256 = $1").bind(sha256).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM blob_chunks WHERE sha256 = $1")
            .bind(sha256)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    async fn sweep_packet_archives(&self, before: i64) -> DbResult<(u64, u64)> {
        let mut tx = self.pool.begin().await?;
        let gone: Vec<String> = sqlx::query_scalar(
            "DELETE FROM packet_archives a WHERE a.used_at < $1
               AND NOT EXISTS (SELECT 1 FROM packet_versions v WHERE v.digest = a.digest)
             RETURNING a.blob_sha256",
        )
        .bind(before)
        .fetch_all(&mut *tx)
        .await?;
        let blobs: Vec<String> = sqlx::query_scalar(
            "DELETE FROM blobs b WHERE b.sha256 = ANY($1)
               AND NOT EXISTS (SELECT 1 FROM packet_archives a WHERE a.blob_sha256 = b.sha256)
               AND NOT EXISTS (SELECT 1 FROM submissions s WHERE s.blob_sha256 = b.sha256)
               AND NOT EXISTS (SELECT 1 FROM model_calls c
                               WHERE c.request_body_sha256 = b.sha256 OR c.response_body_sha256 = b.sha256)
             RETURNING b.sha256",
        )
        .bind(&gone)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM blob_chunks WHERE sha256 = ANY($1)")
            .bind(&blobs)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((gone.len() as u64, blobs.len() as u64))
    }

    async fn sweep_orphan_chunks(&self, before: i64) -> DbResult<u64> {
        let r = sqlx::query(
            "DELETE FROM blob_chunks c
             WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = c.sha256)
               AND c.sha256 IN (SELECT sha256 FROM blob_chunks GROUP BY sha256 HAVING MAX(written_at) < $1)",
        )
        .bind(before)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }
}
