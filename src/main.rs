//! The `semops` binary: operator, CRD generator, offline validator and read-API client. The
//! command line lives in `semops::cli`.
#![forbid(unsafe_code)]

/// jemalloc, not glibc's malloc: glibc kept the pages freed after the bring-up peak in its
/// per-thread arenas, so the operator's RSS stayed at its peak, and gave every small block a header;
/// jemalloc's background thread returns freed pages (docs/architecture.md has the measurements).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    semops::telemetry::set_heap_reader(jemalloc_stats);
    semops::cli::main()
}

/// jemalloc's counters as of now (`epoch` refreshes its cached statistics).
fn jemalloc_stats() -> Option<semops::telemetry::HeapStats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    Some(semops::telemetry::HeapStats {
        allocated: stats::allocated::read().ok()? as u64,
        resident: stats::resident::read().ok()? as u64,
    })
}
