//! The documents point into the repository: every design citation in the code, tests, scripts
//! and documents names a heading of docs/design.md that exists, and nothing cites a design
//! document the repository does not carry.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every text file under the given roots (sources, tests, scripts, documents, chart).
fn files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| {
                ["rs", "md", "yaml", "json", "sh"].contains(&&*x.to_string_lossy())
            }) || p.parent().is_some_and(|d| d.ends_with("hack"))
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for d in [
        "src", "tests", "benches", "hack", "docs", "charts", "examples",
    ] {
        walk(&Path::new(ROOT).join(d), &mut out);
    }
    for f in [
        "README.md",
        "BENCHMARKS.md",
        "CHANGELOG.md",
        "CONTRIBUTING.md",
    ] {
        out.push(Path::new(ROOT).join(f));
    }
    // Stored objects are what an old version wrote; this file spells the patterns it looks for.
    out.retain(|p| {
        !p.starts_with(Path::new(ROOT).join("tests/stored")) && !p.ends_with("tests/documents.rs")
    });
    out
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_design_citation_names_a_heading_of_docs_design_md() {
    let design = std::fs::read_to_string(Path::new(ROOT).join("docs/design.md")).unwrap();
    let anchors: Vec<String> = design
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#').trim()))
        .collect();
    assert!(anchors.len() > 15, "docs/design.md has its sections");
    let mut cited = 0;
    let mut wrong = Vec::new();
    for f in files() {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let name = f.strip_prefix(ROOT).unwrap().display().to_string();
        for (i, line) in text.lines().enumerate() {
            // A design document outside the repository, cited by section number.
            let bare = line.match_indices("DESIGN").any(|(at, _)| {
                line[at + 6..]
                    .trim_start_matches([' ', '§'])
                    .starts_with(|c: char| c.is_ascii_digit() || c == 's')
            });
            if bare {
                wrong.push(format!("{name}:{}: cites DESIGN by number", i + 1));
            }
            for (at, _) in line.match_indices("design.md#") {
                let rest = &line[at + "design.md#".len()..];
                let a: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '-')
                    .collect();
                cited += 1;
                if !anchors.contains(&a) {
                    wrong.push(format!(
                        "{name}:{}: no heading #{a} in docs/design.md",
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(
        cited > 40,
        "the code cites the design ({cited} citations found)"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_anchor_rule_is_githubs() {
    assert_eq!(
        anchor("Deployment, access and trust"),
        "deployment-access-and-trust"
    );
    assert_eq!(
        anchor("Stale-registration checks"),
        "stale-registration-checks"
    );
}
