//! The columns of `packets` and `packet_versions` as both backends select
//! them (the `PacketRow` and `PacketVersion` types decode them themselves:
//! sqlx's `FromRow` is generic over the database).

pub(crate) const PACKET_SELECT: &str = "SELECT id, slug, title, builtin, created_at FROM packets";

pub(crate) const VERSION_SELECT: &str = "SELECT v.id, v.packet_id, p.slug, v.version, v.state, v.dir, v.digest, v.check_state, v.check_report,
    v.created_by, v.created_at, v.published_at FROM packet_versions v JOIN packets p ON p.id = v.packet_id";
