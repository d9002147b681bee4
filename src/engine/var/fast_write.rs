//! Writes that leave a var without its lock (the fast write), and idle
//! vars that one-var ops take without it (the idle token).
//!
//! # Why
//!
//! A write granted on a var nobody else waits for (a fresh output, the next
//! link of a chain the workers have caught up with) used to take the var's
//! lock again at its completion only to find the queue empty: a lock and
//! an unlock, two locked instructions, for nothing. The next op on the
//! idle var then took the lock to find it idle. Here such a write leaves
//! with one CAS, and a one-var op takes an idle var with one CAS.
//!
//! # Protocol
//!
//! The var's `fast` word (shared with the fast-read epoch, `fast_read.rs`)
//! is a tagged union:
//!
//! | `fast`          | meaning                                             |
//! |-----------------|-----------------------------------------------------|
//! | `0`             | nothing runs without the lock                       |
//! | `OPEN \| n`     | an open read epoch (`fast_read.rs`)                 |
//! | [`IDLE`]        | the var is idle; a one-var op may take it           |
//! | address (`\| 1`) | the *fast write*: the write holding the var, nothing queued behind it; bit 0 set when its op names one var |
//!
//! Op blocks are 64-byte aligned and live in user space, far below bit 63,
//! so an address is neither `IDLE` nor has `OPEN`.
//!
//! * **grant** (under the lock): the write of an op that all its vars
//!   granted at its push is recorded in `fast` instead of the state's
//!   `writer` (`make_fast_write_locked` says why only those), unless the
//!   var's last handle is gone (the write that empties an orphaned var
//!   drops the var's self-reference, which needs the lock) or the var is
//!   deleted (later appends must take the lock to learn it).
//! * **leave** (the completion, no lock): CAS `fast` from the op's word to
//!   `IDLE` when the op names one var, else to 0. If it succeeds, nothing
//!   was queued, so there is nothing to grant. Why only one-var ops leave
//!   the token: the next op is likely to be like the last (a chain, a
//!   var of its own reused), and an op of several vars appends under the
//!   locks (`append_all`), where taking the token back costs a CAS more.
//! * **take** (a one-var op's append, no lock): a write CASes `IDLE` to its
//!   own word (a fast write); a read CASes it to `OPEN | 1` (an epoch).
//!   An idle var holds its self-reference and is not deleted (the token is
//!   only left where a fast write was or by the var's creation, which
//!   gives it its self-reference too, and neither an orphaned nor a
//!   deleted var gets one), so the append has nothing else to do.
//! * **close** (under the lock, by anyone about to queue behind the write,
//!   take the var, or look at it): CAS `fast` from whatever it holds to 0,
//!   again until it holds 0 or an epoch. Taking out `IDLE` leaves an idle
//!   var in the state's hands; taking out an address makes that write the
//!   state's `writer`, so its completion's CAS fails and it completes under
//!   the lock as any other write, granting what was queued meanwhile.
//!
//! Every transition is a read-modify-write of the one word, so they happen
//! in one order: exactly one of a leave and a close takes an address out,
//! exactly one of two takers gets `IDLE`, and a close that took `IDLE`
//! leaves nothing to take. After a close the word holds 0 or an epoch, and
//! only reads counted into that epoch change it until the lock is released
//! (nothing leaves `IDLE` but a fast write, which the lock holder now
//! owns or which is gone).
//!
//! Every lock holder that needs the state to be the whole truth (appends,
//! the last handle's drop, diagnostics) closes first. Closing costs only
//! the fast path: the write then completes as it would have before.
//!
//! # Memory ordering
//!
//! The leave's CAS is `Release` (the write's effects, its version bump and
//! any failure it recorded were all made before it); the takes and the
//! close's CAS are `Acquire`. Whoever finds the var idle after a write
//! left it sees everything that write did, as if both had taken the lock.

use crate::sync::Ordering;

use super::super::op::OpPtr;
use super::fast_read::OPEN;
use super::{Appended, VarInner, VarState};

