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
        sqlx::query("INSERT INTO blob_chunks (sha256, seq, bytes) VALUES ($1, $2, $3) ON CONFLICT (sha256, seq) DO NOTHING")
            .bind(sha256)
            .bind(seq)
            .bind(bytes)
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
        sqlx::query("INSERT INTO packet_archives (digest, blob_sha256) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING")
            .bind(digest)
            .bind(blob_sha256)
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
}
