//! Software prefetch: asking the CPU to start moving a cache line here
//! before the code that needs it runs, so that misses overlap.

/// Starts fetching the cache line holding `p` into this core's caches for
/// reading. A hint only: it never faults and changes nothing, whatever `p`
/// is.
#[inline]
pub(crate) fn line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is part of SSE, which every x86-64 CPU has; a
    // prefetch never faults and has no effect on memory.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
