//! Where a timed run's threads spent its time: on a CPU, waiting for one,
//! or asleep.
//!
//! The time per op says how fast a run was; it does not say why a pool of
//! workers fell short of the ideal. A worker that is short of ops either
//! looks for them (on a CPU: the time shows as its CPU time) or sleeps
//! until it is woken (off the CPU); a thread that is ready but has no CPU
//! waits on the scheduler's run queue (more threads than cores). The
//! accounting here reads both per thread, so a run can be taken apart
//! without a profiler and without hardware counters, which the virtual
//! machines the benchmarks run on often lack.
//!
//! CPU time comes from each thread's CPU clock (`clock_gettime` on the
//! clock Linux derives from a thread id, as `pthread_getcpuclockid` does),
//! which counts up to the moment it is read. The counters in
//! `/proc/self/task/<tid>/schedstat` would do for it too, but a running
//! thread's figure there moves only at the scheduler's ticks, a few
//! milliseconds apart: as long as a short run. The run-queue time is read
//! from there, where it moves whenever the thread gets a CPU.
//!
//! How often a thread went to sleep comes from its voluntary context
//! switches (`/proc/self/task/<tid>/status`): the kernel counts one each
//! time the thread blocks (a worker parking on its futex, a pusher
//! waiting for its lead to shrink), and none when it yields or is
//! preempted. Each sleep of a worker is a wake-up some other thread paid
//! for, the pushing thread most often: the figure that says whether a
//! pusher slows down for its pushes or for the wake-ups in them.
//!
//! Accounting is off unless [`account_cpu`] turns it on: it reads a few
//! files per thread before the clock starts and after it stops, outside
//! the timed region, but the system calls still touch the caches the run
//! starts in. Elsewhere than on Linux, runs carry no [`CpuUse`].

use std::fs;

use crate::sync::unmodelled::Mutex;

/// What the names of the threads counted as workers start with (before
/// their index), while accounting is on.
static ACCOUNTED_POOL: Mutex<Option<String>> = Mutex::new(None);

/// The kernel keeps at most this many bytes of a thread's name.
const NAME_BYTES: usize = 15;

/// Turns CPU accounting of this module's timed runs on for the worker
/// threads of the engine pool named `pool` (a name from
/// [`Engine::pools`](crate::Engine::pools), such as `"cpu"`), or off
/// with `None`. It holds for the whole process: with it on, every
/// [`RunResult`](super::RunResult) of a trace run carries the [`CpuUse`]
/// of its timed region.
///
/// That pool's threads are found by the engine's default names
/// (`depengine-<pool>-<index>`); for an engine built with another
/// [`EngineBuilder::thread_name_prefix`](crate::EngineBuilder::thread_name_prefix),
/// or to tell two engines apart, use [`account_cpu_threads`].
pub fn account_cpu(pool: Option<&str>) {
    account_cpu_threads(
        pool.map(|p| format!("{}-{p}-", crate::DEFAULT_THREAD_NAME_PREFIX))
            .as_deref(),
    );
}

/// Turns CPU accounting on, as [`account_cpu`] does, for the threads
/// whose names are `prefix` followed by an index (as the kernel keeps
/// them: the first 15 bytes), such as `"depengine-cpu-"`, or off with
/// `None`. An engine's are
/// `format!("{}-{pool}-", engine.thread_name_prefix())`.
///
/// # Examples
///
/// ```
/// use depengine::bench::account_cpu_threads;
/// use depengine::Engine;
/// let engine = Engine::builder().cpu_workers(2).thread_name_prefix("mine").build().unwrap();
/// let pool = &engine.pools()[0].0;
/// account_cpu_threads(Some(&format!("{}-{pool}-", engine.thread_name_prefix())));
/// // ... timed trace runs ...
/// account_cpu_threads(None);
/// ```
pub fn account_cpu_threads(prefix: Option<&str>) {
    *ACCOUNTED_POOL.lock() = prefix.map(str::to_owned);
}

/// Whether this system has the per-thread clocks that accounting reads;
/// without them runs carry no [`CpuUse`] even with accounting on.
pub fn cpu_accounting_supported() -> bool {
    CpuSnapshot::take("").is_some()
}

