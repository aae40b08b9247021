//! The packet library: packets and their draft or published versions.

use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct PacketRow {
    pub id: i64,
    pub slug: String,
    pub title: String,
    pub builtin: bool,
    pub created_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VersionState {
    Draft,
    Published,
}

/// A stored `packet_versions.state`: `published`, else a draft.
impl From<String> for VersionState {
    fn from(state: String) -> VersionState {
        if state == "published" { VersionState::Published } else { VersionState::Draft }
    }
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct PacketVersion {
    pub id: i64,
    pub packet_id: i64,
    pub slug: String,
    /// Set when published: 1, 2, … per packet.
    pub version: Option<i64>,
    #[sqlx(try_from = "String")]
    pub state: VersionState,
    /// The packet folder, relative to the data directory.
    pub dir: String,
    pub digest: String,
    /// none, running, passed or failed.
    pub check_state: String,
    /// The `packet check` report as JSON, once run.
    pub check_report: Option<String>,
    pub created_by: Option<i64>,
    pub created_at: i64,
    pub published_at: Option<i64>,
}

pub struct NewVersion<'a> {
    pub slug: &'a str,
    pub title: &'a str,
    pub builtin: bool,
    pub dir: &'a str,
    pub digest: &'a str,
    pub created_by: Option<i64>,
    /// Publish at once (the built-in library) or keep as a draft.
    pub publish: bool,
}

#[async_trait]
pub trait PacketStore {
    /// Creates the packet row when the slug is new, then a version of it.
    async fn create_version(&self, v: NewVersion<'_>) -> DbResult<PacketVersion>;
    async fn list_packets(&self) -> DbResult<Vec<PacketRow>>;
    async fn packet_by_slug(&self, slug: &str) -> DbResult<Option<PacketRow>>;
    async fn version_by_id(&self, id: i64) -> DbResult<Option<PacketVersion>>;
    /// All versions of a packet, newest first.
    async fn versions_of(&self, packet_id: i64) -> DbResult<Vec<PacketVersion>>;
    /// The highest published version of the packet with this slug.
    async fn latest_published(&self, slug: &str) -> DbResult<Option<PacketVersion>>;
    /// Replaces a draft's folder digest after an edit; refuses (returns
    /// false) when the version is not a draft.
    async fn update_draft(&self, id: i64, digest: &str) -> DbResult<bool>;
    async fn set_check(&self, id: i64, state: &str, report: Option<&str>) -> DbResult<()>;
    /// Stores a finished self-test and the digest of the folder it ran on
    /// (None when the folder changed while it ran). Unless the version's
    /// digest is still `checked_digest`, the state stored is `failed`.
    async fn finish_check(
        &self,
        id: i64,
        state: &str,
        report: &str,
        checked_digest: Option<&str>,
    ) -> DbResult<()>;
    /// Publishes a draft whose check passed, numbering it after the packet's
    /// last published version; returns false when it is not such a draft.
    async fn publish(&self, id: i64) -> DbResult<bool>;

    /// Sets (`Some(at)`) or clears (`None`) a version's publish request; the
    /// self-test job publishes a draft whose check passes while one is pending.
    async fn set_publish_request(&self, id: i64, at: Option<i64>) -> DbResult<()>;
    /// When the version's pending publish request was made, if any.
    async fn publish_request(&self, id: i64) -> DbResult<Option<i64>>;
}
