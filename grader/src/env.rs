//! The sandbox's environment as probed, and how it compares with a packet's
//! `[environment]` pins.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// What the grader found in the sandbox's environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvProbe {
    pub python: Option<String>,
    pub tools: BTreeMap<String, Option<String>>,
    /// The Go toolchain's version (`go version`), when the sandbox has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go: Option<String>,
    #[serde(skip)]
    pub stdlib: BTreeSet<String>,
    /// Standard-library modules the test runner itself imports (a file of
    /// such a name at the top of a workspace would shadow it).
    #[serde(skip)]
    pub runner_modules: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolPin {
    pub name: String,
    pub pin: Option<String>,
    pub probed: Option<String>,
    pub matches: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvReport {
    pub tools: Vec<ToolPin>,
    /// One sentence for each pin the probe does not satisfy.
    pub mismatches: Vec<String>,
}

/// The packet's pins against what the probe found.
pub fn env_report(m: &crate::manifest::Manifest, probe: &EnvProbe) -> EnvReport {
    let mut tools = Vec::new();
    let matches = |pin: &Option<String>, got: &Option<String>| match (pin, got) {
        (None, _) => true,
        (Some(p), Some(g)) => g == p || g.starts_with(&format!("{p}.")),
        (Some(_), None) => false,
    };
    tools.push(ToolPin {
        name: "python".into(),
        pin: m.environment.python.clone(),
        probed: probe.python.clone(),
        matches: matches(&m.environment.python, &probe.python),
    });
    // A toolchain is named only by the packets that pin it.
    if m.environment.go.is_some() {
        tools.push(ToolPin {
            name: "go".into(),
            pin: m.environment.go.clone(),
            probed: probe.go.clone(),
            matches: matches(&m.environment.go, &probe.go),
        });
    }
    for (name, pin) in &m.environment.tools {
        let probed = probe.tools.get(name).cloned().flatten();
        let pin = Some(pin.clone());
        tools.push(ToolPin { name: name.clone(), matches: matches(&pin, &probed), pin, probed });
    }
    let mismatches = tools
        .iter()
        .filter(|t| !t.matches)
        .map(|t| {
            format!(
                "{} is pinned to {} but the sandbox has {}",
                t.name,
                t.pin.as_deref().unwrap_or("-"),
                t.probed.as_deref().unwrap_or("none")
            )
        })
        .collect();
    EnvReport { tools, mismatches }
}