/// Where the threads of a timed region spent it, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuUse {
    /// On a CPU: the thread that started the clock (the pushing thread).
    pub pusher_ns: u64,
    /// On a CPU: the accounted pool's worker threads, all together.
    pub workers_ns: u64,
    /// Ready but waiting for a CPU: the pushing thread and the workers
    /// (0 where the system keeps no scheduler statistics).
    pub run_queue_ns: u64,
    /// The pool's worker threads that lived through the whole region.
    pub workers: usize,
    /// Times the pushing thread went to sleep (blocked) in the region.
    pub pusher_sleeps: u64,
    /// Times the workers went to sleep in the region, all together.
    pub worker_sleeps: u64,
    /// Sleeping workers the pushing thread woke in the region (of every
    /// engine; counted by the engine, not read from the system): the
    /// part of the workers' sleeps whose wake-up the pushes paid.
    pub pusher_wakes: u64,
}

impl CpuUse {
    /// The workers' CPU time over `elapsed_ns` × the number of workers:
    /// 1 when every worker was on a CPU all the time (running ops or
    /// looking for them), lower when they slept or waited for a CPU.
    pub fn worker_share(&self, elapsed_ns: f64) -> f64 {
        share(self.workers_ns, elapsed_ns * self.workers as f64)
    }

    /// The pushing thread's CPU time over `elapsed_ns`.
    pub fn pusher_share(&self, elapsed_ns: f64) -> f64 {
        share(self.pusher_ns, elapsed_ns)
    }

    /// The time the pushing thread and the workers spent ready without a
    /// CPU, over `elapsed_ns` × (workers + 1): the oversubscription of the
    /// run.
    pub fn run_queue_share(&self, elapsed_ns: f64) -> f64 {
        share(self.run_queue_ns, elapsed_ns * (self.workers + 1) as f64)
    }
}

fn share(ns: u64, of: f64) -> f64 {
    if of > 0.0 {
        ns as f64 / of
    } else {
        0.0
    }
}

/// One thread's counters at a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ThreadTimes {
    tid: u32,
    worker: bool,
    on_cpu_ns: u64,
    run_queue_ns: u64,
    sleeps: u64,
}

/// The counters of the calling thread and of a pool's workers at one
/// moment.
#[derive(Debug, Clone)]
pub(crate) struct CpuSnapshot {
    me: u32,
    threads: Vec<ThreadTimes>,
    /// Workers the calling thread had woken
    /// ([`crate::engine::woken_by_this_thread`]).
    my_wakes: u64,
}

impl CpuSnapshot {
    /// The counters now, if accounting is on (for the pool it names) and
    /// the system has them.
    pub(crate) fn take_if_accounting() -> Option<CpuSnapshot> {
        let pool = ACCOUNTED_POOL.lock().clone()?;
        CpuSnapshot::take(&pool)
    }

    /// The counters now, the threads of `pool` marked as workers; `None`
    /// where the system lacks the calling thread's. The calling thread's
    /// clock is read last, so that the reads are not part of its time
    /// after the snapshot.
    pub(crate) fn take(pool: &str) -> Option<CpuSnapshot> {
        let me = current_tid()?;
        let mut threads = Vec::new();
        for entry in fs::read_dir("/proc/self/task").ok()? {
            let Ok(entry) = entry else { continue };
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let is_worker = tid != me
                && fs::read_to_string(entry.path().join("comm"))
                    .is_ok_and(|name| is_pool_thread(name.trim_end_matches('\n'), pool));
            // A thread that ends between the listing and the reads is
            // left out: it is then in one snapshot at most.
            if let Some(t) = is_worker.then(|| read_thread(tid, true)).flatten() {
                threads.push(t);
            }
        }
        let my_wakes = crate::engine::woken_by_this_thread();
        threads.push(read_thread(me, false)?);
        Some(CpuSnapshot {
            me,
            threads,
            my_wakes,
        })
    }

    /// The counters now, of the threads `self` has (those gone since are
    /// left out). The calling thread's clock is read first, so that the
    /// reads are not part of its time before the snapshot.
    pub(crate) fn again(&self) -> Option<CpuSnapshot> {
        let mut threads = vec![read_thread(self.me, false)?];
        let my_wakes = crate::engine::woken_by_this_thread();
        threads.extend(
            self.threads
                .iter()
                .filter(|t| t.worker)
                .filter_map(|t| read_thread(t.tid, true)),
        );
        Some(CpuSnapshot {
            me: self.me,
            threads,
            my_wakes,
        })
    }

