//! The sandbox's environment as probed, and how it compares with a packet's
//! `[environment]` pins.
//!
//! `TOOLCHAINS` lists the language toolchains a packet may pin (the
//! `[environment]` key, the command that prints the version in the sandbox,
//! what installs it): the probe asks every one once per grader, the pin file
//! and the receipt name them, and `missing_toolchains` gives the pinned ones
//! the sandbox lacks, which `packet check` refuses.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// What the grader found in the sandbox's environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvProbe {
    pub python: Option<String>,
    pub tools: BTreeMap<String, Option<String>>,
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

/// A language toolchain a packet may pin in `[environment]` beside
/// `python`: the one place a new language's toolchain is declared.
pub struct Toolchain {
    /// Its `[environment]` key, and its name in the probe's `tools`.
    pub key: &'static str,
    /// The command that prints its version in the sandbox (plain words, no
    /// quotes: it runs inside the probe's Python text); the first dotted
    /// number it prints is the version.
    pub probe: &'static str,
    /// What installs it, for the error of a packet that pins it when the
    /// sandbox lacks it.
    pub install: &'static str,
}

/// Every toolchain the grader knows, probed once per grader.
pub const TOOLCHAINS: [Toolchain; 3] = [
    Toolchain {
        key: "node",
        probe: "node --version",
        install: "scripts/setup installs Node.js from Debian (nodejs)",
    },
    Toolchain {
        key: "typescript",
        probe: "node /usr/local/lib/gatehouse/node/node_modules/typescript/bin/tsc --version",
        install: "scripts/setup installs the grader's TypeScript compiler into /usr/local/lib/gatehouse/node (grader/toolchain/node)",
    },
    Toolchain {
        key: "go",
        probe: "go version",
        install: "scripts/setup installs Go from Debian (golang-go)",
    },
];

/// The language toolchains a packet pins that the sandbox lacks (or has
/// in another version), each as a sentence naming how to install it:
/// `packet check` refuses such a packet.
pub fn missing_toolchains(m: &crate::manifest::Manifest, probe: &EnvProbe) -> Vec<String> {
    let report = env_report(m, probe);
    let toolchains: BTreeSet<&str> = m.environment.toolchains().iter().map(|(k, _)| *k).collect();
    report
        .tools
        .iter()
        .filter(|t| !t.matches && toolchains.contains(t.name.as_str()))
        .map(|t| {
            format!(
                "packet.toml: [environment] {} = {:?}, but the sandbox has {}: {}",
                t.name,
                t.pin.as_deref().unwrap_or("-"),
                t.probed.as_deref().map_or("none".to_string(), |v| format!("{} {v}", t.name)),
                TOOLCHAINS.iter().find(|c| c.key == t.name).map_or("", |c| c.install)
            )
        })
        .collect()
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
    for (name, pin) in m.environment.toolchains() {
        let probed = probe.tools.get(name).cloned().flatten();
        let pin = Some(pin.clone());
        tools.push(ToolPin { name: name.into(), matches: matches(&pin, &probed), pin, probed });
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
