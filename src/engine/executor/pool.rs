//! A pool of worker threads with a FIFO for ordinary ops and a priority heap.
//!
//! # Dispatch
//!
//! Priority-0 ops go to a global FIFO (crossbeam's injector) from which
//! workers take batches into their own deques, stealing from each other when
//! both run dry; in a pool of at most 16 workers (by default), those a
//! pushing thread makes ready go to a FIFO of that thread's own, which the
//! workers steal from first (`pusher_queues.rs`).
//! Ops with another priority — or every op, in a pool that serves all by
//! priority — go to a heap ordered by priority, then push order.
//! A worker looks at the heap first for positive priorities, then at the FIFOs,
//! then at the heap again for negative ones: so ready ops run highest
//! priority first (rule 8), and the common case never takes a lock.
//!
//! A worker that completes an op which makes exactly the next op of the same
//! pool ready keeps it in a one-op *next slot* and runs it without queueing
//! (as tokio's LIFO slot does): a chain of dependent ops stays on one warm
//! worker. The slot is used only while the heap is empty, so it never runs a
//! low-priority op ahead of a queued higher one.
//!
//! Before it runs an op, a worker also takes the one after it from its own
//! deque into a slot of its own, to ask for its block early; the other
//! workers steal from that slot once every queue is empty (`ahead.rs`).

use std::collections::BinaryHeap;

use crate::sync::deque::{Injector, Stealer, Worker};
use crate::sync::{
    steal_settled, thread, Arc, AtomicBool, AtomicUsize, Backoff, CachePadded, Mutex, Ordering,
};

use super::super::core::Core;
use super::super::error::EngineError;
use super::super::op::OpPtr;
use super::ahead::Ahead;
#[cfg(not(loom))]
use super::linger::Linger;
use super::pusher_queues::PusherQueues;
use super::search_config::SearchConfig;
use super::sleep::Sleep;

struct PrioEntry {
    priority: i32,
    seq: u64,
    op: OpPtr,
}

impl PartialEq for PrioEntry {
    fn eq(&self, other: &Self) -> bool {
        self.priority == other.priority && self.seq == other.seq
    }
}
impl Eq for PrioEntry {}
impl PartialOrd for PrioEntry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for PrioEntry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Max-heap: higher priority first, then earlier push first.
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// State shared by a pool's workers and the threads that dispatch to it.
pub(crate) struct PoolShared {
    pub(crate) name: String,
    injector: Injector<OpPtr>,
    /// Ready ops from pushing threads, one FIFO per thread, in pools of
    /// at most `SearchConfig::pusher_queues_up_to` workers (see
    /// `pusher_queues.rs`); the injector takes the rest.
    pushers: PusherQueues,
    stealers: Vec<Stealer<OpPtr>>,
    /// Each worker's op held ahead (`ahead.rs`), which the others steal
    /// when every queue is empty.
    ahead: Vec<CachePadded<Ahead>>,
    prio: Mutex<BinaryHeap<PrioEntry>>,
    prio_len: AtomicUsize,
    by_priority: bool,
    sleep: Sleep,
    shutdown: AtomicBool,
    /// Workers that may spin for work at the same time: half the pool
    /// unless set (`EngineBuilder::max_searching`).
    max_searching: usize,
    /// How a searcher lingers (`linger.rs`), and whether the last one
    /// wakes a successor ([`PoolShared::wake_another_if_more`]).
    search: SearchConfig,
    /// Threads outside the pool running its ops while they wait
    /// (`EngineBuilder::help_while_waiting`): their completions may bring
    /// work as a worker's do, so a searcher lingers for them too
    /// (`linger.rs`). On a line of its own: searchers read it while the
    /// queues' lines change hands.
    helping: CachePadded<AtomicUsize>,
}