    /// What happened between `self` and the later snapshot `after`, over
    /// the threads that are in both.
    pub(crate) fn until(&self, after: &CpuSnapshot) -> CpuUse {
        let mut cpu = CpuUse {
            pusher_wakes: after.my_wakes.saturating_sub(self.my_wakes),
            ..CpuUse::default()
        };
        for a in &after.threads {
            let Some(b) = self.threads.iter().find(|b| b.tid == a.tid) else {
                continue;
            };
            let on = a.on_cpu_ns.saturating_sub(b.on_cpu_ns);
            let queued = a.run_queue_ns.saturating_sub(b.run_queue_ns);
            let sleeps = a.sleeps.saturating_sub(b.sleeps);
            if a.tid == self.me {
                cpu.pusher_ns += on;
                cpu.run_queue_ns += queued;
                cpu.pusher_sleeps += sleeps;
            } else if a.worker {
                cpu.workers_ns += on;
                cpu.run_queue_ns += queued;
                cpu.worker_sleeps += sleeps;
                cpu.workers += 1;
            }
        }
        cpu
    }
}

/// The calling thread's id, from `/proc/thread-self` (`<pid>/task/<tid>`).
fn current_tid() -> Option<u32> {
    let link = fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// The counters of thread `tid` of this process, its CPU clock read
/// first.
fn read_thread(tid: u32, worker: bool) -> Option<ThreadTimes> {
    let on_cpu_ns = thread_cpu_ns(tid)?;
    let run_queue_ns = fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| parse_schedstat(&s))
        .map_or(0, |(_, queued)| queued);
    let sleeps = fs::read_to_string(format!("/proc/self/task/{tid}/status"))
        .ok()
        .and_then(|s| parse_voluntary_switches(&s))
        .unwrap_or(0);
    Some(ThreadTimes {
        tid,
        worker,
        on_cpu_ns,
        run_queue_ns,
        sleeps,
    })
}

/// Whether a thread named `name` (as the kernel keeps it) is one of the
/// threads named `prefix` then an index (an engine names its workers
/// `<prefix>-<pool>-<index>`), the kernel keeping the first 15 bytes.
fn is_pool_thread(name: &str, prefix: &str) -> bool {
    if prefix.is_empty() {
        return false;
    }
    if prefix.len() >= NAME_BYTES {
        // The index is cut off: every thread of the pool has this name.
        return prefix.as_bytes().get(..NAME_BYTES) == Some(name.as_bytes());
    }
    name.strip_prefix(prefix)
        .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
}

/// `schedstat` holds three numbers: time on a CPU (ns), time waiting on a
/// run queue (ns), and the number of time slices.
fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace();
    let on_cpu = fields.next()?.parse().ok()?;
    let queued = fields.next()?.parse().ok()?;
    Some((on_cpu, queued))
}

/// The `voluntary_ctxt_switches:` count of a thread's `status` file: the
/// times it blocked.
fn parse_voluntary_switches(status: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        line.strip_prefix("voluntary_ctxt_switches:")
            .and_then(|n| n.trim().parse().ok())
    })
}

