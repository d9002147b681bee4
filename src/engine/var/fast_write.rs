//! Writes that leave an idle var without its lock: the fast write.
//!
//! # Why
//!
//! A write granted on a var nobody else waits for (a fresh output, the next
//! link of a chain the workers have caught up with) used to take the var's
//! lock again at its completion only to find the queue empty. That is a
//! lock and an unlock, two locked instructions, per op and var, for
//! nothing: with one var per op they are a tenth of what an op costs on one
//! thread. Here such a write leaves with one CAS.
//!
//! # Protocol
//!
//! The var's `fast` word (shared with the fast-read epoch, `fast_read.rs`)
//! is a tagged union: `0`, nothing runs without the lock; `OPEN | n`, an
//! open read epoch; any other value, the address of the *fast write*, the
//! write holding the var with nothing queued behind it. Op blocks live in
//! user space, far below bit 63, so an address never has `OPEN`.
//!
//! * **grant** (under the lock): the write of an op that all its vars
//!   granted at its push is recorded in `fast` instead of the state's
//!   `writer` (`make_fast_write_locked` says why only those), unless the
//!   var's last handle is gone: the write that empties an orphaned var
//!   drops the var's self-reference, which needs the lock (`orphan` closes
//!   a fast write for the same reason).
//! * **leave** (the completion, no lock): CAS `fast` from the address to 0.
//!   If it succeeds the var is idle; nothing was queued, so there is
//!   nothing to grant.
//! * **close** (under the lock, by anyone about to queue behind the write
//!   or to look at it): swap `fast` to 0; if it held the address, the write
//!   still runs and becomes the state's `writer`, so its completion's CAS
//!   fails and it completes under the lock as any other write, granting
//!   what was queued meanwhile.
//!
//! The swap and the CAS are read-modify-writes of one word, so exactly one
//! of them takes the address out: either the write left first (the closer
//! finds 0 and the var idle) or the closer did (the completion finds 0 and
//! takes the lock). Nothing else writes `fast` meanwhile: an epoch opens
//! and a write is granted only while the var is idle, which it is not while
//! the fast write holds it, and lock-free reads add to `fast` only while
//! `OPEN` is set.
//!
//! Every lock holder that needs to know whether a write holds the var
//! (appends, the last handle's drop, diagnostics) closes the fast write
//! first, so the state's fields keep their meaning for the rest of the
//! protocol. Closing costs only the fast path: the write then completes as
//! it would have before.
//!
//! # Memory ordering
//!
//! The leave's CAS is `Release` (the write's effects, its version bump and
//! any failure it recorded were all made before it), and the close's load
//! and swap are `Acquire`: an op granted after a closer found the var idle
//! sees everything the write did, as if both had taken the lock.

use crate::sync::Ordering;

use super::super::op::OpPtr;
use super::fast_read::OPEN;
use super::{VarInner, VarState};

impl VarInner {
    /// Under the lock, right after `op` was granted the var at its push:
    /// makes it a fast write unless something queued behind it meanwhile.
    ///
    /// Only for an op that every one of its vars granted at its push
    /// ([`super::append_all`] decides): it is ready and starts at once, so
    /// it may well complete before the next append to the var. An op that
    /// still waits for other vars (a wavefront's cell, pushed far ahead of
    /// the workers) would nearly always be closed by the next append
    /// first, and a closed fast write costs a swap at the close and a
    /// failed CAS at the completion for nothing.
    #[inline]
    pub(super) fn make_fast_write_locked(&self, s: &mut VarState, op: OpPtr) {
        debug_assert_eq!(s.writer, Some(op));
        debug_assert!(s.readers == 0 && !s.draining);
        // Once orphaned, the write that empties the var must drop its
        // self-reference, which takes the lock.
        if s.queue.is_empty() && !s.orphaned {
            debug_assert_eq!(self.hot.fast.load(Ordering::Relaxed), 0);
            s.writer = None;
            // Relaxed: the grant that hands `op` to its runner is ordered
            // after this store (the push guard's release), and only that
            // runner's completion reads it without the lock.
            self.hot
                .fast
                .store(op.0.as_ptr() as usize as u64, Ordering::Relaxed);
        }
    }

