//! The route table: an `axum::Router` that also remembers every path it was
//! given, so tests can walk all routes (the CSRF test sends every unsafe
//! method to every path) and a new route cannot be missed.

use std::convert::Infallible;

use axum::Router;
use axum::extract::Request;
use axum::response::IntoResponse;
use axum::routing::{MethodRouter, Route};
use tower::{Layer, Service};

use crate::state::AppState;

/// Every route of one area of the site, and the paths it holds.
pub struct Routes {
    router: Router<AppState>,
    paths: Vec<&'static str>,
}

impl Default for Routes {
    fn default() -> Routes {
        Routes::new()
    }
}

impl Routes {
    pub fn new() -> Routes {
        Routes { router: Router::new(), paths: Vec::new() }
    }

    /// `Router::route`, remembering `path`.
    pub fn route(mut self, path: &'static str, method_router: MethodRouter<AppState>) -> Routes {
        self.paths.push(path);
        self.router = self.router.route(path, method_router);
        self
    }

    /// `Router::merge`, keeping both tables.
    pub fn merge(mut self, other: Routes) -> Routes {
        self.paths.extend(other.paths);
        self.router = self.router.merge(other.router);
        self
    }

    /// `Router::layer`, on the routes added so far.
    pub fn layer<L>(mut self, layer: L) -> Routes
    where
        L: Layer<Route> + Clone + Send + Sync + 'static,
        L::Service: Service<Request> + Clone + Send + Sync + 'static,
        <L::Service as Service<Request>>::Response: IntoResponse + 'static,
        <L::Service as Service<Request>>::Error: Into<Infallible> + 'static,
        <L::Service as Service<Request>>::Future: Send + 'static,
    {
        self.router = self.router.layer(layer);
        self
    }

    /// Every path, as given to [`Routes::route`] (`/c/{token}/submit`).
    pub fn paths(&self) -> &[&'static str] {
        &self.paths
    }

    pub fn into_router(self) -> Router<AppState> {
        self.router
    }
}
