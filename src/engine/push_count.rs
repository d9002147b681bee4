//! The engine's count of pushed ops, which also numbers them, taken
//! without a locked instruction while one thread does all the pushing.
//!
//! # Why
//!
//! Every push takes the next number from this count (the op's sequence
//! number, [`OpCtx::seq`](crate::OpCtx::seq)), and the count is what
//! `wait_for_all` compares with the completions (`Core::idle`). Taken with
//! a locked add, each push waited there for the stores before it (the op's
//! block, whose lines the worker that recycled it last wrote) to reach the
//! cache, and the loads after it could not start early. Owned as below,
//! the empty one-worker `chain` took 0.82 of the time at the median of 14
//! alternating rounds (faster in 13) and `wavefront`-250 0.86 (12 of
//! 14) on the 2-core AMD EPYC sandbox; rows with 1 µs bodies, and pushes
//! from four threads, were level (`BENCHMARKS-HISTORY.md`, "The push count
//! without a locked add").
//!
//! # Rules
//!
//! The first thread to push owns the count (it claims it with one
//! compare-and-swap): its pushes add with a load and a store, between a
//! `busy` mark it sets before and clears after, and only while it still
//! finds itself the owner after setting the mark. A push from any other
//! thread revokes the ownership for good: it marks the count as being
//! revoked, waits until the owner is not inside an add, and marks it
//! shared; from then on every push adds with a locked add. Pushes that
//! find the count being revoked wait until it is shared. So a program
//! that pushes from one thread never takes the slow path after its first
//! push, and one that pushes from several pays one revocation.
//!
//! # Why it holds
//!
//! While the count is owned, only the owner writes it, so its load and
//! store lose no other add. The owner's `busy` store and its second look
//! at the owner, and the revoker's store of `REVOKING` and its look at
//! `busy`, are the two sides of Dekker's protocol, separated by the split
//! fence (`sync/asymmetric_fence.rs`: a compiler fence on the owner's side,
//! a process-wide barrier on the revoker's; SeqCst fences under loom):
//! either the owner sees the revocation and does not store, or the
//! revoker sees it busy and waits for the release store that clears the
//! mark after the owner's store of the count. Every later add of the
//! owner sees the revocation too. The revoker then publishes `SHARED`
//! with a release store, which the other pushes acquire before their
//! locked adds, so the owner's last store comes before all of them in the
//! count's modification order. Readers (`Core::idle`, the lead) load the
//! count: an op's add is sequenced before its appends and dispatch, which
//! publish it to whoever completes the op, so a waiter that saw the
//! completion sees the add (the argument of `Core::idle` is unchanged).
//!
//! Where the split fence is unavailable (not Linux, or a kernel without
//! `membarrier`'s private expedited command), the count starts shared.

use std::cell::Cell;

use crate::sync::{asymmetric_fence, AtomicBool, AtomicU64, Backoff, CachePadded, Ordering};

/// `owner` before the first push.
const UNCLAIMED: u64 = 0;
/// `owner` while a push revokes the ownership.
const REVOKING: u64 = u64::MAX - 1;
/// `owner` once every push takes the locked add.
const SHARED: u64 = u64::MAX;
/// The token of a thread whose thread-locals are gone: never stored in
/// `owner`, so such a thread never owns the count nor takes it for its own.
const NO_TOKEN: u64 = u64::MAX - 2;

/// See the module docs.
pub(crate) struct PushCount {
    line: CachePadded<Fields>,
}

/// On one line: the owner writes `value` and `busy` on every push and
/// reads `owner` twice, so all three are in its cache.
struct Fields {
    value: AtomicU64,
    busy: AtomicBool,
    /// [`UNCLAIMED`], the owning thread's token, [`REVOKING`] or
    /// [`SHARED`].
    owner: AtomicU64,
}

crate::sync::engine_thread_local! {
    /// This thread's token (0 until its first push asks for it).
    static TOKEN: Cell<u64> = const { Cell::new(0) };
}