impl PoolShared {
    /// The shared state of a pool of `workers` workers searching as
    /// `search` says, of an engine that lets `max_lead` ops be pending
    /// (`EngineBuilder::max_lead`, which sizes the pushing threads'
    /// queues), and the workers' own deques, whose stealers it holds.
    fn new(
        name: &str,
        workers: usize,
        by_priority: bool,
        search: SearchConfig,
        max_lead: usize,
    ) -> (PoolShared, Vec<Worker<OpPtr>>) {
        let locals: Vec<Worker<OpPtr>> = (0..workers).map(|_| Worker::new_fifo()).collect();
        let shared = PoolShared {
            name: name.to_string(),
            injector: Injector::new(),
            // Pools up to the setting's size give pushing threads queues
            // of their own (`pusher_queues.rs`, which says why); larger
            // ones take every push on the injector.
            pushers: PusherQueues::new(
                workers <= search.pusher_queues_up_to,
                search.deal_pushes,
                workers,
                max_lead,
            ),
            stealers: locals.iter().map(|w| w.stealer()).collect(),
            ahead: (0..workers)
                .map(|_| CachePadded::new(Ahead::new()))
                .collect(),
            prio: Mutex::new(BinaryHeap::new()),
            prio_len: AtomicUsize::new(0),
            by_priority,
            sleep: Sleep::new(workers).with_asymmetric_fence(search.split_fence_in(workers)),
            shutdown: AtomicBool::new(false),
            max_searching: search.max_searching_in(workers),
            search,
            helping: CachePadded::new(AtomicUsize::new(0)),
        };
        (shared, locals)
    }

    /// Queues a ready op.
    pub(crate) fn push(&self, op: OpPtr) {
        self.enqueue(op);
        self.sleep.notify();
    }

    /// Wakes sleepers for `n` ops queued with [`PoolShared::enqueue`].
    pub(crate) fn notify_many(&self, n: usize) {
        self.sleep.notify_many(n);
    }

    /// Queues a ready op without waking anyone: the caller calls
    /// [`PoolShared::notify_many`] once it has queued them all.
    pub(crate) fn enqueue(&self, op: OpPtr) {
        // SAFETY: a ready op is live until it completes, which needs a worker
        // to take it from this queue first.
        let b = unsafe { op.get() };
        if self.by_priority || b.priority != 0 {
            self.prio.lock().push(PrioEntry {
                priority: b.priority,
                seq: b.seq,
                op,
            });
            self.prio_len.fetch_add(1, Ordering::SeqCst);
        } else if let Err(op) = self.pushers.push(op) {
            self.injector.push(op);
        }
    }

    /// An ordinary op for a thread that helps while it waits: from a
    /// pushing thread's queue or the injector, else stolen from a worker;
    /// none while an op of another priority is queued, which the workers
    /// serve first (rule 8).
    pub(crate) fn take_for_helper(&self) -> Option<OpPtr> {
        if self.prio_len.load(Ordering::Acquire) > 0 {
            return None;
        }
        if let Some(op) = self.pushers.steal_one() {
            return Some(op);
        }
        if let Some(op) = steal_settled(|| self.injector.steal()) {
            return Some(op);
        }
        self.stealers
            .iter()
            .find_map(|s| steal_settled(|| s.steal()))
            .or_else(|| self.ahead.iter().find_map(|a| a.take()))
    }

