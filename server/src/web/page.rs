//! What every page handler needs around its body: the page frame's
//! [`PageMeta`] for a signed-in user or a candidate, and the HTML error page.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use app::shell::{ErrorPage, NavUser, PageMeta};
use axum::http::StatusCode;
use leptos::prelude::*;

use crate::web::session::SignedIn;

/// Whether the hydrate bundle was built; set once when the router is built.
static HYDRATE: AtomicBool = AtomicBool::new(false);

/// Looks for `<site_dir>/pkg/gatehouse.js` and remembers whether pages
/// should load it. Pages work without it (every form is a plain form).
pub fn init(site_dir: &Path) {
    let built = site_dir.join("pkg/gatehouse.js").is_file() && site_dir.join("pkg/gatehouse_bg.wasm").is_file();
    HYDRATE.store(built, Ordering::Relaxed);
    if !built {
        tracing::info!(site_dir = %site_dir.display(), "no hydrate bundle; pages are served without scripts (build it with `cargo run -p site --release`)");
    }
}

/// Whether pages load the hydrate bundle.
pub fn hydrate() -> bool {
    HYDRATE.load(Ordering::Relaxed)
}

/// The frame of a page for a signed-in user: navigation, sign-out form with
/// the session's CSRF token.
pub fn meta(signed_in: &SignedIn, title: impl Into<String>) -> PageMeta {
    PageMeta {
        title: title.into(),
        user: Some(NavUser { name: signed_in.user.name.clone(), role: signed_in.user.role.as_str().to_string() }),
        csrf: signed_in.csrf.clone(),
        flash: None,
        hydrate: hydrate(),
    }
}

/// The frame of a candidate's page: no navigation and no session (the link
/// is the only credential).
pub fn candidate_meta(title: impl Into<String>) -> PageMeta {
    PageMeta { title: title.into(), user: None, csrf: String::new(), flash: None, hydrate: hydrate() }
}

/// Renders Markdown (prompts, rules) to HTML. Raw HTML in the source is shown
/// as text, never passed through: a packet's prompt cannot inject markup.
pub fn markdown(src: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser, html};
    let parser = Parser::new_ext(src, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).map(|e| match e {
        Event::Html(s) | Event::InlineHtml(s) => Event::Text(s),
        other => other,
    });
    let mut out = String::new();
    html::push_html(&mut out, parser);
    out
}

/// A complete HTML error page for `status` showing `message`.
pub fn error_document(status: StatusCode, message: &str) -> String {
    let reason = status.canonical_reason().unwrap_or("Error").to_string();
    let meta = PageMeta { title: reason.clone(), hydrate: false, ..PageMeta::default() };
    let message = message.to_string();
    let code = status.as_u16();
    app::shell::document(meta, move || view! { <ErrorPage status=code reason=reason message=message /> })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_document_keeps_the_message() {
        let html = error_document(StatusCode::GONE, "this link expired on 1 May");
        assert!(html.contains("410 · Gone"), "{html}");
        assert!(html.contains("this link expired on 1 May"), "{html}");
        assert!(!html.contains("gatehouse.js"), "{html}");
    }
}
