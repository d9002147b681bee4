//! A short list of ops that became ready, collected under var locks and
//! dispatched after the locks are released; and the window through which
//! a completion of many vars grants the ops it releases.

use super::op::{Intent, OpPtr};
use crate::sync::Ordering;

const INLINE: usize = 4;

/// Grants a [`GrantWindow`] keeps in flight: each op's count line is
/// asked for this many grants before its decrement. Enough to overlap the
/// misses, few enough to leave the core's fill buffers to the vars' lines.
const WINDOW: usize = 8;

/// Vars an op needs before its completion grants through a
/// [`GrantWindow`]. An op of a few vars releases at most a few ops, whose
/// grants the window would only delay: below this the completion grants
/// as it goes.
pub(crate) const WINDOW_MIN_VARS: usize = 8;

/// Ops made ready by one completion or push. Most completions ready zero or
/// one op, so the first few live inline and the list allocates only when a
/// write releases many readers at once.
pub(crate) struct ReadyList {
    inline: [Option<OpPtr>; INLINE],
    len: usize,
    spill: Vec<OpPtr>,
}

/// The grants a completion of many vars puts off: the writes that its
/// reads' completions start, each made `WINDOW` grants after it was asked
/// for, or at [`GrantWindow::flush`].
///
/// Why: a grant is a locked decrement on the op's block, which the pushing
/// thread wrote, often on another core. A locked instruction lets no later
/// load pass it, so a completion that grants a hundred ops one after
/// another met a hundred misses in a row. The round's writer of `fan`
/// reads every `y_k`, and the completion of each of those reads starts the
/// write of `y_k` queued behind it: on the empty `fan` at one worker that
/// decrement held 10% of all samples. Through the window the misses
/// overlap. A grant put off is only an op made ready a little later by the
/// same completion: the var's state was updated under its lock as before,
/// and the op cannot run before its count reaches zero. (The reads a
/// write releases have their blocks asked for ahead already,
/// `protocol.rs`.) The window lives in the completion's frame, not in the
/// [`ReadyList`] every completion returns.
pub(crate) struct GrantWindow {
    /// Grants put off, oldest at `head`.
    ops: [Option<OpPtr>; WINDOW],
    head: u8,
    len: u8,
}

impl GrantWindow {
    pub(crate) fn new() -> Self {
        GrantWindow {
            ops: [None; WINDOW],
            head: 0,
            len: 0,
        }
    }

    /// Asks for `op`'s count line and puts its grant off; makes the oldest
    /// grant held, into `ready`, when the window is full.
    #[inline]
    pub(crate) fn grant(&mut self, op: OpPtr, ready: &mut ReadyList) {
        // The count's line alone: the grant writes nothing else, and the
        // pushing thread may still be reading the op's vars from the next.
        super::prefetch::line_for_write(op.0.as_ptr() as *const u8);
        if usize::from(self.len) == WINDOW {
            let oldest = self.pop_oldest();
            ready.grant(oldest);
        }
        let tail = (usize::from(self.head) + usize::from(self.len)) % WINDOW;
        self.ops[tail] = Some(op);
        self.len += 1;
    }

    /// Makes the grants still held, oldest first.
    pub(crate) fn flush(&mut self, ready: &mut ReadyList) {
        while self.len > 0 {
            let op = self.pop_oldest();
            ready.grant(op);
        }
    }

    /// Takes the oldest grant held; the window holds at least one.
    #[inline]
    fn pop_oldest(&mut self) -> OpPtr {
        let head = usize::from(self.head);
        self.head = ((head + 1) % WINDOW) as u8;
        self.len -= 1;
        self.ops[head].take().expect("a held grant")
    }
}

impl Drop for GrantWindow {
    fn drop(&mut self) {
        // A grant left here would leave its op waiting for ever.
        debug_assert_eq!(self.len, 0, "grants left in the window");
    }
}

impl ReadyList {
    pub(crate) fn new() -> Self {
        ReadyList {
            inline: [None; INLINE],
            len: 0,
            spill: Vec::new(),
        }
    }

