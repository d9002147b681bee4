//! A FIFO of ready ops per pushing thread, which the pool's workers steal
//! from, instead of the pool's shared injector.
//!
//! # Why
//!
//! An op that is ready at its push goes from the pushing thread to a
//! worker. Through crossbeam's `Injector` that costs the pusher two locked
//! instructions per op (the compare-and-swap of the tail index and the
//! slot's ready mark) on lines the idle workers keep reading while they
//! look for work, so each push waits for those lines to come back from the
//! workers' cores. A queue of the pusher's own takes its pushes with
//! plain stores: the lines still move, but the pusher no longer stalls on
//! them. At 2 workers a crossbeam `Worker` deque there made `indep`,
//! `indep-novars` and `wavefront` 15–39% faster in an interleaved A/B
//! (`BENCHMARKS-HISTORY.md`, "Ready ops in the pushing thread's own
//! queue"); the ring of `push_ring.rs`, whose push reads no line the
//! workers write, made the empty `indep`, `indep-novars` and `random`
//! another 10–19% faster at the medians (`BENCHMARKS-HISTORY.md`, "The pushing
//! thread's queue as a ring").
//!
//! Pools of at most 16 workers hand these queues out by default, and
//! `EngineBuilder::pusher_queues_up_to` moves that bound (the pool decides,
//! `PusherQueues::new`). A crossbeam deque here had lost to the injector
//! from 4 workers on, on 16 cores: it keeps the stealers' front index
//! beside the owner's back index and reads it on every push, so every
//! batch a worker stole took the pusher's line away (`BENCHMARKS-HISTORY.md`,
//! "Pusher queues at 4–16 workers"). The ring has no such line; on the
//! same kind of machine it took 4–10% off `indep` (empty and 1 µs) at 8
//! and 16 workers, and with the sleep fence split beside it (the default
//! in these pools, `search_config.rs`) 10–22% off the empty `indep` and
//! the 1 µs `random` at 8 and 16 workers and the 1 µs `indep` at 16, with
//! `wavefront` level (`BENCHMARKS.md`, "The ring and the split fence on
//! 16 cores").
//!
//! # Rules
//!
//! * Only threads that are not workers of a pool use these queues: a
//!   worker's own dispatches go to the injector or its next slot as before
//!   (through a queue of its own they made `fan` 1.5 times slower, the
//!   ops a completion releases no longer spreading from the injector).
//! * A pool has [`QUEUES`] of them, claimed once each, by the first
//!   threads that push to it; later threads use the injector, and so
//!   does a push that finds its thread's queue full. A queue holds what
//!   the engine's lead lets be pending ([`ring_capacity`]), so with a
//!   lead it does not fill.
//!   A thread that ends leaves its queue's ops where the workers still
//!   steal them (the pool holds the stealing end), so nothing it pushed
//!   is lost.
//! * A thread keeps its queues in a thread-local list keyed by the pool's
//!   id (never reused, unlike an address). The list keeps the queues of at
//!   most [`REMEMBERED`] pools; a thread that pushes to more engines drops
//!   the oldest, whose pool then sees that thread's later pushes through
//!   the injector (its slot stays claimed).
//! * Waking: the push is followed by the pool's fence (SeqCst, or the
//!   light side of the split one) before it reads the sleepers, and a
//!   worker going to sleep fences after counting itself and then checks
//!   these queues too (`PoolShared::has_work`): the same two-fence
//!   argument as for the injector (`sleep.rs`).
//!
//! # Dealing (`EngineBuilder::deal_pushes`, off by default)
//!
//! With one ring per pushing thread, every searching worker reads the
//! lines each push writes (the ring's tail and slots): at 16 workers on
//! 16 cores a push of an op with 1 µs body took 415–470 ns
//! (`BENCHMARKS.md`, "The ring and the split fence on 16 cores"), where
//! the pool could run one every 62 ns. Dealing gives a pushing thread one
//! ring per worker and deals its ops to them in turn, so that each ring's
//! lines are read by the one worker it is dealt to while the pool keeps
//! up. A worker looks in its own rings first; the other workers' rings it
//! looks in at the first look of a search and every eighth after, at
//! every look once its back-off is spent, and after a sleep, so that an op
//! dealt to a busy or sleeping worker is taken by another. (Looking there
//! only at the eighth look made the empty `indep` 1.44 times slower than
//! one ring at 2 workers on 2 cores, where a worker that waits for a CPU
//! leaves its ring to the other; from the first look, 0.95 and 1.11
//! times in two runs: `BENCHMARKS-HISTORY.md`, "Pushes dealt to a ring per
//! worker".) The sleep protocol is unchanged: a worker going to sleep
//! checks every ring (`PoolShared::has_work`).
//! Each ring holds the queue's capacity split between the workers (at
//! least [`MIN_DEALT_CAPACITY`]); a push that finds the ring of its turn
//! full tries the next ones, then the injector.
//!
//! Under loom the pools keep to the injector (whose stand-in the models
//! check): [`PusherQueues::push`] hands every op back.

