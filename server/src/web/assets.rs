//! Static assets: the stylesheet, embedded in the binary so a bare
//! `gatehouse serve` looks right anywhere, and the hydrate bundle
//! (`/pkg/gatehouse.js`, `/pkg/gatehouse_bg.wasm`) from `<site_dir>/pkg`.

use std::sync::OnceLock;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};
use tower::ServiceExt;
use tower_http::services::ServeDir;

use crate::state::AppState;

/// The stylesheet, compiled in.
pub const STYLESHEET: &str = include_str!("../../../style/gatehouse.css");

/// How long browsers may use the stylesheet without asking again.
const STYLE_CACHE: &str = "public, max-age=300";

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/style/gatehouse.css", get(stylesheet))
        .route("/pkg/{*path}", get(bundle))
}

/// The stylesheet's entity tag: a digest of its text.
fn style_etag() -> &'static HeaderValue {
    static ETAG: OnceLock<HeaderValue> = OnceLock::new();
    ETAG.get_or_init(|| {
        let digest = hex::encode(Sha256::digest(STYLESHEET.as_bytes()));
        HeaderValue::from_str(&format!("\"{}\"", &digest[..20]))
            .expect("hex is a valid header value")
    })
}

async fn stylesheet(headers: HeaderMap) -> Response {
    let etag = style_etag().clone();
    let cache = [
        (header::CACHE_CONTROL, HeaderValue::from_static(STYLE_CACHE)),
        (header::ETAG, etag.clone()),
    ];
    let unchanged =
        headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| {
            v.split(',').any(|t| t.trim() == etag.to_str().unwrap_or("") || t.trim() == "*")
        });
    if unchanged {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (
        cache,
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/css; charset=utf-8"))],
        STYLESHEET,
    )
        .into_response()
}

/// Serves `<site_dir>/pkg/<path>`; browsers revalidate with
/// `If-Modified-Since`, so a rebuilt bundle is picked up at once.
async fn bundle(State(state): State<AppState>, mut req: Request) -> Response {
    let dir = state.config.site_dir.join("pkg");
    let inner = req.uri().path().strip_prefix("/pkg").unwrap_or("/").to_string();
    let is_wasm = inner.ends_with(".wasm");
    match inner.parse::<Uri>() {
        Ok(uri) => *req.uri_mut() = uri,
        Err(_) => return StatusCode::NOT_FOUND.into_response(),
    }
    let Ok(res) = ServeDir::new(dir).oneshot(req).await;
    let mut res = res.map(Body::new);
    if res.status().is_success() || res.status() == StatusCode::NOT_MODIFIED {
        res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        if is_wasm {
            // Streaming compilation needs exactly this type.
            res.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/wasm"));
        }
    }
    res
}
