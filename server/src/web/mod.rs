//! The HTTP surface: pages, the candidate's link, the integration API,
//! `/healthz` and `/metrics`.

use axum::Router;
use axum::extract::State;
use axum::routing::get;

use crate::state::AppState;

pub mod session;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(session::layer(&state))
        .with_state(state)
}

async fn healthz(State(state): State<AppState>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "ok": true, "database": state.db.backend() }))
}

async fn metrics(State(state): State<AppState>) -> String {
    state.metrics.render()
}
