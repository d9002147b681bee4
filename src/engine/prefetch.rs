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

/// Starts fetching the cache line holding `p` for writing: the line
/// arrives owned, so a store or a locked instruction on it does not wait
/// for other cores to give it up. A read prefetch where the CPU lacks
/// PREFETCHW. A hint only, like [`line`].
#[inline]
pub(crate) fn line_for_write<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        // Miri runs no inline assembly.
        if !cfg!(miri) && has_prefetchw() {
            // (`_MM_HINT_ET0` would say the same, but without the `prfchw`
            // target feature, which is not stable, LLVM emits a plain read
            // prefetch for it.)
            // SAFETY: the CPU has PREFETCHW (CPUID, checked just above); a
            // prefetch never faults, whatever the address, and leaves
            // memory as it is.
            unsafe {
                std::arch::asm!(
                    "prefetchw byte ptr [{a}]",
                    a = in(reg) p,
                    options(nostack, preserves_flags, readonly)
                );
            }
            return;
        }
    }
    line(p);
}

/// Whether the CPU has PREFETCHW (CPUID leaf 0x8000_0001, ECX bit 8), asked
/// once.
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_prefetchw() -> bool {
    use crate::sync::unmodelled::OnceCell;
    static HAS: OnceCell<bool> = OnceCell::new();
    *HAS.get_or_init(|| {
        use std::arch::x86_64::__cpuid;
        // The extended leaf is read only when the CPU reports it.
        __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0
    })
}
