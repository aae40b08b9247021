//! Argon2id password hashes. Hashing is deliberately slow, so the async
//! callers run these on `spawn_blocking`.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

pub fn hash(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("hashing a password: {e}"))
}

pub fn verify(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored)
        .is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

pub async fn hash_async(password: String) -> anyhow::Result<String> {
    tokio::task::spawn_blocking(move || hash(&password)).await?
}

pub async fn verify_async(password: String, stored: String) -> bool {
    tokio::task::spawn_blocking(move || verify(&password, &stored)).await.unwrap_or(false)
}

/// A random URL-safe secret of 32 bytes (256 bits), hex-encoded.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

/// The SHA-256 of a token, the only form in which tokens are stored.
pub fn token_hash(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn hash_verifies_only_its_password() {
        let h = super::hash("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(super::verify("correct horse", &h));
        assert!(!super::verify("wrong horse", &h));
        assert!(!super::verify("correct horse", "not a hash"));
    }
}