/// `fast`: the var is idle, and a one-var op may take it without the lock.
pub(super) const IDLE: u64 = 2;
/// Low bit of a fast write's word: its op names one var, and it leaves
/// the var [`IDLE`] instead of 0.
const TO_IDLE: u64 = 1;

/// The `fast` word of `op`'s fast write.
#[inline]
fn word(op: OpPtr, to_idle: bool) -> u64 {
    op.0.as_ptr() as usize as u64 | if to_idle { TO_IDLE } else { 0 }
}

impl VarInner {
    /// Under the lock taken for the append that granted `op` the var at
    /// its push: makes it a fast write. `one_var`: the op names this var
    /// alone (its fast write leaves the var [`IDLE`]).
    ///
    /// Only for an op that every one of its vars granted at its push
    /// ([`super::append_all`] decides): it is ready and starts at once, so
    /// it may well complete before the next append to the var. An op that
    /// still waits for other vars (a wavefront's cell, pushed far ahead of
    /// the workers) would nearly always be closed by the next append
    /// first, and a closed fast write costs a CAS at the close and a failed
    /// CAS at the completion for nothing.
    #[inline]
    pub(super) fn make_fast_write_locked(&self, s: &mut VarState, op: OpPtr, one_var: bool) {
        debug_assert_eq!(s.writer, Some(op));
        // Granted on an idle var, under a lock held since: nothing queued.
        debug_assert!(!s.draining && s.queue.is_empty());
        // Once orphaned, the write that empties the var must drop its
        // self-reference, which takes the lock; once deleted, every later
        // append must take the lock to learn it.
        if !s.orphaned && !s.deleted {
            debug_assert_eq!(self.hot.fast.load(Ordering::Relaxed), 0);
            s.writer = None;
            // Relaxed: the grant that hands `op` to its runner is ordered
            // after this store (the push guard's release), and only that
            // runner's completion reads it without the lock.
            self.hot.fast.store(word(op, one_var), Ordering::Relaxed);
        }
    }

    /// The write append of a one-var op, without the lock: granted as a
    /// fast write iff the var is [`IDLE`]. (An idle var holds its
    /// self-reference and is not deleted: see the module docs.)
    ///
    /// A load first, as a read's append does (`try_fast_read`): on a busy
    /// var (a chain whose pusher is ahead of the worker) the CAS could
    /// only fail, and a failed CAS still takes the line for writing from
    /// the core of the worker that completes on it; the lock taken next
    /// is the one locked instruction then. A stale `IDLE` or a stale
    /// "busy" costs nothing but the lock path, which takes the token out
    /// itself (`close_fast_write_locked`). Empty `chain` at one worker:
    /// 0.64 of the time (BENCHMARKS-HISTORY.md, "A load before the idle var's
    /// compare-and-swap").
    #[inline]
    pub(super) fn try_take_idle_for_write(&self, op: OpPtr) -> Option<Appended> {
        if self.hot.fast.load(Ordering::Relaxed) != IDLE {
            return None;
        }
        self.hot
            .fast
            .compare_exchange(IDLE, word(op, true), Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Appended {
                granted: true,
                after_delete: false,
            })
    }

