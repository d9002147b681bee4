//! What is pending, per var: the report a user reads when a program hangs.

use std::fmt;

use crate::sync::Arc;

use super::var::{Access, VarId, VarInner};

/// One op waiting in a var's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOp {
    /// Push sequence number.
    pub seq: u64,
    /// Op name.
    pub name: String,
    /// True when the op writes this var, false when it reads it.
    pub writes_this_var: bool,
    /// Every var the op reads.
    pub reads: Vec<VarId>,
    /// Every var the op writes.
    pub writes: Vec<VarId>,
}

/// The state of one var with pending work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarReport {
    /// The var.
    pub var: VarId,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// Completed writes.
    pub version: u64,
    /// Reads holding the var (ready or running).
    pub running_reads: usize,
    /// The write holding the var (ready or running), by name and sequence.
    /// Writes queued back to back are granted as a *run*; while one runs,
    /// this names the run's last write (the ones before it in the run go
    /// first, in push order, and are not listed under `queued`).
    pub running_write: Option<(u64, String)>,
    /// Ops queued behind them, in push order.
    pub queued: Vec<PendingOp>,
    /// The failure the var carries, if any.
    pub failure: Option<String>,
}

/// Every var with pending work or a failure, from [`crate::Engine::pending_ops`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PendingReport {
    /// Ops pushed and not completed, engine-wide.
    pub pending_ops: usize,
    /// Per var.
    pub vars: Vec<VarReport>,
}

impl PendingReport {
    pub(crate) fn collect(pending_ops: usize, vars: &[Arc<VarInner>]) -> PendingReport {
        let mut report = PendingReport {
            pending_ops,
            vars: Vec::new(),
        };
        for v in vars {
            let mut s = v.hot.state.lock();
            // A write leaving without the lock would not be live below.
            v.close_fast_write_locked(&mut s);
            let failure = v.done.failure.lock().as_ref().map(|f| f.to_string());
            let running_reads = v.fast_reads_running(&s) as usize;
            if running_reads == 0 && s.writer.is_none() && s.queue.is_empty() && failure.is_none() {
                continue;
            }
            // SAFETY (for every `get` below): ops named by a var's state are
            // live while the var's lock is held: an op completes only after
            // taking the lock of each of its vars, including this one.
            let running_write = s.writer.map(|op| {
                // SAFETY: see above.
                let b = unsafe { op.get() };
                (b.seq, b.name.to_string())
            });
            let queued = s
                .queue
                .iter()
                .map(|(op, access)| {
                    // SAFETY: see above.
                    let b = unsafe { op.get() };
                    PendingOp {
                        seq: b.seq,
                        name: b.name.to_string(),
                        writes_this_var: access == Access::Write,
                        reads: b.reads().iter().map(|r| r.id).collect(),
                        writes: b.writes().iter().map(|w| w.id).collect(),
                    }
                })
                .collect();
            report.vars.push(VarReport {
                var: v.id,
                name: v.name.as_deref().map(str::to_string),
                version: v.done.version.load(crate::sync::Ordering::Acquire),
                running_reads,
                running_write,
                queued,
                failure,
            });
        }
        report.vars.sort_by_key(|r| r.var);
        report
    }

    /// The report of one var, if it has pending work.
    pub fn var(&self, var: VarId) -> Option<&VarReport> {
        self.vars.iter().find(|r| r.var == var)
    }
}

impl fmt::Display for PendingReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} op(s) pending", self.pending_ops)?;
        for v in &self.vars {
            let name = v
                .name
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            write!(f, "{}{name} v{}: ", v.var, v.version)?;
            match &v.running_write {
                Some((seq, op)) => write!(f, "held for writing by `{op}` (#{seq})")?,
                None if v.running_reads > 0 => {
                    write!(f, "held for reading by {} op(s)", v.running_reads)?
                }
                None => write!(f, "free")?,
            }
            if let Some(fail) = &v.failure {
                write!(f, "; failed: {fail}")?;
            }
            writeln!(f)?;
            for op in &v.queued {
                let list = |ids: &[VarId]| {
                    ids.iter()
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                writeln!(
                    f,
                    "  waiting: `{}` (#{}) to {} this var; reads [{}], writes [{}]",
                    op.name,
                    op.seq,
                    if op.writes_this_var { "write" } else { "read" },
                    list(&op.reads),
                    list(&op.writes)
                )?;
            }
        }
        Ok(())
    }
}
