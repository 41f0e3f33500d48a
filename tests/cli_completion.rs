//! `semops completion SHELL`: the bash script is loaded into a real bash and asked what it
//! completes, as a user's shell would ask it on Tab; zsh and fish scripts are checked for the
//! shape those shells load (they are not installed on every machine).

use std::process::Command;

const SEMOPS: &str = env!("CARGO_BIN_EXE_semops");

fn script(shell: &str) -> String {
    let out = Command::new(SEMOPS)
        .args(["completion", shell])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What bash offers after `line` (the cursor at its end), through the generated `_semops`.
fn bash_completes(script_path: &std::path::Path, line: &str) -> Vec<String> {
    const PROGRAM: &str = r#"source "$0"; COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$1"; [ "${1: -1}" = " " ] && COMP_WORDS+=(""); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _semops semops "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"; printf '%s\n' "${COMPREPLY[@]}""#;
    let out = Command::new("bash")
        .args(["-c", PROGRAM])
        .arg(script_path)
        .arg(line)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_verbs_their_choices_and_flags() {
    let dir = std::env::temp_dir().join(format!("semops-completion-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("semops.bash");
    std::fs::write(&path, script("bash")).unwrap();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("semops loo", vec!["lookup"]),
        ("semops li", vec!["lineage"]),
        ("semops lineage ", vec!["model", "table", "view"]),
        (
            "semops completion ",
            vec!["bash", "elvish", "fish", "powershell", "zsh"],
        ),
        ("semops version -o ", vec!["text", "json"]),
        ("semops validate --file", vec!["--filename"]),
        ("semops lookup --kube", vec!["--kubeconfig"]),
    ];
    for (line, want) in cases {
        // Bash also offers the verb's flags after a space; compare the kind of word asked for.
        let asks_flag = line.rsplit(' ').next().is_some_and(|w| w.starts_with('-'));
        let mut got: Vec<String> = bash_completes(&path, line)
            .into_iter()
            .filter(|w| w.starts_with('-') == asks_flag)
            .collect();
        got.sort();
        let mut want: Vec<String> = want.into_iter().map(str::to_string).collect();
        want.sort();
        assert_eq!(got, want, "completions of {line:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn zsh_and_fish_scripts_name_the_verbs_in_the_form_those_shells_load() {
    let zsh = script("zsh");
    assert!(
        zsh.starts_with("#compdef semops"),
        "{}",
        &zsh[..40.min(zsh.len())]
    );
    let fish = script("fish");
    for verb in ["lookup", "lineage", "stale", "completion", "validate"] {
        assert!(zsh.contains(&format!("'{verb}:")), "zsh lacks {verb}");
        assert!(
            fish.contains(&format!("-a \"{verb}\"")),
            "fish lacks {verb}"
        );
    }
    let out = Command::new(SEMOPS)
        .args(["completion", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
}
