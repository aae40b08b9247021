//! Admin pages: accounts and integration API tokens.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shell::CsrfField;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserRowView {
    pub id: i64,
    pub email: String,
    pub name: String,
    pub role: String,
    pub disabled: bool,
    pub created: String,
    /// The signed-in admin's own row (no self-demotion or self-disable).
    pub is_self: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRowView {
    pub id: i64,
    pub name: String,
    pub user_email: String,
    pub created: String,
    pub revoked: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdminView {
    pub csrf: String,
    pub users: Vec<UserRowView>,
    pub tokens: Vec<TokenRowView>,
    /// A token just created, shown this once.
    pub new_token: Option<String>,
    pub error: Option<String>,
    /// The model meter's upstreams as configured: (which packets, URL,
    /// whether a key is set). The key itself is never shown.
    #[serde(default)]
    pub upstreams: Vec<(String, String, bool)>,
}

const ROLES: [&str; 3] = ["reviewer", "author", "admin"];

fn role_options(selected: &str) -> impl IntoView + use<> {
    ROLES
        .iter()
        .map(|r| view! { <option value=*r selected=*r == selected>{*r}</option> })
        .collect_view()
}

#[component]
pub fn AdminPage(vm: AdminView) -> impl IntoView {
    let csrf = vm.csrf.clone();
    let users = vm
        .users
        .iter()
        .map(|u| {
            let action = format!("/admin/users/{}", u.id);
            let status = if u.disabled { "disabled" } else { "active" };
            let edit = (!u.is_self).then(|| {
                view! {
                    <form method="post" action=action class="inline">
                        <CsrfField token=csrf.clone() />
                        <select name="role">{role_options(&u.role)}</select>
                        <label><input type="checkbox" name="disabled" value="on" checked=u.disabled />" disabled"</label>
                        <button type="submit">"Save"</button>
                    </form>
                }
            });
            let reset = format!("/admin/users/{}/password", u.id);
            let reset_label = format!("New password for {}", u.email);
            let reset_form = view! {
                <details class="reset-password">
                    <summary>"Reset password…"</summary>
                    <form method="post" action=reset class="inline">
                        <CsrfField token=csrf.clone() />
                        <label class="sr-only" for=format!("password-{}", u.id)>{reset_label}</label>
                        <input type="password" id=format!("password-{}", u.id) name="password" required minlength="8" maxlength="1024" autocomplete="new-password" placeholder="new password (8+ characters)" />
                        <button type="submit">"Set password"</button>
                    </form>
                </details>
            };
            view! {
                <tr>
                    <td>{u.email.clone()}</td>
                    <td>{u.name.clone()}</td>
                    <td>{u.role.clone()}</td>
                    <td>{status}</td>
                    <td>{u.created.clone()}</td>
                    <td>{edit}{reset_form}</td>
                </tr>
            }
        })
        .collect_view();
    let user_options = vm
        .users
        .iter()
        .filter(|u| !u.disabled)
        .map(|u| view! { <option value=u.id.to_string()>{u.email.clone()}</option> })
        .collect_view();
    let tokens = vm
        .tokens
        .iter()
        .map(|t| {
            let action = format!("/admin/tokens/{}/revoke", t.id);
            let state = match &t.revoked {
                Some(at) => view! { <span>"revoked "{at.clone()}</span> }.into_any(),
                None => view! {
                    <form method="post" action=action class="inline">
                        <CsrfField token=csrf.clone() />
                        <button type="submit">"Revoke"</button>
                    </form>
                }
                .into_any(),
            };
            view! { <tr><td>{t.name.clone()}</td><td>{t.user_email.clone()}</td><td>{t.created.clone()}</td><td>{state}</td></tr> }
        })
        .collect_view();
    let new_token = vm.new_token.map(|t| {
        view! {
            <div class="new-token" role="status">
                <p>"The new API token, shown only now (Gatehouse keeps only its hash):"</p>
                <p><code class="api-token">{t}</code></p>
            </div>
        }
    });
    view! {
        <h1>"Users"</h1>
        {vm.error.map(|e| view! { <p class="error" role="alert">{e}</p> })}
        <table class="users">
            <thead><tr><th>"Email"</th><th>"Name"</th><th>"Role"</th><th>"Status"</th><th>"Created"</th><th>"Change"</th></tr></thead>
            <tbody>{users}</tbody>
        </table>
        <section>
            <h2>"Add a user"</h2>
            <form method="post" action="/admin/users" class="narrow">
                <CsrfField token=vm.csrf.clone() />
                <label>"Email" <input type="email" name="email" required /></label>
                <label>"Name" <input type="text" name="name" required /></label>
                <label>"Role" <select name="role">{role_options("reviewer")}</select></label>
                <label>"Password (at least 8 characters)" <input type="password" name="password" required minlength="8" autocomplete="new-password" /></label>
                <button type="submit">"Add user"</button>
            </form>
        </section>
        <section class="model-upstream">
            <h2>"Model upstream"</h2>
            {if vm.upstreams.is_empty() {
                view! { <p class="empty">"No model upstream is configured: the meter refuses candidates' model calls (503). Set GATEHOUSE_MODEL_UPSTREAM_URL (and GATEHOUSE_MODEL_UPSTREAM_KEY), or model_upstreams per packet in gatehouse.toml, and restart."</p> }.into_any()
            } else {
                view! {
                    <table class="upstreams">
                        <thead><tr><th>"For"</th><th>"Upstream URL"</th><th>"Key"</th></tr></thead>
                        <tbody>{vm.upstreams.iter().map(|(scope, url, key)| view! {
                            <tr><td>{scope.clone()}</td><td><code>{url.clone()}</code></td><td>{if *key { "set (not shown)" } else { "none" }}</td></tr>
                        }).collect_view()}</tbody>
                    </table>
                    <p class="hint">"Set in the server's configuration (gatehouse.toml or GATEHOUSE_MODEL_UPSTREAM_*); keys are never shown."</p>
                }
                .into_any()
            }}
        </section>
        <section>
            <h2>"API tokens"</h2>
            {new_token}
            <table class="tokens">
                <thead><tr><th>"Name"</th><th>"Acts as"</th><th>"Created"</th><th>"Revoke"</th></tr></thead>
                <tbody>{tokens}</tbody>
            </table>
            <form method="post" action="/admin/tokens" class="narrow">
                <CsrfField token=vm.csrf.clone() />
                <label>"Name" <input type="text" name="name" required placeholder="ATS integration" /></label>
                <label>"Acts as" <select name="user_id">{user_options}</select></label>
                <button type="submit">"Create token"</button>
            </form>
        </section>
    }
}
