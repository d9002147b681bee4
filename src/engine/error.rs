//! Errors of the engine: misuse of the API ([`EngineError`]), failures of ops
//! ([`OpError`], [`Failure`]) and bad configuration ([`BuildError`]).

use std::borrow::Cow;
use std::fmt;

use crate::sync::Arc;

use super::{Context, VarId};

/// An error returned by an op body, or handed to a completion.
///
/// Anything that implements [`std::error::Error`] converts into it with `?`;
/// [`OpError::msg`] makes one from a plain message.
///
/// # Examples
///
/// ```
/// use depengine::OpError;
/// fn parse(s: &str) -> Result<u32, OpError> {
///     Ok(s.parse::<u32>()?)
/// }
/// assert!(parse("x").is_err());
/// assert_eq!(OpError::msg("disk full").to_string(), "disk full");
/// ```
pub struct OpError {
    message: Cow<'static, str>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl OpError {
    /// An error with this message.
    pub fn msg(message: impl Into<Cow<'static, str>>) -> Self {
        OpError {
            message: message.into(),
            source: None,
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The underlying error, if the op error was made from one.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for OpError {
    fn from(err: E) -> Self {
        OpError {
            message: Cow::Owned(err.to_string()),
            source: Some(Box::new(err)),
        }
    }
}

impl fmt::Debug for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpError")
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why an op failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureKind {
    /// The body returned an error (or handed one to its completion).
    Error,
    /// The body panicked; the message is the panic payload when it was a string.
    Panic,
    /// An async op's completion handle was dropped without being called.
    CompletionDropped,
    /// The op used a var that had been deleted by an earlier op.
    DeletedVar,
}

/// A failed op, as reported by waits: which op, why, and the message.
///
/// Ops that were skipped because they read or wrote a var this failure
/// reached carry the same `Failure` (rule 5 of the engine contract).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Name of the op that failed.
    pub op: String,
    /// Engine-wide sequence number of the failed op (push order).
    pub op_seq: u64,
    /// What kind of failure it was.
    pub kind: FailureKind,
    /// The error message.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            FailureKind::Error => "failed",
            FailureKind::Panic => "panicked",
            FailureKind::CompletionDropped => "dropped its completion handle",
            FailureKind::DeletedVar => "used a deleted var",
        };
        write!(
            f,
            "op `{}` (#{}) {what}: {}",
            self.op, self.op_seq, self.message
        )
    }
}

/// Misuse of the engine, or the failure of an op reported by a wait.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// An op (or an op it depended on) failed; returned by waits and `push_sync`.
    #[error("{0}")]
    OpFailed(Arc<Failure>),
    /// Several ops failed independently before `wait_for_all` returned: the
    /// first failure, and how many more there were (each is recorded on the
    /// vars it reached until this report clears them).
    #[error("{first} (and {more} more failed op(s))")]
    OpsFailed {
        /// The first failure, in the order failures happened.
        first: Arc<Failure>,
        /// How many other failures were reported with it.
        more: usize,
    },
    /// The var was created by another engine.
    #[error("{var} belongs to another engine (engine #{var_engine}, not #{engine}); create vars with the engine you push to")]
    ForeignVar {
        /// The var.
        var: VarId,
        /// The engine that created it.
        var_engine: u64,
        /// The engine it was used with.
        engine: u64,
    },
    /// The var was deleted by `delete_var` before this use.
    #[error("{var} was deleted; it cannot be used by op `{op}` (create a new var instead)")]
    DeletedVar {
        /// The var.
        var: VarId,
        /// The op (or call) that tried to use it.
        op: String,
    },
    /// The engine was shut down; nothing more can be pushed.
    #[error("the engine has been shut down; op `{op}` was not pushed")]
    ShutDown {
        /// The op that was not pushed.
        op: String,
    },
    /// A blocking call was made from inside an op running on this engine,
    /// which would wait for itself.
    #[error("`{call}` was called from inside an op of the same engine, which would deadlock; push a dependent op instead of waiting")]
    WaitFromWorker {
        /// The blocking call.
        call: &'static str,
    },
    /// A blocking call was made while this thread had a batch open on the
    /// same engine: the batch's ready ops start only when it closes.
    #[error("`{call}` was called inside `Engine::batch` on the same engine, which would deadlock: the batch's ops start when its closure returns; wait after it")]
    WaitInBatch {
        /// The blocking call.
        call: &'static str,
    },
    /// The op's context names a device the engine does not have.
    #[error("op `{op}` targets {context}, but the engine has {gpus} GPU device(s); configure more with EngineBuilder::gpus")]
    UnknownContext {
        /// The op.
        op: String,
        /// Its context.
        context: Context,
        /// Number of simulated GPUs the engine has.
        gpus: u32,
    },
    /// A worker thread could not be started.
    #[error("could not start engine worker thread `{thread}`: {message}")]
    Spawn {
        /// Thread name.
        thread: String,
        /// The OS error.
        message: String,
    },
    /// An op given to a [`ReplayBuilder`](crate::ReplayBuilder) sets what a
    /// replay's nodes cannot have.
    #[error("op `{op}` of replay `{replay}` sets {what}; a replay's nodes all run on the CPU pool at priority 0: push this op on its own instead")]
    NotReplayable {
        /// The op.
        op: String,
        /// The replay it was given to.
        replay: String,
        /// What it sets.
        what: &'static str,
    },
    /// A [`ReplayBuilder`](crate::ReplayBuilder) already holds as many
    /// nodes as a replay can.
    #[error("op `{op}` would be node {max} of replay `{replay}`, which holds at most {max} nodes: split the graph into several replays")]
    ReplayFull {
        /// The op.
        op: String,
        /// The replay it was given to.
        replay: String,
        /// The most nodes a replay holds.
        max: usize,
    },
    /// [`Engine::serial`](crate::Engine::serial) was asked of a handle
    /// that other clones share: one of them could push or wait from
    /// another thread while the scope runs ops outside the var protocol.
    #[error("`Engine::serial` needs the only handle to engine #{engine}, but {handles} handles share it: drop the other clones first, or push through `Engine::push`")]
    SharedEngine {
        /// The engine.
        engine: u64,
        /// How many handles share it, the caller's included.
        handles: usize,
    },
}

impl EngineError {
    /// The op failure, if this error reports one.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            EngineError::OpFailed(f) => Some(f),
            EngineError::OpsFailed { first, .. } => Some(first),
            _ => None,
        }
    }
}

/// A bad engine configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// An environment variable holds a value that cannot be used.
    #[error("environment variable {var}={value:?} is invalid: expected {expected}")]
    BadEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What would be accepted.
        expected: &'static str,
    },
    /// A worker thread could not be started.
    #[error("could not start engine worker thread `{thread}`: {message}")]
    Spawn {
        /// Thread name.
        thread: String,
        /// The OS error.
        message: String,
    },
    /// A builder setting needs something this system does not offer.
    #[error("engine setting `{setting}` cannot be used here: {message}; build without it")]
    Unavailable {
        /// The setting.
        setting: &'static str,
        /// What is missing, as the system reported it.
        message: String,
    },
    /// A builder setting is out of range.
    #[error("engine setting `{setting}` = {value} is invalid: {why}")]
    BadSetting {
        /// The setting.
        setting: &'static str,
        /// Its value.
        value: String,
        /// Why it is rejected.
        why: &'static str,
    },
}
