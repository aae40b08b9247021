//! The Postgres backend: a shared database for one server and any number of
//! `gatehouse worker` processes, migrations from `migrations/postgres`.
//!
//! Each file mirrors the SQLite backend's file of the same name; the SQL
//! differs only where the dialects or their concurrency do (`$n`
//! placeholders; `FOR UPDATE SKIP LOCKED` in the queue's claim; row locks
//! where SQLite's single writer serialised a read-then-write; `seq` for
//! SQLite's `rowid`; `lower(email)` for `COLLATE NOCASE`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

mod assignments;
mod audit;
mod blobs;
mod jobs;
mod meter;
mod packet_audits;
mod packets;
mod sessions;
mod submissions;
mod users;
mod witness;

pub struct PgStore {
    pub(crate) pool: PgPool,
}

impl PgStore {
    pub async fn open(url: &str) -> anyhow::Result<PgStore> {
        let opts = PgConnectOptions::from_str(url).map_err(|e| anyhow::anyhow!("database url {url:?}: {e}"))?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await
            .map_err(|e| anyhow::anyhow!("opening {url}: {e}"))?;
        sqlx::migrate!("../migrations/postgres").run(&pool).await.map_err(|e| anyhow::anyhow!("migrating {url}: {e}"))?;
        Ok(PgStore { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

impl super::Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }
}