    /// Counts a thread that waits as running the pool's ops, from the
    /// first op it took until [`PoolShared::stop_helping`].
    pub(crate) fn start_helping(&self) {
        self.helping.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends [`PoolShared::start_helping`].
    pub(crate) fn stop_helping(&self) {
        self.helping.fetch_sub(1, Ordering::Relaxed);
    }

    /// True when an op of the pool runs on another thread than the
    /// searching worker asking: on a worker, or on a thread that helps
    /// while it waits. A hint (`linger.rs`).
    #[cfg(not(loom))]
    fn some_op_running(&self) -> bool {
        self.sleep.some_running(self.workers()) || self.helping.load(Ordering::Relaxed) > 0
    }

    /// Workers of the pool that do not sleep (a hint, `wait_spin.rs`).
    #[cfg(not(loom))]
    pub(crate) fn awake_workers(&self) -> usize {
        self.sleep.awake(self.workers())
    }

    /// Worker threads of the pool.
    pub(crate) fn workers(&self) -> usize {
        self.stealers.len()
    }

    /// Ordinary ops waiting in the shared FIFO and the pushing threads'
    /// queues (not counting those the workers already moved to their own
    /// deques), per worker.
    pub(crate) fn queued_per_worker(&self) -> usize {
        (self.injector.len() + self.pushers.len()) / self.stealers.len()
    }

    /// True when the next slot may be used (see the module docs).
    pub(crate) fn slot_allowed(&self) -> bool {
        self.prio_len.load(Ordering::Relaxed) == 0
    }

    fn pop_prio(&self, only_positive: bool) -> Option<OpPtr> {
        let mut heap = self.prio.lock();
        match heap.peek() {
            Some(e) if !only_positive || e.priority > 0 => {
                let e = heap.pop().expect("peeked");
                self.prio_len.fetch_sub(1, Ordering::SeqCst);
                Some(e.op)
            }
            _ => None,
        }
    }

    /// An op for worker `index`: from the heap's positive priorities, its
    /// own deque, the pushing threads' queues, the injector, the other
    /// workers' deques and held ops, then the heap's other priorities.
    /// Where the pushing threads deal their ops to the workers
    /// (`pusher_queues.rs`), `everywhere` says whether to look in the
    /// other workers' rings too (see [`search`]).
    fn find(&self, local: &Worker<OpPtr>, index: usize, everywhere: bool) -> Option<OpPtr> {
        if self.prio_len.load(Ordering::Acquire) > 0 {
            if let Some(op) = self.pop_prio(!self.by_priority) {
                return Some(op);
            }
        }
        if let Some(op) = local.pop() {
            return Some(op);
        }
        if let Some(op) = self.pushers.steal_into(local, index, everywhere) {
            return Some(op);
        }
        if let Some(op) = steal_settled(|| self.injector.steal_batch_and_pop(local)) {
            return Some(op);
        }
        for (i, s) in self.stealers.iter().enumerate() {
            if i == index {
                continue;
            }
            if let Some(op) = steal_settled(|| s.steal_batch_and_pop(local)) {
                return Some(op);
            }
        }
        for (i, a) in self.ahead.iter().enumerate() {
            if i == index {
                continue;
            }
            if let Some(op) = a.take() {
                return Some(op);
            }
        }
        if self.prio_len.load(Ordering::Acquire) > 0 {
            return self.pop_prio(false);
        }
        None
    }

    /// Called by a worker that found work after searching or sleeping:
    /// while more is queued, wakes another (see `sleep.rs`), or two while
    /// the shared FIFO holds a burst; with nothing more queued, and
    /// `EngineBuilder::keep_one_searching` set, wakes one while nobody
    /// else searches, to search in its place.
    ///
    /// A completion that makes many ops ready at once (a writer releasing
    /// its readers) queues them faster than one wake-up after another can
    /// spread them: each woken worker handing on one wake-up makes a chain
    /// as long as the pool, two make a tree.
    ///
    /// The wake-up for nothing queued takes the next push's wake-up off
    /// the pushing thread (which wakes a sleeper only while nobody
    /// searches) and onto this worker, whose pool is short of work. It
    /// adds wake-ups and never removes one, so the argument of `sleep.rs`
    /// holds as it is; each comes from an op found, so they are as many as
    /// the ops at most.
    fn wake_another_if_more(&self) {
        let queued = self.injector.len();
        if queued > 1 {
            self.sleep.notify_many(2);
        } else if queued == 1 || self.search.keep_one_searching || self.has_work() {
            // Wakes nobody while somebody searches.
            self.sleep.notify();
        }
    }

    /// Called by a pushing thread now and then (one push in
    /// `lead::CHECK_EVERY`): wakes one sleeper while at least one op per
    /// worker waits queued, even though somebody searches.
    ///
    /// A push wakes nobody while a worker searches, counting on that
    /// worker to find its op. A searcher that has no CPU cannot: on a
    /// machine with fewer CPUs than threads, it can wait behind the
    /// pushing thread for a scheduler slice while the other worker sleeps
    /// on an idle CPU, and every op pushed meanwhile waits too (on 2
    /// cores, `priority` with 2 workers started no op before its last
    /// push in many runs: `BENCHMARKS-HISTORY.md`, "A backlog beside a sleeper,
    /// woken every 256 pushes"). This look bounds that wait by the pushes
    /// between two looks; a woken worker that finds more queued hands the
    /// wake-up on as after any wake-up. Where the workers keep up, nothing
    /// is queued and the look costs a few loads.
    #[cfg(not(loom))]
    pub(crate) fn wake_for_backlog(&self) {
        let queued =
            self.injector.len() + self.pushers.len() + self.prio_len.load(Ordering::Relaxed);
        if queued >= self.workers() {
            self.sleep.wake_one_anyway();
        }
    }

    fn has_work(&self) -> bool {
        self.prio_len.load(Ordering::SeqCst) > 0
            || !self.injector.is_empty()
            || !self.pushers.is_empty()
            || self.stealers.iter().any(|s| !s.is_empty())
            || self.ahead.iter().any(|a| !a.is_empty())
    }
}

/// A started pool: its shared state and its threads.
pub(crate) struct WorkerPool {
    pub(crate) shared: Arc<PoolShared>,
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
}

impl WorkerPool {
    /// Starts `workers` threads named `<prefix>-<name>-<i>`
    /// (`EngineBuilder::thread_name_prefix`).
    pub(crate) fn start(
        core: &Arc<Core>,
        name: &str,
        workers: usize,
        by_priority: bool,
    ) -> Result<WorkerPool, EngineError> {
        let (shared, locals) = PoolShared::new(
            name,
            workers.max(1),
            by_priority,
            core.config.search,
            core.config.max_lead,
        );
        let shared = Arc::new(shared);
        let workers = locals.len();
        let pool = WorkerPool {
            shared: shared.clone(),
            threads: Mutex::new(Vec::with_capacity(workers)),
        };
        for (index, local) in locals.into_iter().enumerate() {
            let thread_name = format!("{}-{name}-{index}", core.config.thread_name_prefix);
            let core = core.clone();
            let shared = shared.clone();
            match thread::spawn_named(thread_name.clone(), move || {
                worker_main(core, shared, local, index)
            }) {
                Ok(h) => pool.threads.lock().push(h),
                Err(e) => {
                    pool.stop_and_join();
                    return Err(EngineError::Spawn {
                        thread: thread_name,
                        message: e.to_string(),
                    });
                }
            }
        }
        Ok(pool)
    }

