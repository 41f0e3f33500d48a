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
    #[cfg(feature = "heap-profile")]
    heap_profile::dump_on_sigusr2();
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

/// Where the memory is: with `_RJEM_MALLOC_CONF=prof:true` and `SEMOPS_HEAP_PROFILE=<prefix>`,
/// each SIGUSR2 writes jemalloc's sampled live heap to `<prefix>.<n>.heap` for `jeprof`.
#[cfg(feature = "heap-profile")]
mod heap_profile {
    use tikv_jemalloc_ctl::{Access, AsName};
    use tokio::signal::unix::{SignalKind, signal};

    pub fn dump_on_sigusr2() {
        let Some(prefix) = std::env::var_os("SEMOPS_HEAP_PROFILE") else {
            return;
        };
        let prefix = prefix.to_string_lossy().into_owned();
        // Its own thread and runtime: the dump must work whatever the operator's runtime is doing.
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the heap-profile signal");
            runtime.block_on(async move {
                let mut usr2 = signal(SignalKind::user_defined2()).expect("a SIGUSR2 handler");
                for n in 0.. {
                    if usr2.recv().await.is_none() {
                        return;
                    }
                    // The safe API takes only `'static` paths: a few leaked bytes per dump.
                    let path: &'static [u8] = Box::leak(
                        format!("{prefix}.{n}.heap\0")
                            .into_bytes()
                            .into_boxed_slice(),
                    );
                    match b"prof.dump\0".name().write(path) {
                        Ok(()) => eprintln!("heap profile written to {prefix}.{n}.heap"),
                        Err(e) => eprintln!("heap profile {prefix}.{n}.heap not written: {e}"),
                    }
                }
            });
        });
    }
}
