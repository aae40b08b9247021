//! What every handler and worker shares.

use std::sync::Arc;

use grader::grade::Grader;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::config::Config;
use crate::db::Db;

#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub db: Db,
    /// The grader, shared by the workers and the packet self-test; its calls
    /// block and run on `spawn_blocking` threads.
    pub grader: Arc<Grader>,
    pub metrics: PrometheusHandle,
    /// Global bounds on work any candidate can cause (uploads, sandbox runs).
    pub gates: Arc<Gates>,
    /// The model meter's upstream client (one connection pool; rustls with
    /// the web PKI roots and the configured `model_ca_file`).
    pub model_client: reqwest::Client,
}

/// Global bounds shared by every candidate: concurrent uploads being
/// received and checked, and concurrent witnessed sandbox runs. When one is
/// full the request is refused with 503 at once, never queued.
pub struct Gates {
    pub uploads: Arc<tokio::sync::Semaphore>,
    pub sandbox_runs: Arc<tokio::sync::Semaphore>,
}

impl Gates {
    pub fn new(config: &Config) -> Gates {
        Gates {
            uploads: Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_uploads.max(1))),
            sandbox_runs: Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_sandbox_runs.max(1))),
        }
    }

    /// A permit from `gate`, or a 503 naming `what` is busy.
    pub fn try_take(gate: &Arc<tokio::sync::Semaphore>, what: &str) -> Result<tokio::sync::OwnedSemaphorePermit, crate::error::AppError> {
        gate.clone()
            .try_acquire_owned()
            .map_err(|_| crate::error::AppError::Unavailable(format!("the server is busy with other {what}; try again in a minute")))
    }
}
