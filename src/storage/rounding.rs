//! How pooled storage managers round a requested size to a pool bucket.
//!
//! Kept apart from the managers so that anything that must predict what the
//! pool will really hold (the training-memory simulator, the graph executor's
//! reports) uses the very same arithmetic.

/// Default page size of the exact-size pool: 4 KiB.
pub const DEFAULT_PAGE_SIZE: usize = 4096;
/// Default large-size threshold of the exact-size pool: 2 MiB.
pub const DEFAULT_LARGE_THRESHOLD: usize = 2 << 20;
/// Default linear cutoff of the round pool: 2^24 bytes.
pub const DEFAULT_ROUND_CUTOFF: usize = 1 << 24;

/// A rounding rule: maps a requested size to the size of the block that serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// No rounding: the block is exactly the request.
    None,
    /// Exact-size pool: up to a page multiple; above `large_threshold`, up to a
    /// multiple of `large_threshold`.
    Exact {
        /// Page size (a power of two is not required, but non-zero is).
        page: usize,
        /// Sizes above this round to multiples of it.
        large_threshold: usize,
    },
    /// Round pool: powers of two (never below `page`) up to `cutoff`; above it,
    /// multiples of `cutoff`.
    Round {
        /// Smallest block.
        page: usize,
        /// Linear cutoff (a power of two).
        cutoff: usize,
    },
}

impl Rounding {
    /// The exact-size pool with default page size and threshold.
    pub const fn exact_default() -> Self {
        Rounding::Exact {
            page: DEFAULT_PAGE_SIZE,
            large_threshold: DEFAULT_LARGE_THRESHOLD,
        }
    }

    /// The round pool with default page size and cutoff.
    pub const fn round_default() -> Self {
        Rounding::Round {
            page: DEFAULT_PAGE_SIZE,
            cutoff: DEFAULT_ROUND_CUTOFF,
        }
    }

    /// The block size that serves a request of `size` bytes.
    ///
    /// Size 0 stays 0 under every rule: an empty request holds no memory.
    /// Returns `None` when the rounded size would overflow `usize`.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::storage::rounding::Rounding;
    /// let r = Rounding::Round { page: 4096, cutoff: 1 << 20 };
    /// assert_eq!(r.round(32), Some(4096));
    /// assert_eq!(r.round(4095), Some(4096));
    /// assert_eq!(r.round((2 << 20) + 1), Some(3 << 20));
    /// ```
    pub fn round(&self, size: usize) -> Option<usize> {
        if size == 0 {
            return Some(0);
        }
        match *self {
            Rounding::None => Some(size),
            Rounding::Exact {
                page,
                large_threshold,
            } => {
                if size > large_threshold {
                    round_up(size, large_threshold)
                } else {
                    round_up(size, page)
                }
            }
            Rounding::Round { page, cutoff } => {
                if size > cutoff {
                    round_up(size, cutoff)
                } else {
                    Some(
                        size.checked_next_power_of_two()?
                            .max(page)
                            .min(cutoff.max(page)),
                    )
                }
            }
        }
    }
}

fn round_up(size: usize, multiple: usize) -> Option<usize> {
    if multiple <= 1 {
        return Some(size);
    }
    size.checked_add(multiple - 1)
        .map(|s| s / multiple * multiple)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_pool_rounds_to_pages_then_large_multiples() {
        let r = Rounding::exact_default();
        assert_eq!(r.round(1), Some(4096));
        assert_eq!(r.round(4096), Some(4096));
        assert_eq!(r.round(4097), Some(8192));
        assert_eq!(r.round(2 << 20), Some(2 << 20));
        assert_eq!(r.round((2 << 20) + 1), Some(4 << 20));
    }

    #[test]
    fn round_pool_buckets() {
        let r = Rounding::Round {
            page: 4096,
            cutoff: 1 << 20,
        };
        assert_eq!(r.round(32), r.round(4095));
        assert_eq!(r.round(5000), Some(8192));
        assert_eq!(r.round(1 << 20), Some(1 << 20));
        assert_eq!(r.round((2 << 20) + 1), r.round(3 << 20));
        assert_eq!(r.round(3 << 20), Some(3 << 20));
    }

    #[test]
    fn zero_and_overflow() {
        assert_eq!(Rounding::round_default().round(0), Some(0));
        assert_eq!(Rounding::exact_default().round(usize::MAX), None);
    }
}
