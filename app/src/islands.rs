//! Islands: the only components hydrated in the browser. Their props cross
//! from server to browser as JSON, so they must be serializable.

use leptos::prelude::*;

/// A placeholder island proving the hydrate bundle loads; replaced by the
/// real islands (upload progress, live status).
#[island]
pub fn Counter(start: u32) -> impl IntoView {
    let (n, set_n) = signal(start);
    view! { <button class="counter" on:click=move |_| set_n.update(|n| *n += 1)>{n}</button> }
}
