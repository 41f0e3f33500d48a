//! The rooms and their seams (docs/architecture.md), checked on the source itself: no import
//! cycle between files, the read API and the CLI never reach into a controller, and the pure
//! rooms stay free of I/O crates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// Module path (e.g. `controller::check::round`) of every source file.
fn modules() -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(stem);
                walk(&path, &p, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut p = prefix.to_vec();
                if !["mod", "lib", "main"].contains(&stem.as_str()) {
                    p.push(stem);
                }
                out.insert(p.join("::"), path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(Path::new(SRC), &[], &mut out);
    out
}

/// The code of a file without its `#[cfg(test)] mod tests` block and comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b` / `super::x` path in `text`, resolved against module `me`.
fn references(me: &str, is_mod_file: bool, text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.starts_with("crate::") || w.starts_with("super::"))
        .collect();
    for w in words {
        let parts: Vec<String> = w
            .split("::")
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        let mut base: Vec<String> = if me.is_empty() {
            vec![]
        } else {
            me.split("::").map(String::from).collect()
        };
        let mut rest = parts.as_slice();
        if rest.first().map(String::as_str) == Some("crate") {
            base.clear();
            rest = &rest[1..];
        } else {
            // `super` of a mod.rs is its parent; of a plain file, the file's parent module too.
            let _ = is_mod_file;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        base.extend(rest.iter().cloned());
        out.push(base);
    }
    out
}

/// The longest module that `path` names, if any.
fn target(path: &[String], mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| mods.contains_key(m))
}

/// A room's sub-room: a module path cut to two segments (`controller::check::round` belongs to
/// `controller::check`), so a cycle through a directory's files is a cycle of that directory.
fn node(m: &str) -> String {
    m.split("::").take(2).collect::<Vec<_>>().join("::")
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, path) in &mods {
        if m.is_empty() {
            continue; // lib.rs only declares the rooms
        }
        let is_mod = path.file_name().is_some_and(|f| f == "mod.rs");
        let from = node(m);
        for r in references(m, is_mod, &code(path)) {
            let Some(t) = target(&r, &mods) else { continue };
            let to = node(&t);
            // A parent declaring or re-exporting its own children is not a dependency.
            let child_of_me = to.starts_with(&format!("{from}::"));
            if to != from && !child_of_me {
                g.entry(from.clone()).or_default().insert(to);
            }
        }
        g.entry(from).or_default();
    }
    g
}

fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|s| s == m).unwrap();
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(n, g, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_two_source_files_import_each_other_directly_or_through_others() {
    let g = graph();
    assert!(g.len() > 30, "the scan found only {} rooms", g.len());
    assert_eq!(find_cycle(&g), None, "an import cycle between files");
}

#[test]
fn the_cycle_finder_finds_planted_cycles() {
    // The cycle this layout removed: the Catalog controller runs rounds, and a round file
    // naming the Catalog controller again.
    let mut g = graph();
    g.get_mut("controller::check")
        .unwrap()
        .insert("controller::catalog".into());
    assert!(
        find_cycle(&g).is_some(),
        "controller::catalog uses controller::check"
    );
    let mut g = graph();
    g.get_mut("catalog::registry")
        .unwrap()
        .insert("controller::catalog".into());
    assert!(
        find_cycle(&g).is_some(),
        "controller::catalog uses catalog::registry"
    );
}

#[test]
fn the_read_api_the_cli_and_mcp_never_import_a_controller() {
    let g = graph();
    for (m, deps) in &g {
        if m.starts_with("api") || m.starts_with("cli") || m.starts_with("mcp") {
            let bad: Vec<_> = deps
                .iter()
                .filter(|d| d.starts_with("controller"))
                .collect();
            assert!(bad.is_empty(), "{m} imports {bad:?}");
        }
    }
}

#[test]
fn pure_rooms_import_only_pure_rooms_and_no_io_crates() {
    let pure = [
        "crd",
        "ossie",
        "model",
        "policy",
        "reconcile",
        "lineage",
        "index",
    ];
    let io_rooms = ["controller", "api", "cli", "run", "server", "leader"];
    let io_crates = [
        "kube::Api",
        "kube::Client",
        "tokio_postgres",
        "mysql_async",
        "axum",
        "hyper",
        "std::fs",
        "std::net",
    ];
    let mods = modules();
    let g = graph();
    for (m, path) in &mods {
        if !pure
            .iter()
            .any(|p| m == p || m.starts_with(&format!("{p}::")))
        {
            continue;
        }
        let deps = &g[&node(m)];
        let bad: Vec<_> = deps
            .iter()
            .filter(|d| {
                io_rooms
                    .iter()
                    .any(|r| d == r || d.starts_with(&format!("{r}::")))
            })
            .collect();
        assert!(bad.is_empty(), "pure {m} imports {bad:?}");
        let text = code(path);
        for c in io_crates {
            assert!(!text.contains(c), "pure {m} uses {c}");
        }
    }
}