    /// Number of worker threads.
    pub(crate) fn len(&self) -> usize {
        self.shared.stealers.len()
    }

    /// Stops the workers once their queues are empty and joins them.
    pub(crate) fn stop_and_join(&self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.sleep.wake_all();
        let handles = std::mem::take(&mut *self.threads.lock());
        for h in handles {
            // A worker never unwinds (user panics are caught at the op
            // boundary, bookkeeping panics abort), so join cannot fail.
            let _ = h.join();
        }
    }
}

/// A worker's view of its own pool, for the next slot.
pub(crate) struct LocalSlot<'a> {
    pub(crate) pool: &'a PoolShared,
    pub(crate) next: &'a mut Option<OpPtr>,
}

fn worker_main(core: Arc<Core>, shared: Arc<PoolShared>, local: Worker<OpPtr>, index: usize) {
    let mut next: Option<OpPtr> = None;
    let ahead = &*shared.ahead[index];
    PusherQueues::mark_worker_thread();
    core.mark_own_worker();
    loop {
        // The op held ahead comes before the queues, as the next slot's
        // does and under its rule; and before a search in any case: a
        // worker never sleeps holding one (`ahead.rs`).
        let held = || shared.slot_allowed().then(|| ahead.take()).flatten();
        let op = match next.take().or_else(held) {
            Some(op) => op,
            None => match shared.find(&local, index, false).or_else(|| ahead.take()) {
                Some(op) => op,
                None => {
                    // This thread's completions left the wake-up of a
                    // `wait_for_all` to here: with no op to run, the last
                    // of them may have emptied the engine.
                    core.wake_if_idle();
                    match search(&core, &shared, &local, index) {
                        Some(op) => op,
                        None => {
                            if shared.shutdown.load(Ordering::SeqCst) && !shared.has_work() {
                                return;
                            }
                            continue;
                        }
                    }
                }
            },
        };
        ahead.fill(&local);
        let ready = core.execute(op, Some(index));
        if !ready.is_empty() {
            core.dispatch_all(
                ready,
                Some(LocalSlot {
                    pool: &shared,
                    next: &mut next,
                }),
            );
        }
    }
}

/// Looks of a search per look in every worker's ring of a dealing pusher,
/// while the back-off spins, counting from the first (`pusher_queues.rs`).
const LOOKS_PER_SCAN: usize = 8;

