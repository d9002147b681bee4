//! Appending ops to a var and completing them: the per-var rules (see the
//! module docs of `var`), runs of writes, and the var's self-reference.

use crate::sync::{Arc, Ordering, TryMutexGuard};

use super::super::error::Failure;
use super::super::op::{prefetch_block, Intent, OpPtr};
use super::super::ready::{GrantWindow, ReadyList};
use super::{Access, Appended, FailedVars, VarInner, VarState};

/// How many granted reads' blocks are asked for ahead of the one being
/// granted: enough to overlap their misses, few enough to leave the
/// core's fill buffers to the rest.
const GRANT_AHEAD: usize = 4;

/// How a completing op leaves a var it wrote
/// ([`VarInner::complete_write`]).
#[derive(Clone, Copy)]
pub(crate) struct WriteExit {
    /// The completing op.
    pub(crate) op: OpPtr,
    /// The op names this var alone: a fast write of it leaves the var idle
    /// (`fast_write.rs`).
    pub(crate) one_var: bool,
    /// The next write of the op's run on this var (granted without the
    /// lock), if any.
    pub(crate) run_next: Option<OpPtr>,
}

/// The ops of a run, in push order.
type Run = smallvec::SmallVec<[OpPtr; MAX_RUN]>;

/// The reads a completed write releases, granted after its unlock: up to
/// 128 without a heap buffer (a `rwmix` round releases 63, `fan` 100).
type Reads = smallvec::SmallVec<[OpPtr; 128]>;

/// Most writes taken from a var's queue as one run (see
/// [`VarInner::complete_write`]): enough to amortise the lock, few enough
/// that a run's last op (the var's recorded writer) stays close to the op
/// actually running.
const MAX_RUN: usize = 32;

impl VarState {
    /// No op holds the var or waits for it, apart from reads granted
    /// through an open fast-read epoch.
    #[inline]
    pub(super) fn is_idle(&self) -> bool {
        self.writer.is_none() && self.queue.is_empty() && !self.draining
    }
}

impl VarInner {
    /// Appends a read of a single-var op: without the lock when a fast-read
    /// epoch is open.
    pub(crate) fn append_read(&self, op: OpPtr) -> Appended {
        if self.try_fast_read() {
            return Appended {
                granted: true,
                after_delete: false,
            };
        }
        self.append_read_locked(&mut self.hot.state.lock(), op)
    }

    pub(super) fn append_read_locked(&self, s: &mut VarState, op: OpPtr) -> Appended {
        let after_delete = s.deleted;
        self.check_self_ref(s);
        self.close_fast_write_locked(s);
        let granted = s.writer.is_none() && s.queue.is_empty();
        if granted {
            self.grant_fast_read_locked(s);
        } else {
            s.queue.push_back(op, Access::Read, &self.queues);
        }
        Appended {
            granted,
            after_delete,
        }
    }

    /// Appends the write of a single-var op; `deletes` marks the var
    /// deleted for every later append. Granted at once, the op is ready, so
    /// it is granted as a fast write (`fast_write.rs`).
    pub(crate) fn append_write(&self, op: OpPtr, deletes: bool) -> Appended {
        // A deletion takes the lock, where later appends learn of it.
        if !deletes {
            if let Some(a) = self.try_take_idle_for_write(op) {
                return a;
            }
        }
        let mut s = self.hot.state.lock();
        let a = self.append_write_locked(&mut s, op, deletes);
        if a.granted {
            self.make_fast_write_locked(&mut s, op, true);
        }
        a
    }

    pub(super) fn append_write_locked(
        &self,
        s: &mut VarState,
        op: OpPtr,
        deletes: bool,
    ) -> Appended {
        let after_delete = s.deleted;
        s.deleted |= deletes;
        self.check_self_ref(s);
        self.close_fast_locked(s);
        let granted = s.is_idle();
        if granted {
            s.writer = Some(op);
        } else {
            s.queue.push_back(op, Access::Write, &self.queues);
        }
        Appended {
            granted,
            after_delete,
        }
    }

    /// An append needs the var's reference to itself, which keeps it
    /// alive for the ops' `VarPtr`s (see `slot.rs`). The var holds it from
    /// its creation (`VarInner::new`) until it is orphaned and idle, and
    /// only a handle's holder appends, so it is always there.
    #[inline]
    fn check_self_ref(&self, s: &VarState) {
        debug_assert!(
            s.self_ref && !s.orphaned,
            "append to {} after its last handle",
            self.id
        );
    }

