//! The two allocation models, tracked side by side.
//!
//! - *oracle*: every tensor comes from the system and goes back to it; the
//!   cost is the peak of live bytes.
//! - *pool*: a memory pool that never returns memory. A request is rounded
//!   with [`Rounding`] (the pooled storage manager's own rule); a free block
//!   of exactly that rounded size is reused, otherwise the pool grows by the
//!   rounded size. The cost is the pool's total size at the end.

use std::collections::HashMap;

use serde::Serialize;

use crate::storage::rounding::Rounding;

/// Which measure of memory a simulation reports as its peak (and holds
/// under a budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AllocModel {
    /// Peak of live bytes: every tensor from the system.
    Oracle,
    /// Total size of a never-shrinking pool with the given rounding.
    Pool,
}

/// Memory of one simulation: live bytes and the pool, both at once.
#[derive(Debug, Clone)]
pub(crate) struct Memory {
    rounding: Rounding,
    /// Rounded block held by each tensor that is in memory now.
    held: Vec<Option<(u64, u64)>>,
    live: u64,
    live_peak: u64,
    live_peak_op: usize,
    free_blocks: HashMap<u64, u64>,
    pool_total: u64,
    pool_peak_op: usize,
    op: usize,
}

impl Memory {
    pub(crate) fn new(tensors: usize, rounding: Rounding) -> Self {
        Self {
            rounding,
            held: vec![None; tensors],
            live: 0,
            live_peak: 0,
            live_peak_op: 0,
            free_blocks: HashMap::new(),
            pool_total: 0,
            pool_peak_op: 0,
            op: 0,
        }
    }

    /// Names the op that the following allocations belong to.
    pub(crate) fn set_op(&mut self, op: usize) {
        self.op = op;
    }

    /// Whether tensor `t` is in memory.
    pub(crate) fn holds(&self, t: usize) -> bool {
        self.held[t].is_some()
    }

    /// Allocates tensor `t` of `size` bytes; a tensor already held is left alone.
    pub(crate) fn alloc(&mut self, t: usize, size: u64) {
        if self.held[t].is_some() {
            return;
        }
        let block = usize::try_from(size)
            .ok()
            .and_then(|s| self.rounding.round(s))
            .map_or(u64::MAX, |b| b as u64);
        self.held[t] = Some((size, block));
        self.live = self.live.saturating_add(size);
        if self.live > self.live_peak {
            self.live_peak = self.live;
            self.live_peak_op = self.op;
        }
        if block == 0 {
            return;
        }
        match self.free_blocks.get_mut(&block) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                self.pool_total = self.pool_total.saturating_add(block);
                self.pool_peak_op = self.op;
            }
        }
    }

    /// Frees tensor `t` if it is held.
    pub(crate) fn free(&mut self, t: usize) {
        if let Some((size, block)) = self.held[t].take() {
            self.live -= size;
            if block > 0 {
                *self.free_blocks.entry(block).or_insert(0) += 1;
            }
        }
    }

    /// Peak of live bytes so far and the op where it was first reached.
    pub(crate) fn live_peak(&self) -> (u64, usize) {
        (self.live_peak, self.live_peak_op)
    }

    /// Pool size so far and the op where it last grew.
    pub(crate) fn pool_peak(&self) -> (u64, usize) {
        (self.pool_total, self.pool_peak_op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_reuses_blocks_of_the_same_rounded_size() {
        let mut m = Memory::new(4, Rounding::round_default());
        m.alloc(0, 5000); // 8192 block
        m.free(0);
        m.alloc(1, 6000); // reuses the 8192 block
        assert_eq!(m.pool_peak().0, 8192);
        m.alloc(2, 100); // 4096 block, new
        assert_eq!(m.pool_peak().0, 8192 + 4096);
        assert_eq!(m.live_peak().0, 6100);
        m.alloc(3, 0);
        assert_eq!(m.pool_peak().0, 12288);
    }
}
