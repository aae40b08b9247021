//! The rows of `packets` as both backends read them (sqlx's `FromRow` is
//! generic over the database), and their conversion to the area's types.

use sqlx::FromRow;

use crate::db::packets::*;

#[derive(FromRow)]
pub(crate) struct PacketDb {
    pub(crate) id: i64,
    pub(crate) slug: String,
    pub(crate) title: String,
    pub(crate) builtin: bool,
    pub(crate) created_at: i64,
}

#[derive(FromRow)]
pub(crate) struct VersionDb {
    pub(crate) id: i64,
    pub(crate) packet_id: i64,
    pub(crate) slug: String,
    pub(crate) version: Option<i64>,
    pub(crate) state: String,
    pub(crate) dir: String,
    pub(crate) digest: String,
    pub(crate) check_state: String,
    pub(crate) check_report: Option<String>,
    pub(crate) created_by: Option<i64>,
    pub(crate) created_at: i64,
    pub(crate) published_at: Option<i64>,
}

impl From<PacketDb> for PacketRow {
    fn from(r: PacketDb) -> PacketRow {
        PacketRow { id: r.id, slug: r.slug, title: r.title, builtin: r.builtin, created_at: r.created_at }
    }
}

impl From<VersionDb> for PacketVersion {
    fn from(r: VersionDb) -> PacketVersion {
        PacketVersion {
            id: r.id,
            packet_id: r.packet_id,
            slug: r.slug,
            version: r.version,
            state: if r.state == "published" { VersionState::Published } else { VersionState::Draft },
            dir: r.dir,
            digest: r.digest,
            check_state: r.check_state,
            check_report: r.check_report,
            created_by: r.created_by,
            created_at: r.created_at,
            published_at: r.published_at,
        }
    }
}

pub(crate) const VERSION_SELECT: &str = "SELECT v.id, v.packet_id, p.slug, v.version, v.state, v.dir, v.digest, v.check_state, v.check_report,
    v.created_by, v.created_at, v.published_at FROM packet_versions v JOIN packets p ON p.id = v.packet_id";
