//! Which cache lines a value spans, for the tests that keep a field that
//! one thread writes off the lines that other threads read.

use std::ops::RangeInclusive;

/// The bytes of a cache line as these tests count them: 64, the line of
/// the x86-64 and AArch64 machines this library is measured on.
/// (`CachePadded` pads to 128 on x86-64, for the prefetcher that fetches
/// lines in pairs, so a padded field is off its neighbours' lines either
/// way.)
const LINE: usize = 64;

/// The cache lines, numbered from address 0, that `x` spans.
pub(crate) fn lines<T: ?Sized>(x: &T) -> RangeInclusive<usize> {
    let start = x as *const T as *const u8 as usize;
    let size = std::mem::size_of_val(x).max(1);
    start / LINE..=(start + size - 1) / LINE
}

/// True when `a` and `b` have a cache line in common.
pub(crate) fn share_a_line<A: ?Sized, B: ?Sized>(a: &A, b: &B) -> bool {
    let (a, b) = (lines(a), lines(b));
    a.start() <= b.end() && b.start() <= a.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_share_a_line_and_padded_fields_do_not() {
        #[repr(C)]
        struct Packed {
            a: u64,
            b: u64,
        }
        #[repr(C, align(64))]
        struct Line([u8; 64]);
        #[repr(C)]
        struct Padded {
            a: Line,
            b: Line,
        }
        let p = Packed { a: 1, b: 2 };
        assert!(share_a_line(&p.a, &p.b));
        let q = Padded {
            a: Line([0; 64]),
            b: Line([0; 64]),
        };
        assert!(!share_a_line(&q.a, &q.b));
        assert_eq!(lines(&q.a).count(), 1);
        assert!(lines(&[0u8; 200][..]).count() >= 4);
    }
}
