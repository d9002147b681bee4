//! Engine configuration: a builder, and the environment variables.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::sync::cpu_count;

use super::error::BuildError;
use super::executor::search_config::{
    SearchConfig, WakeFence, DEFAULT_PUSHER_QUEUES_UP_TO, MAX_LINGER,
};
use super::Engine;

/// Which executor runs ready ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EngineKind {
    /// Inline on the thread that made the op ready; no worker threads.
    Naive,
    /// One shared worker pool plus an IO pool for copies.
    Pooled,
    /// Per-device pools, a CPU priority pool and copy pools.
    #[default]
    PerDevice,
}

impl FromStr for EngineKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.to_ascii_lowercase().replace(['_', '-'], "").as_str() {
            "naive" | "naiveengine" => Ok(EngineKind::Naive),
            "pooled" | "threadedengine" | "threadedenginepooled" => Ok(EngineKind::Pooled),
            "perdevice" | "threadedengineperdevice" => Ok(EngineKind::PerDevice),
            _ => Err(()),
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineKind::Naive => "naive",
            EngineKind::Pooled => "pooled",
            EngineKind::PerDevice => "per-device",
        })
    }
}

/// A resolved configuration (every count non-zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EngineConfig {
    pub(crate) kind: EngineKind,
    pub(crate) cpu_workers: usize,
    pub(crate) cpu_priority_workers: usize,
    pub(crate) copy_workers: usize,
    pub(crate) gpu_workers: usize,
    pub(crate) gpus: u32,
    pub(crate) wait_helps: bool,
    pub(crate) push_helps: bool,
    pub(crate) pooled_op_blocks: usize,
    pub(crate) pooled_queue_entries: usize,
    /// Most ops pending before a push from outside the engine waits
    /// (`lead.rs`); 0: no limit.
    pub(crate) max_lead: usize,
    /// How the pools' idle workers look for work.
    pub(crate) search: SearchConfig,
    /// What the worker threads' names start with
    /// ([`EngineBuilder::thread_name_prefix`]).
    pub(crate) thread_name_prefix: String,
}

/// Default of [`EngineBuilder::thread_name_prefix`].
pub const DEFAULT_THREAD_NAME_PREFIX: &str = "depengine";

/// Default of [`EngineBuilder::pooled_op_blocks`].
pub const DEFAULT_POOLED_OP_BLOCKS: usize = 1 << 20;

/// Default of [`EngineBuilder::pooled_queue_entries`].
pub const DEFAULT_POOLED_QUEUE_ENTRIES: usize = 1 << 24;

/// Default of [`EngineBuilder::max_lead`], per CPU worker.
///
/// Large enough that the ops a worker could start are rarely held back: a
/// wavefront pushed row by row has at most one ready op per row in
/// flight, so every worker finds one only with a row or more per worker
/// pending (on 2 cores, a 2,000 × 2,000 wavefront with 1 µs bodies at 2
/// workers ran 11–19% slower with 1,024 per worker, half a row each, and
/// level with 2,048). Small enough that the blocks and queue entries of
/// the pending ops stay in the caches: against the earlier 4,096 per
/// worker, `random` (a million ops over 10,000 vars) took 12–19% less
/// time, and the other rows measured were level or faster
/// (BENCHMARKS-HISTORY.md, "The lead halved").
pub const DEFAULT_LEAD_PER_WORKER: usize = 2048;

/// Builds an [`Engine`]. Counts left at 0 mean "from the environment or the
/// default".
///
/// Defaults: per-device executor; CPU workers = number of CPUs; 1 CPU priority
/// worker; 1 copy worker per copy pool; 2 workers per simulated GPU; no GPUs.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineKind};
/// let engine = Engine::builder()
///     .kind(EngineKind::Pooled)
///     .cpu_workers(2)
///     .build()
///     .unwrap();
/// assert_eq!(engine.kind(), EngineKind::Pooled);
/// ```
#[derive(Debug, Clone, Default)]
pub struct EngineBuilder {
    kind: Option<EngineKind>,
    cpu_workers: usize,
    cpu_priority_workers: usize,
    copy_workers: usize,
    gpu_workers: usize,
    gpus: u32,
    wait_helps: bool,
    push_helps: bool,
    pooled_op_blocks: Option<usize>,
    pooled_queue_entries: Option<usize>,
    max_lead: Option<usize>,
    max_searching: Option<usize>,
    linger: Option<Duration>,
    linger_through_pushes: bool,
    keep_one_searching: bool,
    pusher_queues_up_to: Option<usize>,
    deal_pushes: bool,
    asymmetric_wake_fence: Option<bool>,
    thread_name_prefix: Option<String>,
}

