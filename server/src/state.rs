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
}