    /// Under the lock: makes a running fast write the state's `writer`, so
    /// that it completes under the lock. Does nothing when no fast write
    /// holds the var (or it has just left).
    #[inline]
    pub(super) fn close_fast_write_locked(&self, s: &mut VarState) {
        let f = self.hot.fast.load(Ordering::Acquire);
        if f == 0 || f & OPEN != 0 {
            return;
        }
        let f = self.hot.fast.swap(0, Ordering::Acquire);
        if f != 0 {
            debug_assert_eq!(f & OPEN, 0, "an epoch opened under a fast write");
            debug_assert!(s.writer.is_none() && s.queue.is_empty());
            let op = std::ptr::NonNull::new(f as usize as *mut _)
                .expect("a fast write's address is not null");
            s.writer = Some(OpPtr(op));
        }
    }

    /// For lock holders outside the protocol (diagnostics): closes a fast
    /// write so the state's `writer` names every write holding the var, and
    /// that write cannot complete while the lock is held.
    pub(crate) fn settle_locked(&self, s: &mut VarState) {
        self.close_fast_write_locked(s);
    }

    /// The completion of `op`, the write holding the var: leaves without
    /// the lock when it is still a fast write. False when it was closed (or
    /// never was fast): the caller completes it under the lock.
    ///
    /// One CAS against the op's own address, not a load first: a load would
    /// fetch the line shared and the lock after it would fetch it again to
    /// own it.
    #[inline]
    pub(super) fn try_leave_fast_write(&self, op: OpPtr) -> bool {
        self.hot
            .fast
            .compare_exchange(
                op.0.as_ptr() as usize as u64,
                0,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// True when a fast write holds the var (stable under the lock only in
    /// the direction "it left": a true answer may be stale).
    #[inline]
    pub(super) fn fast_write_running(&self) -> bool {
        let f = self.hot.fast.load(Ordering::Acquire);
        f != 0 && f & OPEN == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::ptr::NonNull;

    use super::super::{FailedVars, VarId, VarSlot};
    use super::*;
    use crate::engine::op::OpBlock;
    use crate::engine::ready::ReadyList;
    use crate::sync::Arc;

    fn var() -> Arc<VarInner> {
        Arc::new(VarInner::new(VarId { engine: 1, id: 0 }, None))
    }

    /// Blocks waiting for one grant each (the var's; no push guard here).
    fn blocks(n: usize) -> Vec<OpBlock> {
        (0..n)
            .map(|_| {
                let b = OpBlock::empty();
                b.wait.store(1, Ordering::Relaxed);
                b
            })
            .collect()
    }

    fn ptr(b: &OpBlock) -> OpPtr {
        OpPtr(NonNull::from(b))
    }

    fn complete_write(v: &VarInner, op: &OpBlock, ready: &mut ReadyList) -> bool {
        v.complete_write(ptr(op), None, None, &FailedVars::new(), true, ready)
    }

    fn ready_ops(mut ready: ReadyList) -> Vec<OpPtr> {
        std::iter::from_fn(|| ready.pop()).collect()
    }

    #[test]
    fn a_write_on_an_idle_var_leaves_while_another_thread_holds_the_lock() {
        let v = var();
        let ops = blocks(1);
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        assert!(v.fast_write_running());
        assert!(v.hot.state.lock().writer.is_none());
        assert!(!v.is_idle(false), "a fast write holds the var");
        let guard = v.hot.state.lock();
        // A completion that needed the lock would wait for `guard` forever.
        let (op, var) = (ptr(&ops[0]), &*v);
        let left = std::thread::scope(|s| {
            s.spawn(move || var.try_leave_fast_write(op))
                .join()
                .unwrap()
        });
        drop(guard);
        assert!(left);
        assert!(v.is_idle(true));
        v.orphan();
        assert_eq!(Arc::strong_count(&v), 1, "the self-reference was dropped");
    }

    #[test]
    fn ops_appended_behind_a_fast_write_are_granted_by_its_completion() {
        let v = var();
        let ops = blocks(3);
        let slot = VarSlot::new(&v);
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        // The read closes the fast write and queues behind it.
        assert!(!v.append_read(ptr(&ops[1]), &slot).granted);
        assert!(!v.fast_write_running());
        assert_eq!(v.hot.state.lock().writer, Some(ptr(&ops[0])));
        assert!(!v.append_write(ptr(&ops[2]), false).granted);
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[0], &mut ready));
        assert_eq!(ready_ops(ready), vec![ptr(&ops[1])], "the read is next");
        assert_eq!(v.done.version.load(Ordering::Relaxed), 1);
        let mut ready = ReadyList::new();
        assert!(!v.complete_read(&mut ready));
        assert_eq!(ready_ops(ready), vec![ptr(&ops[2])]);
        // Granted from the queue, not at its push: under the lock.
        assert!(!v.fast_write_running());
        assert!(!v.try_leave_fast_write(ptr(&ops[2])));
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[2], &mut ready));
        assert!(ready.is_empty());
        assert_eq!(v.done.version.load(Ordering::Relaxed), 2);
        assert!(v.is_idle(true));
        v.orphan();
        assert_eq!(Arc::strong_count(&v), 1);
    }

    #[test]
    fn only_an_op_all_of_whose_vars_granted_it_at_its_push_gets_fast_writes() {
        let (r, w, x, y) = (var(), var(), var(), var());
        let ops = blocks(3);
        let slots = |vs: &[&Arc<VarInner>]| vs.iter().map(|v| VarSlot::new(v)).collect::<Vec<_>>();
        // ops[0] holds `r`; ops[1] reads it and writes `w`, so it waits:
        // its write of `w` is granted, but not as a fast write.
        assert!(r.append_write(ptr(&ops[0]), false).granted);
        let (granted, _) =
            super::super::append_all(ptr(&ops[1]), &slots(&[&r]), &slots(&[&w]), false);
        assert_eq!(granted, 1, "the read of r queued");
        assert!(!w.fast_write_running());
        assert_eq!(w.hot.state.lock().writer, Some(ptr(&ops[1])));
        // ops[2] writes two idle vars: ready at its push, both fast.
        let (granted, _) = super::super::append_all(ptr(&ops[2]), &[], &slots(&[&x, &y]), false);
        assert_eq!(granted, 2);
        assert!(x.fast_write_running() && y.fast_write_running());
        assert!(x.try_leave_fast_write(ptr(&ops[2])) && y.try_leave_fast_write(ptr(&ops[2])));
        // ops[0] grants ops[1] its read; ops[1] then completes under the
        // locks.
        let mut ready = ReadyList::new();
        assert!(!complete_write(&r, &ops[0], &mut ready));
        assert!(!r.complete_read(&mut ready));
        assert!(!complete_write(&w, &ops[1], &mut ready));
        for v in [&r, &w, &x, &y] {
            assert!(v.is_idle(true));
            v.orphan();
            assert_eq!(Arc::strong_count(v), 1);
        }
    }

    #[test]
    fn the_last_handle_s_drop_makes_a_fast_write_release_the_var() {
        let v = var();
        let ops = blocks(2);
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        v.orphan();
        assert!(!v.fast_write_running(), "the drop closed the fast write");
        assert_eq!(Arc::strong_count(&v), 2, "the running write keeps the var");
        let mut ready = ReadyList::new();
        assert!(
            complete_write(&v, &ops[0], &mut ready),
            "the write that empties an orphaned var drops its self-reference"
        );
        assert!(ready.is_empty());
        // SAFETY: the completion handed the self-reference over.
        unsafe { Arc::decrement_strong_count(Arc::as_ptr(&v)) };
        assert_eq!(Arc::strong_count(&v), 1);
    }

    #[test]
    fn an_orphaned_var_grants_no_fast_write() {
        let v = var();
        let ops = blocks(2);
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        assert!(!v.append_write(ptr(&ops[1]), false).granted);
        v.orphan();
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[0], &mut ready));
        assert_eq!(ready_ops(ready), vec![ptr(&ops[1])]);
        assert!(!v.fast_write_running());
        let mut ready = ReadyList::new();
        assert!(complete_write(&v, &ops[1], &mut ready));
        // SAFETY: as above.
        unsafe { Arc::decrement_strong_count(Arc::as_ptr(&v)) };
        assert_eq!(Arc::strong_count(&v), 1);
    }

    #[test]
    fn diagnostics_settle_a_fast_write_into_the_state() {
        let v = var();
        let ops = blocks(1);
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        {
            let mut s = v.hot.state.lock();
            v.settle_locked(&mut s);
            assert_eq!(s.writer, Some(ptr(&ops[0])));
        }
        assert!(
            !v.try_leave_fast_write(ptr(&ops[0])),
            "a settled write takes the lock"
        );
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[0], &mut ready));
        assert!(v.is_idle(true));
        v.orphan();
        assert_eq!(Arc::strong_count(&v), 1);
    }
}