/// Environment variable: executor kind (`naive`, `pooled`, `per-device`, or
/// MXNet's names `NaiveEngine`, `ThreadedEngine`, `ThreadedEnginePerDevice`).
pub const ENV_ENGINE_TYPE: &str = "DEPENGINE_ENGINE_TYPE";
/// Environment variable: CPU worker threads.
pub const ENV_CPU_WORKERS: &str = "DEPENGINE_CPU_WORKERS";
/// Environment variable: CPU priority worker threads.
pub const ENV_CPU_PRIORITY_WORKERS: &str = "DEPENGINE_CPU_PRIORITY_WORKERS";
/// Environment variable: copy worker threads per copy pool.
pub const ENV_COPY_WORKERS: &str = "DEPENGINE_COPY_WORKERS";

impl EngineBuilder {
    /// A builder with every setting at its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// The executor.
    pub fn kind(mut self, kind: EngineKind) -> Self {
        self.kind = Some(kind);
        self
    }

    /// Worker threads of the CPU pool (pooled: of the shared pool).
    pub fn cpu_workers(mut self, n: usize) -> Self {
        self.cpu_workers = n;
        self
    }

    /// Worker threads of the CPU priority pool (per-device only).
    pub fn cpu_priority_workers(mut self, n: usize) -> Self {
        self.cpu_priority_workers = n;
        self
    }

    /// Worker threads of each copy pool (pooled: of the IO pool).
    pub fn copy_workers(mut self, n: usize) -> Self {
        self.copy_workers = n;
        self
    }

    /// Worker threads of each simulated GPU's compute pool.
    pub fn gpu_workers(mut self, n: usize) -> Self {
        self.gpu_workers = n;
        self
    }

    /// Number of simulated GPU devices (`Context::Gpu(0..n)`).
    pub fn gpus(mut self, n: u32) -> Self {
        self.gpus = n;
        self
    }

    /// Lets a thread blocked in [`Engine::wait_for_all`] run ready ops of
    /// the CPU pool (pooled: of the shared pool) while it waits, as a
    /// oneTBB `wait_for_all` or an OpenMP barrier does. Off by default.
    ///
    /// A program that pushes from one thread and then waits can then start
    /// one CPU worker fewer and keep the same parallelism: the waiting
    /// thread becomes a worker instead of sitting idle, and while it pushes
    /// it does not compete for a core with a full pool. The ops it runs see
    /// no difference except [`OpCtx::worker`](crate::OpCtx::worker), which
    /// is `None` for them, and they may not wait on the engine, as on a
    /// worker. Only ordinary ops it finds queued are taken (never a
    /// prioritized, copy or simulated-GPU op), and only while no op of
    /// positive priority is queued in that pool. A waiter that finds
    /// nothing to run for a short while blocks as usual. A push that waits
    /// for the workers to catch up ([`EngineBuilder::max_lead`]) helps in
    /// the same way.
    ///
    /// Which is faster depends on the ops and the machine. On a 2-core
    /// machine, with a million 1 µs ops pushed from one thread, one CPU
    /// worker and a helping waiter took 9–27% less time than two workers
    /// and a pusher that only pushes and waits on `fan`, `rwmix`,
    /// `random` and `randsum` (ops that wait for one another, where the
    /// pusher paces the run and waits for a CPU the two workers hold),
    /// and 1% more on `indep` (independent ops, which two workers drain
    /// while the pusher pushes); on another instance of the same machine,
    /// 6–14% less and 13% more. `BENCHMARKS-HISTORY.md`, "Full size,
    /// every peer but MXNet and StarPU, 1 and 2 workers, at 864361f" and
    /// "... at acf277a"; the latest such table is in `BENCHMARKS.md`.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().cpu_workers(1).help_while_waiting(true).build().unwrap();
    /// let v = engine.new_var();
    /// for _ in 0..100 {
    ///     engine.push(OpDesc::new("inc").writes(&v), |_| Ok(())).unwrap();
    /// }
    /// engine.wait_for_all().unwrap();
    /// ```
    pub fn help_while_waiting(mut self, on: bool) -> Self {
        self.wait_helps = on;
        self
    }

