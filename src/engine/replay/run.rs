//! One replay of a captured graph on the engine's CPU workers.
//!
//! # Protocol
//!
//! Each node has a countdown of the nodes it waits for (`wait`). A thread
//! that finishes a node counts down each successor; the one that brings a
//! successor to zero owns it (a successor with no other predecessor is
//! owned at once, without its countdown). The first successor it owns it
//! runs next itself, so a chain never leaves its thread; the others go to
//! its own deque (newest first, as in rayon), from which idle helpers
//! steal the oldest. The thread that runs the replay's op is the first
//! helper; while fewer helpers than the CPU pool has workers are active,
//! queueing starts another (an engine op without vars that runs
//! [`Run::help`]), and so does a steal that leaves more queued, so the
//! helpers a wide release needs start one another. The roots are claimed
//! from a cursor, a few at a time; a helper runs the roots it claimed
//! itself (they are not stolen), the cursor spreading them.
//!
//! A run allowed one helper (a CPU pool of one worker) never starts
//! another: `add_helper` finds the one seat taken, and the helper that
//! leaves and comes back is the thread that started the run. Such a run
//! is on one thread from its first node to its last, so it counts its
//! countdowns down with a plain load and store and keeps the nodes it
//! makes ready in a plain stack instead of its deque (`ALONE` in the code).
//!
//! A helper leaves when it has found nothing for a while ([`LINGER`]): it
//! gives its deque back to its seat, counts itself out of `active`, then
//! looks once more and comes back if something appeared (and the pool has
//! room). Work is never stranded: a node is queued only in the deque of
//! the running helper that made it ready, and a helper leaves only with
//! its deque empty and its claimed roots run, so every queued node is run
//! by its owner or stolen.
//!
//! The last node to finish (`remaining` reaching zero) hands the outcome to
//! the replay's op, which then releases its vars.
//!
//! # Failures
//!
//! As in the engine (rule 5): a node that fails or panics taints the vars
//! it writes, and every later node that uses a tainted var is skipped and
//! taints what it writes in turn. Each later node on a var follows, through
//! the edges, the node that tainted it, and the taint is stored before the
//! countdowns that release the followers (release/acquire through the
//! countdowns' read-modify-write chains), so the follower sees it.

use std::borrow::Cow;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::sync::deque::{Stealer, Worker};
use crate::sync::{
    increment_below, steal_settled, Arc, AtomicBool, AtomicU32, AtomicUsize, Backoff, Mutex,
    Ordering,
};

use super::super::core::panic_message;
use super::super::inline_body::{InlineBody, NodeKind};
use super::graph::Edges;
use super::helpers::{Choice, HelperPolicy, ReplayHelpers};

/// A node's body: called once per replay. Stored in the graph's array of
/// bodies when it is small (`inline_body.rs`): a run reaches it in one
/// step, where a box cost a second cache miss per node.
pub(crate) type NodeBody = InlineBody<NodeKind>;

/// One node of a captured graph, as the builder collects it.
pub(crate) struct Node {
    pub(crate) name: Cow<'static, str>,
    pub(crate) body: NodeBody,
    /// Dense indices of the vars the node uses: the written ones first.
    pub(crate) vars: Box<[u32]>,
    pub(crate) nwrites: usize,
}

/// What a run reads of a node only when something failed.
pub(crate) struct NodeInfo {
    name: Cow<'static, str>,
    vars: Box<[u32]>,
    nwrites: usize,
}

/// A captured graph: nodes in push order and the edges between them.
pub(crate) struct Graph {
    pub(crate) name: Cow<'static, str>,
    /// The bodies apart from the rest of the nodes: a run walks them
    /// node after node, and a chain of empty nodes was bound by the
    /// cache misses of 64-byte nodes.
    bodies: Box<[NodeBody]>,
    info: Box<[NodeInfo]>,
    pub(crate) edges: Edges,
    /// Distinct vars the nodes use.
    vars: usize,
    /// The countdowns and taint flags of finished runs, for the next ones:
    /// a large run's arrays would otherwise be fresh pages every time.
    spare: Mutex<Vec<Counts>>,
    /// How many helpers its runs get (`helpers.rs`).
    pub(crate) helpers: HelperPolicy,
}

