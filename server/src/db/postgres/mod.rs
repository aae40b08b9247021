//! The Postgres backend: a shared database for one server and any number of
//! `gatehouse worker` processes, migrations from `migrations/postgres`.
//!
//! The areas whose SQL is portable are instantiated from [`super::portable`],
//! as the SQLite backend instantiates them, with Postgres's arguments where
//! the dialects or their concurrency differ: `FOR UPDATE SKIP LOCKED` in
//! the queue's claim (`jobs.rs`, with `LISTEN` for queued jobs), a row lock
//! where SQLite's single writer serialises a read-then-write (publishing),
//! `GREATEST` for SQLite's two-argument `MAX`. The files here hold the
//! queue's `LISTEN` and the blobs kept in the database.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

mod assignments {
    crate::db::portable::assignments::assignment_store!(super::PgStore);
}
mod ats {
    crate::db::portable::ats::ats_store!(super::PgStore);
}
mod webhooks {
    crate::db::portable::webhooks::webhook_store!(super::PgStore);
}
mod erasure {
    crate::db::portable::erasure::erasure_store!(super::PgStore, sqlx::Postgres, compact: "");
}
mod audit {
    crate::db::portable::audit::audit_store!(super::PgStore);
}
mod blobs;
mod jobs;
mod meter {
    crate::db::portable::meter::meter_store!(super::PgStore);
}
mod packet_audits {
    crate::db::portable::packet_audits::packet_audit_store!(super::PgStore);
}
mod packets {
    // Two drafts of one packet published at once would both take
    // MAX(version) + 1; the packet's row lock puts them in turn (as
    // create_version's upsert does).
    crate::db::portable::packets::packet_store!(super::PgStore, publish_lock: Some("SELECT id FROM packets WHERE id = (SELECT packet_id FROM packet_versions WHERE id = $1) FOR UPDATE"));
}
mod sessions {
    crate::db::portable::sessions::session_store!(super::PgStore);
}
mod sso {
    crate::db::portable::sso::oidc_login_store!(super::PgStore);
}
mod submissions {
    crate::db::portable::submissions::submission_store!(super::PgStore, "seq");
}
mod users {
    crate::db::portable::users::user_store!(super::PgStore);
}
mod witness {
    crate::db::portable::witness::witness_store!(super::PgStore);
}

pub struct PgStore {
    pub(crate) pool: PgPool,
}

impl PgStore {
    pub async fn open(url: &str) -> anyhow::Result<PgStore> {
        let opts = PgConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("database url {url:?}: {e}"))?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await
            .map_err(|e| anyhow::anyhow!("opening {url}: {e}"))?;
        sqlx::migrate!("../migrations/postgres")
            .run(&pool)
            .await
            .map_err(|e| anyhow::anyhow!("migrating {url}: {e}"))?;
        Ok(PgStore { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The meter's ledger writes run on the pool as they come (its
    /// connections write side by side).
    pub(crate) async fn ledger_fetch_one(
        &self,
        build: LedgerBuild,
    ) -> sqlx::Result<sqlx::postgres::PgRow> {
        build().fetch_one(&self.pool).await
    }

    pub(crate) async fn ledger_execute(
        &self,
        build: LedgerBuild,
    ) -> sqlx::Result<sqlx::postgres::PgQueryResult> {
        build().execute(&self.pool).await
    }
}

/// Builds a ledger statement with its arguments bound.
pub(crate) type LedgerBuild = Box<
    dyn Fn() -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments>
        + Send
        + Sync,
>;

impl super::Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }
}