    /// When too many ready ops are queued for the CPU workers, a push first
    /// runs some of them on the pushing thread, as an OpenMP runtime runs
    /// tasks at their creation once too many are queued. Off by default.
    ///
    /// "Too many" is more than 64 per CPU worker waiting in the pool's
    /// shared queue; the push then runs queued ops until half that many are
    /// left, and looks again after 16 more pushes. It pays where a pusher
    /// runs far ahead of its workers with ops that are ready at their push
    /// (many independent vars): it keeps the backlog short, and with
    /// [`EngineBuilder::help_while_waiting`] and one CPU worker fewer makes
    /// the pushing thread a worker all along, not only once it waits. On
    /// the `random` workload of `depengine bench` with 10 µs bodies, one
    /// worker and the pushing thread went from 83% to 93% of their time in
    /// the bodies (BENCHMARKS-HISTORY.md, "Helping while pushing").
    ///
    /// Ops that become ready a few at a time (a wavefront, one writer
    /// releasing its readers) never build such a backlog, but a pusher far
    /// ahead of them leaves their blocks and vars to go cold before they
    /// run. So a push also helps, every 64 pushes, when more than 1,024 ops
    /// per CPU worker are pending (pushed and not yet completed), until
    /// half as many are left or nothing is queued. It never waits: with
    /// nothing queued it returns however many ops are pending, so ops that
    /// wait for something the pushing thread does after its pushes (an
    /// async op it completes) cannot hang it. With one worker and 1 µs
    /// bodies this took a 1000 × 1000 wavefront from 851 to 707 ns per op
    /// and `fan` from 849 to 723 (BENCHMARKS-HISTORY.md, "The pushing
    /// thread kept near the running ops").
    ///
    /// The same ops are taken as by a waiting helper (ordinary CPU ops,
    /// none while a prioritized op is queued), with the same rules for the
    /// ops run: [`OpCtx::worker`](crate::OpCtx::worker) is `None` and they
    /// may not wait on the engine. A push never helps inside an op (a push
    /// from a body only queues), inside [`Engine::batch`](crate::Engine::batch),
    /// or under the naive executor, which runs every op at its push anyway.
    ///
    /// Only turn it on where a push may run other ops' bodies: the pushing
    /// thread must not hold, while it pushes, a lock that a body takes. A
    /// push that helps also returns later, so the ops pushed after it reach
    /// the engine later: urgent ops pushed behind a long backlog of
    /// ordinary ones start later than without the option, as they do
    /// under OpenMP.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder()
    ///     .cpu_workers(1)
    ///     .help_while_waiting(true)
    ///     .help_while_pushing(true)
    ///     .build()
    ///     .unwrap();
    /// let vars: Vec<_> = (0..1000).map(|_| engine.new_var()).collect();
    /// for v in &vars {
    ///     engine.push(OpDesc::new("fill").writes(v), |_| Ok(())).unwrap();
    /// }
    /// engine.wait_for_all().unwrap();
    /// assert!(vars.iter().all(|v| v.version() == 1));
    /// ```
    pub fn help_while_pushing(mut self, on: bool) -> Self {
        self.push_helps = on;
        self
    }

    /// Most op blocks the engine keeps for reuse once their ops have
    /// completed (default [`DEFAULT_POOLED_OP_BLOCKS`], 1,048,576); beyond
    /// that, the blocks of completed ops are freed.
    ///
    /// Every pushed op takes a block (about 200 bytes) until it completes.
    /// A push reuses the block of a completed op when one is kept, and
    /// allocates otherwise; a completion keeps its block for a later push,
    /// or frees it. When one thread pushes far ahead of the workers, say a
    /// million ops before the first has run, every push allocates and
    /// every completion frees, on the threads that run the ops. Keeping
    /// the blocks spares the next burst of that size both: on the 2-core
    /// sandbox, a 1000 × 1000 `wavefront` with 1 µs bodies and 2 workers
    /// took 842 ns per op against 973 with a limit of 65,536, the earlier
    /// default (BENCHMARKS-HISTORY.md, "Op blocks kept for reuse").
    ///
    /// The engine never keeps more blocks than it once had pending at the
    /// same time, so the default costs memory only after such a burst:
    /// at most about 256 MB, after a million ops were pending at once. Set
    /// a lower limit to give that memory back instead (it is counted in
    /// whole batches of 64 blocks; each thread that pushes or completes
    /// ops also keeps up to 128 in a cache of its own).
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().pooled_op_blocks(4096).build().unwrap();
    /// let vars: Vec<_> = (0..10_000).map(|_| engine.new_var()).collect();
    /// for v in &vars {
    ///     engine.push(OpDesc::new("fill").writes(v), |_| Ok(())).unwrap();
    /// }
    /// engine.wait_for_all().unwrap();
    /// ```
    pub fn pooled_op_blocks(mut self, n: usize) -> Self {
        self.pooled_op_blocks = Some(n);
        self
    }

    /// Most queue entries the engine keeps buffers for once the vars that
    /// grew them are freed (default [`DEFAULT_POOLED_QUEUE_ENTRIES`],
    /// 16,777,216 entries of 8 bytes, 128 MiB); 0 keeps none.
    ///
    /// A var queues the ops that wait for it. Its first two wait on the
    /// var itself; from the third on the queue moves to a buffer of its
    /// own that doubles as it fills, which happens when the pushing thread
    /// runs far ahead of the workers (each var of MXNet's `randsum` has
    /// hundreds of ops queued then). A program that makes new vars for
    /// every step grew those buffers again on every step, on the pushing
    /// thread: with 1 µs bodies `randsum` took 7–9% longer for it on the
    /// 2-core sandbox (BENCHMARKS-HISTORY.md, "Queue buffers kept for reuse").
    /// A freed var's buffer is now kept, emptied, for the next var whose
    /// queue outgrows its first two entries.
    ///
    /// The engine only keeps buffers its vars had, and makes a new one
    /// only when none is kept (or, rarely, when another thread is using
    /// the pool at that moment), so the buffers kept and those in use
    /// together hold about what the vars' queues once held at the same
    /// time. Set a lower limit to give that memory back instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().pooled_queue_entries(0).build().unwrap();
    /// let v = engine.new_var();
    /// for _ in 0..100 {
    ///     engine.push(OpDesc::new("w").writes(&v), |_| Ok(())).unwrap();
    /// }
    /// engine.wait_for_all().unwrap();
    /// assert_eq!(v.version(), 100);
    /// ```
    pub fn pooled_queue_entries(mut self, n: usize) -> Self {
        self.pooled_queue_entries = Some(n);
        self
    }

