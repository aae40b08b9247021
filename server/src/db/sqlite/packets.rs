use async_trait::async_trait;

use super::SqliteStore;
use crate::db::packets::{NewVersion, PacketRow, PacketStore, PacketVersion};
use crate::db::DbResult;
use crate::now_ms;
use crate::db::rows::packets::*;

#[async_trait]
impl PacketStore for SqliteStore {
    async fn create_version(&self, v: NewVersion<'_>) -> DbResult<PacketVersion> {
        let mut tx = self.pool.begin().await?;
        let now = now_ms();
        sqlx::query("INSERT INTO packets (slug, title, builtin, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (slug) DO UPDATE SET title = excluded.title")
            .bind(v.slug)
            .bind(v.title)
            .bind(v.builtin)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let packet_id: i64 = sqlx::query_scalar("SELECT id FROM packets WHERE slug = ?").bind(v.slug).fetch_one(&mut *tx).await?;
        let (version, state, published_at) = if v.publish {
            let last: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM packet_versions WHERE packet_id = ?")
                .bind(packet_id)
                .fetch_one(&mut *tx)
                .await?;
            (Some(last.unwrap_or(0) + 1), "published", Some(now))
        } else {
            (None, "draft", None)
        };
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO packet_versions (packet_id, version, state, dir, digest, created_by, created_at, published_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(packet_id)
        .bind(version)
        .bind(state)
        .bind(v.dir)
        .bind(v.digest)
        .bind(v.created_by)
        .bind(now)
        .bind(published_at)
        .fetch_one(&mut *tx)
        .await?;
        let row: VersionDb = sqlx::query_as(&format!("{VERSION_SELECT} WHERE v.id = ?")).bind(id).fetch_one(&mut *tx).await?;
        tx.commit().await?;
        Ok(row.into())
    }

    async fn list_packets(&self) -> DbResult<Vec<PacketRow>> {
        let rows: Vec<PacketDb> =
            sqlx::query_as("SELECT id, slug, title, builtin, created_at FROM packets ORDER BY slug").fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(PacketRow::from).collect())
    }

    async fn packet_by_slug(&self, slug: &str) -> DbResult<Option<PacketRow>> {
        let row: Option<PacketDb> = sqlx::query_as("SELECT id, slug, title, builtin, created_at FROM packets WHERE slug = ?")
            .bind(slug)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(PacketRow::from))
    }

    async fn version_by_id(&self, id: i64) -> DbResult<Option<PacketVersion>> {
        let row: Option<VersionDb> =
            sqlx::query_as(&format!("{VERSION_SELECT} WHERE v.id = ?")).bind(id).fetch_optional(&self.pool).await?;
        Ok(row.map(PacketVersion::from))
    }

    async fn versions_of(&self, packet_id: i64) -> DbResult<Vec<PacketVersion>> {
        let rows: Vec<VersionDb> = sqlx::query_as(&format!("{VERSION_SELECT} WHERE v.packet_id = ? ORDER BY v.id DESC"))
            .bind(packet_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(PacketVersion::from).collect())
    }

    async fn latest_published(&self, slug: &str) -> DbResult<Option<PacketVersion>> {
        let row: Option<VersionDb> = sqlx::query_as(&format!(
            "{VERSION_SELECT} WHERE p.slug = ? AND v.state = 'published' ORDER BY v.version DESC LIMIT 1"
        ))
        .bind(slug)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(PacketVersion::from))
    }

    async fn update_draft(&self, id: i64, digest: &str) -> DbResult<bool> {
        let r = sqlx::query("UPDATE packet_versions SET digest = ?, check_state = 'none', check_report = NULL, checked_digest = NULL
             WHERE id = ? AND state = 'draft' AND check_state <> 'running'")
            .bind(digest)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn set_check(&self, id: i64, state: &str, report: Option<&str>) -> DbResult<()> {
        sqlx::query("UPDATE packet_versions SET check_state = ?, check_report = ? WHERE id = ?")
            .bind(state)
            .bind(report)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn finish_check(&self, id: i64, state: &str, report: &str, checked_digest: Option<&str>) -> DbResult<()> {
        sqlx::query(
            "UPDATE packet_versions SET check_report = ?, checked_digest = ?,
                check_state = CASE WHEN ? IS NOT NULL AND digest = ? THEN ? ELSE 'failed' END
             WHERE id = ?",
        )
        .bind(report)
        .bind(checked_digest)
        .bind(checked_digest)
        .bind(checked_digest)
        .bind(state)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn publish(&self, id: i64) -> DbResult<bool> {
        let r = sqlx::query(
            "UPDATE packet_versions SET state = 'published', published_at = ?,
                version = (SELECT COALESCE(MAX(o.version), 0) + 1 FROM packet_versions o WHERE o.packet_id = packet_versions.packet_id)
             WHERE id = ? AND state = 'draft' AND check_state = 'passed' AND checked_digest = digest",
        )
        .bind(now_ms())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn set_publish_request(&self, id: i64, at: Option<i64>) -> DbResult<()> {
        sqlx::query("UPDATE packet_versions SET publish_requested_at = ? WHERE id = ?").bind(at).bind(id).execute(&self.pool).await?;
        Ok(())
    }

    async fn publish_request(&self, id: i64) -> DbResult<Option<i64>> {
        let at: Option<Option<i64>> = sqlx::query_scalar("SELECT publish_requested_at FROM packet_versions WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(at.flatten())
    }
}
