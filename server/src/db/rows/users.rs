//! The rows of `users` as both backends read them (sqlx's `FromRow` is
//! generic over the database), and their conversion to the area's types.

use sqlx::FromRow;

use crate::db::users::*;

#[derive(FromRow)]
pub(crate) struct UserRow {
    pub(crate) id: i64,
    pub(crate) email: String,
    pub(crate) name: String,
    pub(crate) role: String,
    pub(crate) password_hash: String,
    pub(crate) disabled: bool,
    pub(crate) created_at: i64,
}

impl From<UserRow> for User {
    fn from(r: UserRow) -> User {
        User {
            id: r.id,
            email: r.email,
            name: r.name,
            // The CHECK constraint admits only the three roles.
            role: Role::parse(&r.role).unwrap_or(Role::Reviewer),
            password_hash: r.password_hash,
            disabled: r.disabled,
            created_at: r.created_at,
        }
    }
}

pub(crate) const USER_COLS: &str = "id, email, name, role, password_hash, disabled, created_at";