    /// Most ops that may be pending (pushed, not yet completed) before a
    /// push from a thread that is not one of the engine's waits for the
    /// workers to catch up; 0: no limit. Default:
    /// [`DEFAULT_LEAD_PER_WORKER`] (2,048) per CPU worker; no limit for the
    /// naive executor, which runs every op at its push.
    ///
    /// A thread that pushes ops faster than the workers run them gets ahead
    /// by as many ops as it pushes, each holding an op block and a place in
    /// the queues of its vars. A million ops ahead, that is some 200 MB,
    /// and every op's block comes back from memory when a worker gets to it:
    /// on the 2-core sandbox a million 1 µs ops over 10,000 vars
    /// (`random`) took 1,520–1,600 ns per op at one worker unbounded and
    /// 1,205–1,230 with a limit of 4,096 (BENCHMARKS-HISTORY.md, "The pushing
    /// thread's lead"); the default's 2,048 per worker took 12–14% less
    /// time again on its rows with 1 µs bodies ("The lead halved").
    ///
    /// The push that finds the limit passed (the engine looks every 256
    /// pushes) waits until half of it is left, at most 10 ms at a time,
    /// and not at all while no op completes: a wait that sees no
    /// completion for 0.5 ms (seen when one of its naps of up to 2 ms
    /// ends) ends, and pushes do not wait again until some op
    /// completes, so ops that wait for something only the pushing thread
    /// will do (an async op it completes itself) cannot hold it. Between
    /// half the limit and the limit, where the awake workers hold every
    /// CPU, the look yields the pushing thread's CPU once instead, so that
    /// a worker it took the CPU from gets back to its op. With
    /// [`EngineBuilder::help_while_waiting`] the waiting push runs queued
    /// ops meanwhile. The engine's own threads (ops that push ops) never
    /// wait. Pushes inside an [`Engine::batch`] do not wait either (the
    /// ops the batch holds could not complete): the batch looks when it
    /// closes, after handing them over. An op pushed while the lead is full, high-priority ones
    /// included, reaches the workers when the push that waits returns: set
    /// 0 where pushes must never wait, or where the ops that can run in
    /// parallel are pushed far apart.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().cpu_workers(2).max_lead(256).build().unwrap();
    /// let v = engine.new_var();
    /// for _ in 0..10_000 {
    ///     engine.push(OpDesc::new("w").writes(&v), |_| Ok(())).unwrap();
    /// }
    /// engine.wait_for_all().unwrap();
    /// assert_eq!(v.version(), 10_000);
    /// ```
    pub fn max_lead(mut self, ops: usize) -> Self {
        self.max_lead = Some(ops);
        self
    }

    /// Most workers of a pool that look for work at the same time (default:
    /// half the pool, at least one; a larger value counts as the whole
    /// pool). The others sleep until a push or a completion wakes them.
    ///
    /// Every searcher polls the pool's queues, whose lines the threads
    /// that queue ops must then take back: fewer searchers cost the
    /// pushing thread less, more of them start the ops of a burst sooner,
    /// without a wake-up. The default measured best of the values tried on
    /// 2 and 16 cores (`BENCHMARKS.md`); a machine where the pushing
    /// thread is the bottleneck may do better with fewer.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().cpu_workers(4).max_searching(1).build().unwrap();
    /// let vars: Vec<_> = (0..1000).map(|_| engine.new_var()).collect();
    /// for v in &vars {
    ///     engine.push(OpDesc::new("fill").writes(v), |_| Ok(())).unwrap();
    /// }
    /// engine.wait_for_all().unwrap();
    /// assert!(vars.iter().all(|v| v.version() == 1));
    /// ```
    ///
    /// [`EngineBuilder::build`] fails with [`BuildError::BadSetting`] for 0:
    /// with nobody searching, every push would pay a wake-up.
    pub fn max_searching(mut self, workers: usize) -> Self {
        self.max_searching = Some(workers);
        self
    }

    /// How long a worker that found no work keeps looking, past its
    /// back-off of a few microseconds, before it sleeps (default
    /// [`DEFAULT_LINGER`](crate::DEFAULT_LINGER), 50 µs; at most one
    /// second; zero: it sleeps at once). It lingers only while another
    /// thread runs one of the pool's ops, whose completion may bring work,
    /// and, unless [`EngineBuilder::linger_through_pushes`], until an op
    /// is pushed; it yields its CPU between looks.
    ///
    /// A sleeping worker is woken by a system call of the thread that
    /// queues its next op, and its own scheduling again lies on that op's
    /// path; a lingering one takes the op at once, but holds a CPU that
    /// other threads may need. This is the trade an OpenMP runtime's
    /// `GOMP_SPINCOUNT` or `OMP_WAIT_POLICY` sets. (The workers that help
    /// run a [`Replay`](crate::Replay) keep a rule of their own.)
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder()
    ///     .cpu_workers(2)
    ///     .linger(Duration::from_micros(200))
    ///     .build()
    ///     .unwrap();
    /// let v = engine.new_var();
    /// engine.push(OpDesc::new("w").writes(&v), |_| Ok(())).unwrap();
    /// engine.wait_for_all().unwrap();
    /// assert_eq!(v.version(), 1);
    /// ```
    pub fn linger(mut self, d: Duration) -> Self {
        self.linger = Some(d);
        self
    }