/// Tokens handed out so far: never reused, so that a thread that starts
/// after the owner ended is never taken for it.
static TOKENS: crate::sync::unmodelled::AtomicU64 = crate::sync::unmodelled::AtomicU64::new(0);

/// The calling thread's token: never [`UNCLAIMED`], [`REVOKING`] or
/// [`SHARED`]. A thread whose thread-locals are gone gets [`NO_TOKEN`].
#[inline]
fn token() -> u64 {
    TOKEN
        .try_with(|t| {
            let mine = t.get();
            if mine != UNCLAIMED {
                return mine;
            }
            let new = TOKENS.fetch_add(1, crate::sync::unmodelled::Ordering::Relaxed) + 1;
            t.set(new);
            new
        })
        .unwrap_or(NO_TOKEN)
}

impl PushCount {
    /// A count at zero, owned by the first thread to add to it when the
    /// split fence can be used, shared from the start otherwise.
    pub(crate) fn new() -> Self {
        let owner = if asymmetric_fence::register().is_ok() {
            UNCLAIMED
        } else {
            SHARED
        };
        Self::starting(owner)
    }

    /// A count that every add takes with the locked add: the behaviour
    /// where the split fence is unavailable, for tests.
    #[cfg(all(test, not(loom)))]
    fn shared() -> Self {
        Self::starting(SHARED)
    }

    fn starting(owner: u64) -> Self {
        PushCount {
            line: CachePadded::new(Fields {
                value: AtomicU64::new(0),
                busy: AtomicBool::new(false),
                owner: AtomicU64::new(owner),
            }),
        }
    }

    /// Adds `n`; returns the count before.
    #[inline]
    pub(crate) fn add(&self, n: u64) -> u64 {
        let f = &*self.line;
        let me = token();
        if f.owner.load(Ordering::Relaxed) == me {
            f.busy.store(true, Ordering::Relaxed);
            asymmetric_fence::light();
            if f.owner.load(Ordering::Relaxed) == me {
                let before = f.value.load(Ordering::Relaxed);
                f.value.store(before + n, Ordering::Relaxed);
                f.busy.store(false, Ordering::Release);
                return before;
            }
            f.busy.store(false, Ordering::Release);
        }
        self.add_shared(n, me)
    }

    /// The add of a thread that does not own the count: claims it if
    /// nobody has, revokes it from its owner otherwise, then adds with a
    /// locked add.
    #[cold]
    #[inline(never)]
    fn add_shared(&self, n: u64, me: u64) -> u64 {
        let f = &*self.line;
        let mut owner = f.owner.load(Ordering::Acquire);
        loop {
            match owner {
                // Revoked and the owner's last add done: every add is
                // locked now.
                SHARED => break,
                REVOKING => {
                    let mut backoff = Backoff::new();
                    while f.owner.load(Ordering::Acquire) != SHARED {
                        backoff.snooze();
                    }
                    break;
                }
                UNCLAIMED if me != NO_TOKEN => {
                    match f.owner.compare_exchange(
                        UNCLAIMED,
                        me,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        // Owned now; this first add takes the locked
                        // add, which no other thread's add can race
                        // without first revoking.
                        Ok(_) => break,
                        Err(now) => owner = now,
                    }
                }
                // This thread owns the count: a locked add is right for
                // the owner too.
                o if o == me => break,
                o => {
                    match f
                        .owner
                        .compare_exchange(o, REVOKING, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => {
                            self.revoke();
                            break;
                        }
                        Err(now) => owner = now,
                    }
                }
            }
        }
        f.value.fetch_add(n, Ordering::SeqCst)
    }

    /// This thread has set `REVOKING`: waits until the owner is not
    /// inside an add, then makes the count shared.
    fn revoke(&self) {
        let f = &*self.line;
        asymmetric_fence::heavy();
        let mut backoff = Backoff::new();
        while f.busy.load(Ordering::Acquire) {
            backoff.snooze();
        }
        f.owner.store(SHARED, Ordering::Release);
    }