impl Graph {
    /// The graph of `nodes` (in push order) with `edges` between them,
    /// over `vars` distinct vars, whose runs get helpers as `helpers`
    /// says.
    pub(crate) fn new(
        name: Cow<'static, str>,
        nodes: Vec<Node>,
        edges: Edges,
        vars: usize,
        helpers: ReplayHelpers,
    ) -> Graph {
        let (bodies, info) = nodes
            .into_iter()
            .map(|n| {
                let info = NodeInfo {
                    name: n.name,
                    vars: n.vars,
                    nwrites: n.nwrites,
                };
                (n.body, info)
            })
            .unzip::<_, _, Vec<_>, Vec<_>>();
        Graph {
            name,
            bodies: bodies.into_boxed_slice(),
            info: info.into_boxed_slice(),
            edges,
            vars,
            spare: Mutex::new(Vec::new()),
            helpers: HelperPolicy::new(helpers),
        }
    }

    /// Number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.bodies.len()
    }
}

/// A run's per-node countdowns and per-var taint flags.
pub(crate) struct Counts {
    wait: Box<[AtomicU32]>,
    /// Cleared by the run that set them, when it drops.
    tainted: Box<[AtomicBool]>,
}

impl Counts {
    /// Counts for a run of `graph`, reusing a finished run's if there is one.
    fn for_run(graph: &Graph) -> Counts {
        let preds = &graph.edges.preds;
        let spare = graph.spare.lock().pop();
        match spare {
            Some(mut c) => {
                // Published to the helpers with the run itself (they reach
                // it through the engine's queues). Plain writes through
                // `&mut`: a copy the compiler vectorizes, where atomic
                // stores went one by one.
                for (w, &p) in c.wait.iter_mut().zip(preds.iter()) {
                    #[cfg(not(loom))]
                    {
                        *w.get_mut() = p;
                    }
                    #[cfg(loom)]
                    w.store(p, Ordering::Relaxed);
                }
                c
            }
            None => Counts {
                wait: preds.iter().map(|&p| AtomicU32::new(p)).collect(),
                tainted: (0..graph.vars).map(|_| AtomicBool::new(false)).collect(),
            },
        }
    }
}

/// Starts a helper for a run (returns false when it could not).
pub(crate) type Spawn = Box<dyn Fn(Arc<Run>) -> bool + Send + Sync>;

/// Told the run's outcome once: `Err` names the failure.
pub(crate) type Finish = Box<dyn FnOnce(Result<(), String>) + Send>;

/// How long a helper that finds nothing keeps looking before it leaves.
///
/// A helper that leaves while a node runs must be started again (an engine
/// push, often a worker's wake-up) when that node releases its
/// successors; in a fan of 100 readers behind 10 µs writers that cost a
/// wake-up per writer. Waits spin about as long (`core/wait.rs`).
#[cfg(not(loom))]
const LINGER: std::time::Duration = std::time::Duration::from_micros(50);

/// Time since a helper last found work (see [`LINGER`]); under loom a
/// helper leaves as soon as its back-off is done.
struct Linger {
    #[cfg(not(loom))]
    since: Option<std::time::Instant>,
}

impl Linger {
    fn new() -> Self {
        Linger {
            #[cfg(not(loom))]
            since: None,
        }
    }

    /// True once the helper has found nothing for [`LINGER`].
    fn long_enough(&mut self) -> bool {
        #[cfg(not(loom))]
        {
            let now = std::time::Instant::now();
            now.duration_since(*self.since.get_or_insert(now)) >= LINGER
        }
        #[cfg(loom)]
        {
            true
        }
    }
}

/// Most roots claimed at a time from the cursor.
const ROOT_CHUNK: usize = 8;

