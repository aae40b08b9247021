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
    markdown_with(src, None, None)
}

/// [`markdown`] for a text shown under a page's own `h1` and a section's
/// `h2`: a leading `# Title` that only repeats the page's `title` is left
/// out, and the headings move down so the highest left is an `h3` (the
/// levels below follow it; past `h6` they stay `h6`): the page keeps one
/// `h1` and one outline.
pub fn markdown_below(src: &str, title: &str) -> String {
    markdown_with(src, Some(3), Some(title))
}

fn markdown_with(src: &str, top: Option<usize>, title: Option<&str>) -> String {
    use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd, html};
    // A leading `# Title` repeating the page's title is left out.
    let events: Vec<Event> =
        Parser::new_ext(src, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).collect();
    let skip = match (title, events.first()) {
        (Some(title), Some(Event::Start(Tag::Heading { level: HeadingLevel::H1, .. }))) => {
            let end = events.iter().position(|e| matches!(e, Event::End(TagEnd::Heading(_))));
            let text: String = events[..end.unwrap_or(0)]
                .iter()
                .filter_map(|e| match e {
                    Event::Text(t) | Event::Code(t) => Some(t.to_string()),
                    _ => None,
                })
                .collect();
            match end {
                Some(end) if text.trim().eq_ignore_ascii_case(title.trim()) => end + 1,
                _ => 0,
            }
        }
        _ => 0,
    };
    let highest = events[skip..]
        .iter()
        .filter_map(|e| match e {
            Event::Start(Tag::Heading { level, .. }) => Some(*level as usize),
            _ => None,
        })
        .min();
    let shift = match (top, highest) {
        (Some(top), Some(h)) => top as isize - h as isize,
        _ => 0,
    };
    let down = |l: HeadingLevel| {
        HeadingLevel::try_from(((l as isize) + shift).clamp(1, 6) as usize)
            .unwrap_or(HeadingLevel::H6)
    };
    let events = events.into_iter().skip(skip).map(|e| match e {
        Event::Start(Tag::Heading { level, id, classes, attrs }) => {
            Event::Start(Tag::Heading { level: down(level), id, classes, attrs })
        }
        Event::End(TagEnd::Heading(level)) => Event::End(TagEnd::Heading(down(level))),
        other => other,
    });
    // One entry per open link / image: whether it was dropped.
    let (mut links, mut images) = (Vec::new(), Vec::new());
    let parser = events.filter_map(|e| match e {
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
    fn a_prompt_under_the_page_title_keeps_one_h1_and_one_outline() {
        let check = |src: &str, want: &[&str], not: &[&str]| {
            let html = markdown_below(src, "A token bucket");
            for w in want {
                assert!(html.contains(w), "{w} in {html}");
            }
            for n in not {
                assert!(!html.contains(n), "no {n} in {html}");
            }
        };
        // The title repeated: left out; `##` is the highest left, an h3.
        check(
            "# A token bucket\n\nWrite it.\n\n## Rules\n\n### Detail\n",
            &["<h3>Rules</h3>", "<h4>Detail</h4>", "Write it."],
            &["<h1>", "<h2>", "A token bucket</h"],
        );
        // Another title is kept, one level under the section.
        check(
            "# Something else\n\n## Rules\n",
            &["<h3>Something else</h3>", "<h4>Rules</h4>"],
            &["<h1>"],
        );
        // No heading at all: nothing changes; deep ones stop at h6.
        check("Just text.", &["<p>Just text.</p>"], &["<h"]);
        check("##### Five\n\n###### Six\n", &["<h3>Five</h3>", "<h4>Six</h4>"], &[]);
        check(
            "# A token bucket\n\n# Two\n\n###### Deep\n",
            &["<h3>Two</h3>", "<h6>Deep</h6>"],
            &[],
        );
        // Plain markdown is not shifted.
        assert!(markdown("# A token bucket").contains("<h1>"));
    }

    #[test]
    fn error_document_keeps_the_message() {
        let html = error_document(StatusCode::GONE, "this link expired on 1 May");
        assert!(html.contains("410 · Gone"), "{html}");
        assert!(html.contains("this link expired on 1 May"), "{html}");
        assert!(!html.contains("gatehouse.js"), "{html}");
    }
}