    /// The count (SeqCst, as `Core::idle` reads it).
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        self.line.value.load(Ordering::SeqCst)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// Adds from `threads` threads, `each` adds apiece; returns the
    /// numbers they got and the count.
    fn race(count: Arc<PushCount>, threads: usize, each: u64) -> (Vec<u64>, u64) {
        let start = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let count = count.clone();
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    (0..each).map(|_| count.add(1)).collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut got: Vec<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        got.sort_unstable();
        (got, count.load())
    }

    #[test]
    fn one_thread_numbers_its_adds_in_order_and_keeps_the_count() {
        let count = PushCount::new();
        let got: Vec<u64> = (0..1000).map(|_| count.add(1)).collect();
        assert_eq!(got, (0..1000).collect::<Vec<u64>>());
        assert_eq!(count.add(5), 1000);
        assert_eq!(count.load(), 1005);
    }

    #[test]
    fn racing_threads_lose_no_add_and_share_no_number() {
        for shared in [false, true] {
            let count = Arc::new(if shared {
                PushCount::shared()
            } else {
                PushCount::new()
            });
            let (got, total) = race(count, 4, 20_000);
            assert_eq!(total, 80_000, "shared from the start: {shared}");
            assert_eq!(got, (0..80_000).collect::<Vec<u64>>(), "{shared}");
        }
    }

    #[test]
    fn a_second_thread_after_the_owner_takes_over_the_count() {
        let count = Arc::new(PushCount::new());
        for _ in 0..100 {
            count.add(1);
        }
        let c = count.clone();
        let theirs = std::thread::spawn(move || (0..100).map(|_| c.add(1)).collect::<Vec<_>>())
            .join()
            .unwrap();
        assert_eq!(theirs, (100..200).collect::<Vec<u64>>());
        // The first owner's adds go through the locked add now, in order.
        assert_eq!(count.add(1), 200);
        assert_eq!(count.load(), 201);
    }

    #[test]
    fn a_thread_started_after_the_owner_ended_is_not_taken_for_it() {
        let count = Arc::new(PushCount::new());
        for round in 0..8u64 {
            let c = count.clone();
            let got = std::thread::spawn(move || (0..10).map(|_| c.add(1)).collect::<Vec<_>>())
                .join()
                .unwrap();
            assert_eq!(got, (round * 10..round * 10 + 10).collect::<Vec<u64>>());
        }
        assert_eq!(count.load(), 80);
    }
}

/// Models of the ownership and its revocation, which the public API
/// reaches only through engines pushed to from several threads. Run by
/// `scripts/loom.sh` (`cargo test --lib loom_models` under `--cfg loom`).
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::loom_model;
    use loom::thread;
    use std::sync::Arc;

    #[test]
    fn an_owner_and_a_revoker_lose_no_add_and_share_no_number() {
        loom_model(|| {
            let count = Arc::new(PushCount::new());
            // The owner claims the count before the other thread starts.
            let first = count.add(1);
            let c = count.clone();
            let t = thread::spawn(move || c.add(1));
            let mine = count.add(1);
            let theirs = t.join().unwrap();
            let mut got = vec![first, mine, theirs];
            got.sort_unstable();
            assert_eq!(got, vec![0, 1, 2]);
            assert_eq!(count.load(), 3);
        });
    }

    #[test]
    fn two_threads_racing_for_an_unclaimed_count_lose_no_add() {
        loom_model(|| {
            let count = Arc::new(PushCount::new());
            let c = count.clone();
            let t = thread::spawn(move || [c.add(1), c.add(1)]);
            let mine = [count.add(1), count.add(1)];
            let theirs = t.join().unwrap();
            assert!(mine[0] < mine[1] && theirs[0] < theirs[1]);
            let mut got: Vec<u64> = mine.into_iter().chain(theirs).collect();
            got.sort_unstable();
            assert_eq!(got, vec![0, 1, 2, 3]);
            assert_eq!(count.load(), 4);
        });
    }
}