use super::super::op::OpPtr;

/// Queues a pool keeps for pushing threads.
#[cfg(not(loom))]
pub(crate) const QUEUES: usize = 8;

/// Pools whose queues one thread remembers.
#[cfg(not(loom))]
const REMEMBERED: usize = 16;

/// Fewest ops one pushing thread's queue holds (128 KiB of pointers).
#[cfg(not(loom))]
const MIN_RING_CAPACITY: usize = 16_384;

/// Most ops one pushing thread's queue holds (1 MiB of pointers): a
/// pool of 32 workers with the default lead fits.
#[cfg(not(loom))]
const MAX_RING_CAPACITY: usize = 1 << 17;

/// Fewest ops one ring of a dealing pusher holds (see the module docs):
/// a worker's share of the default lead (2,048) and a margin.
#[cfg(not(loom))]
const MIN_DEALT_CAPACITY: usize = 4096;

/// Ops each of the `rings` rings of one pushing thread holds, for an
/// engine whose lead is `max_lead`: the thread's queue
/// ([`ring_capacity`]) split between them, at least
/// [`MIN_DEALT_CAPACITY`] each.
#[cfg(not(loom))]
pub(crate) fn dealt_capacity(max_lead: usize, rings: usize) -> usize {
    (ring_capacity(max_lead) / rings.max(1))
        .next_power_of_two()
        .max(MIN_DEALT_CAPACITY)
}

/// Ops the queues of a pool hold, for an engine whose pushing threads may
/// keep `max_lead` ops pending (`EngineBuilder::max_lead`; 0: no limit).
///
/// Every op in a pushing thread's queue is pending, and the lead lets a
/// thread push up to [`CHECK_EVERY`](crate::engine::lead::CHECK_EVERY)
/// ops past the limit before it looks, so a queue that holds the limit
/// and those pushes is not what fills: the lead stops the pusher first,
/// and its ops stay in the one FIFO rather than spilling to the
/// injector. Why that matters: with a queue of 16,384 ops, a pool of 16
/// workers given queues (`EngineBuilder::pusher_queues_up_to`) lets
/// 32,768 ops be pending by default, so on `indep` with 10 µs bodies
/// half the ops would have gone through the injector, and a measurement
/// of the queue against the injector would have measured a mixture.
#[cfg(not(loom))]
pub(crate) fn ring_capacity(max_lead: usize) -> usize {
    if max_lead == 0 {
        return MIN_RING_CAPACITY;
    }
    max_lead
        .saturating_add(crate::engine::lead::CHECK_EVERY as usize)
        .checked_next_power_of_two()
        .unwrap_or(MAX_RING_CAPACITY)
        .clamp(MIN_RING_CAPACITY, MAX_RING_CAPACITY)
}

#[cfg(not(loom))]
mod imp {
    use std::cell::RefCell;
    use std::sync::OnceLock;

    use crossbeam_deque::Worker;

    use super::super::push_ring::{ring, Consumer, Producer};
    use super::{dealt_capacity, ring_capacity, OpPtr, QUEUES, REMEMBERED};
    use crate::sync::steal_settled;
    use crate::sync::unmodelled::{AtomicU64, AtomicUsize, Ordering};

    static NEXT_POOL: AtomicU64 = AtomicU64::new(0);

