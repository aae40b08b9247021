//! Structure checks over the source tree: the module graph of each crate
//! runs one way (no cycle between top-level modules).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// Top-level modules of the crate rooted at `src` and the modules each
/// refers to by `crate::name` (test modules left out).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("read src") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if path.is_dir() {
            let all = walkdir::WalkDir::new(&path).into_iter().filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "rs"));
            files.insert(name, all.map(|e| e.path().to_path_buf()).collect());
        } else if path.extension().is_some_and(|x| x == "rs") && name != "lib" && name != "main" {
            files.insert(name, vec![path]);
        }
    }
    let path = Regex::new(r"crate::(\w+)").expect("regex");
    let group = Regex::new(r"use crate::\{([^;]*)\}").expect("regex");
    let word = Regex::new(r"(?:^|[{,\s])(\w+)").expect("regex");
    let mut graph = BTreeMap::new();
    for (module, paths) in &files {
        let mut to = BTreeSet::new();
        for p in paths {
            let text = std::fs::read_to_string(p).expect("read");
            let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
            let mut names: Vec<String> = path.captures_iter(text).map(|c| c[1].to_string()).collect();
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
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
    write("lib.rs", "pub mod a; pub mod b; pub mod c;");
    write("a.rs", "use crate::b::X;");
    write("b.rs", "pub struct X; use crate::{c::Y};");
    write("c.rs", "pub struct Y;\n#[cfg(test)]\nmod tests { use crate::a; }");
    assert_eq!(cycles(&module_graph(dir.path())), Vec::<String>::new());
    write("c.rs", "pub struct Y; fn f() { crate::a::g() }");
    assert_eq!(cycles(&module_graph(dir.path())).len(), 3, "{:?}", module_graph(dir.path()));
}

#[test]
fn the_grader_module_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(graph.contains_key("detect") && graph["grade"].contains("detect"), "the graph was not read: {graph:?}");
    assert_eq!(cycles(&graph), Vec::<String>::new());
}
