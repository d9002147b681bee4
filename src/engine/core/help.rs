//! A thread that is not one of the engine's workers running queued ops:
//! a pusher whose workers fall behind (`help_while_pushing`) and a waiter
//! with nothing else to do (`help_while_waiting`). Both take ops from the
//! CPU pool's shared queue (`Pool::take_for_helper`) and run them as a
//! worker would, through `Core::execute`.

use super::Core;

impl Core {
    /// `help_while_pushing`: when the CPU workers have a long backlog, or
    /// the pusher has run far ahead of them, runs queued ops on this
    /// (pushing) thread until the backlog is half as long and no more than
    /// half the window is pending.
    ///
    /// The window keeps a pusher whose ops become ready a few at a time
    /// (a wavefront, a fan) close to the running ops: the blocks and var
    /// lines it writes are then still in cache when the completions grant
    /// them, instead of having been written hundreds of thousands of ops
    /// before. It never makes the push wait: with nothing queued the push
    /// returns, however many ops are pending, so an op that only the
    /// pushing thread would complete later (an async op) cannot hang it.
    ///
    /// The ops their completions make ready are queued, not run next as a
    /// worker's next slot would: a slot here measured no better on a 1,414²
    /// wavefront with 1 µs bodies, and would keep the pusher running ops
    /// down chains instead of pushing.
    pub(super) fn help_with_backlog(&self, seq: u64) {
        let Some(pool) = self.executor().helper_pool() else {
            return;
        };
        let window = HELP_PUSH_WINDOW_PER_WORKER * pool.workers();
        // The window's check sums the completion counter's shards, lines
        // the workers write: it runs on fewer pushes than the backlog's.
        if pool.queued_per_worker() <= HELP_PUSH_BACKLOG
            && !(seq % HELP_PUSH_WINDOW_EVERY == 0 && self.pending() > window)
        {
            return;
        }
        while pool.queued_per_worker() > HELP_PUSH_BACKLOG / 2 || self.pending() > window / 2 {
            let Some(op) = pool.take_for_helper() else {
                return;
            };
            let ready = self.execute(op, None);
            if !ready.is_empty() {
                self.dispatch_all(ready, None);
            }
        }
    }

    /// Runs queued ordinary ops on the calling thread, which is not one of
    /// this engine's, until none is queued; returns how many it ran.
    pub(super) fn help(&self) -> usize {
        self.help_up_to(usize::MAX)
    }

    /// [`Core::help`], for at most `most` ops.
    pub(crate) fn help_up_to(&self, most: usize) -> usize {
        let mut ran = 0;
        let Some(pool) = self.executor().helper_pool() else {
            return 0;
        };
        while ran < most {
            let Some(op) = pool.take_for_helper() else {
                break;
            };
            // Counted as running the pool's ops while it has some: a
            // searching worker then lingers for what its completions
            // make ready, as for another worker's (`linger.rs`). Op
            // bodies' panics are caught in `execute`, so the count is
            // always taken back.
            if ran == 0 {
                pool.start_helping();
            }
            let ready = self.execute(op, None);
            if !ready.is_empty() {
                self.dispatch_all(ready, None);
            }
            ran += 1;
        }
        if ran > 0 {
            pool.stop_helping();
        }
        ran
    }
}

/// `help_while_pushing` looks at the backlog once every this many pushes:
/// reading the queue's length touches a line the workers write.
pub(super) const HELP_PUSH_EVERY: u64 = 16;

/// Ready ops per CPU worker in the shared queue above which a push helps
/// (`help_while_pushing`); it helps until half as many are left. libgomp
/// starts running tasks at their creation past the same 64 per thread.
/// On the 2-core sandbox, `random` with 10 µs bodies (one worker and the
/// helping pusher) gained as much with 16 as with 256, and nothing with
/// 1,024: what counts is that the backlog stays short.
const HELP_PUSH_BACKLOG: usize = 64;

/// `help_while_pushing`: pending ops (pushed, not yet completed) per CPU
/// worker beyond which a push helps even with a short backlog. 256 and
/// 1024 measured alike, 4096 and 16,384 slower, on a 1000 × 1000
/// wavefront and `fan` with 1 µs bodies, one worker and the pushing
/// thread (BENCHMARKS-HISTORY.md, "The pushing thread kept near the
/// running ops").
const HELP_PUSH_WINDOW_PER_WORKER: usize = 1024;

/// Pushes between two checks of that window (a multiple of
/// `HELP_PUSH_EVERY`, whose pushes are the only ones that look).
const HELP_PUSH_WINDOW_EVERY: u64 = 64;
