//! Sign-in and first-start setup pages.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shell::CsrfField;

/// The sign-in form, with the last attempt's email and problem.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoginView {
    pub csrf: String,
    pub email: String,
    /// Where to go after signing in (a local path).
    pub next: String,
    pub error: Option<String>,
    /// The identity providers to sign in with: (link, label).
    #[serde(default)]
    pub sso: Vec<(String, String)>,
    /// Set when password sign-in is off (for all but the break-glass admin).
    #[serde(default)]
    pub password_note: Option<String>,
}

#[component]
pub fn LoginPage(vm: LoginView) -> impl IntoView {
    let sso = (!vm.sso.is_empty()).then(|| {
        view! {
            <ul class="sso">
                {vm
                    .sso
                    .into_iter()
                    .map(|(href, label)| {
                        view! {
                            <li>
                                <a class="button" href=href>
                                    {format!("Sign in with {label}")}
                                </a>
                            </li>
                        }
                    })
                    .collect::<Vec<_>>()}
            </ul>
        }
    });
    view! {
        <section class="narrow">
            <h1>"Sign in"</h1>
            {vm.error.map(|e| view! { <p class="error" role="alert">{e}</p> })}
            {sso}
            {vm.password_note.map(|n| view! { <p class="note">{n}</p> })}
            <form method="post" action="/login">
                <CsrfField token=vm.csrf />
                <input type="hidden" name="next" value=vm.next />
                <label>"Email" <input type="email" name="email" required autocomplete="username" value=vm.email /></label>
                <label>"Password" <input type="password" name="password" required autocomplete="current-password" /></label>
                <button type="submit">"Sign in"</button>
            </form>
        </section>
    }
}

/// The one-time setup form that creates the first admin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupView {
    pub csrf: String,
    pub token: String,
    pub email: String,
    pub name: String,
    pub error: Option<String>,
}

#[component]
pub fn SetupPage(vm: SetupView) -> impl IntoView {
    let action = format!("/setup/{}", vm.token);
    view! {
        <section class="narrow">
            <h1>"Create the first admin"</h1>
            <p>"This link works once. The account you create here manages users and settings."</p>
            {vm.error.map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <form method="post" action=action>
                <CsrfField token=vm.csrf />
                <label>"Email" <input type="email" name="email" required value=vm.email /></label>
                <label>"Name" <input type="text" name="name" required value=vm.name /></label>
                <label>"Password (at least 8 characters)" <input type="password" name="password" required minlength="8" autocomplete="new-password" /></label>
                <button type="submit">"Create admin"</button>
            </form>
        </section>
    }
}
