//! A ready op a worker takes from its own deque one op before its turn,
//! so that it can ask for the op's block while the op before it runs.
//!
//! # Why
//!
//! A ready op's block was last written by the pushing thread on another
//! core, or by the worker that granted it. The worker that ran it met that
//! miss at the op's first load, and only then read the op's vars and
//! asked for their lines (the start of `execute`): with short bodies, the
//! misses came one after the other. Taken one op ahead, the block is
//! asked for while the op before runs, and `execute` finds the vars'
//! addresses at once. On the 2-core sandbox that made the empty `random`
//! at full size 55% faster at one worker and 14% at two, and the empty
//! `indep` taken as a stream 4–7%; ops that a worker's completion made
//! ready, whose blocks it has just touched, pay the swap for nothing
//! (`fan`, `wavefront`: 2–5% slower at the medians), and so does a small
//! `random` (`BENCHMARKS-HISTORY.md`, "A ready op held one ahead"). Holding two
//! (the second with its vars' lines asked for too) gained no more there
//! and cost 3–4% on the wavefronts and `fan`.
//!
//! # Rules
//!
//! * A worker holds at most one op, in a slot of its own, and takes it
//!   from its deque only while the deque keeps another, which the others
//!   can steal as before.
//! * The slot is stealable. Holding an op back from the deque must not
//!   cost parallelism: with two long ops and two workers, a worker that
//!   kept one to itself behind the other would run them one after the
//!   other while the second worker slept. So a worker that finds every
//!   queue empty steals from the others' slots, as a helping thread does,
//!   and counts them as work before it sleeps.
//! * An op leaves the slot by a swap, whoever takes it, so exactly one
//!   thread gets it. Only the owner fills the slot, so a slot the owner
//!   finds empty stays empty until it fills it.
//! * The owner never sleeps holding an op: it takes its slot back before
//!   it searches. A thief that looked at the slot just before the owner
//!   filled it may sleep while an op waits there; the op is then the
//!   owner's next, so the cost is parallelism for one op, never a hang.
//!   (Waking a sleeper at every fill would put a fence and a read of the
//!   sleepers' line on every op.)
//! * Only priority-0 ops reach a worker's deque, so the slot holds no
//!   other; the owner takes from it under the next slot's rule (only
//!   while no op of another priority is queued, `pool.rs`).

use crate::sync::deque::Worker;
use crate::sync::{AtomicUsize, Ordering};

use super::super::op::{prefetch_block, Intent, OpBlock, OpPtr};

/// One worker's op held ahead (see the module docs): the address of its
/// block, or 0.
pub(crate) struct Ahead {
    slot: AtomicUsize,
}

impl Ahead {
    pub(crate) fn new() -> Self {
        Ahead {
            slot: AtomicUsize::new(0),
        }
    }

    /// Takes the op held, if any: the owner before it runs its next op,
    /// another thread when it has found nothing else to run.
    #[inline]
    pub(crate) fn take(&self) -> Option<OpPtr> {
        if self.slot.load(Ordering::Relaxed) == 0 {
            return None;
        }
        // The swap makes the taker the op's only holder; its acquire pairs
        // with the release of the owner's store, made after the owner took
        // the op from its deque.
        let raw = self.slot.swap(0, Ordering::Acquire);
        std::ptr::NonNull::new(raw as *mut OpBlock).map(OpPtr)
    }

    /// True when the worker holds no op. Read by a worker about to sleep,
    /// after its fence (`sleep.rs`).
    pub(crate) fn is_empty(&self) -> bool {
        self.slot.load(Ordering::SeqCst) == 0
    }

    /// The owner, before it runs an op: with the slot empty, takes one
    /// more op from `local` into it while `local` keeps another, and asks
    /// for its block.
    #[inline]
    pub(crate) fn fill(&self, local: &Worker<OpPtr>) {
        if self.slot.load(Ordering::Relaxed) != 0 || local.len() < 2 {
            return;
        }
        if let Some(op) = local.pop() {
            prefetch_block(op.0.as_ptr(), Intent::Write);
            self.slot.store(op.0.as_ptr() as usize, Ordering::Release);
        }
    }
}

/// loom model of the slot: whatever the interleaving of the owner's fill
/// and take with another worker's take, the held op goes to exactly one
/// of them, and the one that gets it sees what was written before the
/// owner held it. Run by `scripts/loom.sh` (`cargo test --lib
/// loom_models` under `--cfg loom`).
#[cfg(all(test, loom))]
mod loom_models {
    use std::ptr::NonNull;

    use loom::cell::UnsafeCell;
    use loom::thread;

    use super::*;
    use crate::sync::{loom_model as model, Arc};

    /// Stand-ins for two op blocks: only their addresses travel.
    #[repr(align(64))]
    struct Fake {
        _bytes: [u8; 64],
    }

    /// What the op's earlier holder wrote, shared with the thief.
    struct State(UnsafeCell<u32>);
    // SAFETY: shared only to let loom check that the slot orders the
    // owner's write before the taker's read (it reports a race otherwise).
    unsafe impl Sync for State {}

    #[test]
    fn a_held_op_goes_to_exactly_one_taker_which_sees_its_state() {
        model(|| {
            let blocks = Arc::new([Fake { _bytes: [0; 64] }, Fake { _bytes: [0; 64] }]);
            let op = |k: usize| OpPtr(NonNull::from(&blocks[k]).cast::<OpBlock>());
            let (a, b) = (op(0), op(1));
            // What the op's earlier holder wrote: the taker must see it.
            let state = Arc::new(State(UnsafeCell::new(0u32)));
            let ahead = Arc::new(Ahead::new());
            let local = Worker::new_fifo();
            local.push(a);
            local.push(b);
            let thief = {
                let (ahead, state) = (ahead.clone(), state.clone());
                thread::spawn(move || {
                    let got = ahead.take();
                    if got.is_some() {
                        // SAFETY: the owner wrote it before holding the
                        // op; taking the op makes this thread its holder.
                        assert_eq!(state.0.with(|s| unsafe { *s }), 7);
                    }
                    got.map(|o| o.0.as_ptr() as usize)
                })
            };
            // SAFETY: no other thread reads it before the op is held.
            state.0.with_mut(|s| unsafe { *s = 7 });
            ahead.fill(&local);
            let mine = ahead.take().map(|o| o.0.as_ptr() as usize);
            let theirs = thief.join().unwrap();
            let a = a.0.as_ptr() as usize;
            match (mine, theirs) {
                (Some(m), None) | (None, Some(m)) => assert_eq!(m, a),
                other => panic!("the held op was taken {other:?}"),
            }
            assert!(local.pop() == Some(b), "the deque kept its other op");
            assert!(ahead.is_empty());
        });
    }
}
