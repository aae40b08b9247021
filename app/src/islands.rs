//! Islands: the only components hydrated in the browser. Their props cross
//! from server to browser as JSON, so they must be serializable.
//!
//! Every island renders complete, working HTML on the server, so the page
//! does the same job with JavaScript off; hydration only adds comfort
//! (an upload progress bar, live status). Once an island has hydrated, its
//! root element carries `data-hydrated="true"`, which the browser tests use
//! to tell that the bundle loaded.
//!
//! How pages use them (props are plain strings and booleans):
//!
//! - `<UploadForm action=format!("/c/{token}/submit") accept_json=true />`
//!   renders `<form id="upload-form" method="post"
//!   enctype="multipart/form-data">` with a `file` field (`#upload-file`)
//!   and a submit button (`#upload-submit`). Optional props: `csrf` (adds the
//!   hidden `csrf` field), `label` (the field's label), `button` (the
//!   button's text). With `accept_json`, the hydrated form sends the file
//!   with `Accept: application/json`, shows `<progress id="upload-progress">`
//!   with the share of the body sent (XMLHttpRequest upload progress events,
//!   not the browser's buffer) and `#upload-phase` ("Uploading: 40 %", then
//!   "Uploaded; checking the zip…" while the server checks it), shows the server's `{"error"}` in `#upload-error` on a
//!   refusal, and goes to the `receipt_url` of a 201 answer.
//! - `<LiveStatus url=format!("/c/{token}/submissions/{id}/status")
//!   initial_state=submission.state />` renders the state pill
//!   `<span id="live-state" class="state state-<state>">`; hydrated, it polls
//!   `url` (which answers `{"state", ...}`) every 1.5 s, updates the pill,
//!   and reloads the page once the state is final (graded, failed, refused,
//!   done; or the `final_states` given, as the self-test's passed and
//!   failed). The packet page uses it for the self-test's and a mutation
//!   audit's status.
//! - `<LiveQueue url="/queue/status".to_string() />` renders a small "live"
//!   note; hydrated, it polls `url` (`{"jobs": [...]}`) and reloads the page
//!   when any job's state changes.
//! - `<CopyButton target="invite-url".to_string() />` renders
//!   `<button id="copy-link" hidden>`; hydrated, it shows, and a click
//!   selects the `<input id=target>` and writes its value to the clipboard,
//!   then reads "Copied" (`data-copied="true"`) or how to copy by hand.

use leptos::prelude::*;

pub use crate::contract::FINAL_STATES;

/// Whether `state` is final (see [`FINAL_STATES`]).
pub fn is_final(state: &str) -> bool {
    FINAL_STATES.contains(&state)
}

/// How often the live islands poll, in milliseconds.
pub const POLL_MS: u64 = 1500;