    /// Under the lock: takes [`IDLE`] or a fast write out of the word, making
    /// a running fast write the state's `writer` so that it completes under
    /// the lock. Afterwards the word is 0 or an open epoch, and changes
    /// only by lock-free reads counted into that epoch until the lock is
    /// released. Lock holders outside the protocol (diagnostics) call it
    /// too, so that the state names every write holding the var and that
    /// write cannot complete while they hold the lock.
    #[inline]
    pub(crate) fn close_fast_write_locked(&self, s: &mut VarState) {
        let mut f = self.hot.fast.load(Ordering::Acquire);
        loop {
            if f == 0 || f & OPEN != 0 {
                return;
            }
            // A CAS, not a swap: a lock-free read may open an epoch on an
            // idle var meanwhile, and a fast write may leave it idle.
            match self
                .hot
                .fast
                .compare_exchange(f, 0, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) if f == IDLE => return,
                Ok(_) => {
                    debug_assert!(s.writer.is_none() && s.queue.is_empty());
                    let op = std::ptr::NonNull::new((f & !TO_IDLE) as usize as *mut _)
                        .expect("a fast write's address is not null");
                    s.writer = Some(OpPtr(op));
                    return;
                }
                Err(now) => f = now,
            }
        }
    }

    /// The completion of `op`, the write holding the var: leaves without
    /// the lock when it is still a fast write (`one_var` as given to
    /// [`VarInner::make_fast_write_locked`]). False when it was closed (or
    /// never was fast): the caller completes it under the lock.
    ///
    /// One CAS against the op's own word, not a load first: a load would
    /// fetch the line shared and the lock after it would fetch it again to
    /// own it.
    #[inline]
    pub(super) fn try_leave_fast_write(&self, op: OpPtr, one_var: bool) -> bool {
        let after = if one_var { IDLE } else { 0 };
        self.hot
            .fast
            .compare_exchange(
                word(op, one_var),
                after,
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
        f != 0 && f != IDLE && f & OPEN == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::test_support::*;
    use super::super::VarSlot;
    use super::*;
    use crate::engine::ready::ReadyList;
    use crate::sync::Arc;

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
            s.spawn(move || var.try_leave_fast_write(op, true))
                .join()
                .unwrap()
        });
        drop(guard);
        assert!(left);
        assert!(v.is_idle(true));
        orphan_all_and_check_freed(&[&v]);
    }

    #[test]
    fn a_fresh_var_is_idle_and_its_first_one_var_op_takes_no_lock() {
        let (v, u) = (var(), var());
        let ops = blocks(2);
        assert_eq!(v.hot.fast.load(Ordering::Relaxed), IDLE);
        assert!(v.is_idle(true));
        assert_eq!(Arc::strong_count(&v), 2, "born with its self-reference");
        // A completion or an append that needed the lock would wait for the
        // other thread forever.
        while_another_thread_holds_the_lock(&v, || {
            assert!(v.append_write(ptr(&ops[0]), false).granted);
            assert!(v.fast_write_running());
            assert!(v.try_leave_fast_write(ptr(&ops[0]), true));
        });
        while_another_thread_holds_the_lock(&u, || {
            assert!(u.append_read(ptr(&ops[1])).granted);
            assert!(u.fast_open());
        });
        let mut ready = ReadyList::new();
        assert!(!u.complete_read(&mut ready, None));
        // A var no op ever used gives its self-reference back at its last
        // handle's drop, as a used one does.
        let w = var();
        orphan_all_and_check_freed(&[&v, &u, &w]);
    }

    #[test]
    fn a_one_var_write_leaves_the_var_idle_for_the_next_one_var_op_without_the_lock() {
        let v = var();
        let ops = blocks(3);
        // A fresh var is born idle: the first write takes it without the
        // lock, and leaves it idle.
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        assert!(v.try_leave_fast_write(ptr(&ops[0]), true));
        assert_eq!(v.hot.fast.load(Ordering::Relaxed), IDLE);
        assert!(v.is_idle(true));
        // While another thread holds the lock: a write takes the idle var,
        // leaves it idle again, and a read opens an epoch on it.
        while_another_thread_holds_the_lock(&v, || {
            assert!(v.append_write(ptr(&ops[1]), false).granted);
            assert!(v.fast_write_running());
            assert!(v.try_leave_fast_write(ptr(&ops[1]), true));
            assert!(v.append_read(ptr(&ops[2])).granted);
            assert!(v.fast_open());
        });
        let mut ready = ReadyList::new();
        assert!(!v.complete_read(&mut ready, None));
        // The epoch stays open until a write (or the last handle) closes it.
        assert!(v.is_idle(false) && v.fast_open());
        orphan_all_and_check_freed(&[&v]);
    }

    #[test]
    fn a_locked_append_takes_an_idle_var_back_and_a_deleted_var_is_never_idle() {
        let (v, u) = (var(), var());
        let ops = blocks(4);
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        assert!(v.try_leave_fast_write(ptr(&ops[0]), true));
        assert_eq!(v.hot.fast.load(Ordering::Relaxed), IDLE);
        // A two-var op takes `v` under the lock: the idle token goes.
        let slots = [VarSlot::new(&v), VarSlot::new(&u)];
        let (granted, _) = super::super::append_all(ptr(&ops[1]), &[], &slots, false);
        assert_eq!(granted, 2);
        assert!(v.fast_write_running() && u.fast_write_running());
        for x in [&v, &u] {
            assert!(x.try_leave_fast_write(ptr(&ops[1]), false));
            assert_eq!(x.hot.fast.load(Ordering::Relaxed), 0);
        }
        // A deletion is granted under the lock and never fast; after it
        // the var stays out of the lock-free paths, and a later append
        // learns of the deletion.
        assert!(v.append_write(ptr(&ops[2]), true).granted);
        assert!(!v.fast_write_running());
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[2], &mut ready));
        assert_eq!(v.hot.fast.load(Ordering::Relaxed), 0);
        let a = v.append_write(ptr(&ops[3]), false);
        assert!(a.granted && a.after_delete);
        assert!(!v.fast_write_running());
        assert!(!complete_write(&v, &ops[3], &mut ready));
        orphan_all_and_check_freed(&[&v, &u]);
    }

    #[test]
    fn ops_appended_behind_a_fast_write_are_granted_by_its_completion() {
        let v = var();
        let ops = blocks(3);
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        // The read closes the fast write and queues behind it.
        assert!(!v.append_read(ptr(&ops[1])).granted);
        assert!(!v.fast_write_running());
        assert_eq!(v.hot.state.lock().writer, Some(ptr(&ops[0])));
        assert!(!v.append_write(ptr(&ops[2]), false).granted);
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[0], &mut ready));
        assert_eq!(ready_ops(ready), vec![ptr(&ops[1])], "the read is next");
        assert_eq!(v.done.version.load(Ordering::Relaxed), 1);
        let mut ready = ReadyList::new();
        assert!(!v.complete_read(&mut ready, None));
        assert_eq!(ready_ops(ready), vec![ptr(&ops[2])]);
        // Granted from the queue, not at its push: under the lock.
        assert!(!v.fast_write_running());
        assert!(!v.try_leave_fast_write(ptr(&ops[2]), true));
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[2], &mut ready));
        assert!(ready.is_empty());
        assert_eq!(v.done.version.load(Ordering::Relaxed), 2);
        assert!(v.is_idle(true));
        orphan_all_and_check_freed(&[&v]);
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
        assert!(x.try_leave_fast_write(ptr(&ops[2]), false));
        assert!(y.try_leave_fast_write(ptr(&ops[2]), false));
        // An op of several vars leaves them at 0, not idle: a locked
        // append would have to take the token back.
        assert_eq!(x.hot.fast.load(Ordering::Relaxed), 0);
        // ops[0] grants ops[1] its read; ops[1] then completes under the
        // locks.
        let mut ready = ReadyList::new();
        assert!(!complete_write(&r, &ops[0], &mut ready));
        assert!(!r.complete_read(&mut ready, None));
        assert!(!complete_write_of(&w, &ops[1], false, &mut ready));
        assert!([&w, &x, &y].iter().all(|v| v.is_idle(true)));
        // The read granted from the queue opened an epoch on `r`, which
        // stays open, with no read running, until a write closes it.
        assert!(r.is_idle(false) && r.fast_open());
        orphan_all_and_check_freed(&[&r, &w, &x, &y]);
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
        // SAFETY: the completion above returned true.
        unsafe { drop_handed_self_ref(&v) };
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
        // SAFETY: the completion above returned true.
        unsafe { drop_handed_self_ref(&v) };
    }

    #[test]
    fn diagnostics_settle_a_fast_write_into_the_state() {
        let v = var();
        let ops = blocks(1);
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        {
            let mut s = v.hot.state.lock();
            v.close_fast_write_locked(&mut s);
            assert_eq!(s.writer, Some(ptr(&ops[0])));
        }
        assert!(
            !v.try_leave_fast_write(ptr(&ops[0]), true),
            "a settled write takes the lock"
        );
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[0], &mut ready));
        assert!(v.is_idle(true));
        orphan_all_and_check_freed(&[&v]);
    }
}