    /// Lets a lingering worker ([`EngineBuilder::linger`]) keep looking
    /// after an op is pushed. Off by default: a push that brings work wakes
    /// a sleeper anyway, and where the pushing thread shares a CPU with the
    /// workers (more threads than CPUs), the CPU is better spent pushing.
    /// Where the pushing threads have CPUs of their own, lingering on may
    /// spare pushes their wake-ups.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().cpu_workers(2).linger_through_pushes(true).build().unwrap();
    /// let v = engine.new_var();
    /// engine.push(OpDesc::new("w").writes(&v), |_| Ok(())).unwrap();
    /// engine.wait_for_all().unwrap();
    /// assert_eq!(v.version(), 1);
    /// ```
    pub fn linger_through_pushes(mut self, on: bool) -> Self {
        self.linger_through_pushes = on;
        self
    }

    /// Makes a worker that finds work while it was the last one searching
    /// wake a sleeping worker to search in its place (as the schedulers of
    /// Go and tokio keep a spinning thread). Off by default.
    ///
    /// A thread that queues an op wakes a sleeper only when nobody
    /// searches, and the wake-up (a system call, on a virtual machine
    /// often more) is then on that thread. Where one pushing thread feeds
    /// many workers that run out of ops, searchers that find ops leave
    /// nobody searching and the pushes pay those wake-ups; with this
    /// setting the worker that took the op pays instead, and the next
    /// push finds a searcher. The cost is one more worker awake while the
    /// pool is short of work, which only pays where the pushing threads
    /// have CPUs of their own.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().cpu_workers(4).keep_one_searching(true).build().unwrap();
    /// let vars: Vec<_> = (0..1000).map(|_| engine.new_var()).collect();
    /// for v in &vars {
    ///     engine.push(OpDesc::new("fill").writes(v), |_| Ok(())).unwrap();
    /// }
    /// engine.wait_for_all().unwrap();
    /// assert!(vars.iter().all(|v| v.version() == 1));
    /// ```
    pub fn keep_one_searching(mut self, on: bool) -> Self {
        self.keep_one_searching = on;
        self
    }

    /// Whether the pools' sleep protocol splits its fence: a thread that
    /// queues an op then orders its look at the sleeping workers with a
    /// compiler fence only, and a worker going to sleep pays for both
    /// sides with a process-wide memory barrier (Linux's `membarrier`).
    /// `true`: in every pool; `false`: in none. By default pools of up to
    /// [`EngineBuilder::pusher_queues_up_to`] workers split it where the
    /// system has the barrier, and keep the full fence where it does not.
    ///
    /// Every op queued is followed by that look, and with a full fence
    /// there the queuing thread waits for its earlier stores (the op's
    /// block, its queue's slot and index) to reach lines that workers on
    /// other cores hold. Split, those stores drain while the thread goes
    /// on, and each worker's sleep costs a system call that interrupts
    /// every core running one of the process's threads. It pays where a
    /// pushing thread has a queue of its own, whose pushes make no locked
    /// instruction that waits for those stores anyway: on 16 cores, beside
    /// that queue, it took 10–22% off the empty `indep` and the 1 µs
    /// `random` at 8 and 16 workers; alone (pushes through the shared
    /// queue) it made them up to 30% slower at 8 workers. On 2 cores it
    /// moved no row steadily while each push also took a locked add for
    /// its number; since that add is gone, the empty one-worker `indep`
    /// took 0.60-0.62 of the time with it, and the rows whose workers
    /// sleep most were level (`BENCHMARKS.md`, "The ring and the split
    /// fence on 16 cores"; `BENCHMARKS-HISTORY.md`, "The sleep fence
    /// split", "The push count without a locked add").
    ///
    /// [`EngineBuilder::build`] fails with [`BuildError::Unavailable`] where
    /// `true` is asked for and the barrier cannot be had (not Linux, a
    /// kernel without the private expedited command, a sandbox that
    /// forbids the call).
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{BuildError, Engine, OpDesc};
    /// match Engine::builder().cpu_workers(2).asymmetric_wake_fence(true).build() {
    ///     Ok(engine) => {
    ///         let vars: Vec<_> = (0..1000).map(|_| engine.new_var()).collect();
    ///         for v in &vars {
    ///             engine.push(OpDesc::new("fill").writes(v), |_| Ok(())).unwrap();
    ///         }
    ///         engine.wait_for_all().unwrap();
    ///         assert!(vars.iter().all(|v| v.version() == 1));
    ///     }
    ///     Err(e) => assert!(matches!(e, BuildError::Unavailable { .. }), "{e}"),
    /// }
    /// // Off everywhere, which never fails.
    /// assert!(Engine::builder().cpu_workers(8).asymmetric_wake_fence(false).build().is_ok());
    /// ```
    pub fn asymmetric_wake_fence(mut self, on: bool) -> Self {
        self.asymmetric_wake_fence = Some(on);
        self
    }

