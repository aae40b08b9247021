//! The rows of `audit` as both backends read them (sqlx's `FromRow` is
//! generic over the database), and their conversion to the area's types.

use sqlx::FromRow;


#[derive(FromRow)]
pub(crate) struct AuditDb {
    pub(crate) id: i64,
    pub(crate) at: i64,
    pub(crate) actor: String,
    pub(crate) action: String,
    pub(crate) subject: String,
    pub(crate) detail: String,
}