/// Counts one finished predecessor off a countdown; true when it reached
/// zero. `alone`: no other thread uses the run's countdowns (a run of one
/// helper, see the module's docs), so a plain load and store do.
#[inline(always)]
fn count_down(wait: &AtomicU32, alone: bool) -> bool {
    if alone {
        let left = wait.load(Ordering::Relaxed) - 1;
        wait.store(left, Ordering::Relaxed);
        left == 0
    } else {
        wait.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

/// The state of one replay.
pub(crate) struct Run {
    graph: Arc<Graph>,
    /// Taken out only by `Drop`, which gives them back to the graph.
    counts: Option<Counts>,
    remaining: AtomicUsize,
    /// One deque per helper seat: a helper takes a seat's deque when it
    /// joins and gives it back before it counts itself out, so a joined
    /// helper always finds a free seat. The nodes a helper makes ready
    /// stay in its own deque (run newest first, as rayon's do); idle
    /// helpers steal the oldest.
    seats: Box<[Mutex<Option<Worker<u32>>>]>,
    stealers: Box<[Stealer<u32>]>,
    next_root: AtomicUsize,
    active: AtomicUsize,
    max_helpers: usize,
    spawn: Spawn,
    finish: Mutex<Option<Finish>>,
    any_tainted: AtomicBool,
    /// The first node that failed, and why.
    failure: Mutex<Option<(u32, String)>>,
    skipped: AtomicUsize,
    /// How many helpers the graph's policy gave this run, and whether
    /// the run is timed for it.
    choice: Choice,
}

impl Run {
    /// A run of `graph` on a pool of `workers`: at most that many
    /// helpers at a time, or one, as the graph's policy chooses
    /// (`helpers.rs`).
    pub(crate) fn new(graph: Arc<Graph>, workers: usize, spawn: Spawn, finish: Finish) -> Arc<Run> {
        let counts = Some(Counts::for_run(&graph));
        let choice = graph.helpers.choose(workers.max(1));
        let max_helpers = choice.helpers;
        let deques: Vec<Worker<u32>> = (0..max_helpers).map(|_| Worker::new_lifo()).collect();
        let stealers = deques.iter().map(Worker::stealer).collect();
        let seats = deques.into_iter().map(|d| Mutex::new(Some(d))).collect();
        Arc::new(Run {
            remaining: AtomicUsize::new(graph.len()),
            graph,
            counts,
            seats,
            stealers,
            next_root: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            max_helpers,
            spawn,
            finish: Mutex::new(Some(finish)),
            any_tainted: AtomicBool::new(false),
            failure: Mutex::new(None),
            skipped: AtomicUsize::new(0),
            choice,
        })
    }

    /// Runs the replay: this thread (the replay's op) is its first helper,
    /// and more are started while there are roots for them. Helping here
    /// rather than starting a helper for this thread too saves a handoff
    /// through the engine's queues, often a sleeping worker's wake-up,
    /// before the first node runs.
    pub(crate) fn start(self: Arc<Self>) {
        if self.graph.len() == 0 {
            self.finish();
            return;
        }
        let joined = self.try_join();
        debug_assert!(joined, "a new run has room for one helper");
        let want = self.graph.edges.roots.len().min(self.max_helpers);
        for _ in 1..want {
            if !self.add_helper() {
                break;
            }
        }
        self.help();
    }

    /// A helper's loop: runs nodes until none is left to take. The caller
    /// has counted it in `active`.
    pub(crate) fn help(self: &Arc<Self>) {
        // One loop per case, each its own function: with the choice inside
        // one loop, the loop of runs with more helpers compiled to 3 more
        // instructions per node on `chain` (callgrind), and its times at 2
        // workers wandered above those of the loop before the choice.
        if self.max_helpers == 1 {
            self.help_loop::<true>()
        } else {
            self.help_loop::<false>()
        }
    }

    /// [`Run::help`]'s loop; `ALONE`: the run is allowed one helper (see
    /// the module's docs).
    #[inline(never)]
    fn help_loop<const ALONE: bool>(self: &Arc<Self>) {
        let (mut seat, mut local) = self.take_seat();
        let mut backoff = Backoff::new();
        // Nodes this helper finished and has not yet counted out of
        // `remaining`: one shared read-modify-write per stretch of work
        // instead of one per node, which every helper would fight over.
        let mut done = 0;
        let mut idle = Linger::new();
        // Positions in the graph's roots that this helper claimed from the
        // cursor and has not run yet; it leaves only once they are run, so
        // none is stranded.
        let mut claimed = 0..0;
        // The nodes a run of one helper makes ready: nobody steals them, so
        // a plain stack, where the deque's pop cost a fence per node.
        let mut mine: Vec<u32> = Vec::new();
        loop {
            if let Some(i) = self.take::<ALONE>(seat, &local, &mut mine, &mut claimed) {
                done += self.run_from::<ALONE>(i, &local, &mut mine);
                backoff = Backoff::new();
                idle = Linger::new();
                continue;
            }
            if done > 0 {
                self.count_done(done);
                done = 0;
            }
            if self.remaining.load(Ordering::Acquire) == 0 {
                break;
            }
            if !backoff.is_completed() || !idle.long_enough() {
                backoff.snooze();
                continue;
            }
            self.leave_seat(seat, local);
            if !self.has_queued() || !self.try_join() {
                return;
            }
            (seat, local) = self.take_seat();
            backoff = Backoff::new();
        }
        self.leave_seat(seat, local);
    }

    /// Gives a seat's deque back, then counts the helper out (in that
    /// order: see [`Run::take_seat`]).
    fn leave_seat(&self, seat: usize, local: Worker<u32>) {
        *self.seats[seat].lock() = Some(local);
        self.active.fetch_sub(1, Ordering::SeqCst);
    }

    /// A free seat's deque, for a helper counted in `active`: seats are
    /// given back before `active` counts a helper out, so at most
    /// `active - 1` are taken and one is free.
    fn take_seat(&self) -> (usize, Worker<u32>) {
        self.seats
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.lock().take().map(|d| (i, d)))
            .expect("a joined helper finds a free seat")
    }

    /// Counts `n` finished nodes out; the helper that counts the last one
    /// finishes the run.
    fn count_done(&self, n: usize) {
        if self.remaining.fetch_sub(n, Ordering::AcqRel) == n {
            self.finish();
        }
    }

    fn counts(&self) -> &Counts {
        self.counts
            .as_ref()
            .expect("counts live until the run drops")
    }

    /// Starts one more helper, unless the pool is full or the engine
    /// refused it; true when one was started.
    fn add_helper(self: &Arc<Self>) -> bool {
        if !self.try_join() {
            return false;
        }
        if (self.spawn)(self.clone()) {
            return true;
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Counts one more helper in, unless the pool is full.
    fn try_join(&self) -> bool {
        increment_below(&self.active, self.max_helpers)
    }

    fn has_queued(&self) -> bool {
        self.stealers.iter().any(|s| !s.is_empty())
            || self.next_root.load(Ordering::SeqCst) < self.graph.edges.roots.len()
    }

    /// A node to run: from this helper's deque, the roots it claimed, the
    /// roots not claimed yet, or another helper's deque.
    ///
    /// Inlined into each helper loop: called out of line, as the compiler
    /// chose once there were two loops, it made the 2-worker `fan` about a
    /// fifth slower (minimum 29 -> 35 ns per op).
    #[inline(always)]
    fn take<const ALONE: bool>(
        self: &Arc<Self>,
        seat: usize,
        local: &Worker<u32>,
        mine: &mut Vec<u32>,
        claimed: &mut Range<usize>,
    ) -> Option<u32> {
        if ALONE {
            if let Some(i) = mine.pop() {
                return Some(i);
            }
        } else if let Some(i) = local.pop() {
            return Some(i);
        }
        if let Some(k) = claimed.next() {
            return Some(self.graph.edges.roots[k]);
        }
        if let Some(i) = self.claim_roots(claimed) {
            return Some(i);
        }
        let stolen = self
            .stealers
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != seat)
            .find_map(|(_, s)| steal_settled(|| s.steal_batch_and_pop(local)));
        // A node that releases many starts one helper; each helper that
        // steals while more is queued starts the next, so a wide release
        // reaches every worker the pool has, not just two. The relaxed
        // look first spares a full pool (every steal at 2 workers) the
        // scan of every deque; `add_helper` checks again.
        if stolen.is_some()
            && self.active.load(Ordering::Relaxed) < self.max_helpers
            && self.has_queued()
        {
            self.add_helper();
        }
        stolen
    }

    /// Claims a few roots: returns the first and keeps the rest in
    /// `claimed`, which only this helper reads. Through the deque each
    /// root cost a push and a pop, whose fence took more time than an
    /// empty node's body; the chunk is small enough that no helper holds
    /// back much that another could have run.
    fn claim_roots(&self, claimed: &mut Range<usize>) -> Option<u32> {
        let roots = &self.graph.edges.roots;
        let seen = self.next_root.load(Ordering::Relaxed);
        if seen >= roots.len() {
            return None;
        }
        // Chunks small enough to leave every helper some of what is left:
        // a few long roots must not all go to the first helper.
        let chunk = ((roots.len() - seen) / (2 * self.max_helpers)).clamp(1, ROOT_CHUNK);
        let start = self.next_root.fetch_add(chunk, Ordering::SeqCst);
        let end = roots.len().min(start + chunk);
        if start >= end {
            return None;
        }
        *claimed = start + 1..end;
        Some(roots[start])
    }

    /// Runs node `i`, then each first successor it makes ready, queueing
    /// the others (in `mine` when `ALONE`, a run of one helper as the
    /// module's docs say; in the deque `local` otherwise); returns how
    /// many nodes it ran (or skipped).
    ///
    /// `ALONE` spares the countdowns their locked instruction, which was
    /// most of an empty node's time. It is a const parameter, not a flag
    /// tested per successor: the test cost the other runs 9 instructions
    /// per node (callgrind, `chain`).
    fn run_from<const ALONE: bool>(
        self: &Arc<Self>,
        i: u32,
        local: &Worker<u32>,
        mine: &mut Vec<u32>,
    ) -> usize {
        let edges = &self.graph.edges;
        let wait = &self.counts().wait;
        let mut next = Some(i);
        let mut ran = 0;
        while let Some(i) = next.take() {
            self.run_node(i);
            ran += 1;
            let mut queued = false;
            for &s in edges.succs(i) {
                // A node that follows this one alone needs no countdown:
                // nobody else will ever touch it.
                let (sole, s) = (s.sole(), s.node());
                if sole || count_down(&wait[s as usize], ALONE) {
                    if next.is_none() {
                        next = Some(s);
                    } else if ALONE {
                        mine.push(s);
                    } else {
                        local.push(s);
                        queued = true;
                    }
                }
            }
            if queued {
                self.add_helper();
            }
        }
        ran
    }

    /// Runs node `i`'s body, or skips it when a var it uses is tainted.
    #[inline(always)]
    fn run_node(&self, i: u32) {
        let tainted = &self.counts().tainted;
        let skip = self.any_tainted.load(Ordering::Acquire)
            && self.graph.info[i as usize]
                .vars
                .iter()
                .any(|&v| tainted[v as usize].load(Ordering::Acquire));
        let failed = if skip {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            true
        } else {
            let body = &self.graph.bodies[i as usize];
            let why = match catch_unwind(AssertUnwindSafe(|| body.call())) {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.message().to_string()),
                Err(payload) => Some(format!("panicked: {}", panic_message(&*payload))),
            };
            match why {
                None => false,
                Some(why) => {
                    let mut f = self.failure.lock();
                    if f.is_none() {
                        *f = Some((i, why));
                    }
                    true
                }
            }
        };
        if failed {
            let node = &self.graph.info[i as usize];
            if node.nwrites > 0 {
                for &v in &node.vars[..node.nwrites] {
                    tainted[v as usize].store(true, Ordering::Release);
                }
                self.any_tainted.store(true, Ordering::Release);
            }
        }
    }

    /// Hands the outcome to whoever waits for it (once).
    fn finish(&self) {
        let Some(finish) = self.finish.lock().take() else {
            return;
        };
        let failure = self.failure.lock().take();
        self.graph.helpers.finished(&self.choice, failure.is_none());
        let outcome = match failure {
            None => Ok(()),
            Some((i, why)) => {
                let node = &self.graph.info[i as usize];
                Err(format!(
                    "node `{}` (#{i}) of replay `{}` failed: {why}; {} later node(s) of the replay were skipped",
                    node.name,
                    self.graph.name,
                    self.skipped.load(Ordering::Relaxed)
                ))
            }
        };
        finish(outcome);
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let Some(c) = self.counts.take() else {
            return;
        };
        // Most runs taint nothing: only those that did pay a pass over the
        // flags, and not at the start of the next run.
        if self.any_tainted.load(Ordering::Acquire) {
            for t in c.tainted.iter() {
                t.store(false, Ordering::Relaxed);
            }
        }
        self.graph.spare.lock().push(c);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::engine::replay::graph::infer_preds;

    /// A graph of `n` independent empty nodes, its runs adaptive.
    fn independent(n: usize) -> Arc<Graph> {
        let ops: Vec<(&[u32], &[u32])> = vec![(&[], &[]); n];
        let preds = infer_preds(0, ops.iter().copied());
        let nodes = (0..n)
            .map(|i| Node {
                name: format!("n{i}").into(),
                body: NodeBody::new_node(|| Ok(())),
                vars: Box::new([]),
                nwrites: 0,
            })
            .collect();
        Arc::new(Graph::new(
            "g".into(),
            nodes,
            Edges::from_preds(&preds),
            0,
            ReplayHelpers::Adaptive,
        ))
    }

    /// One run on a pool of `workers`, helpers on threads of their own;
    /// returns once every helper has left.
    fn run(graph: &Arc<Graph>, workers: usize, fail: bool) {
        let handles = Arc::new(std::sync::Mutex::new(Vec::new()));
        let h = handles.clone();
        let spawn: Spawn = Box::new(move |run: Arc<Run>| {
            h.lock()
                .unwrap()
                .push(std::thread::spawn(move || run.help()));
            true
        });
        let finish: Finish = Box::new(|_| {});
        let r = Run::new(graph.clone(), workers, spawn, finish);
        if fail {
            *r.failure.lock() = Some((0, "test".into()));
        }
        r.start();
        loop {
            // Popped before the join: a helper may start another, which
            // takes the lock.
            let next = handles.lock().unwrap().pop();
            match next {
                Some(t) => t.join().unwrap(),
                None => break,
            }
        }
    }

    #[test]
    fn a_run_reports_its_time_to_the_graphs_policy_unless_it_failed() {
        let g = independent(64);
        run(&g, 2, false);
        assert_eq!(
            g.helpers.timed(),
            (1, None, None),
            "the first run is not timed"
        );
        run(&g, 2, true);
        assert_eq!(g.helpers.timed(), (2, None, None), "a failed run was timed");
        run(&g, 2, false);
        let (runs, alone, shared) = g.helpers.timed();
        assert_eq!((runs, alone), (3, None));
        assert!(shared.is_some(), "a run with the workers was not timed");
    }

    #[test]
    fn a_run_on_a_pool_of_one_is_not_timed() {
        let g = independent(64);
        for _ in 0..5 {
            run(&g, 1, false);
        }
        assert_eq!(g.helpers.timed(), (0, None, None));
    }
}

/// loom models of the protocol above: every interleaving of the helpers
/// that loom explores runs each node once, after its predecessors (the
/// nodes' cells are loom cells: a node reading a predecessor's cell
/// without a happens-before edge is reported as a race), and finishes the
/// run once. Run by `scripts/loom.sh` (`cargo test --lib loom_models`).
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::engine::replay::graph::{infer_preds, Edges};
    use crate::engine::OpError;
    use crate::sync::loom_model as model;
    use loom::cell::UnsafeCell;
    use loom::thread;

    /// Each node's result: 1 + the largest result of its predecessors.
    struct Cells(Vec<UnsafeCell<u32>>);
    // SAFETY: the cells are shared only to let loom check that the run's
    // protocol orders every access (it reports a race otherwise).
    unsafe impl Sync for Cells {}
    // SAFETY: as above.
    unsafe impl Send for Cells {}

    /// The graph of `ops` (reads, writes as var indices), each node
    /// writing its cell; each `(node, runs)` of `fails` fails on those
    /// runs (numbered from 0).
    fn graph(
        ops: &[(&[u32], &[u32])],
        vars: usize,
        fails: &[(usize, std::ops::Range<usize>)],
    ) -> (Arc<Graph>, std::sync::Arc<Cells>) {
        let preds = infer_preds(vars, ops.iter().copied());
        let cells =
            std::sync::Arc::new(Cells((0..ops.len()).map(|_| UnsafeCell::new(0)).collect()));
        let nodes: Vec<Node> = ops
            .iter()
            .enumerate()
            .map(|(i, (r, w))| {
                let (cells, p) = (cells.clone(), preds[i].clone());
                // Not a loom atomic: a node's body runs once per run, in
                // the order the run's protocol gives it.
                let calls = std::sync::atomic::AtomicUsize::new(0);
                let fail_runs: Vec<_> = fails
                    .iter()
                    .filter(|(n, _)| *n == i)
                    .map(|(_, runs)| runs.clone())
                    .collect();
                let body = NodeBody::new_node(move || {
                    let run = calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let mut v = 1;
                    for &j in &p {
                        // SAFETY: loom checks the access (see `Cells`).
                        v = v.max(1 + cells.0[j as usize].with(|c| unsafe { *c }));
                    }
                    // SAFETY: as above.
                    cells.0[i].with_mut(|c| unsafe { *c = v });
                    if fail_runs.iter().any(|runs| runs.contains(&run)) {
                        return Err(OpError::msg("boom"));
                    }
                    Ok(())
                });
                Node {
                    name: format!("n{i}").into(),
                    body,
                    vars: w.iter().chain(r.iter()).copied().collect(),
                    nwrites: w.len(),
                }
            })
            .collect();
        let graph = Arc::new(Graph::new(
            "m".into(),
            nodes,
            Edges::from_preds(&preds),
            vars,
            ReplayHelpers::Adaptive,
        ));
        (graph, cells)
    }

    /// One run of `graph` with two helpers at most; returns its outcome
    /// once every helper has left.
    fn run_graph(graph: &Arc<Graph>) -> Result<(), String> {
        run_graph_with(graph, 2)
    }

    /// One run of `graph` with `helpers` helpers at most.
    fn run_graph_with(graph: &Arc<Graph>, helpers: usize) -> Result<(), String> {
        let handles = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let outcome = std::sync::Arc::new(std::sync::Mutex::new(None));
        let h = handles.clone();
        let spawn: Spawn = Box::new(move |run: Arc<Run>| {
            h.lock().unwrap().push(thread::spawn(move || run.help()));
            true
        });
        let o = outcome.clone();
        let finish: Finish = Box::new(move |r| {
            let mut o = o.lock().unwrap();
            assert!(o.is_none(), "finished twice");
            *o = Some(r);
        });
        Run::new(graph.clone(), helpers, spawn, finish).start();
        loop {
            let next = handles.lock().unwrap().pop();
            match next {
                Some(t) => t.join().unwrap(),
                None => break,
            }
        }
        let outcome = outcome.lock().unwrap().take();
        outcome.expect("the run finished")
    }

    /// Each node's cell (0: never run).
    fn values(cells: &Cells) -> Vec<u32> {
        // SAFETY: every helper has been joined.
        cells.0.iter().map(|c| c.with(|v| unsafe { *v })).collect()
    }

    /// Runs the graph of `ops` once; node `fail` (if any) fails. Returns
    /// the outcome and each node's cell (0: skipped).
    fn run(
        ops: &[(&[u32], &[u32])],
        vars: usize,
        fail: Option<usize>,
    ) -> (Result<(), String>, Vec<u32>) {
        let fails: Vec<_> = fail.into_iter().map(|n| (n, 0..1)).collect();
        let (graph, cells) = graph(ops, vars, &fails);
        let r = run_graph(&graph);
        (r, values(&cells))
    }

    #[test]
    fn a_diamond_runs_each_node_once_after_its_predecessors() {
        // 0 writes a; 1 and 2 read a and write b and c; 3 reads b and c.
        model(|| {
            let (r, cells) = run(
                &[(&[], &[0]), (&[0], &[1]), (&[0], &[2]), (&[1, 2], &[3])],
                4,
                None,
            );
            assert_eq!(r, Ok(()));
            assert_eq!(cells, vec![1, 2, 2, 3]);
        });
    }

    #[test]
    fn two_roots_and_a_join_reach_both_helpers_without_stranding() {
        model(|| {
            let (r, cells) = run(&[(&[], &[0]), (&[], &[1]), (&[0, 1], &[2])], 3, None);
            assert_eq!(r, Ok(()));
            assert_eq!(cells, vec![1, 1, 2]);
        });
    }

    #[test]
    fn roots_claimed_two_at_a_time_run_once_before_their_join() {
        // Eight roots and two helpers: each claim takes two roots and keeps
        // the second to itself (`claimed`); the join reads every root.
        model(|| {
            let roots: Vec<[u32; 1]> = (0..8).map(|v| [v]).collect();
            let mut ops: Vec<(&[u32], &[u32])> = roots.iter().map(|w| (&[][..], &w[..])).collect();
            let all: Vec<u32> = (0..8).collect();
            ops.push((&all, &[8]));
            let (r, cells) = run(&ops, 9, None);
            assert_eq!(r, Ok(()));
            assert_eq!(cells, vec![1, 1, 1, 1, 1, 1, 1, 1, 2]);
        });
    }

    #[test]
    fn a_fan_of_three_behind_one_node_runs_each_once_with_three_helpers() {
        // 0 writes a; 1, 2 and 3 read it: 0's helper queues two and starts
        // a second, whose steal may start a third (`Run::take`).
        model(|| {
            let ops: &[(&[u32], &[u32])] = &[(&[], &[0]), (&[0], &[1]), (&[0], &[2]), (&[0], &[3])];
            let (graph, cells) = graph(ops, 4, &[]);
            assert_eq!(run_graph_with(&graph, 3), Ok(()));
            assert_eq!(values(&cells), vec![1, 2, 2, 2]);
        });
    }

    #[test]
    fn a_failure_skips_the_nodes_on_its_vars_and_fails_the_run_once() {
        // 0 writes a and fails; 1 reads a (skipped); 2 writes b (runs).
        model(|| {
            let (r, cells) = run(&[(&[], &[0]), (&[0], &[2]), (&[], &[1])], 3, Some(0));
            let why = r.unwrap_err();
            assert!(
                why.contains("node `n0` (#0)") && why.contains("1 later node(s)"),
                "{why}"
            );
            assert_eq!(cells, vec![1, 0, 1]);
        });
    }

    #[test]
    fn a_run_after_a_failed_one_finds_its_counts_and_taints_reset() {
        // 0 writes a and fails on the first run; 1 reads a and writes b;
        // 2 writes c; 3 reads b and c (a countdown of 2); 4 writes e and
        // fails on the second run, so that run looks at taints, and must
        // not find the first run's.
        model(|| {
            let ops: &[(&[u32], &[u32])] = &[
                (&[], &[0]),
                (&[0], &[1]),
                (&[], &[2]),
                (&[1, 2], &[3]),
                (&[], &[4]),
            ];
            let (graph, cells) = graph(ops, 5, &[(0, 0..1), (4, 1..2)]);
            assert!(run_graph(&graph).unwrap_err().contains("n0"));
            assert_eq!(values(&cells), vec![1, 0, 1, 0, 1]);
            assert!(run_graph(&graph).unwrap_err().contains("n4"));
            assert_eq!(values(&cells), vec![1, 2, 1, 3, 1]);
        });
    }
}
