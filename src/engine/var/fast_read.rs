//! Reads whose completion takes no lock: the fast-read counter.
//!
//! # Why
//!
//! Many ops reading one var (weights read by every layer, a config read by
//! every task) used to take the var's lock twice per op: the pusher to count
//! the read in, the completing worker to count it out. The var's line then
//! moved between the pushing core and a worker's core on every op. Here the
//! two counts live on different lines: pushers count reads in on `fast`
//! (the pushers' line), completions count them out on `fast_done` (the
//! completions' line), and neither side writes the other's line while reads
//! keep coming.
//!
//! Every granted read is counted here, however it was granted: reads that
//! a write's completion grants from the queue too. Those used to be
//! counted in a locked `readers` field, so each of their completions
//! locked the var, and a writer followed by many readers (`rwmix`, `fan`,
//! MXNet's `randsum`) had the completing workers queue on its lock
//! (`BENCHMARKS-HISTORY.md`, "Every read counted through the fast-read
//! counter").
//!
//! # Protocol
//!
//! A read is granted through the counter during an *epoch*: `fast` has its
//! `OPEN` bit set and counts the reads granted in it. An epoch is open only
//! while no write holds the var or waits in its queue.
//!
//! * **open**: an append (under the var's lock) that grants a read at once
//!   sets `fast = OPEN | 1`, or adds one if already open. A one-var read
//!   also opens an epoch without the lock, by CAS from the idle token
//!   (`fast_write.rs`), which stands for a var that holds and waits for
//!   nothing: no epoch drains there, so `fast_done` is 0 as at any open.
//! * **fast append**: a single-var read adds one to `fast` by CAS while
//!   `OPEN` is set — no lock at all.
//! * **queued reads**: a write's completion (under the lock) that grants
//!   the `n` reads queued behind it counts them in as an epoch: it opens
//!   one with `fast = OPEN | n` when nothing is queued behind them, and
//!   else closes it at once (below, with `g = n`), the write queued behind
//!   them then waiting for the drain. No epoch is open then: the write
//!   that just completed held the var. The reads are counted under the
//!   lock and granted after it is released (`complete_write`), so none
//!   completes before the count. An orphaned var (no handle, so no append
//!   will ever close an epoch) gets a closed one, so that its last read
//!   drops the var's self-reference.
//! * **fast completion**: `fast_done -= 1` (wrapping).
//! * **close**: a write append (or the var's last handle going away), under
//!   the lock, swaps `fast` to 0 — from then on CAS appends fail and take the
//!   lock — and adds `MARK + g` to `fast_done`, `g` being the epoch's grants.
//!   `fast_done` then holds `MARK + (reads still running)`.
//!
//! All updates of `fast_done` are read-modify-writes of one word, so they
//! happen in one order: exactly one of them leaves it at `MARK` — the close,
//! if every read of the epoch had completed (then the write may be granted
//! at once), or else the completion of the epoch's last read, which then
//! takes the lock and ends the drain (`drain_end` in `protocol.rs`). No read
//! is counted after the close (the swap made every later CAS fail), and
//! before the close `fast_done` is minus the completions so far, never
//! `MARK`. While draining, the closing write waits at the head of the queue,
//! so no new epoch opens before the drain ends and resets `fast_done` to 0.
//!
//! # Memory ordering
//!
//! The opener's store is `Release` and every append's CAS `Acquire` (an
//! epoch opened from the idle token acquires the leave of the write before
//! it): the RMW chain on `fast` carries the effects of the write completed
//! before the epoch opened to every read of it. Completions' decrements are
//! `AcqRel`, and the close's add (or the last completion's decrement)
//! acquires all of them: every read of the epoch happens-before the write
//! granted after it. A read granted from the queue acquires the completed
//! write's effects through its grant (the op's `wait` decrement), not
//! through `fast`.

use crate::sync::Ordering;

use super::fast_write::IDLE;
use super::{VarInner, VarState};

/// `fast`: an epoch is open.
pub(super) const OPEN: u64 = 1 << 63;
/// `fast`: reads granted in the open epoch.
const COUNT: u64 = OPEN - 1;
/// `fast_done` after a close: `MARK` + the closed epoch's running reads.
const MARK: u64 = 1 << 62;

impl VarInner {
    /// A single-var read's append without the lock: granted iff an epoch is
    /// open.
    #[inline]
    pub(super) fn try_fast_read(&self) -> bool {
        let mut f = self.hot.fast.load(Ordering::Relaxed);
        loop {
            // An idle var (`fast_write.rs`) opens an epoch for this read.
            let next = if f & OPEN != 0 {
                f + 1
            } else if f == IDLE {
                OPEN | 1
            } else {
                return false;
            };
            match self
                .hot
                .fast
                .compare_exchange_weak(f, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => f = now,
            }
        }
    }

    /// True while an epoch is open. Stable under the lock once the idle
    /// token is out of the word (`close_fast_write_locked`): every other
    /// open, and every close, holds the lock.
    #[inline]
    pub(super) fn fast_open(&self) -> bool {
        self.hot.fast.load(Ordering::Relaxed) & OPEN != 0
    }

    /// Under the lock, with no write holding or queued: grants a read
    /// through the counter, opening an epoch if none is open.
    #[inline]
    pub(super) fn grant_fast_read_locked(&self, s: &VarState) {
        debug_assert!(!s.draining && s.writer.is_none() && s.queue.is_empty());
        debug_assert!(!self.fast_write_running(), "a read granted under a write");
        if self.fast_open() {
            // Lock-free appends may add concurrently; only lock holders
            // close, so the epoch stays open.
            self.hot.fast.fetch_add(1, Ordering::AcqRel);
        } else {
            self.hot.fast.store(OPEN | 1, Ordering::Release);
        }
    }

