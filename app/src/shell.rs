//! The HTML document around every page: head, navigation, flash message.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// Who is signed in, as the navigation shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NavUser {
    pub name: String,
    pub role: String,
}

/// What every page's frame needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PageMeta {
    pub title: String,
    pub user: Option<NavUser>,
    /// The session's CSRF token, for the sign-out form.
    pub csrf: String,
    /// A one-line notice shown above the page (after a redirect).
    pub flash: Option<String>,
    /// Load the hydrate bundle (false when it was not built).
    pub hydrate: bool,
}

/// The hidden CSRF field every state-changing form carries.
#[component]
pub fn CsrfField(token: String) -> impl IntoView {
    view! { <input type="hidden" name="csrf" value=token /> }
}

/// A submission or assignment state as a coloured pill (`state state-graded`);
/// the classes are in `style/gatehouse.css`. Use
/// [`crate::islands::LiveStatus`] instead where the state should follow
/// grading live.
#[component]
pub fn StatePill(state: String) -> impl IntoView {
    view! { <span class=format!("state state-{state}")>{state.clone()}</span> }
}

/// A finding's provenance badge: witnessed, replayed or claimed.
#[component]
pub fn Badge(kind: String) -> impl IntoView {
    view! { <span class=format!("badge {kind}")>{kind.clone()}</span> }
}

/// The body of an error page: the status, the message, and a way on.
#[component]
pub fn ErrorPage(status: u16, reason: String, message: String) -> impl IntoView {
    let next = match status {
        401 => view! { <a href="/login">"Sign in"</a> }.into_any(),
        _ => view! { <a href="/">"Go to the start page"</a> }.into_any(),
    };
    view! {
        <section class="error-page" id="error-page" data-status=status>
            <h1>{format!("{status} · {reason}")}</h1>
            <p class="refusal" id="error-message" role="alert">{message}</p>
            <p>{next}</p>
        </section>
    }
}

/// Renders a complete HTML document for `body`.
#[cfg(feature = "ssr")]
pub fn document<V: IntoView + 'static>(meta: PageMeta, body: impl FnOnce() -> V) -> String {
    use leptos::config::LeptosOptions;
    use leptos::hydration::HydrationScripts;

    let owner = Owner::new();
    owner.with(|| {
        let options = LeptosOptions::builder().output_name("gatehouse").site_pkg_dir("pkg").build();
        let title = if meta.title.is_empty() {
            "Gatehouse".to_string()
        } else {
            format!("{} · Gatehouse", meta.title)
        };
        let scripts =
            meta.hydrate.then(|| view! { <HydrationScripts options=options islands=true /> });
        let nav = nav(&meta);
        let flash = meta.flash.clone().map(|f| view! { <p class="flash" role="status">{f}</p> });
        let body = body();
        let doc = view! {
            <!DOCTYPE html>
            <html lang="en">
                <head>
                    <meta charset="utf-8" />
                    <meta name="viewport" content="width=device-width, initial-scale=1" />
                    <title>{title}</title>
                    <link rel="stylesheet" href="/style/gatehouse.css" />
                    {scripts}
                </head>
                <body>
                    {nav}
                    <main>{flash}{body}</main>
                </body>
            </html>
        };
        doc.to_html()
    })
}

#[cfg(feature = "ssr")]
fn nav(meta: &PageMeta) -> impl IntoView + use<> {
    let user = meta.user.clone();
    let csrf = meta.csrf.clone();
    view! {
        <header class="top">
            <a class="brand" href="/">"Gatehouse"</a>
            {user.map(|u| {
                let admin = (u.role == "admin").then(|| view! { <a href="/admin/users">"Users"</a><a href="/admin/ats">"Sign-in and ATS"</a><a href="/admin/webhooks">"Webhooks"</a><a href="/admin/retention">"Candidate data"</a> });
                view! {
                    <nav>
                        <a href="/inbox">"Inbox"</a>
                        <a href="/packets">"Packets"</a>
                        <a href="/assignments">"Assignments"</a>
                        <a href="/queue">"Queue"</a>
                        {admin}
                    </nav>
                    <form class="signout" method="post" action="/logout">
                        <CsrfField token=csrf />
                        <span class="who">{u.name}" · "{u.role}</span>
                        <button type="submit">"Sign out"</button>
                    </form>
                }
            })}
        </header>
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn document_escapes_and_marks_islands() {
        let meta = PageMeta { title: "A <b>".into(), hydrate: true, ..PageMeta::default() };
        let html = document(meta, || {
            view! {
                <p>"x < y"</p>
                <crate::islands::UploadForm action="/c/t/submit".to_string() accept_json=true />
                <crate::islands::LiveStatus url="/s/1/status".to_string() initial_state="queued".to_string() />
            }
        });
        assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
        assert!(html.contains("<title>A &lt;b&gt; · Gatehouse</title>"), "{html}");
        assert!(html.contains("x &lt; y"), "{html}");
        assert!(html.contains("leptos-island"), "{html}");
        assert!(html.contains("/pkg/gatehouse.js"), "{html}");
        // The islands render working HTML before any script runs.
        assert!(html.contains(r#"enctype="multipart/form-data""#), "{html}");
        assert!(html.contains(r#"action="/c/t/submit""#), "{html}");
        assert!(html.contains(r#"name="file""#), "{html}");
        assert!(!html.contains("data-hydrated"), "{html}");
        assert!(html.contains(r#"class="state state-queued""#), "{html}");
    }

    #[test]
    fn without_the_bundle_no_script_is_loaded() {
        let html = document(PageMeta::default(), || view! { <p>"hi"</p> });
        assert!(!html.contains("gatehouse.js"), "{html}");
        assert!(html.contains("/style/gatehouse.css"), "{html}");
    }

    #[test]
    fn error_page_shows_status_and_message() {
        let html = document(PageMeta { title: "Not Found".into(), ..PageMeta::default() }, || {
            view! { <ErrorPage status=404 reason="Not Found".into() message="packet <x> not found".into() /> }
        });
        assert!(html.contains("404 · Not Found"), "{html}");
        assert!(html.contains("packet &lt;x&gt; not found"), "{html}");
    }
}
