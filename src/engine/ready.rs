//! A short list of ops that became ready, collected under var locks and
//! dispatched after the locks are released.

use super::op::OpPtr;

const INLINE: usize = 4;

/// Ops made ready by one completion or push. Most completions ready zero or
/// one op, so the first few live inline and the list allocates only when a
/// write releases many readers at once.
pub(crate) struct ReadyList {
    inline: [Option<OpPtr>; INLINE],
    len: usize,
    spill: Vec<OpPtr>,
}

impl ReadyList {
    pub(crate) fn new() -> Self {
        ReadyList {
            inline: [None; INLINE],
            len: 0,
            spill: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, op: OpPtr) {
        if self.len < INLINE {
            self.inline[self.len] = Some(op);
            self.len += 1;
        } else {
            self.spill.push(op);
        }
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<OpPtr> {
        if let Some(op) = self.spill.pop() {
            return Some(op);
        }
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        self.inline[self.len].take()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0 && self.spill.is_empty()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::engine::op::OpBlock;
    use std::ptr::NonNull;

    #[test]
    fn holds_more_than_inline_capacity() {
        let mut blocks: Vec<Box<OpBlock>> = (0..10).map(|_| Box::new(OpBlock::empty())).collect();
        let ptrs: Vec<OpPtr> = blocks
            .iter_mut()
            .map(|b| OpPtr(NonNull::from(&mut **b)))
            .collect();
        let mut list = ReadyList::new();
        assert!(list.is_empty());
        for &p in &ptrs {
            list.push(p);
        }
        let mut out = Vec::new();
        while let Some(p) = list.pop() {
            out.push(p);
        }
        assert_eq!(out.len(), 10);
        for p in &ptrs {
            assert!(out.contains(p));
        }
        assert!(list.is_empty());
    }
}
