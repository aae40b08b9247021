//! The SQLite backend: one file, WAL mode, migrations from `migrations/sqlite`.
//! The portable areas are instantiated from [`super::portable`], with
//! SQLite's arguments; the files here hold the areas whose SQL is SQLite's
//! own (the meter) and the blobs it keeps out of the database.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

mod assignments {
    crate::db::portable::assignments::assignment_store!(super::SqliteStore);
}
mod audit {
    crate::db::portable::audit::audit_store!(super::SqliteStore);
}
mod blobs;
mod jobs {
    // One writer at a time: the claim's subquery and update are atomic as
    // they are, with no row lock and no re-check.
    crate::db::portable::jobs::job_store!(super::SqliteStore, claim_lock: "", claim_recheck: "", greatest: "MAX", own: {});
}
mod meter {
    crate::db::portable::meter::meter_store!(super::SqliteStore, writer);
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
mod submissions {
    crate::db::portable::submissions::submission_store!(super::SqliteStore, "rowid");
}
mod users {
    crate::db::portable::users::user_store!(super::SqliteStore);
}
mod witness {
    crate::db::portable::witness::witness_store!(super::SqliteStore);
}

pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
    /// One connection for the model meter's ledger writes (one statement
    /// per call admitted and per call settled): they queue for it in order
    /// instead of meeting SQLite's write lock on eight connections, whose
    /// busy handler sleeps milliseconds at a time.
    pub(crate) writer: SqlitePool,
}

impl SqliteStore {
    pub async fn open(url: &str) -> anyhow::Result<SqliteStore> {
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("database url {url:?}: {e}"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        if let Some(dir) = opts.get_filename().parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(opts.clone())
            .await
            .map_err(|e| anyhow::anyhow!("opening {url}: {e}"))?;
        sqlx::migrate!("../migrations/sqlite").run(&pool).await.map_err(|e| anyhow::anyhow!("migrating {url}: {e}"))?;
        // (An in-memory database is one per pool: it keeps the one pool.)
        let writer = if opts.get_filename() == std::path::Path::new(":memory:") || url.contains("mode=memory") {
            pool.clone()
        } else {
            SqlitePoolOptions::new().max_connections(1).connect_with(opts).await.map_err(|e| anyhow::anyhow!("opening {url}: {e}"))?
        };
        Ok(SqliteStore { pool, writer })
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
