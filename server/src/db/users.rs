//! Accounts and integration API tokens.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::DbResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Reviewer,
    Author,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Author => "author",
            Role::Reviewer => "reviewer",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "author" => Some(Role::Author),
            "reviewer" => Some(Role::Reviewer),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct User {
    pub id: i64,
    pub email: String,
    pub name: String,
    pub role: Role,
    #[serde(skip)]
    pub password_hash: String,
    pub disabled: bool,
    pub created_at: i64,
}

pub struct NewUser<'a> {
    pub email: &'a str,
    pub name: &'a str,
    pub role: Role,
    pub password_hash: &'a str,
}

#[async_trait]
pub trait UserStore {
    async fn user_count(&self) -> DbResult<i64>;
    /// Fails with a unique-constraint error when the email is taken.
    async fn create_user(&self, user: NewUser<'_>) -> DbResult<User>;
    async fn user_by_email(&self, email: &str) -> DbResult<Option<User>>;
    async fn user_by_id(&self, id: i64) -> DbResult<Option<User>>;
    async fn list_users(&self) -> DbResult<Vec<User>>;
    async fn set_user_role(&self, id: i64, role: Role, disabled: bool) -> DbResult<()>;
    async fn set_password(&self, id: i64, password_hash: &str) -> DbResult<()>;

    async fn create_api_token(&self, user_id: i64, name: &str, token_hash: &str) -> DbResult<i64>;
    /// The active user behind a token hash, if the token is not revoked.
    async fn user_by_api_token(&self, token_hash: &str) -> DbResult<Option<User>>;
    async fn revoke_api_token(&self, id: i64) -> DbResult<()>;
    /// Every API token, newest first (never the token itself).
    async fn list_api_tokens(&self) -> DbResult<Vec<ApiToken>>;
}

/// An integration API token as the admin pages list it.
#[derive(Debug, Clone, Serialize)]
pub struct ApiToken {
    pub id: i64,
    pub user_id: i64,
    pub user_email: String,
    pub name: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}