    /// After the last handle went away: true (and the self-reference is the
    /// caller's to drop, after unlocking) once nothing is pending.
    #[inline]
    fn release_if_orphaned(&self, s: &mut VarState) -> bool {
        // No fast write is granted once orphaned (`make_fast_write_locked`), and
        // `orphan` closed the one that ran: its completion locks the var.
        debug_assert!(!s.orphaned || !self.fast_write_running());
        if s.orphaned && s.self_ref && s.is_idle() && !self.fast_open() {
            s.self_ref = false;
            true
        } else {
            false
        }
    }

    /// The last `Var` handle was dropped: no op can be appended any more.
    /// Closes the fast-read epoch so the var learns when its last read ends,
    /// and drops the self-reference if nothing is pending.
    pub(super) fn orphan(&self) {
        let release = {
            let mut s = self.hot.state.lock();
            s.orphaned = true;
            // Closes a fast write too: its completion then takes the lock
            // and can drop the self-reference.
            self.close_fast_locked(&mut s);
            self.release_if_orphaned(&mut s)
        };
        if release {
            // SAFETY: taken out of the state just above; the handle being
            // dropped still holds its own count, so `self` outlives this.
            unsafe { Arc::decrement_strong_count(self as *const VarInner) };
        }
    }

    /// Completes a read. Every read is counted through the fast-read
    /// counter (`fast_read.rs`), so this takes no lock unless it is the
    /// last read of a closed epoch. Returns `true` when the caller must
    /// drop the var's self-reference (see
    /// [`super::VarPtr::release_self_ref`]).
    ///
    /// The write it starts, if any, is granted through `window` when one
    /// is given (a completion of many vars, `ready.rs`).
    #[must_use]
    #[inline]
    pub(crate) fn complete_read(
        &self,
        ready: &mut ReadyList,
        window: Option<&mut GrantWindow>,
    ) -> bool {
        if !self.count_out_fast_read() {
            return false;
        }
        let mut s = self.hot.state.lock();
        self.reset_fast_done_locked(&mut s);
        let mut run = Run::new();
        self.take_head_writes_if_free(&mut s, &mut run);
        self.unlock_and_start(s, &[], &run, ready, window)
    }

    /// After a read left: the queued writes' turn, if no read or write
    /// holds the var any more.
    fn take_head_writes_if_free(&self, s: &mut VarState, run: &mut Run) {
        // A fast write is granted only with nothing queued or reading, and
        // every append closes it: none runs while reads complete.
        debug_assert!(!self.fast_write_running());
        if s.writer.is_none() && !s.draining {
            self.take_head_writes(s, run);
        }
    }

    /// Ends a completion: checks whether the var's self-reference is to be
    /// dropped, releases the lock, then grants the reads and starts the
    /// run taken under it. Returns as [`VarInner::complete_read`].
    ///
    /// Why after the unlock: each grant is a locked decrement on the op's
    /// block, which the pushing thread wrote long ago and which is often
    /// out of this core's caches. With 63 reads released at once
    /// (`rwmix`), holding the lock through those misses kept the pusher,
    /// appending the next read, spinning on the lock until it yielded its
    /// core. The reads are out of the queue and counted in, so a later
    /// append finds them running (an open epoch grants it; a write waits
    /// for their drain), and none can complete, so drain, before its grant
    /// here. (A run: see [`VarInner::start_run`].)
    fn unlock_and_start(
        &self,
        mut s: TryMutexGuard<'_, VarState>,
        reads: &[OpPtr],
        run: &Run,
        ready: &mut ReadyList,
        window: Option<&mut GrantWindow>,
    ) -> bool {
        let release = self.release_if_orphaned(&mut s);
        drop(s);
        // Each grant is a locked decrement, which no later load passes: the
        // misses on the blocks would come one after another. Asked for a
        // few ahead, they overlap.
        if reads.len() > 1 {
            for &op in reads.iter().take(GRANT_AHEAD) {
                prefetch_block(op.0.as_ptr(), Intent::Write);
            }
        }
        for (k, &op) in reads.iter().enumerate() {
            if let Some(&later) = reads.get(k + GRANT_AHEAD) {
                prefetch_block(later.0.as_ptr(), Intent::Write);
            }
            ready.grant(op);
        }
        self.start_run(run, ready, window);
        release
    }

