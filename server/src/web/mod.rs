//! The HTTP surface: pages, the candidate's link, the integration API,
//! `/healthz` and `/metrics`. Each area of the site is one module with a
//! `routes()` function; `router` merges them and adds the session layer.

use axum::Router;
use axum::extract::State;
use axum::routing::get;

use crate::state::AppState;

pub mod admin;
pub mod api;
pub mod assets;
pub mod assignments;
pub mod auth;
pub mod candidate;
pub mod library;
pub mod queue;
pub mod review;
pub mod session;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .merge(auth::routes())
        .merge(admin::routes())
        .merge(library::routes())
        .merge(assignments::routes())
        .merge(candidate::routes())
        .merge(api::routes())
        .merge(review::routes())
        .merge(queue::routes())
        .merge(assets::routes())
        .merge(crate::meter::routes())
        .layer(axum::middleware::from_fn(api::track_http))
        .layer(session::layer(&state))
        .with_state(state)
}

async fn healthz(State(state): State<AppState>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "ok": true, "database": state.db.backend() }))
}

async fn metrics(State(state): State<AppState>) -> String {
    state.metrics.render()
}
