//! One replay of a captured graph on the engine's CPU workers.
//!
//! # Protocol
//!
//! Each node has a countdown of the nodes it waits for (`wait`). A thread
//! that finishes a node counts down each successor; the one that brings a
//! successor to zero owns it. The first successor it owns it runs next
//! itself, so a chain never leaves its thread; the others go to the shared
//! queue, and while fewer helpers than the CPU pool has workers are
//! active, another helper is started (an engine op without vars that runs
//! [`Run::help`]). The roots are claimed from a cursor, a few at a time.
//!
//! A helper leaves when it finds nothing queued: it counts itself out of
//! `active`, then looks once more and comes back if something appeared
//! (and the pool has room). Work is never stranded: only an active helper
//! (or the start) queues a node, and a helper never leaves without having
//! looked at the queue after its own last queueing, so whoever queued a
//! node either runs it or sees another helper take it.
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
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::sync::deque::{Injector, Steal, Worker};
use crate::sync::{Arc, AtomicBool, AtomicUsize, Backoff, Mutex, Ordering};

use super::super::core::panic_message;
use super::super::op::OpResult;
use super::graph::Edges;

/// A node's body: called once per replay.
pub(crate) type NodeBody = Box<dyn Fn() -> OpResult + Send + Sync>;

/// One node of a captured graph.
pub(crate) struct Node {
    pub(crate) name: Cow<'static, str>,
    pub(crate) body: NodeBody,
    /// Dense indices of the vars the node uses: the written ones first.
    pub(crate) vars: Box<[u32]>,
    pub(crate) nwrites: usize,
}

/// A captured graph: nodes in push order and the edges between them.
pub(crate) struct Graph {
    pub(crate) name: Cow<'static, str>,
    pub(crate) nodes: Box<[Node]>,
    pub(crate) edges: Edges,
    /// Distinct vars the nodes use.
    pub(crate) vars: usize,
}

/// Starts a helper for a run (returns false when it could not).
pub(crate) type Spawn = Box<dyn Fn(Arc<Run>) -> bool + Send + Sync>;

/// Told the run's outcome once: `Err` names the failure.
pub(crate) type Finish = Box<dyn FnOnce(Result<(), String>) + Send>;

/// Most roots claimed at a time from the cursor.
const ROOT_CHUNK: usize = 8;

/// The state of one replay.
pub(crate) struct Run {
    graph: Arc<Graph>,
    wait: Box<[AtomicUsize]>,
    remaining: AtomicUsize,
    queue: Injector<u32>,
    next_root: AtomicUsize,
    active: AtomicUsize,
    max_helpers: usize,
    spawn: Spawn,
    finish: Mutex<Option<Finish>>,
    any_tainted: AtomicBool,
    tainted: Box<[AtomicBool]>,
    /// The first node that failed, and why.
    failure: Mutex<Option<(u32, String)>>,
    skipped: AtomicUsize,
}

impl Run {
    /// A run of `graph` with at most `max_helpers` helpers at a time.
    pub(crate) fn new(
        graph: Arc<Graph>,
        max_helpers: usize,
        spawn: Spawn,
        finish: Finish,
    ) -> Arc<Run> {
        let wait = graph
            .edges
            .preds
            .iter()
            .map(|&p| AtomicUsize::new(p as usize))
            .collect();
        let tainted = (0..graph.vars).map(|_| AtomicBool::new(false)).collect();
        Arc::new(Run {
            remaining: AtomicUsize::new(graph.nodes.len()),
            graph,
            wait,
            queue: Injector::new(),
            next_root: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            max_helpers: max_helpers.max(1),
            spawn,
            finish: Mutex::new(Some(finish)),
            any_tainted: AtomicBool::new(false),
            tainted,
            failure: Mutex::new(None),
            skipped: AtomicUsize::new(0),
        })
    }

