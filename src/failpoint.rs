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

/// `lineage-slow`: makes each lineage request slow, so the drills can fill admission and pass
/// the deadline without building huge graphs.
#[cfg(feature = "failpoints")]
pub async fn delay(name: &str, by: std::time::Duration) {
    if armed(name) {
        tokio::time::sleep(by).await;
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub async fn delay(_name: &str, _by: std::time::Duration) {}