/// A zip upload form that works as a plain multipart form and, once
/// hydrated, uploads in the background with a progress bar.
#[island]
pub fn UploadForm(
    /// Where the form posts (the multipart field is `file`).
    action: String,
    /// Upload with `Accept: application/json` when hydrated (the endpoint
    /// answers 201 `{"receipt_url"}` or 4xx `{"error"}`); when false, the
    /// hydrated form still submits as a plain form.
    accept_json: bool,
    /// The session's CSRF token, when the endpoint wants one.
    #[prop(optional)]
    csrf: Option<String>,
    /// The file field's label.
    #[prop(optional)]
    label: Option<String>,
    /// The submit button's text.
    #[prop(optional)]
    button: Option<String>,
) -> impl IntoView {
    let (hydrated, set_hydrated) = signal(false);
    let (progress, set_progress) = signal(None::<f64>);
    let (error, set_error) = signal(None::<String>);
    let (busy, set_busy) = signal(false);
    // The whole file has reached the server, which is checking it now.
    let (sent, set_sent) = signal(false);
    // Effects run only in the browser, so this marks hydration.
    Effect::new(move |_| set_hydrated.set(true));

    let label = label.unwrap_or_else(|| "Your submission (a .zip file)".to_string());
    let button = button.unwrap_or_else(|| "Upload".to_string());
    let target = action.clone();
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        #[cfg(feature = "hydrate")]
        {
            if !accept_json {
                return;
            }
            ev.prevent_default();
            if busy.get_untracked() {
                return;
            }
            let Some(form) = client::form_of(&ev) else { return };
            set_error.set(None);
            set_progress.set(Some(0.0));
            set_sent.set(false);
            set_busy.set(true);
            let started = client::upload(
                &form,
                &target,
                move |pct| set_progress.set(Some(pct)),
                move || {
                    set_progress.set(Some(100.0));
                    set_sent.set(true);
                },
                move |outcome| match outcome {
                    Ok(receipt_url) => {
                        set_progress.set(Some(100.0));
                        client::go_to(&receipt_url);
                    }
                    Err(message) => {
                        set_progress.set(None);
                        set_sent.set(false);
                        set_busy.set(false);
                        set_error.set(Some(message));
                        // The message renders on the next frame; bring it into view.
                        request_animation_frame(|| client::reveal("upload-error"));
                    }
                },
            );
            if let Err(message) = started {
                set_progress.set(None);
                set_busy.set(false);
                set_error.set(Some(message));
            }
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (ev, accept_json, &target, set_progress, set_error, set_busy, set_sent);
    };

    view! {
        <form
            class="upload"
            id="upload-form"
            method="post"
            enctype="multipart/form-data"
            action=action
            data-hydrated=move || hydrated.get().then_some("true")
            on:submit=on_submit
        >
            {csrf.map(|token| view! { <input type="hidden" name="csrf" value=token /> })}
            <label for="upload-file">{label}</label>
            <input type="file" id="upload-file" name="file" accept=".zip,application/zip" required=true />
            <button type="submit" id="upload-submit" disabled=move || busy.get()>{button}</button>
            {move || {
                progress
                    .get()
                    .map(|pct| {
                        // The bytes the browser has sent, from the upload's
                        // progress events; then the server checks the zip.
                        let phase = if sent.get() { "Uploaded; checking the zip…".to_string() } else { format!("Uploading: {pct:.0} %") };
                        view! {
                            <progress id="upload-progress" max="100" value=format!("{pct:.0}")>
                                {format!("{pct:.0}%")}
                            </progress>
                            <span id="upload-phase" role="status" data-sent=move || sent.get().then_some("true")>{phase}</span>
                        }
                    })
            }}
            {move || error.get().map(|e| view! { <p class="refusal" id="upload-error" role="alert">{e}</p> })}
        </form>
    }
}

