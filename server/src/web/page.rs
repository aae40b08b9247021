//! What every page handler needs around its body: the page frame's
//! [`PageMeta`] for a signed-in user or a candidate, and the HTML error page.

use app::shell::{ErrorPage, NavUser, PageMeta};
use axum::http::StatusCode;
use leptos::prelude::*;

use crate::web::session::SignedIn;

/// The frame of a page for a signed-in user: navigation, sign-out form with
/// the session's CSRF token.
pub fn meta(signed_in: &SignedIn, title: impl Into<String>) -> PageMeta {
    PageMeta {
        title: title.into(),
        user: Some(NavUser {
            name: signed_in.user.name.clone(),
            role: signed_in.user.role.as_str().to_string(),
        }),
        csrf: signed_in.csrf.clone(),
        flash: None,
        hydrate: signed_in.hydrate,
    }
}

/// The frame of a candidate's page: no navigation and no session (the link
/// is the only credential).
pub fn candidate_meta(state: &crate::state::AppState, title: impl Into<String>) -> PageMeta {
    PageMeta {
        title: title.into(),
        user: None,
        csrf: String::new(),
        flash: None,
        hydrate: state.hydrate,
    }
}

/// Renders Markdown (prompts, rules) to HTML. Raw HTML in the source is shown
/// as text, never passed through: a packet's prompt cannot inject markup.
/// Links and images keep only `http`, `https`, `mailto` and relative URLs;
/// any other (`javascript:`, `data:`, `vbscript:` ...) loses its link and is
/// shown as its text.
pub fn markdown(src: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd, html};
    // One entry per open link / image: whether it was dropped.
    let (mut links, mut images) = (Vec::new(), Vec::new());
    let parser = Parser::new_ext(src, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH)
        .filter_map(|e| match e {
            Event::Html(s) | Event::InlineHtml(s) => Some(Event::Text(s)),
            Event::Start(Tag::Link { ref dest_url, .. }) => {
                let ok = safe_url(dest_url);
                links.push(ok);
                ok.then_some(e)
            }
            Event::Start(Tag::Image { ref dest_url, .. }) => {
                let ok = safe_url(dest_url);
                images.push(ok);
                ok.then_some(e)
            }
            Event::End(TagEnd::Link) => links.pop().unwrap_or(true).then_some(e),
            Event::End(TagEnd::Image) => images.pop().unwrap_or(true).then_some(e),
            other => Some(other),
        });
    let mut out = String::new();
    html::push_html(&mut out, parser);
    out
}

/// Whether a link target is `http`, `https`, `mailto` or relative, read the
/// way a browser reads it (tabs and newlines removed, leading spaces and
/// control characters trimmed, the scheme case-insensitive).
pub fn safe_url(url: &str) -> bool {
    let cleaned: String = url.chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
    let cleaned = cleaned.trim_start_matches(|c: char| c <= ' ' || c.is_control());
    let end = cleaned.find(['/', '?', '#', '\\']).unwrap_or(cleaned.len());
    match cleaned[..end].find(':') {
        None => true,
        Some(i) => {
            matches!(cleaned[..i].to_ascii_lowercase().as_str(), "http" | "https" | "mailto")
        }
    }
}

/// A complete HTML error page for `status` showing `message`.
pub fn error_document(status: StatusCode, message: &str) -> String {
    let reason = status.canonical_reason().unwrap_or("Error").to_string();
    let meta = PageMeta { title: reason.clone(), hydrate: false, ..PageMeta::default() };
    let message = message.to_string();
    let code = status.as_u16();
    app::shell::document(
        meta,
        move || view! { <ErrorPage status=code reason=reason message=message /> },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_link_schemes_survive() {
        let check = |url: &str, ok: bool| assert_eq!(safe_url(url), ok, "{url:?}");
        for good in [
            "https://example.test/x",
            "HTTP://x",
            "mailto:a@b.test",
            "/docs",
            "notes.md",
            "#top",
            "?q=1",
            "a/b:c",
            "",
        ] {
            check(good, true);
        }
        for bad in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            " javascript:x",
            "java\tscript:x",
            "java\nscript:x",
            "\u{1}javascript:x",
            "data:text/html,<script>",
            "vbscript:x",
            "file:///etc/passwd",
            "blob:x",
        ] {
            check(bad, false);
        }
    }

    #[test]
    fn markdown_drops_unsafe_links_and_images() {
        let html = markdown(
            "[Start here](javascript:alert(1)) [Enc](jav&#x61;script:alert(2)) and [ok](https://example.test/) ![img](data:image/svg+xml,x) ![fine](/a.png) <vbscript:x>",
        );
        assert!(!html.contains("javascript:"), "{html}");
        assert!(!html.contains("data:image"), "{html}");
        assert!(!html.contains("vbscript:x\""), "{html}");
        assert!(html.contains("Start here"), "{html}");
        assert!(html.contains(r#"<a href="https://example.test/">ok</a>"#), "{html}");
        assert!(html.contains(r#"<img src="/a.png" alt="fine" />"#), "{html}");
    }

    #[test]
    fn error_document_keeps_the_message() {
        let html = error_document(StatusCode::GONE, "this link expired on 1 May");
        assert!(html.contains("410 · Gone"), "{html}");
        assert!(html.contains("this link expired on 1 May"), "{html}");
        assert!(!html.contains("gatehouse.js"), "{html}");
    }
}