    /// Grants `op` one of its dependencies, at once; collects it when that
    /// was the last.
    #[inline]
    pub(crate) fn grant(&mut self, op: OpPtr) {
        // SAFETY: a queued or granted op is live: it completes (and is
        // recycled) only after every one of its vars has granted it, and
        // the caller holds one of those grants (made under a var's lock,
        // or handed on in a run) until this decrement.
        let block = unsafe { op.get() };
        match block.wait.fetch_sub(1, Ordering::AcqRel) {
            1 => {
                // This thread runs the op, or hands it on, next: the
                // decrement brought the block's first line here, which
                // says where a long var list lives.
                block.prefetch_spilled_vars(Intent::Read);
                self.push(op)
            }
            // More grants than the op waits for: two threads could run and
            // recycle the same block. Not reachable while the protocol
            // holds; checked because the branch costs nothing next to the
            // locked decrement, and a broken protocol must not go quiet.
            0 => over_granted(op),
            _ => {}
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

#[cold]
#[inline(never)]
fn over_granted(op: OpPtr) -> ! {
    // The block's fields are not read: in this state another thread may
    // be recycling it.
    panic!(
        "the op of block {:p} was granted more often than it waits for: the var protocol is broken",
        op.0.as_ptr()
    )
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

    /// Blocks whose ops each wait for `wait` grants.
    fn blocks(n: usize, wait: usize) -> (Vec<OpBlock>, Vec<OpPtr>) {
        let mut blocks: Vec<OpBlock> = (0..n).map(|_| OpBlock::empty()).collect();
        for b in &blocks {
            b.wait.store(wait, Ordering::Relaxed);
        }
        let ptrs = blocks.iter_mut().map(|b| OpPtr(NonNull::from(b))).collect();
        (blocks, ptrs)
    }

    fn drain(list: &mut ReadyList) -> Vec<OpPtr> {
        std::iter::from_fn(|| list.pop()).collect()
    }

    #[test]
    fn a_window_holds_its_last_grants_until_flushed_and_makes_each_once_oldest_first() {
        let n = 3 * WINDOW + 3;
        let (blocks, ptrs) = blocks(n, 1);
        let (mut list, mut window) = (ReadyList::new(), GrantWindow::new());
        for &p in &ptrs {
            window.grant(p, &mut list);
        }
        // Every grant but the last WINDOW has been made, oldest first.
        let made = drain(&mut list);
        let mut expected: Vec<OpPtr> = ptrs[..n - WINDOW].to_vec();
        let mut got = made.clone();
        got.sort_by_key(|p| p.0.as_ptr() as usize);
        expected.sort_by_key(|p| p.0.as_ptr() as usize);
        assert_eq!(got, expected);
        for b in &blocks[n - WINDOW..] {
            assert_eq!(b.wait.load(Ordering::Relaxed), 1, "held, not granted");
        }
        window.flush(&mut list);
        let rest = drain(&mut list);
        assert_eq!(rest.len(), WINDOW);
        for p in &ptrs[n - WINDOW..] {
            assert!(rest.contains(p));
        }
        for b in &blocks {
            assert_eq!(b.wait.load(Ordering::Relaxed), 0, "granted exactly once");
        }
        assert!(list.is_empty());
    }

    #[test]
    fn an_op_granted_through_the_window_is_ready_only_at_its_last_grant() {
        let (blocks, ptrs) = blocks(1, 2);
        let (mut list, mut window) = (ReadyList::new(), GrantWindow::new());
        window.grant(ptrs[0], &mut list);
        window.flush(&mut list);
        assert!(list.is_empty(), "one grant of two");
        assert_eq!(blocks[0].wait.load(Ordering::Relaxed), 1);
        list.grant(ptrs[0]);
        assert_eq!(drain(&mut list), ptrs);
    }

    #[test]
    #[should_panic(expected = "granted more often than it waits for")]
    fn a_grant_beyond_the_count_panics() {
        let (_blocks, ptrs) = blocks(1, 1);
        let mut list = ReadyList::new();
        list.grant(ptrs[0]);
        list.grant(ptrs[0]);
    }
}
