//! Structure checks over the source tree: the module graph of each crate
//! runs one way (no cycle between its top-level modules, nor between the
//! modules of any folder module, however deep).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// Top-level modules of the crate rooted at `src` and the modules each
/// refers to by `crate::name` (test modules and comments left out).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    module_graph_in(src, "crate")
}

/// The modules of the folder `src` (whose path in the crate is `prefix`,
/// `crate` for the root) and the siblings each refers to, by `prefix::name`
/// or `super::name`.
fn module_graph_in(src: &Path, prefix: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("read src") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if path.is_dir() {
            let all = walkdir::WalkDir::new(&path)
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "rs"));
            files.insert(name, all.map(|e| e.path().to_path_buf()).collect());
        } else if path.extension().is_some_and(|x| x == "rs")
            && name != "lib"
            && name != "main"
            && name != "mod"
        {
            files.insert(name, vec![path]);
        }
    }
    let sibling =
        if prefix == "crate" { "crate".to_string() } else { format!("(?:crate::{prefix}|super)") };
    let path = Regex::new(&format!(r"\b{sibling}::(\w+)")).expect("regex");
    let group = Regex::new(&format!(r"use {sibling}::\{{([^;]*)\}}")).expect("regex");
    let word = Regex::new(r"(?:^|[{,\s])(\w+)").expect("regex");
    let mut graph = BTreeMap::new();
    for (module, paths) in &files {
        let mut to = BTreeSet::new();
        for p in paths {
            let text = std::fs::read_to_string(p).expect("read");
            let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
            // Comments (doc links included) are not dependencies.
            let text: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            let text = text.as_str();
            let mut names: Vec<String> =
                path.captures_iter(text).map(|c| c[1].to_string()).collect();
            for g in group.captures_iter(text) {
                names.extend(word.captures_iter(&g[1]).map(|c| c[1].to_string()));
            }
            to.extend(names.into_iter().filter(|n| n != module && files.contains_key(n)));
        }
        graph.insert(module.clone(), to);
    }
    graph
}

/// The modules on some cycle of `graph`, each with the edges that close it.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(m) = stack.pop() {
            for n in graph.get(&m).into_iter().flatten() {
                if n == to {
                    return true;
                }
                if seen.insert(n.clone()) {
                    stack.push(n.clone());
                }
            }
        }
        false
    };
    let mut out = Vec::new();
    for (m, to) in graph {
        for n in to {
            if reaches(n, m) {
                out.push(format!("{m} -> {n} (and {n} reaches {m})"));
            }
        }
    }
    out
}

#[test]
fn the_cycle_check_fires_on_a_cycle_and_stays_quiet_without_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write =
        |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
    write("lib.rs", "pub mod a; pub mod b; pub mod c;");
    write("a.rs", "use crate::b::X;");
    write("b.rs", "pub struct X; use crate::{c::Y};");
    write("c.rs", "pub struct Y;\n#[cfg(test)]\nmod tests { use crate::a; }");
    assert_eq!(cycles(&module_graph(dir.path())), Vec::<String>::new());
    write("c.rs", "/// Unlike [`crate::a`].\npub struct Y;");
    assert_eq!(
        cycles(&module_graph(dir.path())),
        Vec::<String>::new(),
        "a doc link is not a dependency"
    );
    write("c.rs", "pub struct Y; fn f() { crate::a::g() }");
    assert_eq!(cycles(&module_graph(dir.path())).len(), 3, "{:?}", module_graph(dir.path()));
    // A folder module's children, by `super::` and by their full path.
    let sub = dir.path().join("web");
    std::fs::create_dir(&sub).expect("mkdir");
    std::fs::write(sub.join("mod.rs"), "pub mod x; pub mod y;").expect("write");
    std::fs::write(sub.join("x.rs"), "use super::y::Z;").expect("write");
    std::fs::write(sub.join("y.rs"), "pub struct Z;").expect("write");
    assert_eq!(cycles(&module_graph_in(&sub, "web")), Vec::<String>::new());
    std::fs::write(sub.join("y.rs"), "pub struct Z; fn f() { crate::web::x::g() }").expect("write");
    assert_eq!(cycles(&module_graph_in(&sub, "web")).len(), 2);
}