    /// What the names of the engine's worker threads start with: a
    /// worker is named `<prefix>-<pool>-<index>` (pools as
    /// [`Engine::pools`] names them), `depengine-cpu-0` by default. Two
    /// engines in one process can then be told apart in a profiler,
    /// `top -H` or `/proc`. Linux keeps the first 15 bytes of a thread's
    /// name, so a short prefix keeps the index.
    ///
    /// [`EngineBuilder::build`] fails with [`BuildError::BadSetting`] for
    /// an empty prefix or one with a NUL byte, which no thread name can
    /// hold.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().cpu_workers(1).thread_name_prefix("sim").build().unwrap();
    /// assert_eq!(engine.thread_name_prefix(), "sim");
    /// let v = engine.new_var();
    /// let name = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    /// let seen = name.clone();
    /// engine
    ///     .push(OpDesc::new("where").writes(&v), move |_| {
    ///         *seen.lock().unwrap() = std::thread::current().name().unwrap_or("").to_string();
    ///         Ok(())
    ///     })
    ///     .unwrap();
    /// engine.wait_for_all().unwrap();
    /// assert!(name.lock().unwrap().starts_with("sim-cpu-"));
    /// ```
    pub fn thread_name_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name_prefix = Some(prefix.into());
        self
    }

    /// Pools of at most `workers` workers give each pushing thread (the
    /// first 8 that push to the pool) a queue of its own for the ops that
    /// are ready at its push, which the workers look in before the pool's
    /// shared queue; larger pools take those ops on the shared queue.
    /// Default 16; 0: no pool does.
    ///
    /// A thread's own queue spares its pushes the locked instructions of
    /// the shared queue, on lines the searching workers read. At 2
    /// workers on 2 cores, a crossbeam deque there made the empty
    /// `indep`, `indep-novars` and `wavefront` 15–39% faster than the
    /// shared queue, and the ring it is now (`push_ring.rs`) the empty
    /// rows whose ops are ready at their push another 10–19%
    /// (`BENCHMARKS-HISTORY.md`, "The pushing thread's queue as a ring"). On a
    /// 16-core machine the deque lost to the shared queue from 4 workers
    /// on (its push read a line the stealers write); the ring took 4–10%
    /// off `indep` at 8 and 16 workers, and more with the sleep fence split
    /// beside it ([`EngineBuilder::asymmetric_wake_fence`]; `BENCHMARKS.md`,
    /// "The ring and the split fence on 16 cores"). Pools past 16 workers
    /// were not measured; they keep the shared queue unless this says
    /// otherwise.
    ///
    /// Each such queue holds the ops [`EngineBuilder::max_lead`] lets be
    /// pending (from 16,384 to 131,072 of them), so that with a lead it is
    /// not what fills; a push that finds it full (with no lead, or with
    /// more ops pending than it holds, as when the lead's wait gives up
    /// on ops that do not complete) goes to the shared queue instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().cpu_workers(4).pusher_queues_up_to(4).build().unwrap();
    /// let vars: Vec<_> = (0..1000).map(|_| engine.new_var()).collect();
    /// for v in &vars {
    ///     engine.push(OpDesc::new("fill").writes(v), |_| Ok(())).unwrap();
    /// }
    /// engine.wait_for_all().unwrap();
    /// assert!(vars.iter().all(|v| v.version() == 1));
    /// ```
    pub fn pusher_queues_up_to(mut self, workers: usize) -> Self {
        self.pusher_queues_up_to = Some(workers);
        self
    }

    /// Makes each pushing thread's queue (see
    /// [`EngineBuilder::pusher_queues_up_to`]) a ring per worker, to which
    /// the thread deals the ops ready at its push in turn, instead of one
    /// ring that every worker takes from. Off by default: a setting to
    /// measure on many cores, not yet measured there.
    ///
    /// Why it might pay: with one ring, every searching worker reads the
    /// lines each push writes, and at 16 workers on 16 cores a push of an
    /// op with a 1 µs body took 415–470 ns where the pool could run one
    /// every 62 ns (`BENCHMARKS.md`, "The ring and the split fence on 16
    /// cores"). Dealt, each ring's lines have one reader while the pool
    /// keeps up. A worker looks in the other workers' rings now and then
    /// while it searches and at every look once its back-off is spent, so
    /// an op dealt to a busy or sleeping worker waits for a search to
    /// reach it; with fewer workers searching than the pool has
    /// ([`EngineBuilder::max_searching`]) that wait is the cost to weigh.
    /// Pools that give pushing threads no queue are not affected. On 2
    /// cores, where the pushing thread and the workers share the CPUs, it
    /// was level with 1 µs bodies at 2 workers and slower on empty ops
    /// (`BENCHMARKS-HISTORY.md`, "Pushes dealt to a ring per worker").
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    /// let engine = Engine::builder().cpu_workers(4).deal_pushes(true).build().unwrap();
    /// let vars: Vec<_> = (0..1000).map(|_| engine.new_var()).collect();
    /// for v in &vars {
    ///     engine.push(OpDesc::new("fill").writes(v), |_| Ok(())).unwrap();
    /// }
    /// engine.wait_for_all().unwrap();
    /// assert!(vars.iter().all(|v| v.version() == 1));
    /// ```
    pub fn deal_pushes(mut self, on: bool) -> Self {
        self.deal_pushes = on;
        self
    }

    /// Fills the settings still unset from the process environment.
    ///
    /// # Errors
    ///
    /// [`BuildError::BadEnv`] naming the variable when a value cannot be used.
    pub fn env(self) -> Result<Self, BuildError> {
        let vars: HashMap<String, String> = [
            ENV_ENGINE_TYPE,
            ENV_CPU_WORKERS,
            ENV_CPU_PRIORITY_WORKERS,
            ENV_COPY_WORKERS,
        ]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
        self.env_from(&vars)
    }

    /// Like [`EngineBuilder::env`], from a map instead of the process
    /// environment (for tests and embedding).
    ///
    /// # Errors
    ///
    /// [`BuildError::BadEnv`] naming the variable when a value cannot be used.
    pub fn env_from(mut self, vars: &HashMap<String, String>) -> Result<Self, BuildError> {
        if let Some(v) = vars.get(ENV_ENGINE_TYPE) {
            let kind = v.trim().parse().map_err(|()| BuildError::BadEnv {
                var: ENV_ENGINE_TYPE,
                value: v.clone(),
                expected: "naive, pooled or per-device",
            })?;
            self.kind.get_or_insert(kind);
        }
        let count = |name: &'static str| -> Result<usize, BuildError> {
            match vars.get(name) {
                None => Ok(0),
                Some(v) => match v.trim().parse::<usize>() {
                    Ok(n) if (1..=4096).contains(&n) => Ok(n),
                    _ => Err(BuildError::BadEnv {
                        var: name,
                        value: v.clone(),
                        expected: "a whole number of threads from 1 to 4096",
                    }),
                },
            }
        };
        let cpu = count(ENV_CPU_WORKERS)?;
        let prio = count(ENV_CPU_PRIORITY_WORKERS)?;
        let copy = count(ENV_COPY_WORKERS)?;
        if self.cpu_workers == 0 {
            self.cpu_workers = cpu;
        }
        if self.cpu_priority_workers == 0 {
            self.cpu_priority_workers = prio;
        }
        if self.copy_workers == 0 {
            self.copy_workers = copy;
        }
        Ok(self)
    }

    pub(crate) fn resolve(&self) -> Result<EngineConfig, BuildError> {
        let check = |setting: &'static str, n: usize| {
            if n > 4096 {
                Err(BuildError::BadSetting {
                    setting,
                    value: n.to_string(),
                    why: "at most 4096 threads per pool",
                })
            } else {
                Ok(())
            }
        };
        check("cpu_workers", self.cpu_workers)?;
        check("cpu_priority_workers", self.cpu_priority_workers)?;
        check("copy_workers", self.copy_workers)?;
        check("gpu_workers", self.gpu_workers)?;
        if self.gpus > 1024 {
            return Err(BuildError::BadSetting {
                setting: "gpus",
                value: self.gpus.to_string(),
                why: "at most 1024 simulated devices",
            });
        }
        if self.max_searching == Some(0) {
            return Err(BuildError::BadSetting {
                setting: "max_searching",
                value: "0".to_string(),
                why: "at least one worker must be allowed to search, or every push pays a wake-up",
            });
        }
        let linger = self.linger.unwrap_or(super::DEFAULT_LINGER);
        if linger > MAX_LINGER {
            return Err(BuildError::BadSetting {
                setting: "linger",
                value: format!("{linger:?}"),
                why: "at most one second: a lingering worker holds its CPU",
            });
        }
        let wake_fence = match self.asymmetric_wake_fence {
            None => WakeFence::Auto,
            Some(false) => WakeFence::Full,
            Some(true) => {
                crate::sync::asymmetric_fence::register().map_err(|message| {
                    BuildError::Unavailable {
                        setting: "asymmetric_wake_fence",
                        message,
                    }
                })?;
                WakeFence::Split
            }
        };
        let thread_name_prefix = self
            .thread_name_prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_THREAD_NAME_PREFIX.to_string());
        if thread_name_prefix.is_empty() || thread_name_prefix.contains('\0') {
            return Err(BuildError::BadSetting {
                setting: "thread_name_prefix",
                value: format!("{thread_name_prefix:?}"),
                why: "a thread name needs a prefix of at least one byte and no NUL byte",
            });
        }
        let or = |n: usize, d: usize| if n == 0 { d } else { n };
        let kind = self.kind.unwrap_or_default();
        let cpu_workers = or(self.cpu_workers, cpu_count());
        let max_lead = match (self.max_lead, kind) {
            (Some(n), _) => n,
            (None, EngineKind::Naive) => 0,
            (None, _) => DEFAULT_LEAD_PER_WORKER.saturating_mul(cpu_workers),
        };
        Ok(EngineConfig {
            kind,
            cpu_workers,
            cpu_priority_workers: or(self.cpu_priority_workers, 1),
            copy_workers: or(self.copy_workers, 1),
            gpu_workers: or(self.gpu_workers, 2),
            gpus: self.gpus,
            wait_helps: self.wait_helps,
            push_helps: self.push_helps,
            pooled_op_blocks: self.pooled_op_blocks.unwrap_or(DEFAULT_POOLED_OP_BLOCKS),
            pooled_queue_entries: self
                .pooled_queue_entries
                .unwrap_or(DEFAULT_POOLED_QUEUE_ENTRIES),
            max_lead,
            search: SearchConfig {
                max_searching: self.max_searching,
                linger,
                linger_through_pushes: self.linger_through_pushes,
                keep_one_searching: self.keep_one_searching,
                pusher_queues_up_to: self
                    .pusher_queues_up_to
                    .unwrap_or(DEFAULT_PUSHER_QUEUES_UP_TO),
                deal_pushes: self.deal_pushes,
                wake_fence,
            },
            thread_name_prefix,
        })
    }

    /// Builds the engine and starts its threads.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for a setting out of range, or when a worker thread
    /// cannot be started.
    pub fn build(self) -> Result<Engine, BuildError> {
        let config = self.resolve()?;
        Engine::start(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_settings_reach_the_config_and_default_to_the_measured_ones() {
        let c = EngineBuilder::new().resolve().unwrap();
        assert_eq!(c.search, SearchConfig::default());
        assert_eq!(c.search.linger, super::super::DEFAULT_LINGER);
        let c = EngineBuilder::new()
            .max_searching(3)
            .linger(Duration::ZERO)
            .linger_through_pushes(true)
            .keep_one_searching(true)
            .pusher_queues_up_to(16)
            .deal_pushes(true)
            .resolve()
            .unwrap();
        assert_eq!(
            c.search,
            SearchConfig {
                max_searching: Some(3),
                linger: Duration::ZERO,
                linger_through_pushes: true,
                keep_one_searching: true,
                pusher_queues_up_to: 16,
                deal_pushes: true,
                wake_fence: WakeFence::Auto,
            }
        );
        let c = EngineBuilder::new()
            .asymmetric_wake_fence(false)
            .resolve()
            .unwrap();
        assert_eq!(c.search.wake_fence, WakeFence::Full);
        // Asked for, the split fence is on where the barrier registers,
        // and an error naming the setting where it does not.
        match EngineBuilder::new().asymmetric_wake_fence(true).resolve() {
            Ok(c) => assert_eq!(c.search.wake_fence, WakeFence::Split),
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        BuildError::Unavailable {
                            setting: "asymmetric_wake_fence",
                            ..
                        }
                    ),
                    "{e}"
                );
                assert!(e.to_string().contains("asymmetric_wake_fence"), "{e}");
            }
        }
    }

    #[test]
    fn a_thread_name_prefix_defaults_and_an_empty_or_nul_one_is_refused() {
        let c = EngineBuilder::new().resolve().unwrap();
        assert_eq!(c.thread_name_prefix, DEFAULT_THREAD_NAME_PREFIX);
        let c = EngineBuilder::new()
            .thread_name_prefix("x")
            .resolve()
            .unwrap();
        assert_eq!(c.thread_name_prefix, "x");
        for bad in ["", "a\0b"] {
            let err = EngineBuilder::new()
                .thread_name_prefix(bad)
                .build()
                .unwrap_err();
            assert_bad_setting(&err, "thread_name_prefix");
        }
    }

    /// `err` is a [`BuildError::BadSetting`] of `setting`, whose message
    /// names it.
    fn assert_bad_setting(err: &BuildError, setting: &str) {
        assert!(
            matches!(err, BuildError::BadSetting { setting: s, .. } if *s == setting),
            "{err}"
        );
        assert!(err.to_string().contains(setting), "{err}");
    }

    #[test]
    fn no_searcher_and_a_linger_past_a_second_are_errors_naming_the_setting() {
        let err = EngineBuilder::new().max_searching(0).build().unwrap_err();
        assert_bad_setting(&err, "max_searching");
        let err = EngineBuilder::new()
            .linger(Duration::from_millis(1500))
            .build()
            .unwrap_err();
        assert_bad_setting(&err, "linger");
        assert!(err.to_string().contains("1.5s"), "{err}");
        // The bound itself is accepted.
        assert!(EngineBuilder::new().linger(MAX_LINGER).resolve().is_ok());
    }
}