    std::thread_local! {
        /// This thread's queues: (pool id, its queue, or `None` once the
        /// pool had none left for it).
        static MINE: RefCell<Vec<(u64, Option<Dealer>)>> = const { RefCell::new(Vec::new()) };
        /// Set on a pool's worker threads, which never use these queues.
        static IS_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// A pushing thread's queue for one pool: one ring, or one per worker
    /// when the pool deals (see the module docs).
    pub(crate) struct Dealer {
        /// Ring 0 in place, so that the push of a pool that does not deal
        /// reaches its ring as directly as before dealing.
        first: Producer,
        /// The rings of workers 1 and up, when the pool deals.
        rest: Box<[Producer]>,
        /// The ring the next push tries first.
        turn: usize,
    }

    impl Dealer {
        /// Queues `op` on the ring of its turn, or the next one with room;
        /// hands it back when all are full.
        #[inline(always)]
        pub(crate) fn push(&mut self, op: OpPtr) -> Result<(), OpPtr> {
            if self.rest.is_empty() {
                return self.first.push(op);
            }
            self.deal(op)
        }

        #[inline(never)]
        fn deal(&mut self, mut op: OpPtr) -> Result<(), OpPtr> {
            let n = self.rest.len() + 1;
            for _ in 0..n {
                let t = self.turn;
                self.turn = if t + 1 == n { 0 } else { t + 1 };
                let ring = match t {
                    0 => &mut self.first,
                    _ => &mut self.rest[t - 1],
                };
                match ring.push(op) {
                    Ok(()) => return Ok(()),
                    Err(back) => op = back,
                }
            }
            Err(op)
        }
    }

    /// Pushes `op` on the thread's queue, or hands it back when the pool had
    /// none left for this thread.
    #[inline(always)]
    fn push_or_hand_back(q: &mut Option<Dealer>, op: OpPtr) -> Result<(), OpPtr> {
        match q {
            Some(q) => q.push(op),
            None => Err(op),
        }
    }

    /// The stealing ends of a pool's pusher queues.
    pub(crate) struct PusherQueues {
        id: u64,
        /// Queues this pool hands out: [`QUEUES`], or none.
        limit: usize,
        /// Rings per queue: one, or one per worker when the pool deals.
        rings: usize,
        /// Ops each ring holds ([`ring_capacity`], or [`dealt_capacity`]).
        capacity: usize,
        claimed: AtomicUsize,
        /// Each claimed queue's rings.
        slots: [OnceLock<Rings>; QUEUES],
    }

    /// The stealing ends of one pushing thread's queue: ring 0 in place,
    /// as it was before dealing, so that the lone ring of a pool that does
    /// not deal costs its searches no more loads; the rings of workers 1
    /// and up, when the pool deals, in `rest`.
    struct Rings {
        first: Consumer,
        rest: Box<[Consumer]>,
    }

    impl Rings {
        /// Worker `k`'s ring (`k` below the ring count).
        fn of(&self, k: usize) -> &Consumer {
            match k {
                0 => &self.first,
                _ => &self.rest[k - 1],
            }
        }

        fn all(&self) -> impl Iterator<Item = &Consumer> {
            std::iter::once(&self.first).chain(self.rest.iter())
        }
    }

    impl PusherQueues {
        /// The queues of a new pool of `workers` workers of an engine with
        /// the lead `max_lead`; with `enabled` false it hands none out,
        /// and every push goes to the pool's injector. With `deal`, each
        /// queue is a ring per worker (see the module docs).
        pub(crate) fn new(enabled: bool, deal: bool, workers: usize, max_lead: usize) -> Self {
            let rings = if deal { workers.max(1) } else { 1 };
            PusherQueues {
                id: NEXT_POOL.fetch_add(1, Ordering::Relaxed),
                limit: if enabled { QUEUES } else { 0 },
                rings,
                capacity: if rings > 1 {
                    dealt_capacity(max_lead, rings)
                } else {
                    ring_capacity(max_lead)
                },
                claimed: AtomicUsize::new(0),
                slots: Default::default(),
            }
        }

        /// True when each pushing thread deals its ops to a ring per worker.
        #[cfg(test)]
        pub(crate) fn deals(&self) -> bool {
            self.rings > 1
        }

        /// Marks the calling thread as a worker of some pool.
        pub(crate) fn mark_worker_thread() {
            IS_WORKER.with(|w| w.set(true));
        }

        /// Queues `op` on the calling thread's queue for this pool, or hands
        /// it back (`Err`) for the injector: on a worker thread, when the
        /// pool has no queue left for this thread (or hands none out), or
        /// during thread exit.
        #[inline]
        pub(crate) fn push(&self, op: OpPtr) -> Result<(), OpPtr> {
            if self.limit == 0 {
                return Err(op);
            }
            if IS_WORKER.try_with(|w| w.get()).unwrap_or(true) {
                return Err(op);
            }
            MINE.try_with(|mine| {
                let mut mine = mine.borrow_mut();
                if let Some((_, q)) = mine.iter_mut().find(|(id, _)| *id == self.id) {
                    return push_or_hand_back(q, op);
                }
                let mut q = self.claim();
                let pushed = push_or_hand_back(&mut q, op);
                if mine.len() >= REMEMBERED {
                    mine.remove(0);
                }
                mine.push((self.id, q));
                pushed
            })
            .unwrap_or(Err(op))
        }

        /// A queue of this pool for the calling thread, if one is left.
        pub(super) fn claim(&self) -> Option<Dealer> {
            let i = self.claimed.fetch_add(1, Ordering::Relaxed);
            if i >= self.limit {
                return None;
            }
            let (producers, mut consumers): (Vec<_>, Vec<_>) =
                (0..self.rings).map(|_| ring(self.capacity)).unzip();
            let first = consumers.remove(0);
            // The slot is this thread's alone (the index was claimed above).
            let _ = self.slots[i].set(Rings {
                first,
                rest: consumers.into_boxed_slice(),
            });
            let mut producers = producers.into_iter();
            let first = producers.next().expect("a queue has at least one ring");
            Some(Dealer {
                first,
                rest: producers.collect(),
                turn: 0,
            })
        }

        /// The rings of every claimed queue.
        fn queues(&self) -> impl Iterator<Item = &Rings> {
            let n = self.claimed.load(Ordering::Relaxed).min(self.limit);
            self.slots[..n].iter().filter_map(OnceLock::get)
        }

        fn stealers(&self) -> impl Iterator<Item = &Consumer> {
            self.queues().flat_map(Rings::all)
        }

        /// Moves a batch of some pusher's ops to `local` and pops one, for
        /// worker `index`. In a dealing pool, from the worker's own rings,
        /// and from the others' too when `everywhere`; otherwise from any
        /// queue.
        pub(crate) fn steal_into(
            &self,
            local: &Worker<OpPtr>,
            index: usize,
            everywhere: bool,
        ) -> Option<OpPtr> {
            let take = |s: &Consumer| steal_settled(|| s.steal_batch_and_pop(local));
            if self.rings == 1 {
                return self.queues().find_map(|q| take(&q.first));
            }
            let own = index % self.rings;
            if let Some(op) = self.queues().find_map(|q| take(q.of(own))) {
                return Some(op);
            }
            if !everywhere {
                return None;
            }
            self.queues().find_map(|q| {
                q.all()
                    .enumerate()
                    .filter(|&(k, _)| k != own)
                    .find_map(|(_, s)| take(s))
            })
        }

        /// One op from some pusher's queue (a helping thread's take).
        pub(crate) fn steal_one(&self) -> Option<OpPtr> {
            self.stealers().find_map(|s| steal_settled(|| s.steal()))
        }

        /// True when no pusher's queue holds an op.
        pub(crate) fn is_empty(&self) -> bool {
            self.stealers().all(Consumer::is_empty)
        }

        /// Ops in the pushers' queues.
        pub(crate) fn len(&self) -> usize {
            self.stealers().map(Consumer::len).sum()
        }
    }
}

#[cfg(loom)]
mod imp {
    use super::OpPtr;
    use crate::sync::deque::Worker;

