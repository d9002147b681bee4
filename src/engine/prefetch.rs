//! Software prefetch: asking the CPU to start moving a cache line here
//! before the code that needs it runs, so that misses overlap.

#[cfg(target_arch = "x86_64")]
use std::sync::atomic::{AtomicU8, Ordering};

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

/// Whether the CPU has PREFETCHW (CPUID leaf 0x8000_0001, ECX bit 8).
///
/// Asked of the CPU once; afterwards one relaxed load and a compare. A
/// `OnceCell` did the same in about twice the instructions, and a
/// completion asks several times per op (the `wavefront` worker spent
/// some 40 instructions an op on it under callgrind).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_prefetchw() -> bool {
    match PREFETCHW.load(Ordering::Relaxed) {
        YES => true,
        NO => false,
        _ => ask_cpu_for_prefetchw(),
    }
}

/// [`has_prefetchw`]'s answer: [`UNKNOWN`] until a thread has asked the
/// CPU. Relaxed is enough: every thread that asks gets the same answer,
/// so a thread that has not seen another's store just asks again.
#[cfg(target_arch = "x86_64")]
static PREFETCHW: AtomicU8 = AtomicU8::new(UNKNOWN);
#[cfg(target_arch = "x86_64")]
const UNKNOWN: u8 = 0;
#[cfg(target_arch = "x86_64")]
const NO: u8 = 1;
#[cfg(target_arch = "x86_64")]
const YES: u8 = 2;

#[cfg(target_arch = "x86_64")]
#[cold]
fn ask_cpu_for_prefetchw() -> bool {
    use std::arch::x86_64::__cpuid;
    // The extended leaf is read only when the CPU reports it.
    let has = __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0;
    PREFETCHW.store(if has { YES } else { NO }, Ordering::Relaxed);
    has
}

/// The addresses of the cache lines that the `bytes` bytes from `start`
/// lie on, first to last: what to ask for to cover a buffer that need
/// not start on a line.
#[inline]
pub(crate) fn lines_of(start: usize, bytes: usize) -> impl Iterator<Item = usize> {
    let first = start & !(LINE - 1);
    let end = if bytes == 0 { first } else { start + bytes };
    (first..end).step_by(LINE)
}

/// Bytes in a cache line, as the layouts of the hot structs assume.
const LINE: usize = 64;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_prefetchw_answer_is_the_cpus_and_is_kept() {
        use std::arch::x86_64::__cpuid;
        let cpu =
            __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0;
        assert_eq!(has_prefetchw(), cpu);
        // Kept after the first question, whichever thread asked it.
        assert_eq!(
            PREFETCHW.load(Ordering::Relaxed),
            if cpu { YES } else { NO }
        );
        assert_eq!(has_prefetchw(), cpu);
    }

    #[test]
    fn lines_of_covers_an_unaligned_buffer_and_nothing_beyond_it() {
        // 48 bytes from 40 reach into the second line (40..88).
        assert_eq!(lines_of(40, 48).collect::<Vec<_>>(), [0, 64]);
        // 64 bytes on a line boundary: that line only.
        assert_eq!(lines_of(128, 64).collect::<Vec<_>>(), [128]);
        // One byte past it: the next line too.
        assert_eq!(lines_of(128, 65).collect::<Vec<_>>(), [128, 192]);
        // The last byte alone decides the last line.
        assert_eq!(lines_of(127, 1).collect::<Vec<_>>(), [64]);
        assert_eq!(lines_of(127, 2).collect::<Vec<_>>(), [64, 128]);
        // Nothing to cover, even from the middle of a line.
        assert_eq!(lines_of(80, 0).count(), 0);
        assert_eq!(lines_of(0, 0).count(), 0);
    }
}
