//! glibc malloc tuning for a long-running controller: by default glibc gives every thread its
//! own arena and keeps freed pages, so the memory of the initial list of 10,000 objects (pages
//! of JSON, decoded once, then dropped) stays resident for the life of the process. Two arenas
//! and a trim after the caches synced (and every few minutes) return it. No-ops elsewhere.
#![allow(unsafe_code)]

/// Caps malloc arenas; call before starting threads.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Returns freed heap pages to the operating system.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim is thread-safe and only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}