/// Thread `tid`'s CPU time up to now, from its CPU clock.
#[cfg(target_os = "linux")]
fn thread_cpu_ns(tid: u32) -> Option<u64> {
    // The clock id of a thread's CPU clock, as the kernel's posix CPU
    // timers define it and glibc's `pthread_getcpuclockid` builds it: the
    // complemented thread id shifted by three, with the per-thread flag
    // (4) and the scheduler's clock (2), which counts nanoseconds on a CPU.
    let id = i32::try_from(tid).ok()?;
    let clock: libc::clockid_t = (!id << 3) | 4 | 2;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call, and `clock_gettime` writes nothing else; an id that names no
    // thread of this process makes it fail with EINVAL, handled below.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u64::try_from(ts.tv_nsec).ok()?;
    Some(secs * 1_000_000_000 + nanos)
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu_ns(_tid: u32) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};

    use super::*;

    #[test]
    fn schedstat_lines_parse_and_bad_ones_do_not() {
        assert_eq!(parse_schedstat("861532 2044 2\n"), Some((861_532, 2_044)));
        assert_eq!(parse_schedstat("12"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn voluntary_switches_are_read_from_a_status_file() {
        let status = "Name:\tdepengine-cpu-0\nState:\tS (sleeping)\n\
                      voluntary_ctxt_switches:\t1234\n\
                      nonvoluntary_ctxt_switches:\t56\n";
        assert_eq!(parse_voluntary_switches(status), Some(1234));
        assert_eq!(
            parse_voluntary_switches("nonvoluntary_ctxt_switches:\t56\n"),
            None
        );
        assert_eq!(
            parse_voluntary_switches("voluntary_ctxt_switches:\tx\n"),
            None
        );
        assert_eq!(parse_voluntary_switches(""), None);
    }

    #[test]
    fn pool_threads_are_known_by_their_names_cut_to_fifteen_bytes() {
        let cpu = "depengine-cpu-";
        assert!(is_pool_thread("depengine-cpu-0", cpu));
        // "depengine-cpu-12" cut to 15 bytes.
        assert!(is_pool_thread("depengine-cpu-1", cpu));
        assert!(!is_pool_thread("depengine-cpu-", cpu));
        // "depengine-cpu-priority-0" and "depengine-cpu-copy-0", cut.
        assert!(!is_pool_thread("depengine-cpu-p", cpu));
        assert!(!is_pool_thread("depengine-cpu-c", cpu));
        assert!(is_pool_thread("depengine-cpu-p", "depengine-cpu-priority-"));
        assert!(!is_pool_thread(
            "depengine-cpu-c",
            "depengine-cpu-priority-"
        ));
        // "depengine-worker-3", cut: the pooled executor's workers.
        assert!(is_pool_thread("depengine-worke", "depengine-worker-"));
        assert!(!is_pool_thread("depengine", cpu));
        assert!(!is_pool_thread("depengine-cpu-0", ""));
        // Another engine's prefix: its own threads, not the default's.
        assert!(is_pool_thread("b-cpu-3", "b-cpu-"));
        assert!(!is_pool_thread("depengine-cpu-3", "b-cpu-"));
        assert!(!is_pool_thread("b-cpu-3", cpu));
    }

    #[test]
    fn shares_are_fractions_of_the_elapsed_time() {
        let cpu = CpuUse {
            pusher_ns: 50,
            workers_ns: 300,
            run_queue_ns: 40,
            workers: 2,
            ..CpuUse::default()
        };
        assert_eq!(cpu.pusher_share(100.0), 0.5);
        assert_eq!(cpu.worker_share(200.0), 0.75);
        assert_eq!(cpu.run_queue_share(100.0), 40.0 / 300.0);
        assert_eq!(CpuUse::default().worker_share(100.0), 0.0);
        assert_eq!(cpu.worker_share(0.0), 0.0);
    }

    /// Spawns a thread named `name` that spins until `stop`, and waits
    /// until it runs.
    fn spinner(name: &str, stop: &Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
        let started = Arc::new(Barrier::new(2));
        let handle = {
            let (stop, started) = (stop.clone(), started.clone());
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    started.wait();
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
                .unwrap()
        };
        started.wait();
        handle
    }

    /// Spins on this thread until the use since `before` meets `done`, and
    /// returns the last use read. Bounded, and never on the wall clock: a
    /// loaded machine gets there later, a broken count never.
    fn spin_until(before: &CpuSnapshot, done: impl Fn(&CpuUse) -> bool) -> CpuUse {
        let mut cpu = CpuUse::default();
        for _ in 0..10_000 {
            let mut x = 0u64;
            for i in 0..100_000u64 {
                x = std::hint::black_box(x ^ i);
            }
            cpu = before.until(&before.again().unwrap());
            if done(&cpu) {
                break;
            }
        }
        cpu
    }

    #[test]
    fn two_engines_in_one_process_are_told_apart_by_their_thread_names() {
        if !cpu_accounting_supported() {
            return;
        }
        let build = |prefix: &str, workers: usize| {
            crate::Engine::builder()
                .cpu_workers(workers)
                .thread_name_prefix(prefix)
                .build()
                .unwrap()
        };
        let (a, b) = (build("acct-a", 2), build("acct-b", 1));
        for (engine, workers) in [(&a, 2), (&b, 1)] {
            let prefix = format!("{}-{}-", engine.thread_name_prefix(), engine.pools()[0].0);
            // A worker names its thread as it starts: wait (bounded) until
            // every one has.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let mut found = 0;
            while std::time::Instant::now() < deadline {
                let before = CpuSnapshot::take(&prefix).unwrap();
                found = before.until(&before.again().unwrap()).workers;
                if found >= workers {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert_eq!(
                found, workers,
                "{prefix}: the other engine's threads counted?"
            );
        }
    }

    #[test]
    fn workers_are_the_pools_threads_alive_through_the_region() {
        if !cpu_accounting_supported() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let worker = spinner("depengine-t-0", &stop);
        let other = spinner("depengine-u-0", &stop);
        let before = CpuSnapshot::take("depengine-t-").unwrap();
        // Born after `before`: in one snapshot only, so not counted.
        let late = spinner("depengine-t-1", &stop);
        // Until both this thread and the worker have had CPU time.
        let cpu = spin_until(&before, |cpu| cpu.workers_ns > 0 && cpu.pusher_ns > 0);
        stop.store(true, Ordering::Relaxed);
        for t in [worker, other, late] {
            t.join().unwrap();
        }
        assert_eq!(cpu.workers, 1, "{cpu:?}");
        assert!(cpu.workers_ns > 0 && cpu.pusher_ns > 0, "{cpu:?}");
    }

    #[test]
    fn a_worker_that_blocks_counts_a_sleep() {
        if !cpu_accounting_supported() {
            return;
        }
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let ready = Arc::new(Barrier::new(2));
        let worker = {
            let ready = ready.clone();
            std::thread::Builder::new()
                .name("depengine-v-0".into())
                .spawn(move || {
                    ready.wait();
                    go_rx.recv().unwrap();
                    // Blocks until the test has seen this sleep counted.
                    done_rx.recv().unwrap();
                })
                .unwrap()
        };
        ready.wait();
        let before = CpuSnapshot::take("depengine-v-").unwrap();
        go_tx.send(()).unwrap();
        // The worker blocks in its second `recv` within microseconds.
        let cpu = spin_until(&before, |cpu| cpu.worker_sleeps > 0);
        done_tx.send(()).unwrap();
        worker.join().unwrap();
        assert_eq!(cpu.workers, 1, "{cpu:?}");
        assert!(
            cpu.worker_sleeps >= 1,
            "the blocked worker's sleep: {cpu:?}"
        );
    }

    #[test]
    fn the_wake_ups_a_push_pays_are_the_pushing_threads() {
        if !cpu_accounting_supported() {
            return;
        }
        // One worker that sleeps as soon as its back-off is spent.
        let engine = crate::Engine::builder()
            .cpu_workers(1)
            .linger(std::time::Duration::ZERO)
            .build()
            .unwrap();
        let pool = format!("{}-{}-", engine.thread_name_prefix(), engine.pools()[0].0);
        let v = engine.new_var();
        let push = || {
            engine
                .push(crate::OpDesc::new("w").writes(&v), |_| Ok(()))
                .unwrap();
            engine.wait_for_all().unwrap();
        };
        // Once it has run an op, the worker has started and named its
        // thread, so the snapshot finds it.
        push();
        let before = CpuSnapshot::take(&pool).unwrap();
        let cpu = before.until(&before.again().unwrap());
        assert!(cpu.workers >= 1, "the worker is found: {cpu:?}");
        assert_eq!(cpu.pusher_wakes, 0);
        let mut slept = 0;
        let mut cpu = CpuUse::default();
        // Bounded: each try waits for a sleep of the worker (or of another
        // test's worker of the same name, which only costs a try), then
        // pushes; a push that finds it asleep, with nobody searching,
        // wakes it.
        for _ in 0..100 {
            slept = spin_until(&before, |cpu| cpu.worker_sleeps > slept).worker_sleeps;
            push();
            cpu = before.until(&before.again().unwrap());
            if cpu.pusher_wakes > 0 {
                break;
            }
        }
        assert!(cpu.pusher_wakes > 0, "{cpu:?}");
        assert!(
            cpu.pusher_wakes < v.version(),
            "one wake-up per push since the first at most: {cpu:?}"
        );
    }

    #[test]
    fn a_thread_clock_counts_only_that_threads_cpu_time() {
        let Some(me) = current_tid() else { return };
        let Some(t0) = thread_cpu_ns(me) else { return };
        // A spinning thread gains CPU time; a blocked one gains none.
        // (Nothing here reads the wall clock.)
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x ^ i);
        }
        let t1 = thread_cpu_ns(me).unwrap();
        assert!(t1 > t0, "{t0} {t1}");
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || {
            tx.send(current_tid().unwrap()).unwrap();
            go_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        // Once blocked in `recv` its clock stands still, while this
        // thread's moves on: two reads across a spin agree (bounded: it
        // blocks within microseconds of its send, later on a loaded
        // machine). A spinning thread's reads never would.
        let mut still = false;
        for _ in 0..1_000 {
            let s0 = thread_cpu_ns(tid).unwrap();
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x ^ i);
            }
            if thread_cpu_ns(tid).unwrap() == s0 {
                still = true;
                break;
            }
        }
        go_tx.send(()).unwrap();
        sleeper.join().unwrap();
        assert!(still, "a blocked thread's CPU clock kept moving");
        assert!(thread_cpu_ns(me).unwrap() > t1);
        std::hint::black_box(x);
    }
}