/// Spins for work, then sleeps; `None` when the worker found nothing after
/// its sleep either (the caller loops).
///
/// Past its back-off, a searcher lingers while another worker runs an op
/// and nothing is pushed (`linger.rs`); loom, which models no clock, sees
/// the back-off alone.
fn search(core: &Core, shared: &PoolShared, local: &Worker<OpPtr>, index: usize) -> Option<OpPtr> {
    if !shared.sleep.try_start_searching(shared.max_searching) {
        return sleep_then_look(shared, local, index);
    }
    let mut backoff = Backoff::new();
    #[cfg(not(loom))]
    let mut linger = Linger::new(&shared.search);
    let mut looks = 0usize;
    loop {
        // Where the pushing threads deal (`pusher_queues.rs`), the other
        // workers' rings are looked in at the first look and every eighth
        // while the back-off spins, and at every look past it: each look
        // at them reads lines the pushes write, which dealing keeps to one
        // reader.
        let everywhere = looks % LOOKS_PER_SCAN == 0 || backoff.is_completed();
        looks += 1;
        if let Some(op) = shared.find(local, index, everywhere) {
            shared.sleep.stop_searching();
            shared.wake_another_if_more();
            return Some(op);
        }
        if shared.shutdown.load(Ordering::Relaxed) {
            break;
        }
        if backoff.is_completed() {
            #[cfg(not(loom))]
            if linger.keep_looking(
                shared.some_op_running(),
                core.next_seq(),
                std::time::Instant::now(),
            ) {
                std::thread::yield_now();
                continue;
            }
            #[cfg(loom)]
            let _ = core;
            break;
        }
        backoff.snooze();
    }
    shared.sleep.stop_searching();
    sleep_then_look(shared, local, index)
}

