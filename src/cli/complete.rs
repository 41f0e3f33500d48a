//! `semops __complete ARGS...`: completions in cobra's `__complete` protocol, which kubectl
//! (1.26+) speaks to a plugin's `kubectl_complete-<plugin>` helper: `kubectl semops lo<Tab>`
//! runs `kubectl_complete-semops lo`, which runs `kubectl-semops __complete lo`. One candidate
//! per line (`value<TAB>description`), then `:<directive>`. Pure over the clap tree.

use clap::{Arg, Command};

/// cobra's ShellCompDirectiveNoFileComp: offer only these candidates, never file names.
const NO_FILE_COMPLETION: u8 = 4;

/// The lines to print for the words after `semops` (the last is the word being completed).
pub fn lines(root: &Command, words: &[String]) -> Vec<String> {
    let (done, partial) = match words.split_last() {
        Some((last, done)) => (done, last.as_str()),
        None => (&[][..], ""),
    };
    let mut command = root;
    let mut pending_value: Option<&Arg> = None;
    let mut positionals = 0usize;
    for word in done {
        if pending_value.take().is_some() {
            continue;
        }
        if let Some(flag) = word.strip_prefix("--") {
            if !flag.contains('=') {
                pending_value = command
                    .get_arguments()
                    .find(|a| a.get_long() == Some(flag))
                    .filter(|a| takes_value(a));
            }
        } else if let Some(short) = short_flag(word) {
            pending_value = command
                .get_arguments()
                .find(|a| a.get_short() == Some(short))
                .filter(|a| takes_value(a));
        } else if let Some(sub) = command
            .get_subcommands()
            .find(|s| s.get_name() == word || s.get_all_aliases().any(|a| a == word))
        {
            command = sub;
            positionals = 0;
        } else if command.has_subcommands() && command.get_positionals().next().is_none() {
            // An unknown verb: nothing after it can be completed.
            return vec![format!(":{NO_FILE_COMPLETION}")];
        } else if !word.starts_with('-') {
            positionals += 1;
        }
    }
    let mut out: Vec<String> = if let Some(arg) = pending_value {
        values(arg, partial)
    } else if partial.starts_with('-') {
        command
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| (format!("--{l}"), help(a))))
            .chain([("--help".to_string(), "Print help".to_string())])
            .filter(|(flag, _)| flag.starts_with(partial))
            .map(|(flag, about)| with_description(&flag, &about))
            .collect()
    } else {
        let subcommands: Vec<String> = command
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name().starts_with(partial))
            .map(|s| {
                with_description(
                    s.get_name(),
                    &s.get_about().map(|a| a.to_string()).unwrap_or_default(),
                )
            })
            .collect();
        if !subcommands.is_empty() {
            subcommands
        } else {
            command
                .get_positionals()
                .nth(positionals)
                .map(|a| values(a, partial))
                .unwrap_or_default()
        }
    };
    out.sort();
    out.dedup();
    out.push(format!(":{NO_FILE_COMPLETION}"));
    out
}

/// `-o` (a lone short flag, its value in the next word); `-ojson` carries its value.
fn short_flag(word: &str) -> Option<char> {
    let mut chars = word.strip_prefix('-')?.chars();
    let short = chars.next()?;
    chars.next().is_none().then_some(short)
}

fn takes_value(arg: &Arg) -> bool {
    arg.get_num_args().is_none_or(|n| n.takes_values())
        && !matches!(
            arg.get_action(),
            clap::ArgAction::SetTrue
                | clap::ArgAction::SetFalse
                | clap::ArgAction::Count
                | clap::ArgAction::Help
                | clap::ArgAction::Version
        )
}

/// The choices an argument accepts (enums, value parsers with fixed values) that start with
/// `partial`; none for free text.
fn values(arg: &Arg, partial: &str) -> Vec<String> {
    arg.get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set() && v.get_name().starts_with(partial))
        .map(|v| {
            with_description(
                v.get_name(),
                &v.get_help().map(|h| h.to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

fn help(arg: &Arg) -> String {
    arg.get_help().map(|h| h.to_string()).unwrap_or_default()
}

/// `value<TAB>first line of the description` (cobra shows it beside the candidate).
fn with_description(value: &str, about: &str) -> String {
    match about
        .lines()
        .next()
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        Some(line) => format!("{value}\t{line}"),
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn complete(line: &str) -> Vec<String> {
        let words: Vec<String> = line.split(' ').map(str::to_string).collect();
        lines(&crate::cli::Cli::command(), &words)
            .into_iter()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    }

    #[test]
    fn completes_verbs_choices_flags_and_flag_values() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "",
                &["lookup", "metrics", "lineage", "completion", ":4"],
                &["reference", "__complete"],
            ),
            ("lo", &["lookup", ":4"], &["lineage", "metrics"]),
            ("lineage ", &["model", "table", "view", ":4"], &["lookup"]),
            ("completion f", &["fish", ":4"], &["bash"]),
            ("stale hr --re", &["--reconcile", ":4"], &["--dry-run"]),
            ("version -o ", &["json", "text", ":4"], &[]),
            (
                "lookup table hr.public.employees --",
                &["--namespace", "--help", ":4"],
                &["--reconcile"],
            ),
            ("nosuchverb ", &[":4"], &["lookup"]),
        ];
        for (line, want, unwanted) in cases {
            let got = complete(line);
            for w in *want {
                assert!(
                    got.iter().any(|g| g == w),
                    "{line:?}: {w} missing from {got:?}"
                );
            }
            for u in *unwanted {
                assert!(
                    !got.iter().any(|g| g == u),
                    "{line:?}: {u} offered in {got:?}"
                );
            }
            assert_eq!(got.last().map(String::as_str), Some(":4"), "{line:?}");
        }
    }
}
