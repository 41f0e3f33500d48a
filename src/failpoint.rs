//! Failpoints for the crash and overload drills, compiled only with the `failpoints` feature
//! (the test suites that need them enable it); in any other build every hook is an empty inline
//! function, so nothing reads `SEMOPS_FAILPOINT` and nothing can exit the process.

/// Whether `SEMOPS_FAILPOINT` names `name`.
#[cfg(feature = "failpoints")]
fn armed(name: &str) -> bool {
    std::env::var("SEMOPS_FAILPOINT").is_ok_and(|v| v == name)
}

/// `after-revision`: exits the process between the revision write and the status commit.
#[cfg(feature = "failpoints")]
pub fn crash(name: &str) {
    if armed(name) {
        tracing::error!(failpoint = name, "failpoint hit; exiting");
        std::process::exit(86);
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn crash(_name: &str) {}

/// `lineage-hold`: holds each lineage request until the file `SEMOPS_FAILPOINT_RELEASE` names
/// exists (for ever without it), so a test fills admission or passes the deadline because it
/// decided to, never because a clock ran out first.
#[cfg(feature = "failpoints")]
pub async fn hold(name: &str) {
    if armed(name) {
        let release = std::env::var_os("SEMOPS_FAILPOINT_RELEASE");
        while !release
            .as_ref()
            .is_some_and(|f| std::path::Path::new(f).exists())
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub async fn hold(_name: &str) {}
