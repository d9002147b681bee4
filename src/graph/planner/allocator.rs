//! NNVM's `GraphAllocator`: storage blocks with `request` and `release`.
//!
//! A released block goes into a free list ordered by size (a multimap in
//! NNVM). A request for `size` bytes searches the free blocks whose size is
//! within `[size / match_range, size * match_range]`: first the blocks at
//! least as big as the request, smallest first (a block that already fits),
//! then the smaller ones, biggest first, growing the block found to `size`.
//! A free block is taken only when it is on the requesting op's device and,
//! when the graph is coloured, was released by an op of the requester's
//! colour. When nothing matches, a new block is made. `match_range` 0 turns
//! reuse off.

use std::collections::BTreeMap;

use crate::storage::DeviceId;

use super::super::ir::OpId;

/// One storage block of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) size: u64,
    pub(crate) device: DeviceId,
    /// The op that released it last (meaningful while it is free).
    pub(crate) released_by: OpId,
}

/// The allocator of one planning run.
#[derive(Debug)]
pub(crate) struct GraphAllocator<'a> {
    match_range: u64,
    /// Colour of each op; empty when the graph is not coloured.
    colors: &'a [u32],
    pub(crate) blocks: Vec<Block>,
    /// Free blocks keyed by (size, release sequence): a multimap by size in
    /// which equal sizes keep their release order.
    free: BTreeMap<(u64, u64), usize>,
    seq: u64,
}

impl<'a> GraphAllocator<'a> {
    pub(crate) fn new(match_range: u64, colors: &'a [u32]) -> Self {
        Self {
            match_range,
            colors,
            blocks: Vec::new(),
            free: BTreeMap::new(),
            seq: 0,
        }
    }

    fn usable(&self, id: usize, device: DeviceId, op: OpId) -> bool {
        let b = &self.blocks[id];
        b.device == device
            && (self.colors.is_empty() || self.colors[b.released_by] == self.colors[op])
    }

    /// A block of at least `size` bytes on `device` for an output of `op`.
    pub(crate) fn request(&mut self, size: u64, device: DeviceId, op: OpId) -> usize {
        if self.match_range == 0 {
            return self.alloc(size, device);
        }
        let low = size / self.match_range;
        let high = size.saturating_mul(self.match_range);
        // Blocks at least as big as the request, smallest first.
        let bigger = self
            .free
            .range((size, 0)..=(high, u64::MAX))
            .find(|(_, &id)| self.usable(id, device, op))
            .map(|(&k, &id)| (k, id));
        // Then smaller blocks, biggest first.
        let found = bigger.or_else(|| {
            self.free
                .range((low, 0)..(size, 0))
                .rev()
                .find(|(_, &id)| self.usable(id, device, op))
                .map(|(&k, &id)| (k, id))
        });
        match found {
            Some((key, id)) => {
                self.free.remove(&key);
                let b = &mut self.blocks[id];
                b.size = b.size.max(size);
                id
            }
            None => self.alloc(size, device),
        }
    }

    /// A new block, never a free one.
    pub(crate) fn alloc(&mut self, size: u64, device: DeviceId) -> usize {
        self.blocks.push(Block {
            size,
            device,
            released_by: 0,
        });
        self.blocks.len() - 1
    }

    /// Puts block `id` back in the free list; `op` is the op that released it.
    pub(crate) fn release(&mut self, id: usize, op: OpId) {
        self.blocks[id].released_by = op;
        self.seq += 1;
        self.free.insert((self.blocks[id].size, self.seq), id);
    }

    /// Sum of the block sizes (NNVM's `TotalAllocBytes`).
    pub(crate) fn total_bytes(&self) -> u64 {
        self.blocks.iter().map(|b| b.size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU: DeviceId = DeviceId::cpu(0);

    #[test]
    fn bigger_blocks_first_then_smaller_grown() {
        let mut a = GraphAllocator::new(4, &[]);
        let small = a.request(100, CPU, 0);
        let big = a.request(300, CPU, 0);
        let huge = a.request(2000, CPU, 0);
        a.release(small, 1);
        a.release(big, 1);
        a.release(huge, 1);
        // 200: the 300 block fits and is the smallest that does.
        assert_eq!(a.request(200, CPU, 2), big);
        // 250: nothing bigger within 4x (2000 > 1000), so the 100 block grows.
        assert_eq!(a.request(250, CPU, 2), small);
        assert_eq!(a.blocks[small].size, 250);
        // 10: 2000 is outside [2, 40]; a new block.
        let fresh = a.request(10, CPU, 2);
        assert_eq!(fresh, 3);
        assert_eq!(a.total_bytes(), 250 + 300 + 2000 + 10);
    }

    #[test]
    fn match_range_zero_never_reuses_and_devices_stay_apart() {
        let mut a = GraphAllocator::new(0, &[]);
        let x = a.request(8, CPU, 0);
        a.release(x, 0);
        assert_ne!(a.request(8, CPU, 1), x);
        let mut b = GraphAllocator::new(16, &[]);
        let y = b.request(8, DeviceId::gpu(0), 0);
        b.release(y, 0);
        assert_ne!(b.request(8, CPU, 1), y);
        assert_eq!(b.request(8, DeviceId::gpu(0), 1), y);
    }

    #[test]
    fn colours_keep_blocks_apart() {
        let colors = [0, 1, 0];
        let mut a = GraphAllocator::new(16, &colors);
        let x = a.request(8, CPU, 0);
        a.release(x, 0);
        assert_ne!(a.request(8, CPU, 1), x, "op 1 has another colour");
        assert_eq!(a.request(8, CPU, 2), x);
    }
}
