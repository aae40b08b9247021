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