/// Sleeps until woken, then looks for work once; a worker that wakes to
/// work while more is queued wakes another.
///
/// Without that hand-on, a backlog queued while some worker searched
/// reached one worker more at most: the pushes skip the wake-up (somebody
/// searches), the searcher that finds work wakes one sleeper, and that
/// sleeper, finding work at once, never searched and woke nobody. Both
/// kept running from the backlog, so nobody searched again, while the
/// others slept beside it (16 workers ran 100 µs bodies two at a time,
/// `BENCHMARKS-HISTORY.md`, "A backlog left to two workers").
fn sleep_then_look(shared: &PoolShared, local: &Worker<OpPtr>, index: usize) -> Option<OpPtr> {
    shared.sleep.sleep(index, || {
        shared.has_work() || shared.shutdown.load(Ordering::SeqCst)
    });
    let op = shared.find(local, index, true)?;
    shared.wake_another_if_more();
    Some(op)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::ptr::NonNull;

    use super::*;

    /// A pool's shared state without threads: `workers` workers that all
    /// count as asleep.
    fn asleep(workers: usize) -> PoolShared {
        asleep_but(0, workers, SearchConfig::default())
    }

    /// A pool of `workers` workers searching as `search` says, all but
    /// the first `awake` of them counted as asleep.
    fn asleep_but(awake: usize, workers: usize, search: SearchConfig) -> PoolShared {
        let (shared, _) = PoolShared::new("test", workers, false, search, 0);
        for w in awake..workers {
            shared.sleep.pretend_asleep(w);
        }
        shared
    }

    #[test]
    fn a_helping_thread_counts_as_running_the_pools_ops_until_it_stops() {
        // Two workers asleep: nobody runs an op, so a searcher would not
        // linger; while a waiting thread helps, it would.
        let shared = asleep(2);
        assert!(!shared.some_op_running());
        shared.start_helping();
        assert!(shared.some_op_running());
        shared.start_helping();
        shared.stop_helping();
        assert!(shared.some_op_running(), "one helper still runs ops");
        shared.stop_helping();
        assert!(!shared.some_op_running());
        // A worker awake and not searching runs an op (or is about to).
        let (awake, _) = PoolShared::new("test", 2, false, SearchConfig::default(), 0);
        assert!(awake.some_op_running());
    }

    /// Sleepers left after a worker that found work hands the wake-up on
    /// with `queued` ops in the FIFO. The ops are never run: only their
    /// count in the queue matters, so they point nowhere.
    fn sleepers_after_hand_on(queued: usize) -> usize {
        let shared = asleep(4);
        for _ in 0..queued {
            shared.injector.push(OpPtr(NonNull::dangling()));
        }
        shared.wake_another_if_more();
        shared.sleep.sleepers()
    }

    /// Stand-ins for op blocks, never run: the pool only moves their
    /// addresses (and asks for their lines, a hint).
    #[repr(align(64))]
    struct Fake {
        _bytes: [u8; 192],
    }

    fn fakes(n: usize) -> Vec<Fake> {
        (0..n).map(|_| Fake { _bytes: [0; 192] }).collect()
    }

    fn op(blocks: &[Fake], k: usize) -> OpPtr {
        OpPtr(NonNull::from(&blocks[k]).cast())
    }

    #[test]
    fn a_worker_holds_an_op_ahead_only_while_its_deque_keeps_another() {
        let blocks = fakes(2);
        let (shared, locals) = PoolShared::new("test", 2, false, SearchConfig::default(), 0);
        locals[0].push(op(&blocks, 0));
        shared.ahead[0].fill(&locals[0]);
        assert!(shared.ahead[0].is_empty(), "a lone op stays stealable");
        assert_eq!(locals[0].len(), 1);
        locals[0].push(op(&blocks, 1));
        shared.ahead[0].fill(&locals[0]);
        assert_eq!(locals[0].len(), 1, "one op left in the deque");
        assert!(
            shared.ahead[0].take() == Some(op(&blocks, 0)),
            "the deque's front is held, so the order is kept"
        );
    }

    /// A pool of `workers` workers whose first has two ops in its deque
    /// and has filled its slot: it holds the first, its deque the second.
    fn one_held(workers: usize) -> (Vec<Fake>, PoolShared, Vec<Worker<OpPtr>>) {
        let blocks = fakes(2);
        let (shared, locals) = PoolShared::new("test", workers, false, SearchConfig::default(), 0);
        locals[0].push(op(&blocks, 0));
        locals[0].push(op(&blocks, 1));
        shared.ahead[0].fill(&locals[0]);
        (blocks, shared, locals)
    }

    #[test]
    fn another_worker_steals_the_held_op_once_every_queue_is_empty() {
        let (blocks, shared, locals) = one_held(2);
        assert!(
            shared.find(&locals[1], 1, true) == Some(op(&blocks, 1)),
            "the deque is stolen from first"
        );
        assert!(shared.has_work(), "a held op is work: nobody sleeps on it");
        assert!(
            shared.find(&locals[1], 1, true) == Some(op(&blocks, 0)),
            "then the held op"
        );
        assert!(shared.ahead[0].take().is_none(), "taken once only");
        assert!(!shared.has_work());
        assert!(shared.find(&locals[1], 1, true).is_none());
    }

    #[test]
    fn a_helping_thread_takes_a_held_op() {
        let (blocks, shared, locals) = one_held(1);
        assert!(locals[0].pop() == Some(op(&blocks, 1)));
        assert!(shared.take_for_helper() == Some(op(&blocks, 0)));
        assert!(shared.take_for_helper().is_none());
        assert!(!shared.has_work());
    }

    #[test]
    fn a_pool_lets_as_many_search_as_its_setting_says() {
        let searchers = |max_searching: Option<usize>, workers: usize| {
            let search = SearchConfig {
                max_searching,
                ..SearchConfig::default()
            };
            let (shared, _) = PoolShared::new("test", workers, false, search, 0);
            let mut n = 0;
            while shared.sleep.try_start_searching(shared.max_searching) {
                n += 1;
                assert!(n <= workers, "more searchers than workers");
            }
            n
        };
        assert_eq!(searchers(None, 16), 8, "half the pool by default");
        assert_eq!(searchers(None, 2), 1);
        assert_eq!(searchers(Some(3), 16), 3);
        assert_eq!(searchers(Some(1), 16), 1);
        assert_eq!(searchers(Some(64), 16), 16, "at most the pool");
    }

    #[test]
    fn a_worker_wakes_nobody_one_or_two_by_what_is_queued() {
        assert_eq!(sleepers_after_hand_on(0), 4, "nothing queued: nobody woken");
        assert_eq!(sleepers_after_hand_on(1), 3, "one op queued: one woken");
        // A burst spreads as a tree: each woken worker wakes two.
        assert_eq!(sleepers_after_hand_on(2), 2, "two queued: two woken");
        assert_eq!(
            sleepers_after_hand_on(50),
            2,
            "a burst: still two per hand-on"
        );
    }

    #[test]
    fn a_backlog_beside_a_sleeper_wakes_it_though_somebody_searches() {
        // Worker 0 counts as searching (and, in the case this is for, has
        // no CPU); workers 1 and 2 sleep.
        let backlog = |queued: usize| {
            let shared = asleep_but(1, 3, SearchConfig::default());
            assert!(shared.sleep.try_start_searching(shared.max_searching));
            for _ in 0..queued {
                shared.injector.push(OpPtr(NonNull::dangling()));
            }
            // A push wakes nobody: somebody searches.
            shared.sleep.notify();
            assert_eq!(shared.sleep.sleepers(), 2);
            shared.wake_for_backlog();
            shared.sleep.sleepers()
        };
        assert_eq!(backlog(2), 2, "fewer ops than workers: nobody woken");
        assert_eq!(backlog(3), 1, "one op per worker: one woken");
        assert_eq!(backlog(300), 1, "one per look; the woken one hands on");
        // With nobody asleep there is nobody to wake.
        let (shared, _) = PoolShared::new("test", 2, false, SearchConfig::default(), 0);
        for _ in 0..10 {
            shared.injector.push(OpPtr(NonNull::dangling()));
        }
        shared.wake_for_backlog();
        assert_eq!(shared.sleep.sleepers(), 0);
    }

    #[test]
    fn pools_up_to_the_setting_give_pushing_threads_queues() {
        // This test's thread is no worker: it may take a pool's queue.
        // The op is never run, so it points nowhere.
        let op = OpPtr(NonNull::dangling());
        let takes = |workers: usize, search: SearchConfig| {
            let (shared, _) = PoolShared::new("test", workers, false, search, 0);
            shared.pushers.push(op).is_ok()
        };
        let d = SearchConfig::default();
        assert!(takes(2, d), "two workers: a queue by default");
        assert!(takes(16, d), "sixteen: a queue by default");
        assert!(!takes(17, d), "seventeen: the injector by default");
        let up_to = |n| SearchConfig {
            pusher_queues_up_to: n,
            ..d
        };
        assert!(takes(16, up_to(16)));
        assert!(!takes(17, up_to(16)));
        assert!(!takes(1, up_to(0)), "0: no pool hands queues out");
    }

    #[test]
    fn a_pushing_threads_queue_holds_what_the_lead_lets_be_pending() {
        // Sixteen workers given queues, with the default lead (32,768
        // pending): a queue of 16,384 would hand the rest to the
        // injector. The ops are never run, so they point nowhere.
        let op = OpPtr(NonNull::dangling());
        let search = SearchConfig {
            pusher_queues_up_to: 16,
            ..SearchConfig::default()
        };
        let lead = 16 * crate::engine::DEFAULT_LEAD_PER_WORKER;
        let pending = lead + crate::engine::lead::CHECK_EVERY as usize;
        let (shared, _) = PoolShared::new("test", 16, false, search, lead);
        let kept = (0..pending)
            .take_while(|_| shared.pushers.push(op).is_ok())
            .count();
        assert_eq!(kept, pending, "the queue filled before the lead");
        assert_eq!(shared.pushers.len(), pending);
    }

    #[test]
    fn the_last_searcher_wakes_one_in_its_place_only_when_set() {
        let keep = SearchConfig {
            keep_one_searching: true,
            ..SearchConfig::default()
        };
        // Worker 0 took the only op queued and stopped searching; the
        // other three sleep.
        let shared = asleep_but(1, 4, keep);
        shared.wake_another_if_more();
        assert_eq!(shared.sleep.sleepers(), 2, "one woken to search");
        // The woken one searches now: the next find wakes nobody.
        assert!(shared.sleep.try_start_searching(shared.max_searching));
        shared.wake_another_if_more();
        assert_eq!(shared.sleep.sleepers(), 2, "a searcher is left");
        // Without the setting the same find wakes nobody.
        let shared = asleep_but(1, 4, SearchConfig::default());
        shared.wake_another_if_more();
        assert_eq!(shared.sleep.sleepers(), 3);
    }
}