    /// Starts helpers for the roots; helps on this thread when none could
    /// be started.
    pub(crate) fn start(self: Arc<Self>) {
        if self.graph.nodes.is_empty() {
            self.finish();
            return;
        }
        let want = self.graph.edges.roots.len().min(self.max_helpers);
        for _ in 0..want {
            if !self.try_join() {
                break;
            }
            if !(self.spawn)(self.clone()) {
                self.active.fetch_sub(1, Ordering::SeqCst);
                break;
            }
        }
        if self.active.load(Ordering::SeqCst) == 0 && self.try_join() {
            self.help();
        }
    }

    /// A helper's loop: runs nodes until none is left to take. The caller
    /// has counted it in `active`.
    pub(crate) fn help(self: &Arc<Self>) {
        let local = Worker::new_fifo();
        let mut backoff = Backoff::new();
        loop {
            if let Some(i) = self.take(&local) {
                self.run_from(i);
                backoff = Backoff::new();
                continue;
            }
            if self.remaining.load(Ordering::Acquire) == 0 {
                break;
            }
            if !backoff.is_completed() {
                backoff.snooze();
                continue;
            }
            self.active.fetch_sub(1, Ordering::SeqCst);
            if !self.has_queued() || !self.try_join() {
                return;
            }
            backoff = Backoff::new();
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
    }

    /// Counts one more helper in, unless the pool is full.
    fn try_join(&self) -> bool {
        let mut n = self.active.load(Ordering::SeqCst);
        loop {
            if n >= self.max_helpers {
                return false;
            }
            match self
                .active
                .compare_exchange_weak(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
    }

    fn has_queued(&self) -> bool {
        !self.queue.is_empty()
            || self.next_root.load(Ordering::SeqCst) < self.graph.edges.roots.len()
    }

    /// A node to run: from this helper's claimed roots, the shared queue,
    /// or the roots not claimed yet.
    fn take(&self, local: &Worker<u32>) -> Option<u32> {
        if let Some(i) = local.pop() {
            return Some(i);
        }
        loop {
            match self.queue.steal() {
                Steal::Success(i) => return Some(i),
                Steal::Empty => break,
                Steal::Retry => continue,
            }
        }
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
        for &r in &roots[start + 1..end] {
            local.push(r);
        }
        Some(roots[start])
    }

    /// Runs node `i`, then each first successor it makes ready, queueing
    /// the others.
    fn run_from(self: &Arc<Self>, i: u32) {
        let mut next = Some(i);
        while let Some(i) = next.take() {
            self.run_node(i);
            let mut queued = false;
            for &s in self.graph.edges.succs(i) {
                if self.wait[s as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                    if next.is_none() {
                        next = Some(s);
                    } else {
                        self.queue.push(s);
                        queued = true;
                    }
                }
            }
            if queued && self.try_join() && !(self.spawn)(self.clone()) {
                self.active.fetch_sub(1, Ordering::SeqCst);
            }
            if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.finish();
            }
        }
    }

    /// Runs node `i`'s body, or skips it when a var it uses is tainted.
    fn run_node(&self, i: u32) {
        let node = &self.graph.nodes[i as usize];
        let skip = self.any_tainted.load(Ordering::Acquire)
            && node
                .vars
                .iter()
                .any(|&v| self.tainted[v as usize].load(Ordering::Acquire));
        let failed = if skip {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            true
        } else {
            let why = match catch_unwind(AssertUnwindSafe(|| (node.body)())) {
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
        if failed && node.nwrites > 0 {
            for &v in &node.vars[..node.nwrites] {
                self.tainted[v as usize].store(true, Ordering::Release);
            }
            self.any_tainted.store(true, Ordering::Release);
        }
    }

    /// Hands the outcome to whoever waits for it (once).
    fn finish(&self) {
        let Some(finish) = self.finish.lock().take() else {
            return;
        };
        let outcome = match self.failure.lock().take() {
            None => Ok(()),
            Some((i, why)) => {
                let node = &self.graph.nodes[i as usize];
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
