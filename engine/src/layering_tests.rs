//! The engine's modules depend on one another one way only (docs/architecture.md draws
//! the graph). These tests read the engine's own source and fail on an import cycle
//! between its top-level modules, or on a bottom-layer module that reaches up.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Modules every other one may use; they use nothing of the engine above them.
const BOTTOM: &[&str] = &["error", "model", "clock"];

/// Files that are only tests: they may import whatever they test.
fn is_test_file(path: &Path) -> bool {
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    name == "tests" || name.ends_with("_tests") || name == "testutil" || name == "testalloc"
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read the source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !is_test_file(&path) {
            out.push(path);
        }
    }
}

/// A file's text without its inline test module (`#[cfg(test)] mod name { … }`, by
/// convention the file's end). A `#[cfg(test)] mod name;` declaration stays.
fn production_text(text: &str) -> &str {
    const MARK: &str = "#[cfg(test)]\nmod ";
    let mut from = 0;
    while let Some(i) = text[from..].find(MARK) {
        let at = from + i;
        let after = &text[at + MARK.len()..];
        let name_end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if after[name_end..].trim_start().starts_with('{') {
            return &text[..at];
        }
        from = at + MARK.len();
    }
    text
}

/// The first path segments a `crate::…` use names: `crate::a::B` gives `a`;
/// `crate::{a::B, c}` gives `a` and `c`.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `hedgerow_crate::…` or similar
        }
        if let Some(inner) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item = String::new();
            for c in inner.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.extend(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.extend(first_segment(&item));
        } else {
            out.extend(first_segment(rest));
        }
    }
    out
}

fn first_segment(s: &str) -> Option<String> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (end > 0).then(|| s[..end].to_owned())
}

/// Top-level module → the top-level modules its non-test code uses.
fn module_graph(src: &Path) -> Graph {
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(src).expect("read engine/src") {
        let path = entry.expect("a directory entry").path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if stem == "lib" || is_test_file(&path) {
            continue;
        }
        if path.is_dir() || path.extension().is_some_and(|e| e == "rs") {
            modules.insert(stem.to_owned());
        }
    }
    let mut graph = Graph::new();
    for m in &modules {
        let mut files = Vec::new();
        let dir = src.join(m);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src.join(format!("{m}.rs")));
        }
        let deps = graph.entry(m.clone()).or_default();
        for f in files {
            let text = std::fs::read_to_string(&f).expect("read a source file");
            deps.extend(
                crate_refs(production_text(&text))
                    .into_iter()
                    .filter(|d| d != m && modules.contains(d)),
            );
        }
    }
    graph
}

/// One cycle of the graph, if it has any.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &Graph,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut cycle = path[i..].to_vec();
            cycle.push(n.to_owned());
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_owned());
        for d in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, graph, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
}

fn engine_graph() -> Graph {
    module_graph(
        &std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("src"),
    )
}

fn render(graph: &Graph) -> String {
    graph
        .iter()
        .map(|(m, d)| {
            format!(
                "  {m} -> {}",
                d.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn engine_modules_import_one_way() {
    let graph = engine_graph();
    assert!(graph.len() > 10, "found too few modules: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import cycle between engine modules: {}\n{}",
            cycle.join(" -> "),
            render(&graph)
        );
    }
}

#[test]
fn the_bottom_layer_reaches_up_to_nothing() {
    let graph = engine_graph();
    for m in BOTTOM {
        let up: Vec<_> = graph[*m]
            .iter()
            .filter(|d| !BOTTOM.contains(&d.as_str()))
            .collect();
        assert!(up.is_empty(), "`{m}` uses {up:?}\n{}", render(&graph));
    }
}

#[test]
fn the_checker_sees_uses_and_cycles() {
    let refs = crate_refs(
        "use crate::a::B;\nuse crate::{c::{D, E}, f};\nlet x = crate::g::h();\nmy_crate::z",
    );
    assert_eq!(refs, ["a", "c", "f", "g"].map(String::from).into());
    let mut g = Graph::new();
    g.entry("x".into()).or_default().insert("y".into());
    g.entry("y".into()).or_default().insert("z".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("z".into()).or_default().insert("x".into());
    assert_eq!(
        find_cycle(&g).expect("x -> y -> z -> x is a cycle"),
        ["x", "y", "z", "x"]
    );
    assert_eq!(
        production_text("use crate::a;\n#[cfg(test)]\nmod tests { use crate::b; }"),
        "use crate::a;\n"
    );
    let declared = "#[cfg(test)]\nmod tests;\nuse crate::a;\n";
    assert_eq!(production_text(declared), declared);
}