    /// Under loom: no pusher queues (see the module docs).
    pub(crate) struct PusherQueues;

    impl PusherQueues {
        pub(crate) fn new(_enabled: bool, _deal: bool, _workers: usize, _max_lead: usize) -> Self {
            PusherQueues
        }
        pub(crate) fn mark_worker_thread() {}
        pub(crate) fn push(&self, op: OpPtr) -> Result<(), OpPtr> {
            Err(op)
        }
        pub(crate) fn steal_into(
            &self,
            _local: &Worker<OpPtr>,
            _index: usize,
            _everywhere: bool,
        ) -> Option<OpPtr> {
            None
        }
        pub(crate) fn steal_one(&self) -> Option<OpPtr> {
            None
        }
        pub(crate) fn is_empty(&self) -> bool {
            true
        }
        pub(crate) fn len(&self) -> usize {
            0
        }
    }
}

pub(crate) use imp::PusherQueues;

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::{QUEUES, REMEMBERED};
    use crate::{Engine, EngineKind, OpDesc};

    fn engine(workers: usize) -> Engine {
        Engine::builder()
            .kind(EngineKind::PerDevice)
            .cpu_workers(workers)
            .build()
            .unwrap()
    }

    /// Pushes `n` ops ready at their push (no vars), each adding one.
    fn push_counted(engine: &Engine, n: usize, count: &Arc<AtomicUsize>) {
        for _ in 0..n {
            let c = count.clone();
            engine
                .push(OpDesc::new("count"), move |_| {
                    c.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
        }
    }

    #[test]
    fn a_queue_holds_the_lead_and_the_pushes_before_its_look() {
        use super::{ring_capacity, MAX_RING_CAPACITY, MIN_RING_CAPACITY};
        use crate::engine::lead::CHECK_EVERY;
        let check = CHECK_EVERY as usize;
        assert_eq!(ring_capacity(0), MIN_RING_CAPACITY, "no lead: the least");
        assert_eq!(ring_capacity(1), MIN_RING_CAPACITY);
        for workers in [1, 2, 4, 8, 16, 32] {
            let lead = workers * crate::engine::DEFAULT_LEAD_PER_WORKER;
            let c = ring_capacity(lead);
            assert!(c.is_power_of_two(), "{c}");
            assert!(c >= lead + check, "{workers} workers: {c} < {lead}");
        }
        assert_eq!(ring_capacity(65_536 - check), 65_536, "a lead that fits");
        assert_eq!(ring_capacity(65_536), 131_072, "its look's pushes too");
        assert_eq!(ring_capacity(usize::MAX), MAX_RING_CAPACITY, "capped");
    }

    #[test]
    fn a_pool_without_queues_hands_none_out() {
        let off = super::PusherQueues::new(false, false, 2, 0);
        assert!(off.claim().is_none());
        assert!(off.is_empty());
        let on = super::PusherQueues::new(true, false, 2, 0);
        for _ in 0..QUEUES {
            assert!(on.claim().is_some());
        }
        assert!(on.claim().is_none(), "only QUEUES queues per pool");
    }

    #[test]
    fn a_dealing_queue_deals_in_turn_and_a_worker_looks_in_its_own_rings_first() {
        use super::super::push_ring::{n, num};
        use crate::sync::deque::Worker;
        let q = super::PusherQueues::new(true, true, 4, 0);
        assert!(q.deals());
        let mut dealer = q.claim().unwrap();
        for i in 1..=8 {
            dealer.push(n(i)).unwrap();
        }
        assert_eq!(q.len(), 8, "every ring counted");
        let local = Worker::new_fifo();
        // Worker 2's ring holds the 3rd and the 7th op, oldest first.
        assert_eq!(q.steal_into(&local, 2, false).map(num), Some(3));
        assert_eq!(q.steal_into(&local, 2, false).map(num), Some(7));
        // Its own rings empty, it takes nothing of the others'...
        assert_eq!(q.steal_into(&local, 2, false).map(num), None);
        assert!(!q.is_empty(), "the other rings still hold ops");
        // ...unless it looks everywhere: ring 0 first.
        assert_eq!(q.steal_into(&local, 2, true).map(num), Some(1));
        // A helping thread's take and a pool without dealing see them all.
        let mut rest: Vec<usize> = std::iter::from_fn(|| q.steal_one().map(num)).collect();
        rest.sort_unstable();
        assert_eq!(rest, [2, 4, 5, 6, 8]);
        assert!(q.is_empty());
        let plain = super::PusherQueues::new(true, false, 4, 0);
        assert!(!plain.deals());
        let mut one = plain.claim().unwrap();
        one.push(n(9)).unwrap();
        assert_eq!(plain.steal_into(&local, 3, false).map(num), Some(9));
    }

    #[test]
    fn a_dealt_push_skips_full_rings_and_is_handed_back_when_all_are() {
        use super::super::push_ring::{n, num};
        use super::{dealt_capacity, ring_capacity, MIN_DEALT_CAPACITY};
        use crate::sync::deque::Worker;
        // The capacity: the thread's queue split between the rings, never
        // below the least.
        assert_eq!(ring_capacity(0), 16_384);
        assert_eq!(
            dealt_capacity(0, 2),
            8_192,
            "no lead: the least queue, halved"
        );
        assert_eq!(dealt_capacity(16 * 2048, 16), 4_096, "16 workers' lead");
        assert_eq!(
            dealt_capacity(0, 64),
            MIN_DEALT_CAPACITY,
            "never below the least"
        );
        let q = super::PusherQueues::new(true, true, 2, 0);
        let cap = dealt_capacity(0, 2);
        let mut dealer = q.claim().unwrap();
        for i in 1..=2 * cap {
            dealer.push(n(i)).unwrap();
        }
        let extra = 1 << 40;
        assert_eq!(
            dealer.push(n(extra)).map_err(num),
            Err(extra),
            "both rings full"
        );
        // Worker 1 takes a batch from ring 1 (the even ops): the pushes
        // after it find ring 0 full at their turn and go to ring 1, until
        // it is full again.
        let local = Worker::new_fifo();
        assert_eq!(q.steal_into(&local, 1, false).map(num), Some(2));
        let taken = 1 + std::iter::from_fn(|| local.pop()).count();
        assert_eq!(q.len(), 2 * cap - taken);
        for i in 0..taken {
            dealer.push(n(2 * cap + 1 + i)).unwrap();
        }
        assert_eq!(dealer.push(n(extra)).map_err(num), Err(extra), "full again");
        // Ring 1 holds a ring's worth again, the pushes after the batch
        // last; ring 0 is as it was.
        let drain = |index: usize| {
            let into = Worker::new_fifo();
            let mut got = Vec::new();
            while let Some(op) = q.steal_into(&into, index, false) {
                got.push(num(op));
                got.extend(std::iter::from_fn(|| into.pop().map(num)));
            }
            got
        };
        let ring1 = drain(1);
        assert_eq!(ring1.len(), cap);
        assert_eq!(ring1.last(), Some(&(2 * cap + taken)));
        let ring0 = drain(0);
        assert_eq!(ring0.len(), cap);
        assert_eq!((ring0[0], ring0[cap - 1]), (1, 2 * cap - 1));
    }

    #[test]
    fn ops_from_more_pushing_threads_than_queues_all_run() {
        let engine = engine(2);
        let count = Arc::new(AtomicUsize::new(0));
        let threads = QUEUES + 4;
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (engine, count) = (engine.clone(), count.clone());
                std::thread::spawn(move || push_counted(&engine, 500, &count))
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(count.load(Ordering::Relaxed), threads * 500);
    }

    #[test]
    fn ops_left_in_the_queue_of_a_thread_that_ended_still_run() {
        let engine = engine(2);
        // Both workers wait in these until the pushing thread has ended, so
        // its ops are still in its queue when its end drops the queue.
        let release = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let (release, started) = (release.clone(), started.clone());
            engine
                .push(OpDesc::new("block"), move |_| {
                    started.fetch_add(1, Ordering::SeqCst);
                    while !release.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    Ok(())
                })
                .unwrap();
        }
        while started.load(Ordering::SeqCst) < 2 {
            std::thread::yield_now();
        }
        let count = Arc::new(AtomicUsize::new(0));
        {
            let (engine, count) = (engine.clone(), count.clone());
            std::thread::spawn(move || push_counted(&engine, 1000, &count))
                .join()
                .unwrap();
        }
        assert_eq!(count.load(Ordering::Relaxed), 0, "the workers were blocked");
        release.store(true, Ordering::SeqCst);
        engine.wait_for_all().unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 1000);
    }

    #[test]
    fn one_thread_pushing_to_more_engines_than_it_remembers() {
        let engines: Vec<Engine> = (0..REMEMBERED + 4).map(|_| engine(1)).collect();
        let count = Arc::new(AtomicUsize::new(0));
        // Round after round over every engine: each round finds the
        // queues of the oldest engines forgotten and claims new ones.
        for _ in 0..3 {
            for e in &engines {
                push_counted(e, 50, &count);
            }
        }
        for e in &engines {
            e.wait_for_all().unwrap();
        }
        assert_eq!(count.load(Ordering::Relaxed), 3 * engines.len() * 50);
        // An engine made after others were dropped gets a fresh id, never
        // the queue a dropped engine left in this thread's list.
        drop(engines);
        let fresh = engine(1);
        let before = count.load(Ordering::Relaxed);
        push_counted(&fresh, 50, &count);
        fresh.wait_for_all().unwrap();
        assert_eq!(count.load(Ordering::Relaxed), before + 50);
    }
}
