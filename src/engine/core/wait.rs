//! The blocking waits: `wait_for_all`, `wait_for_var` / `wait_to_write`
//! and the quiet wait of serial scopes and shutdown, with the spin that
//! comes before a waiter parks (`wait_spin.rs`) and the argument that no
//! wake-up of `wait_for_all` is lost (`Core::wait_idle`).

use super::{seqcst_order_for_loom, Core, CURRENT_ENGINE};
use crate::engine::error::{EngineError, Failure};
use crate::engine::op::{Body, OpDesc, Property};
use crate::engine::signal::Signal;
use crate::engine::var::Var;
use crate::sync::{Arc, Ordering};

impl Core {
    pub(crate) fn check_blocking(&self, call: &'static str) -> Result<(), EngineError> {
        if CURRENT_ENGINE.with(|c| c.get()) == self.id {
            return Err(EngineError::WaitFromWorker { call });
        }
        if self.in_batch() {
            return Err(EngineError::WaitInBatch { call });
        }
        Ok(())
    }

    /// True when the calling thread is running an op body of this engine.
    pub(crate) fn on_own_thread(&self) -> bool {
        CURRENT_ENGINE.with(|c| c.get()) == self.id
    }

    /// Waits for the var's pending writes (and reads, for `to_write`), then
    /// reports and clears its failure.
    pub(crate) fn wait_var(&self, var: &Var, to_write: bool) -> Result<(), EngineError> {
        let call = if to_write {
            "wait_to_write"
        } else {
            "wait_for_var"
        };
        self.check_blocking(call)?;
        // Deleted vars may still be waited on (to see the deletion finish).
        self.check_var(var, call, false)?;
        if !var.inner.is_idle(to_write) {
            let signal = Arc::new(Signal::new());
            let mut desc = OpDesc::new(call).property(Property::NoSkip);
            desc = if to_write {
                desc.writes(var)
            } else {
                desc.reads(var)
            };
            // Internal: the push neither refuses nor poisons a deleted var.
            self.push(desc, Body::Empty, Some(signal.clone()), true)?;
            let _ = signal.wait(|| self.cpu_to_spare());
        }
        match var.inner.take_failure(&self.failed_vars) {
            None => Ok(()),
            Some(f) => {
                self.mark_reported(&f);
                Err(EngineError::OpFailed(f))
            }
        }
    }

    pub(crate) fn mark_reported(&self, f: &Arc<Failure>) {
        let mut log = self.failures.lock();
        if let Some(e) = log.iter_mut().find(|e| Arc::ptr_eq(&e.failure, f)) {
            e.reported = true;
        }
    }

    /// True when, at one instant, every op pushed so far had completed.
    ///
    /// `completed` is summed before `pushed` is read. Its shards only grow,
    /// so the sum `c` is at most the total completed when the last shard was
    /// read (instant `t`); an op is counted as pushed before it can complete,
    /// so `pushed(t) >= completed(t) >= c`, and `p`, read later, is at least
    /// `pushed(t)`. Finding `c == p` therefore means `pushed(t) ==
    /// completed(t)`: nothing was pending at `t`.
    pub(super) fn idle(&self) -> bool {
        let c = self.completed.sum();
        c == self.pushed.load()
    }

