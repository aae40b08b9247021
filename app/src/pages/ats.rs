//! The admin page of the hiring team's stack: how people sign in (the
//! OpenID Connect issuers and the password setting, from the server's
//! configuration) and the ATS connections (Greenhouse's Assessment Partner
//! API), each with its own key.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shell::CsrfField;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AtsRowView {
    pub id: i64,
    pub name: String,
    pub results: String,
    pub blind_review: bool,
    pub deadline_days: i64,
    pub callback_hosts: String,
    pub created: String,
    pub revoked: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AtsView {
    pub csrf: String,
    pub connections: Vec<AtsRowView>,
    /// A key just created, shown this once.
    pub new_key: Option<String>,
    /// `<public URL>/ats/greenhouse`, the base of the endpoints.
    pub endpoint_base: String,
    /// The identity providers: (label, issuer, allowed domains, default role).
    pub sso: Vec<(String, String, String, String)>,
    pub password_sign_in: bool,
    pub break_glass_admin: Option<String>,
}

const RESULTS: [(&str, &str); 3] = [
    ("never", "never: the ATS learns that the test is graded, not the score"),
    ("after-review", "after review: score and decision once a reviewer has scored"),
    ("immediately", "immediately: score and decision once graded"),
];

#[component]
pub fn AtsPage(vm: AtsView) -> impl IntoView {
    let csrf = vm.csrf.clone();
    let rows = vm
        .connections
        .iter()
        .map(|c| {
            let action = format!("/admin/ats/{}/revoke", c.id);
            let state = match &c.revoked {
                Some(at) => view! { <span>"revoked "{at.clone()}</span> }.into_any(),
                None => view! {
                    <form method="post" action=action class="inline">
                        <CsrfField token=csrf.clone() />
                        <button type="submit">"Revoke"</button>
                    </form>
                }
                .into_any(),
            };
            view! {
                <tr>
                    <td>{c.name.clone()}</td>
                    <td>{c.results.clone()}</td>
                    <td>{if c.blind_review { "on" } else { "off" }}</td>
                    <td>{format!("{} days", c.deadline_days)}</td>
                    <td>{c.callback_hosts.clone()}</td>
                    <td>{c.created.clone()}</td>
                    <td>{state}</td>
                </tr>
            }
        })
        .collect_view();
    let new_key = vm.new_key.map(|k| {
        view! {
            <div class="new-token" role="status">
                <p>"The new connection's key, shown only now (Gatehouse keeps only its hash). Give it to Greenhouse as the API key; it is sent as the HTTP Basic username:"</p>
                <p><code class="ats-key">{k}</code></p>
            </div>
        }
    });
    let sso = if vm.sso.is_empty() {
        view! { <p class="empty">"No identity provider is configured ([oidc.<name>] in gatehouse.toml)."</p> }.into_any()
    } else {
        view! {
            <table class="sso">
                <thead><tr><th>"Provider"</th><th>"Issuer"</th><th>"Accounts made for"</th><th>"Default role"</th></tr></thead>
                <tbody>{vm.sso.iter().map(|(label, issuer, domains, role)| view! {
                    <tr><td>{label.clone()}</td><td><code>{issuer.clone()}</code></td><td>{if domains.is_empty() { "no domain (accounts are made by an admin)".to_string() } else { domains.clone() }}</td><td>{role.clone()}</td></tr>
                }).collect_view()}</tbody>
            </table>
        }
        .into_any()
    };
    let password = if vm.password_sign_in {
        "Password sign-in: on for every account.".to_string()
    } else {
        format!(
            "Password sign-in: off, except for the break-glass admin {}.",
            vm.break_glass_admin.unwrap_or_default()
        )
    };
    let base = vm.endpoint_base.clone();
    view! {
        <h1>"Sign-in and ATS"</h1>
        <section>
            <h2>"Single sign-on"</h2>
            {sso}
            <p>{password}</p>
            <p class="hint">"Set in the server's configuration (gatehouse.toml); client secrets are never shown."</p>
        </section>
        <section>
            <h2>"ATS connections (Greenhouse)"</h2>
            <p>"Greenhouse's endpoints: "<code>{format!("{base}/list_tests")}</code>", "<code>{format!("{base}/send_test")}</code>", "<code>{format!("{base}/test_status")}</code>" and "<code>{format!("{base}/response_error")}</code>"."</p>
            {new_key}
            <table class="ats">
                <thead><tr><th>"Name"</th><th>"Results"</th><th>"Blind review"</th><th>"Deadline"</th><th>"Callback hosts"</th><th>"Created"</th><th>"Revoke"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <form method="post" action="/admin/ats" class="narrow">
                <CsrfField token=vm.csrf.clone() />
                <label>"Name" <input type="text" name="name" required maxlength="200" placeholder="Greenhouse (Acme)" /></label>
                <label>"What the ATS learns of results" <select name="results">{RESULTS.iter().map(|(v, l)| view! { <option value=*v>{*l}</option> }).collect_view()}</select></label>
                <label><input type="checkbox" name="blind_review" value="on" />" Blind review (the ATS gets no score until a reviewer has scored)"</label>
                <label>"Days to deadline" <input type="number" name="deadline_days" min="1" max="365" value="7" required /></label>
                <label>"Callback hosts (space-separated)" <input type="text" name="callback_hosts" value="app.greenhouse.io" /></label>
                <button type="submit">"Create connection"</button>
            </form>
        </section>
    }
}
