//! The `semops` binary: operator, CRD generator, offline validator and read-API client. The
//! command line lives in `semops::cli`.
#![forbid(unsafe_code)]

/// mimalloc, not glibc's malloc: glibc keeps the pages freed after the bring-up peak (the first
/// list of every model, a burst of acceptances) in per-thread arenas for good, so the operator's
/// RSS stayed at its peak; mimalloc returns freed pages to the system (docs/architecture.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    semops::cli::main()
}
