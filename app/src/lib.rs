//! Gatehouse's pages as Leptos components.
//!
//! The server (`ssr`) renders every page to a complete HTML document with
//! [`shell::document`]; forms are plain HTML forms that post to the server and
//! work with JavaScript off. The interactive parts are islands
//! ([`islands`]), hydrated in the browser by the wasm bundle (`hydrate`),
//! which carries nothing but the islands.
//!
//! Page components take plain serializable view models, so the server
//! decides what a page shows and the components only lay it out.
//!
//! The islands (`islands`) are the upload progress (from XMLHttpRequest upload
//! events, then "checking the zip"), the live status of a submission or a
//! self-test, and the invite link's Copy button. `charts` (`ssr` only) draws
//! the SVG charts (the score histogram served as `distribution.svg`, the
//! witnessed timeline on a scorecard) as Leptos `<svg>` views, so their text
//! and attributes are escaped by construction; the renderer's `<!>` hydration
//! markers are removed, since a standalone SVG is XML. `pages::transcript`
//! renders the model conversation (each call a `<details>` with its prompt,
//! answer and tool calls, among the witnessed runs) for the reviewer's
//! scorecard and the candidate's own transcript page; prompts and answers are
//! text nodes, never `inner_html`. `pages::review` lays out the assignment,
//! scorecard and receipt pages and `pages::compare` the comparison.
//! `text::escape_html` is the one escaper for the HTML the server still writes
//! by hand (the invite email, `<textarea>` contents). `ssr` and `hydrate` are
//! never enabled together.

#[cfg(feature = "ssr")]
pub mod charts;
pub mod contract;
pub mod islands;
pub mod pages;
pub mod shell;
pub mod text;

#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
}
