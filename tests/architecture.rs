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

/// Every path a `crate::…` / `super::…` reference in `text` names, with `use` groups expanded:
/// `use super::{round, announce::{self, X}}` names `super::round`, `super::announce` and
/// `super::announce::X`.
fn raw_paths(text: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = text.chars().collect();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = ["crate::", "super::"].iter().any(|p| {
            let p: Vec<char> = p.chars().collect();
            chars[i..].starts_with(&p)
                && (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':'))
        });
        if starts {
            i = tree(&chars, i, &[], &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Parses one use tree at `i` below `prefix`, pushing every path it names; returns the end.
fn tree(chars: &[char], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let skip_ws = |mut i: usize| {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let mut path = prefix.to_vec();
    loop {
        i = skip_ws(i);
        if i < chars.len() && chars[i] == '{' {
            i += 1;
            loop {
                i = skip_ws(i);
                if i >= chars.len() {
                    return i;
                }
                match chars[i] {
                    '}' => return i + 1,
                    ',' => i += 1,
                    _ => {
                        let before = i;
                        i = tree(chars, i, &path, out);
                        if i == before {
                            i += 1; // not a path: step over it
                        }
                    }
                }
            }
        }
        let start = i;
        while i < chars.len() && (is_ident(chars[i]) || chars[i] == '*') {
            i += 1;
        }
        let segment: String = chars[start..i].iter().collect();
        match segment.as_str() {
            "" | "*" => break,
            "self" => {}
            s => path.push(s.to_string()),
        }
        if chars[i..].starts_with(&[':', ':']) {
            i += 2;
        } else {
            break;
        }
    }
    if path.len() > prefix.len() || !prefix.is_empty() {
        out.push(path);
    }
    i
}

/// The paths `text` (the code of module `me`) names, resolved to paths from the crate root.
fn references(me: &str, text: &str) -> Vec<Vec<String>> {
    raw_paths(text)
        .into_iter()
        .map(|parts| {
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
                // `super` of a mod.rs is its parent module; of a plain file, the module that
                // declares it: both are the module path minus its last part.
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            base.extend(rest.iter().cloned());
            base
        })
        .collect()
}

/// The longest module that `path` names, if any.
fn target(path: &[String], mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| mods.contains_key(m))
}

/// The room of a module: its first segment (`controller::check::round` is in `controller`).
fn room(m: &str) -> &str {
    m.split("::").next().unwrap_or(m)
}

/// Which file imports which: one node per source file (its module path).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, path) in &mods {
        if m.is_empty() {
            continue; // lib.rs only declares the rooms
        }
        for r in references(m, &code(path)) {
            let Some(to) = target(&r, &mods) else {
                continue;
            };
            // A module declaring or re-exporting its own children is not a dependency (a child
            // using its parent's items is).
            let child_of_me = to.starts_with(&format!("{m}::"));
            if &to != m && !child_of_me {
                g.entry(m.clone()).or_default().insert(to);
            }
        }
        g.entry(m.clone()).or_default();
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
    assert!(g.len() > 100, "the scan found only {} files", g.len());
    assert_eq!(find_cycle(&g), None, "an import cycle between files");
}

#[test]
fn grouped_and_nested_imports_are_seen() {
    let refs = |me: &str, text: &str| -> Vec<String> {
        references(me, text).iter().map(|p| p.join("::")).collect()
    };
    assert_eq!(
        refs(
            "controller::check::round",
            "use super::{REACHABLE_FLIPS, RoundReport, announce, visit};"
        ),
        [
            "controller::check::REACHABLE_FLIPS",
            "controller::check::RoundReport",
            "controller::check::announce",
            "controller::check::visit"
        ]
    );
    assert_eq!(
        refs(
            "cli::query",
            "use crate::client::{Query, routes::{self, Family},\n    transport::*};\nlet x = crate::lineage::render::dot(v);"
        ),
        [
            "client::Query",
            "client::routes",
            "client::routes::Family",
            "client::transport",
            "lineage::render::dot"
        ]
    );
    let mods = modules();
    assert_eq!(
        target(
            &references(
                "controller::check::round",
                "use super::{announce::committed};"
            )[0],
            &mods
        )
        .as_deref(),
        Some("controller::check::announce")
    );
}

#[test]
fn the_cycle_finder_finds_planted_cycles() {
    // The Catalog controller runs rounds: the rounds' bookkeeping naming it again is a circle.
    let mut g = graph();
    g.get_mut("controller::check")
        .unwrap()
        .insert("controller::catalog".into());
    assert!(
        find_cycle(&g).is_some(),
        "controller::catalog uses controller::check"
    );
    // Two sibling files naming each other (a round announcing, the announcer using the round's
    // classification) is a circle of files.
    let mut g = graph();
    g.get_mut("controller::check::round")
        .unwrap()
        .insert("controller::check::announce".into());
    g.get_mut("controller::check::announce")
        .unwrap()
        .insert("controller::check::round".into());
    assert!(find_cycle(&g).is_some(), "round <-> announce");
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
fn the_read_api_the_client_the_cli_and_mcp_never_import_a_controller() {
    let g = graph();
    for (m, deps) in &g {
        if ["api", "client", "cli", "mcp", "console", "change"].contains(&room(m)) {
            let bad: Vec<_> = deps.iter().filter(|d| room(d) == "controller").collect();
            assert!(bad.is_empty(), "{m} imports {bad:?}");
        }
    }
}

#[test]
fn no_arrow_runs_up_from_the_client_to_its_users() {
    // The client serves the CLI, MCP and the console; MCP is served by the CLI's `semops mcp`.
    let above = |m: &str| -> &'static [&'static str] {
        match room(m) {
            "client" => &["cli", "mcp", "console", "server", "run", "controller"],
            "mcp" => &["cli", "server", "run", "controller"],
            "console" => &["cli", "mcp", "server", "run", "controller", "api"],
            _ => &[],
        }
    };
    let g = graph();
    let mut checked = 0;
    for (m, deps) in &g {
        let bad: Vec<_> = deps
            .iter()
            .filter(|d| above(m).contains(&room(d)))
            .collect();
        assert!(bad.is_empty(), "{m} imports {bad:?}, a room above it");
        checked += usize::from(!above(m).is_empty());
    }
    assert!(
        checked >= 6,
        "the client and mcp files were found ({checked})"
    );
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
        "sql",
        "change",
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
        let deps = &g[m];
        let bad: Vec<_> = deps
            .iter()
            .filter(|d| io_rooms.contains(&room(d)))
            .collect();
        assert!(bad.is_empty(), "pure {m} imports {bad:?}");
        let text = code(path);
        for c in io_crates {
            assert!(!text.contains(c), "pure {m} uses {c}");
        }
    }
}
