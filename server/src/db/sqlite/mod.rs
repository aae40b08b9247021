//! The SQLite backend: one file, WAL mode, migrations from `migrations/sqlite`.
//! The portable areas are instantiated from [`super::portable`], with
//! SQLite's arguments; the files here hold the blobs it keeps out of the
//! database and the meter ledger's writer task (group commit, `ledger.rs`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

mod assignments {
    crate::db::portable::assignments::assignment_store!(super::SqliteStore);
}
mod ats {
    crate::db::portable::ats::ats_store!(super::SqliteStore);
}
mod webhooks {
    crate::db::portable::webhooks::webhook_store!(super::SqliteStore);
}
mod erasure {
    crate::db::portable::erasure::erasure_store!(super::SqliteStore, sqlx::Sqlite, compact: "PRAGMA wal_checkpoint(TRUNCATE)");
}
mod audit {
    crate::db::portable::audit::audit_store!(super::SqliteStore);
}
mod blobs;
mod ledger;
mod jobs {
    // One writer at a time: the claim's subquery and update are atomic as
    // they are, with no row lock and no re-check.
    crate::db::portable::jobs::job_store!(super::SqliteStore, claim_lock: "", claim_recheck: "", greatest: "MAX", own: {});
}
mod meter {
    crate::db::portable::meter::meter_store!(super::SqliteStore);
}
mod packet_audits {
    crate::db::portable::packet_audits::packet_audit_store!(super::SqliteStore);
}
mod packets {
    crate::db::portable::packets::packet_store!(super::SqliteStore, publish_lock: None);
}
mod sessions {
    crate::db::portable::sessions::session_store!(super::SqliteStore);
}
mod sso {
    crate::db::portable::sso::oidc_login_store!(super::SqliteStore);
}
mod submissions {
    crate::db::portable::submissions::submission_store!(super::SqliteStore, "rowid");
}
mod users {
    crate::db::portable::users::user_store!(super::SqliteStore);
}
mod witness {
    crate::db::portable::witness::witness_store!(super::SqliteStore);
}

/// The size the write-ahead log is cut back to once it has been
/// checkpointed and restarted (`journal_size_limit`): it grows past it only
/// while a long read transaction keeps the checkpoints from reaching its
/// end.
pub const WAL_SIZE_LIMIT: u64 = 16 << 20;

pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
    /// The model meter's ledger writes (one statement per call admitted
    /// and per call settled), on one connection of their own: they queue
    /// for it in order instead of meeting SQLite's write lock on eight
    /// connections, whose busy handler sleeps milliseconds at a time, and
    /// those that queued together commit together (see [`ledger`]).
    ledger: ledger::Ledger,
}

impl SqliteStore {
    pub async fn open(url: &str) -> anyhow::Result<SqliteStore> {
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("database url {url:?}: {e}"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            .pragma("journal_size_limit", WAL_SIZE_LIMIT.to_string())
            // What a delete or an update frees is overwritten with zeros,
            // so an erased candidate's name or code does not linger in the
            // file's free space (#31).
            .pragma("secure_delete", "ON");
        if let Some(dir) = opts.get_filename().parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(opts.clone())
            .await
            .map_err(|e| anyhow::anyhow!("opening {url}: {e}"))?;
        sqlx::migrate!("../migrations/sqlite")
            .run(&pool)
            .await
            .map_err(|e| anyhow::anyhow!("migrating {url}: {e}"))?;
        // (An in-memory database is one per pool: it keeps the one pool.)
        let writer = if opts.get_filename() == std::path::Path::new(":memory:")
            || url.contains("mode=memory")
        {
            pool.clone()
        } else {
            // Its WAL checkpoints run beside it, on the read pool.
            let opts = opts.pragma("wal_autocheckpoint", "0");
            SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(opts)
                .await
                .map_err(|e| anyhow::anyhow!("opening {url}: {e}"))?
        };
        let ledger = ledger::Ledger::start(writer, pool.clone());
        Ok(SqliteStore { pool, ledger })
    }

    pub(crate) async fn ledger_fetch_one(
        &self,
        build: ledger::Build,
    ) -> sqlx::Result<sqlx::sqlite::SqliteRow> {
        self.ledger.fetch_one(build).await
    }

    pub(crate) async fn ledger_execute(
        &self,
        build: ledger::Build,
    ) -> sqlx::Result<sqlx::sqlite::SqliteQueryResult> {
        self.ledger.execute(build).await
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

impl super::Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }
}
