//! How the daemon asks glibc's allocator to give memory back (issue 18). A connection
//! that sent a large frame or was sent large answers held buffers of a MiB or more;
//! with glibc's defaults, the threshold above which an allocation gets pages of its
//! own rises after the first such buffer is freed, so later ones come from the heap
//! and stay with the process after they are freed (1.7 GiB after an attack closed).
//! Fixing the threshold keeps every buffer of [`MMAP_THRESHOLD`] or more in pages of
//! its own, unmapped when freed; fewer arenas keep freed small allocations where they
//! can be reused.

/// Allocations of this size or more are mapped on their own and unmapped when freed.
const MMAP_THRESHOLD: i32 = 128 * 1024;
/// glibc makes up to 8 arenas per core for a threaded process; the daemon's threads
/// are the async workers and blocking helpers, which need few.
const ARENA_MAX: i32 = 2;

/// Call before the runtime starts threads. A no-op where glibc is not the allocator.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before other threads
    // exist, so no allocation runs concurrently.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
    }
}