    /// Blocks until no op is pending.
    ///
    /// No lost wake-up: the completer increments its shard, then (at once,
    /// or, on a pool worker, once the worker finds no op to run:
    /// `wake_if_idle`) reads `idle_waiters`, then checks `idle()` (all
    /// SeqCst); the waiter increments `idle_waiters`, then checks `idle()`
    /// under the lock. Either the completer sees the waiter and notifies
    /// under the lock (the waiter is then checking or already waiting), or
    /// the waiter's check comes after the increment and sees it. Of the
    /// last completions, the one whose increment comes last in the SeqCst
    /// order sees every other increment in its `idle()`, so some completer
    /// finds the engine idle.
    ///
    /// With `help`, the caller first runs queued ops itself (see
    /// `EngineBuilder::help_while_waiting`), and again whenever its spin
    /// finds more; an op it runs is completed, and looked after, at once,
    /// so the argument above is unchanged. A helper parks for at most
    /// `HELPER_NAP` at a time and then looks for queued ops again: a lost
    /// wake-up costs it one nap, never a hang.
    pub(super) fn wait_idle(&self, help: bool) -> Result<(), EngineError> {
        if self.idle() {
            return Ok(());
        }
        // Records this wait's length for the thread's next wait when it
        // goes out of scope (`wait_spin.rs`).
        #[cfg(not(loom))]
        let timer = crate::engine::wait_spin::WaitTimer::start();
        let mut first = true;
        loop {
            let ran = help && self.help() > 0;
            if ran && self.idle() {
                return Ok(());
            }
            // A helper back from a nap that found nothing goes straight
            // back to sleep: spinning after every nap would keep a core
            // busy through long ops.
            let spin = std::mem::replace(&mut first, false) || ran;
            #[cfg(not(loom))]
            if spin && self.spin_until_idle(help, &timer) {
                return Ok(());
            }
            // loom models no clock: no spin, straight to the park below.
            #[cfg(loom)]
            let _ = spin;
            self.idle_waiters.fetch_add(1, Ordering::SeqCst);
            seqcst_order_for_loom();
            let idle = {
                let mut g = self.idle_lock.lock();
                loop {
                    if self.idle() {
                        break true;
                    }
                    // A helper naps instead of sleeping until idle: ops
                    // may be queued again before the engine is idle, and
                    // nothing else would wake it for them.
                    #[cfg(not(loom))]
                    if help {
                        let _ = self.idle_cv.wait_for(&mut g, HELPER_NAP);
                        break self.idle();
                    }
                    self.idle_cv.wait(&mut g);
                }
            };
            self.idle_waiters.fetch_sub(1, Ordering::SeqCst);
            if idle {
                return Ok(());
            }
        }
    }

