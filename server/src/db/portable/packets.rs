//! `PacketStore` for both backends, written once: its SQL is the same on
//! SQLite and Postgres (`$n` placeholders, which both sqlx drivers bind).
//! What differs is `publish_lock`, a statement `publish` runs first, in its
//! transaction, with the version's id: Postgres locks the packet's row, so
//! two drafts of one packet published at once do not both take
//! `MAX(version) + 1` (as `create_version`'s upsert puts them in turn);
//! SQLite's single writer already serialises them (`None`).

macro_rules! packet_store {
    ($store:ty, publish_lock: $publish_lock:expr $(,)?) => {
        use async_trait::async_trait;

        use crate::db::packets::{NewVersion, PacketRow, PacketStore, PacketVersion};
        use crate::db::DbResult;
        use crate::now_ms;
        use crate::db::rows::packets::{PACKET_SELECT, VERSION_SELECT};

        #[async_trait]
        impl PacketStore for $store {
            async fn create_version(&self, v: NewVersion<'_>) -> DbResult<PacketVersion> {
                let mut tx = self.pool.begin().await?;
                let now = now_ms();
                sqlx::query("INSERT INTO packets (slug, title, builtin, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (slug) DO UPDATE SET title = excluded.title")
                    .bind(v.slug)
                    .bind(v.title)
                    .bind(v.builtin)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                let packet_id: i64 = sqlx::query_scalar("SELECT id FROM packets WHERE slug = $1").bind(v.slug).fetch_one(&mut *tx).await?;
                let (version, state, published_at) = if v.publish {
                    let last: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM packet_versions WHERE packet_id = $1")
                        .bind(packet_id)
                        .fetch_one(&mut *tx)
                        .await?;
                    (Some(last.unwrap_or(0) + 1), "published", Some(now))
                } else {
                    (None, "draft", None)
                };
                let id: i64 = sqlx::query_scalar(
                    "INSERT INTO packet_versions (packet_id, version, state, dir, digest, created_by, created_at, published_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
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
                let row: PacketVersion = sqlx::query_as(&format!("{VERSION_SELECT} WHERE v.id = $1")).bind(id).fetch_one(&mut *tx).await?;
                tx.commit().await?;
                Ok(row)
            }

            async fn list_packets(&self) -> DbResult<Vec<PacketRow>> {
                sqlx::query_as(&format!("{PACKET_SELECT} ORDER BY slug")).fetch_all(&self.pool).await
            }

            async fn packet_by_slug(&self, slug: &str) -> DbResult<Option<PacketRow>> {
                sqlx::query_as(&format!("{PACKET_SELECT} WHERE slug = $1")).bind(slug).fetch_optional(&self.pool).await
            }

            async fn version_by_id(&self, id: i64) -> DbResult<Option<PacketVersion>> {
                sqlx::query_as(&format!("{VERSION_SELECT} WHERE v.id = $1")).bind(id).fetch_optional(&self.pool).await
            }

            async fn versions_of(&self, packet_id: i64) -> DbResult<Vec<PacketVersion>> {
                sqlx::query_as(&format!("{VERSION_SELECT} WHERE v.packet_id = $1 ORDER BY v.id DESC")).bind(packet_id).fetch_all(&self.pool).await
            }

            async fn latest_published(&self, slug: &str) -> DbResult<Option<PacketVersion>> {
                sqlx::query_as(&format!("{VERSION_SELECT} WHERE p.slug = $1 AND v.state = 'published' ORDER BY v.version DESC LIMIT 1"))
                    .bind(slug)
                    .fetch_optional(&self.pool)
                    .await
            }

            async fn update_draft(&self, id: i64, digest: &str) -> DbResult<bool> {
                let r = sqlx::query("UPDATE packet_versions SET digest = $1, check_state = 'none', check_report = NULL, checked_digest = NULL
                     WHERE id = $2 AND state = 'draft' AND check_state <> 'running'")
                    .bind(digest)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn set_check(&self, id: i64, state: &str, report: Option<&str>) -> DbResult<()> {
                sqlx::query("UPDATE packet_versions SET check_state = $1, check_report = $2 WHERE id = $3")
                    .bind(state)
                    .bind(report)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn finish_check(&self, id: i64, state: &str, report: &str, checked_digest: Option<&str>) -> DbResult<()> {
                sqlx::query(
                    "UPDATE packet_versions SET check_report = $1, checked_digest = $2,
                        check_state = CASE WHEN $3 IS NOT NULL AND digest = $4 THEN $5 ELSE 'failed' END
                     WHERE id = $6",
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
                let mut tx = self.pool.begin().await?;
                let lock: Option<&str> = $publish_lock;
                if let Some(lock) = lock {
                    sqlx::query(lock).bind(id).fetch_optional(&mut *tx).await?;
                }
                let r = sqlx::query(
                    "UPDATE packet_versions SET state = 'published', published_at = $1,
                        version = (SELECT COALESCE(MAX(o.version), 0) + 1 FROM packet_versions o WHERE o.packet_id = packet_versions.packet_id)
                     WHERE id = $2 AND state = 'draft' AND check_state = 'passed' AND checked_digest = digest",
                )
                .bind(now_ms())
                .bind(id)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(r.rows_affected() == 1)
            }

            async fn set_publish_request(&self, id: i64, at: Option<i64>) -> DbResult<()> {
                sqlx::query("UPDATE packet_versions SET publish_requested_at = $1 WHERE id = $2").bind(at).bind(id).execute(&self.pool).await?;
                Ok(())
            }

            async fn publish_request(&self, id: i64) -> DbResult<Option<i64>> {
                let at: Option<Option<i64>> = sqlx::query_scalar("SELECT publish_requested_at FROM packet_versions WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(at.flatten())
            }
        }
    };
}

pub(crate) use packet_store;