    /// Completes the granted write. `failure` (if any) is recorded on the var
    /// before the next op is granted, so that op sees it (rule 5). Returns as
    /// [`VarInner::complete_read`].
    ///
    /// # Runs
    ///
    /// When the next queued op is a write, the writes queued right behind it
    /// are taken out of the queue with it as a *run*: each is linked to the
    /// next through its slot's `link`, and the var's `writer` names the
    /// last. A write of a run that is not the last grants the next one
    /// itself (`run_next`), without taking the var's lock. Why: in a chain
    /// of writes the pushing thread appends to the var for every op; if the
    /// completing worker also locked it for every op, the var's line would
    /// move between their cores twice per op. Order is unchanged: the run is
    /// the queue's head, taken in push order, and anything appended later
    /// queues behind its last op.
    #[must_use]
    #[inline]
    pub(crate) fn complete_write(
        &self,
        exit: WriteExit,
        failure: Option<&Arc<Failure>>,
        failed_vars: &FailedVars,
        bump_version: bool,
        ready: &mut ReadyList,
    ) -> bool {
        // Both before the var passes on, with or without the lock, so the
        // next op on it sees them.
        if bump_version {
            self.bump_version();
        }
        if let Some(f) = failure {
            self.record_failure(f, failed_vars);
        }
        if let Some(next) = exit.run_next {
            ready.grant(next);
            return false;
        }
        if self.try_leave_fast_write(exit.op, exit.one_var) {
            return false;
        }
        let mut s = self.hot.state.lock();
        debug_assert!(
            s.writer.is_some(),
            "write completed on {} with no writer",
            self.id
        );
        s.writer = None;
        let mut run = Run::new();
        let mut reads = Reads::new();
        match s.queue.front() {
            Some((_, Access::Write)) => self.take_head_writes(&mut s, &mut run),
            Some((_, Access::Read)) => {
                while let Some((op, Access::Read)) = s.queue.front() {
                    s.queue.pop_front();
                    reads.push(op);
                }
                // Counted through the fast-read counter, as every read is:
                // their completions then take no lock (the last of a closed
                // epoch aside), where each used to lock the var to count
                // itself out of `readers`. Granted only after the unlock,
                // none has completed: a write queued behind them waits for
                // their drain.
                self.count_in_granted_reads_locked(&mut s, reads.len() as u64);
            }
            None => {}
        }
        self.unlock_and_start(s, &reads, &run, ready, None)
    }

    /// Only the write holding the var bumps it, so no read-modify-write (a
    /// locked instruction) is needed.
    #[inline]
    pub(crate) fn bump_version(&self) {
        let v = self.done.version.load(Ordering::Relaxed);
        self.done.version.store(v + 1, Ordering::Release);
    }

    /// With no op holding the var: takes the write at the queue's head,
    /// with the writes right behind it, as a run (see
    /// [`VarInner::complete_write`]). The var's `writer` names the run's
    /// last op from here on; the caller starts the run with
    /// [`VarInner::start_run`] after releasing the lock.
    fn take_head_writes(&self, s: &mut VarState, run: &mut Run) {
        debug_assert!(run.is_empty());
        while run.len() < MAX_RUN {
            match s.queue.front() {
                Some((op, Access::Write)) => {
                    s.queue.pop_front();
                    run.push(op);
                }
                _ => break,
            }
        }
        if let Some(&last) = run.last() {
            s.writer = Some(last);
        }
    }

    /// Links the ops of a run taken under the lock and grants its first.
    ///
    /// Why outside the lock: linking touches every op's block, which was
    /// written long ago by the pushing thread and is often out of this
    /// core's caches; holding the var's lock through those misses made the
    /// pusher wait for it. Nobody else can reach the run's ops meanwhile:
    /// they left the queue under the lock, and the var names the run's last
    /// op as its writer, so later appends queue behind the run.
    fn start_run(&self, run: &[OpPtr], ready: &mut ReadyList, window: Option<&mut GrantWindow>) {
        let Some(&first) = run.first() else {
            return;
        };
        for &op in &run[1..] {
            prefetch_block(op.0.as_ptr(), Intent::Read);
        }
        for pair in run.windows(2) {
            self.link_run(pair[0], pair[1]);
        }
        match window {
            Some(w) => w.grant(first, ready),
            None => ready.grant(first),
        }
    }

    /// Makes `next` the op after `op` in a run on this var.
    fn link_run(&self, op: OpPtr, next: OpPtr) {
        // SAFETY: `op` left the queue in a run that is not started yet, so it
        // is live and nobody reads its slot for this var until the grant.
        let b = unsafe { op.get() };
        let me = self as *const VarInner as usize;
        let slot = b
            .writes()
            .iter()
            .find(|v| v.var.addr() == me)
            .expect("a queued write names the var in its writes");
        // SAFETY: before the run's first grant (see above).
        unsafe { slot.set_run_next(next) };
    }

    /// True when no write is granted or queued (and, for `and_reads`, no
    /// read either): a wait on the var can return at once.
    pub(crate) fn is_idle(&self, and_reads: bool) -> bool {
        let s = self.hot.state.lock();
        s.writer.is_none()
            && !self.fast_write_running()
            && s.queue.is_empty()
            && (!and_reads || (!s.draining && !self.fast_open()))
    }
}