/// Every folder module under `src` (recursively), as its path in the crate
/// (`web`, `web::review`) and its folder.
fn folder_modules(src: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = walkdir::WalkDir::new(src)
        .min_depth(1)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_dir())
        .map(|e| {
            let rel = e.path().strip_prefix(src).expect("under src");
            let name: Vec<String> =
                rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            (name.join("::"), e.path().to_path_buf())
        })
        .collect();
    out.sort();
    out
}

/// The cycles of a crate: between its top-level modules, and between the
/// modules of each of its folder modules, however deep (a folder added
/// later is checked without naming it here).
fn crate_cycles(src: &Path) -> Vec<String> {
    let mut out = cycles(&module_graph(src));
    for (module, folder) in folder_modules(src) {
        let graph = module_graph_in(&folder, &module);
        out.extend(cycles(&graph).into_iter().map(|c| format!("in {module}: {c}")));
    }
    out
}

#[test]
fn every_folder_module_is_checked_and_a_cycle_in_one_is_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    let write = |name: &str, text: &str| {
        let path = src.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write("lib.rs", "pub mod audit;");
    write("audit/mod.rs", "pub mod kept; pub mod save; pub struct Report;");
    write("audit/kept.rs", "use super::Report; pub fn list() {}");
    write("audit/save.rs", "use super::kept::list; use super::Report;");
    write("deep/inner/mod.rs", "pub mod a; pub mod b;");
    write("deep/inner/a.rs", "pub fn f() {}");
    write("deep/inner/b.rs", "use super::a::f;");
    assert_eq!(crate_cycles(src), Vec::<String>::new());
    let modules: Vec<String> = folder_modules(src).into_iter().map(|(m, _)| m).collect();
    assert_eq!(modules, ["audit", "deep", "deep::inner"]);
    // The shape of the cycle this check was extended for (grader's audit:
    // kept called save's id check, save imported kept's folder name).
    write("audit/kept.rs", "pub fn list() { super::save::plain_id(\"x\"); }");
    write("audit/save.rs", "use super::kept::list; pub fn plain_id(_: &str) {}");
    assert_eq!(crate_cycles(src).len(), 2, "{:?}", crate_cycles(src));
    assert!(crate_cycles(src)[0].starts_with("in audit: kept -> save"), "{:?}", crate_cycles(src));
    write("audit/kept.rs", "pub fn list() {}");
    write("deep/inner/a.rs", "pub fn f() { crate::deep::inner::b::g() }");
    assert_eq!(crate_cycles(src).len(), 2, "a folder two deep: {:?}", crate_cycles(src));
}

#[test]
fn the_server_module_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../server/src");
    let graph = module_graph(&src);
    assert!(
        graph.contains_key("meter") && graph["web"].contains("meter"),
        "the graph was not read: {graph:?}"
    );
    let web = module_graph_in(&src.join("web"), "web");
    assert!(web["witness"].contains("candidate"), "the web graph was not read: {web:?}");
    let review = module_graph_in(&src.join("web/review"), "web::review");
    assert!(review["scorecard"].contains("compare"), "the review graph was not read: {review:?}");
    assert_eq!(crate_cycles(&src), Vec::<String>::new());
}

#[test]
fn the_grader_module_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(
        graph.contains_key("detect") && graph["grade"].contains("detect"),
        "the graph was not read: {graph:?}"
    );
    let grade = module_graph_in(&src.join("grade"), "grade");
    assert!(grade["pipeline"].contains("scoring"), "the grade graph was not read: {grade:?}");
    let manifest = module_graph_in(&src.join("manifest"), "manifest");
    assert!(
        manifest["validate"].contains("paths"),
        "the manifest graph was not read: {manifest:?}"
    );
    let audit = module_graph_in(&src.join("audit"), "audit");
    assert!(audit["save"].contains("kept"), "the audit graph was not read: {audit:?}");
    assert_eq!(crate_cycles(&src), Vec::<String>::new());
}

#[test]
fn the_app_module_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../app/src");
    assert!(module_graph(&src).contains_key("pages"), "the graph was not read");
    assert_eq!(crate_cycles(&src), Vec::<String>::new());
}
