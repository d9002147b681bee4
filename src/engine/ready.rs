//! A short list of ops that became ready, collected under var locks and
//! dispatched after the locks are released; and the window through which
//! a completion of many vars grants the ops it releases.

use super::op::OpPtr;
use crate::sync::Ordering;

const INLINE: usize = 4;

/// Grants a windowed completion keeps in flight: each op's block is asked
/// for this many grants before its own. Enough to overlap the misses, few
/// enough to leave the core's fill buffers to the vars' lines.
const WINDOW: usize = 8;

/// Vars an op needs before its completion grants through a window
/// ([`ReadyList::windowed`]). An op of a few vars releases at most a few
/// ops, whose grants the window would only delay: below this the
/// completion grants as it goes, as before.
pub(crate) const WINDOW_MIN_VARS: usize = 8;

/// Ops made ready by one completion or push. Most completions ready zero or
/// one op, so the first few live inline and the list allocates only when a
/// write releases many readers at once.
pub(crate) struct ReadyList {
    inline: [Option<OpPtr>; INLINE],
    len: usize,
    spill: Vec<OpPtr>,
    /// Grants put off, oldest at `window_head`, in a list made by
    /// [`ReadyList::windowed`]; `window_on` is false in every other list.
    window: [Option<OpPtr>; WINDOW],
    window_head: u8,
    window_len: u8,
    window_on: bool,
}

impl ReadyList {
    pub(crate) fn new() -> Self {
        ReadyList {
            inline: [None; INLINE],
            len: 0,
            spill: Vec::new(),
            window: [None; WINDOW],
            window_head: 0,
            window_len: 0,
            window_on: false,
        }
    }

    /// A list for the completion of an op of many vars, which grants the
    /// writes its reads' completions start through a window
    /// ([`ReadyList::grant_through_window`]): each such grant asks for the
    /// op's block and is made `WINDOW` grants later (or at
    /// [`ReadyList::flush_window`]).
    ///
    /// Why: a grant is a locked decrement on the op's block, which the
    /// pushing thread wrote, often on another core. A locked instruction
    /// lets no later load pass it, so a completion that grants a hundred
    /// ops one after another met a hundred misses in a row. The round's
    /// writer of `fan` reads every `y_k`, and the completion of each of
    /// those reads starts the write of `y_k` queued behind it: on the
    /// empty `fan` at one worker that decrement held 10% of all samples.
    /// Through the window the misses overlap. A grant put off is only an
    /// op made ready a little later by the same completion: the var's
    /// state was updated under its lock as before, and the op cannot run
    /// before its count reaches zero. (The reads a write releases have
    /// their blocks asked for ahead already, `protocol.rs`.)
    pub(crate) fn windowed() -> Self {
        ReadyList {
            window_on: true,
            ..ReadyList::new()
        }
    }

    /// Grants `op` one of its dependencies, at once.
    #[inline]
    pub(crate) fn grant(&mut self, op: OpPtr) {
        // SAFETY: a queued or granted op is live: it completes (and is
        // recycled) only after every one of its vars has granted it, and
        // the caller holds one of those grants (made under a var's lock,
        // or handed on in a run) until this decrement.
        let block = unsafe { op.get() };
        match block.wait.fetch_sub(1, Ordering::AcqRel) {
            1 => self.push(op),
            // More grants than the op waits for: two threads could run and
            // recycle the same block. Not reachable while the protocol
            // holds; checked because the branch costs nothing next to the
            // locked decrement, and a broken protocol must not go quiet.
            0 => over_granted(op),
            _ => {}
        }
    }

    /// Grants `op` one of its dependencies: through the window in a
    /// windowed list, at once in any other.
    #[inline]
    pub(crate) fn grant_through_window(&mut self, op: OpPtr) {
        if !self.window_on {
            self.grant(op);
            return;
        }
        // The count's line alone: the grant writes nothing else, and
        // whoever runs the op reads the rest.
        super::prefetch::line_for_write(op.0.as_ptr() as *const u8);
        let len = usize::from(self.window_len);
        if len == WINDOW {
            let head = usize::from(self.window_head);
            let oldest = self.window[head].replace(op).expect("a full window");
            self.window_head = ((head + 1) % WINDOW) as u8;
            self.grant(oldest);
        } else {
            let tail = (usize::from(self.window_head) + len) % WINDOW;
            self.window[tail] = Some(op);
            self.window_len += 1;
        }
    }

    /// Makes the grants the window still holds, oldest first.
    pub(crate) fn flush_window(&mut self) {
        while self.window_len > 0 {
            let head = usize::from(self.window_head);
            let op = self.window[head].take().expect("a held grant");
            self.window_head = ((head + 1) % WINDOW) as u8;
            self.window_len -= 1;
            self.grant(op);
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
        debug_assert_eq!(self.window_len, 0, "grants left in the window");
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
    fn a_window_holds_its_last_grants_until_flushed_and_makes_each_once() {
        let n = 3 * WINDOW + 3;
        let (blocks, ptrs) = blocks(n, 1);
        let mut list = ReadyList::windowed();
        for &p in &ptrs {
            list.grant_through_window(p);
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
        list.flush_window();
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
        let mut list = ReadyList::windowed();
        list.grant_through_window(ptrs[0]);
        list.flush_window();
        assert!(list.is_empty(), "one grant of two");
        assert_eq!(blocks[0].wait.load(Ordering::Relaxed), 1);
        list.grant(ptrs[0]);
        assert_eq!(drain(&mut list), ptrs);
    }

    #[test]
    fn an_ordinary_list_grants_through_the_window_at_once() {
        let (blocks, ptrs) = blocks(WINDOW + 1, 1);
        let mut list = ReadyList::new();
        for &p in &ptrs {
            list.grant_through_window(p);
        }
        assert_eq!(drain(&mut list).len(), ptrs.len());
        assert!(blocks.iter().all(|b| b.wait.load(Ordering::Relaxed) == 0));
        // Nothing held: the flush has nothing to do.
        list.flush_window();
        assert!(list.is_empty());
    }
}