    /// Under the lock: closes the open epoch, if any, or else the fast write
    /// (`fast_write.rs`). Sets `draining` when some of the epoch's reads
    /// still run.
    pub(super) fn close_fast_locked(&self, s: &mut VarState) {
        // First: an idle var may open an epoch without the lock until then.
        self.close_fast_write_locked(s);
        if !self.fast_open() {
            return;
        }
        let granted = self.hot.fast.swap(0, Ordering::AcqRel) & COUNT;
        self.close_epoch_of_locked(s, granted);
    }

    /// Under the lock, in a write's completion that has just granted the
    /// `n` reads queued behind it: counts them in as an epoch of their own.
    /// It stays open for later reads when nothing is queued behind them
    /// (and appends can still come: the var has a handle); otherwise it is
    /// closed at once, as a write's append closes one, and the write queued
    /// behind them waits for the drain.
    pub(super) fn count_in_granted_reads_locked(&self, s: &mut VarState, n: u64) {
        // The write just completed held the var: no epoch is open, none
        // drains, and no fast write or idle token is in the word.
        debug_assert!(
            !s.draining && s.writer.is_none() && self.hot.fast.load(Ordering::Relaxed) == 0
        );
        if s.queue.is_empty() && !s.orphaned {
            // Release: as any opener's store (module docs).
            self.hot.fast.store(OPEN | n, Ordering::Release);
            return;
        }
        self.close_epoch_of_locked(s, n);
    }

    /// Under the lock: adds the close's `MARK + granted` to `fast_done`;
    /// ends the drain at once when every read of the epoch has completed,
    /// else sets `draining`.
    fn close_epoch_of_locked(&self, s: &mut VarState, granted: u64) {
        let add = MARK.wrapping_add(granted);
        let now = self
            .done
            .fast_done
            .fetch_add(add, Ordering::AcqRel)
            .wrapping_add(add);
        if now == MARK {
            self.done.fast_done.store(0, Ordering::Relaxed);
        } else {
            s.draining = true;
        }
    }

    /// Counts a fast read out. True when it was the last read of a closed
    /// epoch: the caller must then end the drain under the lock.
    #[inline]
    pub(super) fn count_out_fast_read(&self) -> bool {
        let prev = self.done.fast_done.fetch_sub(1, Ordering::AcqRel);
        prev.wrapping_sub(1) == MARK
    }

    /// Under the lock, at the end of a drain: the counter is free again.
    pub(super) fn reset_fast_done_locked(&self, s: &mut VarState) {
        debug_assert!(s.draining);
        self.done.fast_done.store(0, Ordering::Relaxed);
        s.draining = false;
    }

    /// Reads granted through the counter that have not completed. Two
    /// separate loads, so a snapshot only: for diagnostics.
    pub(crate) fn fast_reads_running(&self, s: &VarState) -> u64 {
        let f = self.hot.fast.load(Ordering::Acquire);
        let d = self.done.fast_done.load(Ordering::Acquire);
        let n = if f & OPEN != 0 {
            (f & COUNT).wrapping_add(d)
        } else if s.draining {
            d.wrapping_sub(MARK)
        } else {
            0
        };
        // A torn snapshot can come out "negative"; report nothing then.
        if n > COUNT >> 1 {
            0
        } else {
            n
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::test_support::{
        blocks, complete_write, orphan_all_and_check_freed, ptr, ready_ops, var,
        while_another_thread_holds_the_lock,
    };
    use crate::engine::ready::ReadyList;

    /// Reads that a write's completion grants from the queue are counted
    /// through the counter too: with a write queued behind them, the first
    /// read's completion takes no lock (it returns while another thread
    /// holds the lock: a completion that locked would hang the test) and
    /// grants nothing; the last one grants the write.
    #[test]
    fn reads_granted_from_the_queue_complete_without_the_lock_and_the_last_grants_the_write() {
        let v = var();
        let ops = blocks(4);
        assert!(v.append_write(ptr(&ops[0]), false).granted);
        assert!(!v.append_read(ptr(&ops[1])).granted);
        assert!(!v.append_read(ptr(&ops[2])).granted);
        assert!(!v.append_write(ptr(&ops[3]), false).granted);
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[0], &mut ready));
        let mut granted = ready_ops(ready);
        granted.sort_by_key(|op| op.0.as_ptr() as usize);
        assert_eq!(
            granted,
            [&ops[1], &ops[2]].map(ptr),
            "both reads, not the write behind them"
        );
        assert!(!v.fast_open(), "a write waits behind them: closed at once");
        while_another_thread_holds_the_lock(&v, || {
            let mut ready = ReadyList::new();
            assert!(!v.complete_read(&mut ready, None));
            assert!(ready.is_empty(), "the write waits for the other read");
        });
        let mut ready = ReadyList::new();
        assert!(!v.complete_read(&mut ready, None));
        assert_eq!(ready_ops(ready), vec![ptr(&ops[3])]);
        let mut ready = ReadyList::new();
        assert!(!complete_write(&v, &ops[3], &mut ready));
        assert!(ready.is_empty() && v.is_idle(true));
        orphan_all_and_check_freed(&[&v]);
    }
}
