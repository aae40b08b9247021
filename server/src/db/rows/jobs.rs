//! The columns of `jobs` as both backends select them (the `Job` type
//! decodes them itself: sqlx's `FromRow` is generic over the database).

pub(crate) const COLS: &str = "id, kind, subject, state, attempts, max_attempts, priority, lease_owner, lease_until, last_error, created_at, finished_at";
