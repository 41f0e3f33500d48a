//! What this binary is: version, git commit and its date, compiler, target (set by build.rs).

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildInfo {
    pub version: &'static str,
    pub commit: &'static str,
    pub build_date: &'static str,
    pub rustc: &'static str,
    pub target: &'static str,
}

pub const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    commit: env!("SEMOPS_GIT_COMMIT"),
    build_date: env!("SEMOPS_BUILD_DATE"),
    rustc: env!("SEMOPS_RUSTC"),
    target: env!("SEMOPS_TARGET"),
};

/// The `--version` text: the version on the first line, the facts below.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("SEMOPS_GIT_COMMIT"),
    "\nbuilt: ",
    env!("SEMOPS_BUILD_DATE"),
    "\nrustc: ",
    env!("SEMOPS_RUSTC"),
    "\ntarget: ",
    env!("SEMOPS_TARGET"),
);

impl BuildInfo {
    /// `semops version` output.
    pub fn text(&self) -> String {
        format!(
            "semops {}\ncommit: {}\nbuilt: {}\nrustc: {}\ntarget: {}\n",
            self.version, self.commit, self.build_date, self.rustc, self.target
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_facts_are_filled_in() {
        assert_eq!(BUILD.version, env!("CARGO_PKG_VERSION"));
        assert!(BUILD.rustc.starts_with("rustc "), "{}", BUILD.rustc);
        assert!(BUILD.target.contains('-'), "{}", BUILD.target);
        assert!(LONG_VERSION.starts_with(BUILD.version));
        let text = BUILD.text();
        for fact in [BUILD.commit, BUILD.build_date, BUILD.rustc, BUILD.target] {
            assert!(text.contains(fact), "{text}");
        }
    }
}