    /// As `Signal::wait`: looks again for as long as `timer` allows (the
    /// calling thread's spin, `wait_spin.rs`) before parking, rarely (each
    /// look reads every shard of the completion counter);
    /// a helper runs whatever it finds queued meanwhile. True when the
    /// engine became idle.
    #[cfg(not(loom))]
    fn spin_until_idle(&self, help: bool, timer: &crate::engine::wait_spin::WaitTimer) -> bool {
        let mut start = std::time::Instant::now();
        while timer.keep_spinning(start.elapsed(), || self.cpu_to_spare()) {
            if help && self.help() > 0 {
                if self.idle() {
                    return true;
                }
                start = std::time::Instant::now();
                continue;
            }
            for _ in 0..256 {
                std::hint::spin_loop();
            }
            if self.idle() {
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    /// True when fewer of this engine's workers are awake than the machine
    /// has CPUs: a caller that spins while it waits then takes no CPU a
    /// worker needs (`wait_spin.rs`).
    #[cfg(not(loom))]
    pub(crate) fn cpu_to_spare(&self) -> bool {
        self.executor().awake_workers() < crate::engine::wait_spin::cpus()
    }

    /// loom models no clock, and its waits do not spin.
    #[cfg(loom)]
    pub(crate) fn cpu_to_spare(&self) -> bool {
        false
    }

    /// Waits for every op pushed so far; reports the first failure no wait
    /// has reported yet, and leaves every var clean.
    pub(crate) fn wait_all(&self) -> Result<(), EngineError> {
        self.check_blocking("wait_for_all")?;
        self.wait_idle(self.config.wait_helps)?;
        let entries = std::mem::take(&mut *self.failures.lock());
        let mut first = None;
        let mut others = 0;
        for e in entries {
            for v in &e.tainted {
                v.clear_failure_if(&e.failure, &self.failed_vars);
            }
            if !e.reported {
                if first.is_none() {
                    first = Some(e.failure);
                } else {
                    others += 1;
                }
            }
        }
        match first {
            None => Ok(()),
            Some(f) if others == 0 => Err(EngineError::OpFailed(f)),
            Some(first) => Err(EngineError::OpsFailed {
                first,
                more: others,
            }),
        }
    }
}

/// How long a waiter that helps (`EngineBuilder::help_while_waiting`)
/// parks before it looks for queued ops again. Long enough that a waiter
/// with nothing to run costs little CPU, short enough that work released
/// while it sleeps waits for it at most this long.
#[cfg(not(loom))]
const HELPER_NAP: std::time::Duration = std::time::Duration::from_micros(200);

#[cfg(all(test, not(loom)))]
mod failure_count_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use crate::{Engine, EngineKind, OpDesc, OpError};

    /// The skip check reads an op's vars only while the engine's count of
    /// failed vars is above zero: the count must follow every way a var
    /// gains or loses a failure, or ops would run after a failure (count
    /// too low) or the check would never get cheap again (too high).
    #[test]
    fn the_failed_var_count_follows_failures_and_the_waits_that_report_them() {
        for kind in [EngineKind::Naive, EngineKind::Pooled, EngineKind::PerDevice] {
            let engine = Engine::builder().kind(kind).cpu_workers(2).build().unwrap();
            let count = || engine.core().failed_vars.count();
            let (a, b, c) = (engine.new_var(), engine.new_var(), engine.new_var());
            let ran = Arc::new(AtomicUsize::new(0));
            let run = |desc: OpDesc<'_>| {
                let r = ran.clone();
                engine
                    .push(desc, move |_| {
                        r.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                    .unwrap();
            };
            run(OpDesc::new("clean").writes(&a));
            engine.wait_for_all().unwrap();
            assert_eq!(count(), 0, "{kind:?}");
            engine
                .push(OpDesc::new("fails").writes(&a), |_| {
                    Err(OpError::msg("lost"))
                })
                .unwrap();
            // Skipped, and passes the failure on to b.
            run(OpDesc::new("skipped").reads(&a).writes(&b));
            engine.wait_for_var(&b).unwrap_err();
            assert_eq!(count(), 1, "{kind:?}: a still carries it, b's was taken");
            // A var without a failure runs while another var carries one.
            run(OpDesc::new("elsewhere").writes(&c));
            engine.wait_for_var(&c).unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), 2, "{kind:?}");
            run(OpDesc::new("skipped too").reads(&a));
            engine.wait_for_all().unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), 2, "{kind:?}");
            assert_eq!(count(), 0, "{kind:?}: wait_for_all left every var clean");
            run(OpDesc::new("runs again").reads(&a).writes(&b));
            engine.wait_for_all().unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), 3, "{kind:?}");
        }
    }
}

/// The blocking waits keep the calling thread's last wait, which sets the
/// length of its next spin (`wait_spin.rs`).
#[cfg(all(test, not(loom)))]
mod wait_spin_wiring {
    use crate::engine::completion::held_op;
    use crate::engine::wait_spin::{last_wait, SPIN_BASE};
    use crate::engine::Engine;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_wait_for_all_that_parked_records_at_least_its_spin() {
        let engine = Engine::builder().cpu_workers(1).build().unwrap();
        let x = engine.new_var();
        let done = held_op(&engine, &x);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                assert_eq!(last_wait(), None);
                engine.wait_for_all().unwrap();
                last_wait()
            });
            // The op is completed only once the waiter has parked, which
            // it does after its whole spin: the wait it records is at
            // least that long, whatever the machine's speed.
            // (A waiter that failed before its wait ends the loop too.)
            while engine.core().idle_waiters.load(Ordering::SeqCst) == 0 && !waiter.is_finished() {
                std::thread::yield_now();
            }
            done.done();
            let recorded = waiter
                .join()
                .unwrap()
                .expect("wait_for_all records its wait");
            assert!(recorded >= SPIN_BASE, "{recorded:?}");
        });
    }

    #[test]
    fn a_signal_wait_records_even_when_answered_at_once() {
        std::thread::spawn(|| {
            let signal = crate::engine::signal::Signal::new();
            signal.set(Ok(()));
            assert_eq!(last_wait(), None);
            signal.wait(|| true).unwrap();
            assert!(last_wait().is_some());
        })
        .join()
        .unwrap();
    }
}
