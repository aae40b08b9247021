//! The store areas whose SQL is the same on both backends, each written
//! once as a macro that `sqlite` and `postgres` instantiate in a module of
//! their own (`mod users { user_store!(super::SqliteStore); }`). The SQL
//! uses `$n` placeholders, which sqlx binds on SQLite as on Postgres; what
//! still differs between the dialects is an argument of the macro (the
//! queue's claim under a row lock, publishing under one, `GREATEST` for
//! `MAX`, the meter's writer connection on SQLite).

pub(crate) mod assignments;
pub(crate) mod ats;
pub(crate) mod audit;
pub(crate) mod erasure;
pub(crate) mod jobs;
pub(crate) mod meter;
pub(crate) mod packet_audits;
pub(crate) mod packets;
pub(crate) mod sessions;
pub(crate) mod sso;
pub(crate) mod submissions;
pub(crate) mod users;
pub(crate) mod webhooks;
pub(crate) mod witness;
