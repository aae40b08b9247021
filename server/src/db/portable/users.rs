//! `UserStore` for both backends, written once: its SQL is the same on
//! SQLite and Postgres (`$n` placeholders, which both sqlx drivers bind).

macro_rules! user_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::users::{ApiToken, NewUser, Role, User, UserStore};
        use crate::db::DbResult;
        use crate::now_ms;
        use crate::db::rows::users::*;

        #[async_trait]
        impl UserStore for $store {
            async fn user_count(&self) -> DbResult<i64> {
                sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(&self.pool).await
            }

            async fn create_user(&self, u: NewUser<'_>) -> DbResult<User> {
                let row: UserRow = sqlx::query_as(&format!(
                    "INSERT INTO users (email, name, role, password_hash, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING {USER_COLS}"
                ))
                .bind(u.email)
                .bind(u.name)
                .bind(u.role.as_str())
                .bind(u.password_hash)
                .bind(now_ms())
                .fetch_one(&self.pool)
                .await?;
                Ok(row.into())
            }

            async fn user_by_email(&self, email: &str) -> DbResult<Option<User>> {
                let row: Option<UserRow> = sqlx::query_as(&format!("SELECT {USER_COLS} FROM users WHERE lower(email) = lower($1)"))
                    .bind(email)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(row.map(User::from))
            }

            async fn user_by_id(&self, id: i64) -> DbResult<Option<User>> {
                let row: Option<UserRow> =
                    sqlx::query_as(&format!("SELECT {USER_COLS} FROM users WHERE id = $1")).bind(id).fetch_optional(&self.pool).await?;
                Ok(row.map(User::from))
            }

            async fn list_users(&self) -> DbResult<Vec<User>> {
                let rows: Vec<UserRow> = sqlx::query_as(&format!("SELECT {USER_COLS} FROM users ORDER BY id")).fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(User::from).collect())
            }

            async fn set_user_role(&self, id: i64, role: Role, disabled: bool) -> DbResult<()> {
                sqlx::query("UPDATE users SET role = $1, disabled = $2 WHERE id = $3")
                    .bind(role.as_str())
                    .bind(disabled)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn set_password(&self, id: i64, password_hash: &str) -> DbResult<()> {
                sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2").bind(password_hash).bind(id).execute(&self.pool).await?;
                Ok(())
            }

            async fn create_api_token(&self, user_id: i64, name: &str, token_hash: &str) -> DbResult<i64> {
                sqlx::query_scalar("INSERT INTO api_tokens (user_id, name, token_hash, created_at) VALUES ($1, $2, $3, $4) RETURNING id")
                    .bind(user_id)
                    .bind(name)
                    .bind(token_hash)
                    .bind(now_ms())
                    .fetch_one(&self.pool)
                    .await
            }

            async fn user_by_api_token(&self, token_hash: &str) -> DbResult<Option<User>> {
                let row: Option<UserRow> = sqlx::query_as(
                    "SELECT u.id, u.email, u.name, u.role, u.password_hash, u.disabled, u.created_at
                     FROM api_tokens t JOIN users u ON u.id = t.user_id
                     WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND NOT u.disabled",
                )
                .bind(token_hash)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(User::from))
            }

            async fn revoke_api_token(&self, id: i64) -> DbResult<()> {
                sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE id = $2").bind(now_ms()).bind(id).execute(&self.pool).await?;
                Ok(())
            }

            async fn list_api_tokens(&self) -> DbResult<Vec<ApiToken>> {
                let rows: Vec<(i64, i64, String, String, i64, Option<i64>)> = sqlx::query_as(
                    "SELECT t.id, t.user_id, u.email, t.name, t.created_at, t.revoked_at
                     FROM api_tokens t JOIN users u ON u.id = t.user_id ORDER BY t.id DESC",
                )
                .fetch_all(&self.pool)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(id, user_id, user_email, name, created_at, revoked_at)| ApiToken { id, user_id, user_email, name, created_at, revoked_at })
                    .collect())
            }
        }
    };
}

pub(crate) use user_store;
