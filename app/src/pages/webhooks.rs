//! The admin page of webhooks: the endpoints (create one, its secret shown
//! once; disable one) and the latest deliveries with their answers, each
//! with a "Redeliver" button.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shell::CsrfField;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointRowView {
    pub id: i64,
    pub url: String,
    pub events: String,
    pub created: String,
    pub disabled: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRowView {
    pub id: i64,
    pub url: String,
    pub event: String,
    pub message_id: String,
    pub state: String,
    pub attempts: i64,
    /// The last answer's status, or "not reached".
    pub status: String,
    pub answer: String,
    /// When it was delivered, or when it is next tried.
    pub when: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WebhooksView {
    pub csrf: String,
    pub endpoints: Vec<EndpointRowView>,
    pub deliveries: Vec<DeliveryRowView>,
    /// A secret just created, shown this once.
    pub new_secret: Option<String>,
    /// Every event type, in order.
    pub events: Vec<String>,
}

#[component]
pub fn WebhooksPage(vm: WebhooksView) -> impl IntoView {
    let csrf = vm.csrf.clone();
    let endpoints = vm
        .endpoints
        .iter()
        .map(|e| {
            let action = format!("/admin/webhooks/{}/disable", e.id);
            let state = match &e.disabled {
                Some(at) => view! { <span>"disabled "{at.clone()}</span> }.into_any(),
                None => view! {
                    <form method="post" action=action class="inline">
                        <CsrfField token=csrf.clone() />
                        <button type="submit">"Disable"</button>
                    </form>
                }
                .into_any(),
            };
            view! {
                <tr>
                    <td><code>{e.url.clone()}</code></td>
                    <td>{e.events.clone()}</td>
                    <td>{e.created.clone()}</td>
                    <td>{state}</td>
                </tr>
            }
        })
        .collect_view();
    let deliveries = vm
        .deliveries
        .iter()
        .map(|d| {
            let action = format!("/admin/webhooks/deliveries/{}/redeliver", d.id);
            view! {
                <tr class=format!("delivery {}", d.state)>
                    <td>{d.id}</td>
                    <td>{d.event.clone()}</td>
                    <td><code>{d.message_id.clone()}</code></td>
                    <td><code>{d.url.clone()}</code></td>
                    <td>{d.state.clone()}</td>
                    <td>{d.attempts}</td>
                    <td>{d.status.clone()}</td>
                    <td><code class="answer">{d.answer.clone()}</code></td>
                    <td>{d.when.clone()}</td>
                    <td>
                        <form method="post" action=action class="inline">
                            <CsrfField token=csrf.clone() />
                            <button type="submit">"Redeliver"</button>
                        </form>
                    </td>
                </tr>
            }
        })
        .collect_view();
    let new_secret = vm.new_secret.map(|k| {
        view! {
            <div class="new-token" role="status">
                <p>"The new endpoint's signing secret, shown only now. Give it to the receiver's Standard Webhooks verifier:"</p>
                <p><code class="webhook-secret">{k}</code></p>
            </div>
        }
    });
    let empty =
        vm.deliveries.is_empty().then(|| view! { <p class="empty">"No deliveries yet."</p> });
    view! {
        <h1>"Webhooks"</h1>
        <section>
            <h2>"Endpoints"</h2>
            <p class="hint">"Each event is posted as JSON, signed per the Standard Webhooks specification (webhook-id, webhook-timestamp, webhook-signature), and tried again with a growing wait until the receiver answers 2xx. Events carry identifiers and links, never a score, name or email."</p>
            {new_secret}
            <table class="webhooks">
                <thead><tr><th>"URL"</th><th>"Events"</th><th>"Created"</th><th>"Disable"</th></tr></thead>
                <tbody>{endpoints}</tbody>
            </table>
            <form method="post" action="/admin/webhooks" class="narrow">
                <CsrfField token=vm.csrf.clone() />
                <label>"URL" <input type="url" name="url" required maxlength="2000" placeholder="https://hooks.example.com/gatehouse" /></label>
                <fieldset>
                    <legend>"Events"</legend>
                    {vm.events.iter().map(|e| view! {
                        <label><input type="checkbox" name="events" value=e.clone() checked />" "{e.clone()}</label>
                    }).collect_view()}
                </fieldset>
                <button type="submit">"Add endpoint"</button>
            </form>
        </section>
        <section>
            <h2>"Latest deliveries"</h2>
            {empty}
            <table class="deliveries">
                <thead><tr><th>"#"</th><th>"Event"</th><th>"webhook-id"</th><th>"URL"</th><th>"State"</th><th>"Attempts"</th><th>"Answer"</th><th>"Body"</th><th>"Delivered / next try"</th><th>"Redeliver"</th></tr></thead>
                <tbody>{deliveries}</tbody>
            </table>
        </section>
    }
}
