//! `OidcLoginStore` for both backends, written once (`DELETE ... RETURNING`
//! is the same on SQLite and Postgres).

macro_rules! oidc_login_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::DbResult;
        use crate::db::sso::{OidcLogin, OidcLoginStore};

        const COLS: &str =
            "state_hash, provider, browser_hash, nonce, pkce_verifier, next, created_at";

        #[async_trait]
        impl OidcLoginStore for $store {
            async fn create_oidc_login(&self, l: &OidcLogin) -> DbResult<()> {
                sqlx::query(&format!(
                    "INSERT INTO oidc_logins ({COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                ))
                .bind(&l.state_hash)
                .bind(&l.provider)
                .bind(&l.browser_hash)
                .bind(&l.nonce)
                .bind(&l.pkce_verifier)
                .bind(&l.next)
                .bind(l.created_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn take_oidc_login(&self, state_hash: &str) -> DbResult<Option<OidcLogin>> {
                sqlx::query_as(&format!(
                    "DELETE FROM oidc_logins WHERE state_hash = $1 RETURNING {COLS}"
                ))
                .bind(state_hash)
                .fetch_optional(&self.pool)
                .await
            }

            async fn count_oidc_logins(&self) -> DbResult<i64> {
                sqlx::query_scalar("SELECT COUNT(*) FROM oidc_logins").fetch_one(&self.pool).await
            }

            async fn delete_oidc_logins_before(&self, before: i64) -> DbResult<u64> {
                Ok(sqlx::query("DELETE FROM oidc_logins WHERE created_at < $1")
                    .bind(before)
                    .execute(&self.pool)
                    .await?
                    .rows_affected())
            }
        }
    };
}

pub(crate) use oidc_login_store;
