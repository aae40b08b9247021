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

/// The rows of a meter status answer (`{"caps": [{"cap", "limit", "used", "left"}]}`).
pub fn budget_rows(body: &serde_json::Value) -> Vec<BudgetRow> {
    body.get("caps")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let cap = c.get("cap")?.as_str()?.to_string();
            Some(BudgetRow {
                label: cap_label(&cap),
                limit: c.get("limit")?.as_i64()?,
                used: c.get("used")?.as_i64()?,
                left: c.get("left")?.as_i64()?,
                cap,
            })
        })
        .collect()
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
                budget_client::get_json(&url, move |body| {
                    let now = budget_rows(&body);
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

/// The live budget's one browser call: GET JSON with XMLHttpRequest.
#[cfg(feature = "hydrate")]
mod budget_client {
    use std::cell::RefCell;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::Closure;
    use web_sys::XmlHttpRequest;

    /// Gets `url` as JSON and hands a 200 answer to `then`; failures are
    /// ignored (the next poll tries again).
    pub fn get_json(url: &str, then: impl FnOnce(serde_json::Value) + 'static) {
        let Ok(xhr) = XmlHttpRequest::new() else { return };
        if xhr.open_with_async("GET", url, true).is_err() || xhr.set_request_header("Accept", "application/json").is_err() {
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
}
