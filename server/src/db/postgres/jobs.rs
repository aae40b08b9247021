//! The queue on Postgres: the portable [`job_store`](crate::db::portable::jobs)
//! with many workers claiming at once, and `LISTEN` for jobs queued by any
//! process.

use crate::db::jobs::JobWake;

crate::db::portable::jobs::job_store! {
    super::PgStore,
    // The subquery locks the row it picks (FOR UPDATE OF j) and skips rows
    // another claimer holds (SKIP LOCKED), so two claimers never get the
    // same job and neither waits for the other.
    claim_lock: "FOR UPDATE OF j SKIP LOCKED",
    // Postgres re-checks the subquery's WHERE against the row's newest
    // version once it holds the lock; the outer WHERE says the same again,
    // so a job finished meanwhile is not claimed.
    claim_recheck: "AND (state = 'queued' OR (state = 'running' AND lease_until < $2))",
    greatest: "GREATEST",
    own: {
        async fn listen_for_jobs(&self, wake: JobWake) -> DbResult<bool> {
            let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
            listener.listen(JOBS_CHANNEL).await?;
            tokio::spawn(async move {
                loop {
                    match listener.recv().await {
                        Ok(_) => wake(),
                        Err(e) => {
                            // The next recv reconnects; a job queued meanwhile
                            // was missed, so wake the workers to look.
                            tracing::warn!(error = %e, "listening for jobs failed; reconnecting");
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                            wake();
                        }
                    }
                }
            });
            Ok(true)
        }
    },
}

/// The channel the `jobs_notify` trigger (migration 0010) notifies.
const JOBS_CHANNEL: &str = "gatehouse_jobs";