/// A submission's state pill that follows grading live.
#[island]
pub fn LiveStatus(
    /// The status endpoint, answering `{"state", "decision", "score"}`.
    url: String,
    /// The state the server rendered.
    initial_state: String,
    /// The states after which polling stops and the page reloads, when not
    /// a submission's [`FINAL_STATES`] (a self-test: passed, failed).
    #[prop(optional)]
    final_states: Option<Vec<String>>,
    /// The candidate's sentence about the submission's place in line (the
    /// status answers it as `queue.sentence` while it waits); given, even
    /// empty, the island shows it under the pill and keeps it current.
    #[prop(optional)]
    wait: Option<String>,
) -> impl IntoView {
    let (state, set_state) = signal(initial_state.clone());
    let shows_wait = wait.is_some();
    let (wait_text, set_wait) = signal(wait.unwrap_or_default());
    let (hydrated, set_hydrated) = signal(false);
    Effect::new(move |_| set_hydrated.set(true));
    let finals =
        final_states.unwrap_or_else(|| FINAL_STATES.iter().map(|s| s.to_string()).collect());

    #[cfg(feature = "hydrate")]
    if !finals.contains(&initial_state) {
        let handle = std::rc::Rc::new(std::cell::Cell::new(None::<IntervalHandle>));
        let keep = handle.clone();
        let started = set_interval_with_handle(
            move || {
                let handle = keep.clone();
                let finals = finals.clone();
                client::get_json(&url, move |body| {
                    let Ok(crate::contract::LiveWait { state: now, queue }) =
                        serde_json::from_value(body)
                    else {
                        return;
                    };
                    let sentence = queue.map(|q| q.sentence).unwrap_or_default();
                    if shows_wait && sentence != wait_text.get_untracked() {
                        set_wait.set(sentence);
                    }
                    let now = now.as_str();
                    if now != state.get_untracked() {
                        set_state.set(now.to_string());
                    }
                    if finals.iter().any(|f| f == now) {
                        if let Some(h) = handle.take() {
                            h.clear();
                        }
                        client::reload();
                    }
                });
            },
            std::time::Duration::from_millis(POLL_MS),
        );
        handle.set(started.ok());
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (&url, set_state, finals, set_wait);

    view! {
        <span
            id="live-state"
            class=move || format!("state state-{}", state.get())
            data-state=move || state.get()
            data-hydrated=move || hydrated.get().then_some("true")
            aria-live="polite"
        >
            {move || state.get()}
        </span>
        {shows_wait.then(|| view! {
            <span class="queue-wait" id="queue-wait" aria-live="polite" hidden=move || wait_text.get().is_empty()>
                {move || wait_text.get()}
            </span>
        })}
    }
}

/// Reloads the page whenever the grading queue changes, so a server-rendered
/// queue table stays current.
#[island]
pub fn LiveQueue(
    /// The queue endpoint, answering `{"jobs": [{"id", "state", ...}]}`.
    url: String,
) -> impl IntoView {
    let (hydrated, set_hydrated) = signal(false);
    Effect::new(move |_| set_hydrated.set(true));

    #[cfg(feature = "hydrate")]
    {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(None::<String>));
        let _ = set_interval_with_handle(
            move || {
                let seen = seen.clone();
                client::get_json(&url, move |body| {
                    let Ok(queue) = serde_json::from_value::<crate::contract::QueueStatus>(body)
                    else {
                        return;
                    };
                    let now = queue.signature();
                    let mut seen = seen.borrow_mut();
                    match seen.as_deref() {
                        Some(before) if before != now => client::reload(),
                        _ => *seen = Some(now),
                    }
                });
            },
            std::time::Duration::from_millis(POLL_MS),
        );
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = &url;

    view! {
        <p class="live-note" id="live-queue" data-hydrated=move || hydrated.get().then_some("true")>
            {move || if hydrated.get() { "Updating live." } else { "Reload the page to update." }}
        </p>
    }
}

/// A Copy button for a read-only field (an invite link). It is hidden until
/// hydrated (with JavaScript off the field is there to select and copy by
/// hand); clicked, it selects the field's text and writes it to the
/// clipboard, then says "Copied" (or how to copy when the browser refused).
#[island]
pub fn CopyButton(
    /// The id of the `<input>` whose value is copied.
    target: String,
) -> impl IntoView {
    let (hydrated, set_hydrated) = signal(false);
    let (said, set_said) = signal(None::<&'static str>);
    Effect::new(move |_| set_hydrated.set(true));
    let on_click = move |_| {
        #[cfg(feature = "hydrate")]
        client::copy_field(&target, move |ok| {
            set_said.set(Some(if ok { "Copied" } else { "Selected: press Ctrl+C to copy" }))
        });
        #[cfg(not(feature = "hydrate"))]
        {
            let _ = (&target, set_said);
        }
    };
    view! {
        <button
            type="button"
            class="copy"
            id="copy-link"
            hidden=move || !hydrated.get()
            data-hydrated=move || hydrated.get().then_some("true")
            data-copied=move || said.get().map(|s| if s == "Copied" { "true" } else { "false" })
            on:click=on_click
        >
            {move || said.get().unwrap_or("Copy link")}
        </button>
    }
}

/// The browser calls behind the islands: XMLHttpRequest for both the upload
/// (it reports upload progress, which fetch does not) and the polling.
#[cfg(feature = "hydrate")]
mod client {
    use std::cell::RefCell;
    use std::rc::Rc;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::Closure;
    use web_sys::{FormData, HtmlFormElement, ProgressEvent, XmlHttpRequest};

    fn js_error(what: &str) -> impl Fn(wasm_bindgen::JsValue) -> String + '_ {
        move |e| format!("{what} failed in the browser: {e:?}")
    }

    /// The form a submit event came from.
    pub fn form_of(ev: &web_sys::SubmitEvent) -> Option<HtmlFormElement> {
        ev.target()?.dyn_into::<HtmlFormElement>().ok()
    }

    /// Posts `form` to `action` as multipart with `Accept: application/json`.
    /// `progress` gets the percentage of the body sent (the upload's
    /// progress events); `sent` is called once the whole body is sent (the
    /// server is checking it); `done` gets the receipt URL of a 201, or the
    /// message to show.
    pub fn upload(
        form: &HtmlFormElement,
        action: &str,
        progress: impl Fn(f64) + 'static,
        sent: impl Fn() + 'static,
        done: impl FnOnce(Result<String, String>) + 'static,
    ) -> Result<(), String> {
        let data = FormData::new_with_form(form).map_err(js_error("reading the form"))?;
        let xhr = XmlHttpRequest::new().map_err(js_error("starting the upload"))?;
        xhr.open_with_async("POST", action, true).map_err(js_error("starting the upload"))?;
        xhr.set_request_header("Accept", "application/json")
            .map_err(js_error("starting the upload"))?;

        let on_progress = Closure::<dyn FnMut(ProgressEvent)>::new(move |e: ProgressEvent| {
            if e.length_computable() && e.total() > 0.0 {
                progress((e.loaded() / e.total() * 100.0).clamp(0.0, 100.0));
            }
        });
        let watch = xhr.upload().map_err(js_error("watching the upload"))?;
        watch.set_onprogress(Some(on_progress.as_ref().unchecked_ref()));
        on_progress.forget();
        let on_sent = Closure::<dyn FnMut()>::new(move || sent());
        watch.set_onload(Some(on_sent.as_ref().unchecked_ref()));
        on_sent.forget();

        // Exactly one of load and error fires; the callback is taken once.
        let done = Rc::new(RefCell::new(Some(done)));
        let finished = done.clone();
        let request = xhr.clone();
        let on_load = Closure::<dyn FnMut()>::new(move || {
            let status = request.status().unwrap_or(0);
            let text = request.response_text().ok().flatten().unwrap_or_default();
            if let Some(f) = finished.borrow_mut().take() {
                f(super::upload_outcome(status, &text));
            }
        });
        xhr.set_onload(Some(on_load.as_ref().unchecked_ref()));
        on_load.forget();
        let on_error = Closure::<dyn FnMut()>::new(move || {
            if let Some(f) = done.borrow_mut().take() {
                f(Err("The upload did not reach the server: the connection failed or was closed (a file over the size limit is cut off).".into()));
            }
        });
        xhr.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        on_error.forget();

        xhr.send_with_opt_form_data(Some(&data)).map_err(js_error("sending the upload"))
    }

    /// Gets `url` as JSON and hands a successful answer to `then`; failures
    /// are ignored (the next poll tries again).
    pub fn get_json(url: &str, then: impl FnOnce(serde_json::Value) + 'static) {
        let Ok(xhr) = XmlHttpRequest::new() else { return };
        if xhr.open_with_async("GET", url, true).is_err()
            || xhr.set_request_header("Accept", "application/json").is_err()
        {
            return;
        }
        let request = xhr.clone();
        let then = RefCell::new(Some(then));
        let on_load = Closure::<dyn FnMut()>::new(move || {
            if request.status().unwrap_or(0) != 200 {
                return;
            }
            let text = request.response_text().ok().flatten().unwrap_or_default();
            if let (Ok(body), Some(f)) = (serde_json::from_str(&text), then.borrow_mut().take()) {
                f(body);
            }
        });
        xhr.set_onload(Some(on_load.as_ref().unchecked_ref()));
        on_load.forget();
        let _ = xhr.send();
    }

    /// Scrolls the element with `id` into view, when there is one.
    pub fn reveal(id: &str) {
        if let Some(e) = leptos::prelude::document().get_element_by_id(id) {
            e.scroll_into_view();
        }
    }

    /// Selects the text of the input `id` and writes it to the clipboard;
    /// `then(true)` once written, `then(false)` when the browser refused.
    pub fn copy_field(id: &str, then: impl Fn(bool) + Clone + 'static) {
        let Some(input) = leptos::prelude::document()
            .get_element_by_id(id)
            .and_then(|e| e.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            then(false);
            return;
        };
        input.select();
        let text = input.value();
        let clipboard = leptos::prelude::window().navigator().clipboard();
        let ok = then.clone();
        let on_ok = Closure::once(move |_: wasm_bindgen::JsValue| ok(true));
        let on_err = Closure::once(move |_: wasm_bindgen::JsValue| then(false));
        let _ = clipboard.write_text(&text).then2(&on_ok, &on_err);
        on_ok.forget();
        on_err.forget();
    }

    pub fn go_to(url: &str) {
        let _ = leptos::prelude::window().location().set_href(url);
    }

    pub fn reload() {
        let _ = leptos::prelude::window().location().reload();
    }
}

/// What an upload's answer means: the receipt URL of a 201 (or 200), else
/// the message to show the candidate.
pub fn upload_outcome(status: u16, body: &str) -> Result<String, String> {
    let json: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let field = |name: &str| {
        json.as_ref().and_then(|j| j.get(name)).and_then(|v| v.as_str()).map(str::to_string)
    };
    match status {
        200 | 201 => field("receipt_url").ok_or_else(|| {
            "The upload was accepted, but the answer had no receipt link; reload the page."
                .to_string()
        }),
        _ => Err(field("error")
            .unwrap_or_else(|| format!("The server refused the upload (HTTP {status})."))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_outcome_reads_the_contract() {
        assert_eq!(
            upload_outcome(201, r#"{"id":1,"receipt_url":"/c/t/submissions/1"}"#),
            Ok("/c/t/submissions/1".into())
        );
        assert_eq!(
            upload_outcome(422, r#"{"error":"entry ../evil escapes the folder"}"#),
            Err("entry ../evil escapes the folder".into())
        );
        assert_eq!(
            upload_outcome(413, "cut off"),
            Err("The server refused the upload (HTTP 413).".into())
        );
    }

    #[test]
    fn final_states() {
        assert!(
            is_final("graded") && is_final("failed") && is_final("refused") && is_final("done")
        );
        assert!(!is_final("queued") && !is_final("grading") && !is_final("running"));
    }
}

/// One budget on the candidate page: what is used and left of a cap.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BudgetRow {
    /// The manifest name (`model_calls`, `tokens`, `request_bytes`, `time_box_minutes`).
    pub cap: String,
    /// The name people read ("Model calls").
    pub label: String,
    pub limit: i64,
    pub used: i64,
    pub left: i64,
}

/// The people's name of a cap.
pub fn cap_label(cap: &str) -> String {
    match cap {
        "model_calls" => "Model calls".into(),
        "tokens" => "Tokens".into(),
        "request_bytes" => "Request bytes".into(),
        "time_box_minutes" => "Time box (minutes)".into(),
        other => other.replace('_', " "),
    }
}

/// The rows of a meter status answer, one per cap.
pub fn budget_rows(status: &crate::contract::MeterStatus) -> Vec<BudgetRow> {
    status.caps.iter().map(BudgetRow::from).collect()
}

impl From<&crate::contract::CapUse> for BudgetRow {
    fn from(c: &crate::contract::CapUse) -> BudgetRow {
        BudgetRow {
            label: cap_label(&c.cap),
            cap: c.cap.clone(),
            limit: c.limit,
            used: c.used,
            left: c.left,
        }
    }
}

/// What is left of each model budget, as a table the server renders;
/// hydrated, it polls `url` (`GET /c/{token}/meter`) every few seconds and
/// updates the figures in place.
#[island]
pub fn LiveBudget(
    /// The meter status endpoint of the assignment.
    url: String,
    /// The rows the server rendered.
    initial: Vec<BudgetRow>,
) -> impl IntoView {
    let (rows, set_rows) = signal(initial);
    let (hydrated, set_hydrated) = signal(false);
    Effect::new(move |_| set_hydrated.set(true));

    #[cfg(feature = "hydrate")]
    {
        let _ = set_interval_with_handle(
            move || {
                client::get_json(&url, move |body| {
                    let Ok(status) = serde_json::from_value::<crate::contract::MeterStatus>(body)
                    else {
                        return;
                    };
                    let now = budget_rows(&status);
                    if now != rows.get_untracked() {
                        set_rows.set(now);
                    }
                });
            },
            std::time::Duration::from_millis(3000),
        );
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (&url, set_rows);

    view! {
        <table class="budgets live-budget" id="live-budget" data-hydrated=move || hydrated.get().then_some("true") aria-live="polite">
            <thead><tr><th>"Budget"</th><th>"Used"</th><th>"Left"</th><th>"Limit"</th></tr></thead>
            <tbody>
                {move || {
                    rows.get()
                        .into_iter()
                        .map(|r| {
                            view! {
                                <tr data-cap=r.cap.clone() class=if r.left == 0 { "spent" } else { "" }>
                                    <th scope="row">{r.label.clone()}</th>
                                    <td class="used">{r.used}</td>
                                    <td class="left">{r.left}</td>
                                    <td class="limit">{r.limit}</td>
                                </tr>
                            }
                        })
                        .collect_view()
                }}
            </tbody>
        </table>
    }
}
