//! OpenID Connect sign-ins under way (`oidc_logins`): what the callback
//! needs to finish one, good once.

use async_trait::async_trait;

use super::DbResult;

/// One sign-in started at an issuer and not yet finished.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OidcLogin {
    /// SHA-256 of the `state` sent to the issuer.
    pub state_hash: String,
    /// The issuer's name in the configuration.
    pub provider: String,
    /// SHA-256 of the cookie set in the browser that started it.
    pub browser_hash: String,
    pub nonce: String,
    pub pkce_verifier: String,
    /// Where to go after signing in (a local path).
    pub next: String,
    pub created_at: i64,
}

#[async_trait]
pub trait OidcLoginStore {
    async fn create_oidc_login(&self, login: &OidcLogin) -> DbResult<()>;
    /// Deletes and returns the sign-in with this state hash: a state is
    /// good once, whoever asks second finds nothing.
    async fn take_oidc_login(&self, state_hash: &str) -> DbResult<Option<OidcLogin>>;
    /// How many sign-ins are under way.
    async fn count_oidc_logins(&self) -> DbResult<i64>;
    /// Deletes sign-ins started before `before` (Unix ms); how many.
    async fn delete_oidc_logins_before(&self, before: i64) -> DbResult<u64>;
}
