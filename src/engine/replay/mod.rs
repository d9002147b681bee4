//! Capture a graph of ops once, replay it many times: [`Replay`].
//! `run.rs` runs one replay, `graph.rs` infers its edges.

pub(crate) mod graph;
pub(crate) mod helpers;
pub(crate) mod run;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use crate::sync::unmodelled::{AtomicU64, Ordering};
use crate::sync::Arc;

use super::core::Core;
use super::op::{Body, Context, OpDesc, OpResult, Property};
use super::var::{Var, VarId};
use super::{Engine, EngineError, OpError};
use graph::{infer_preds, Edges};
pub use helpers::ReplayHelpers;
use run::{Graph, Node, NodeBody, Run};

static NEXT_BUILDER: AtomicU64 = AtomicU64::new(0);

/// Collects the nodes of a [`Replay`]: ops described as for
/// [`Engine::push`], in push order. Made by [`Engine::replay_builder`].
pub struct ReplayBuilder {
    core: Arc<Core>,
    name: Cow<'static, str>,
    nodes: Vec<Node>,
    /// Numbers builders, so a private var names its replay.
    id: u64,
    index: HashMap<VarId, u32>,
    /// Every var a node uses, by dense index: an engine var, or `None`
    /// for a private one.
    vars: Vec<Option<Var>>,
    written: Vec<bool>,
    /// [`graph::MAX_NODES`]; lower in a test.
    max_nodes: usize,
    helpers: ReplayHelpers,
    /// [`ReplayBuilder::push_with`]'s list of a node's vars, reused.
    scratch: Vec<u32>,
}

impl ReplayBuilder {
    /// Adds a node: `desc` names it and declares the vars it reads and
    /// writes, as for a push; `body` runs once per replay.
    ///
    /// # Errors
    ///
    /// [`EngineError::ForeignVar`] or [`EngineError::DeletedVar`] for a var
    /// that cannot be used, as a push would report;
    /// [`EngineError::NotReplayable`] when `desc` sets a context other than
    /// `cpu(0)`, a property other than `Normal`, or a priority: a replay's
    /// nodes all run on the CPU pool, in the graph's order;
    /// [`EngineError::ReplayFull`] when the builder already holds 2^31
    /// nodes.
    pub fn push<F>(&mut self, desc: OpDesc<'_>, body: F) -> Result<(), EngineError>
    where
        F: Fn() -> OpResult + Send + Sync + 'static,
    {
        self.push_with(desc, PrivateAccess::new(), body)
    }

    /// [`ReplayBuilder::push`] for a node that also uses private vars of
    /// this replay ([`ReplayBuilder::private_var`]).
    ///
    /// # Errors
    ///
    /// As [`ReplayBuilder::push`]; [`EngineError::NotReplayable`] also for
    /// a private var of another replay.
    pub fn push_with<F>(
        &mut self,
        desc: OpDesc<'_>,
        private: PrivateAccess<'_>,
        body: F,
    ) -> Result<(), EngineError>
    where
        F: Fn() -> OpResult + Send + Sync + 'static,
    {
        let foreign = private
            .reads
            .iter()
            .chain(private.writes)
            .any(|p| p.replay != self.id);
        let what = if desc.context != Context::Cpu(0) {
            Some("a context other than cpu(0)")
        } else if desc.property != Property::Normal {
            Some("a property other than Normal")
        } else if desc.priority != 0 {
            Some("a priority")
        } else if foreign {
            Some("a private var of another replay")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(EngineError::NotReplayable {
                op: desc.name.to_string(),
                replay: self.name.to_string(),
                what,
            });
        }
        if self.nodes.len() >= self.max_nodes {
            return Err(EngineError::ReplayFull {
                op: desc.name.to_string(),
                replay: self.name.to_string(),
                max: self.max_nodes,
            });
        }
        for v in desc.writes.iter().chain(desc.reads.iter()) {
            self.core.check_var_pub(v, &desc.name)?;
        }
        // The node's writes, then its reads, in one buffer kept from node
        // to node: two fresh lists per node were a third of a capture's
        // allocations.
        let mut vars = std::mem::take(&mut self.scratch);
        vars.clear();
        for v in desc.writes.iter() {
            let i = self.index_of(v, true);
            vars.push(i);
        }
        vars.extend(private.writes.iter().map(|p| p.index));
        vars.sort_unstable();
        vars.dedup();
        let nwrites = vars.len();
        for v in desc.reads.iter() {
            let i = self.index_of(v, false);
            vars.push(i);
        }
        vars.extend(private.reads.iter().map(|p| p.index));
        vars[nwrites..].sort_unstable();
        // Each read once, and none the node writes too.
        let mut kept = nwrites;
        for j in nwrites..vars.len() {
            let i = vars[j];
            let repeat = kept > nwrites && vars[kept - 1] == i;
            if !repeat && vars[..nwrites].binary_search(&i).is_err() {
                vars[kept] = i;
                kept += 1;
            }
        }
        vars.truncate(kept);
        self.nodes.push(Node {
            name: desc.name,
            body: NodeBody::new_node(body),
            vars: vars.as_slice().into(),
            nwrites,
        });
        self.scratch = vars;
        Ok(())
    }

    /// A var that orders this replay's nodes among themselves and nothing
    /// else: the replay's op does not hold it, so it costs a replay nothing
    /// at its push. It is no engine [`Var`], so nothing outside the replay
    /// can name it. For data only the replay's nodes touch (a step's
    /// activations, say). Runs of the replay still follow one another: a
    /// replay with private vars writes one engine var of its own (see
    /// [`Replay::writes`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine::{Engine, OpDesc, PrivateAccess};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    ///
    /// let engine = Engine::builder().cpu_workers(2).build()?;
    /// let out = engine.new_var();
    /// let (act, res) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    /// let mut step = engine.replay_builder("step");
    /// let t = step.private_var(); // the activation, seen by no one else
    /// let a = act.clone();
    /// step.push_with(OpDesc::new("produce"), PrivateAccess::new().writes(&[t]), move || {
    ///     a.store(7, Ordering::SeqCst);
    ///     Ok(())
    /// })?;
    /// let (a, r) = (act.clone(), res.clone());
    /// step.push_with(
    ///     OpDesc::new("consume").writes(&out),
    ///     PrivateAccess::new().reads(&[t]),
    ///     move || {
    ///         r.store(6 * a.load(Ordering::SeqCst), Ordering::SeqCst);
    ///         Ok(())
    ///     },
    /// )?;
    /// let step = step.build();
    /// // `out`, and the replay's own var that keeps its runs in order.
    /// assert_eq!(step.writes().len(), 2);
    /// engine.push_replay(&step)?;
    /// engine.wait_for_var(&out)?;
    /// assert_eq!(res.load(Ordering::SeqCst), 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn private_var(&mut self) -> PrivateVar {
        let index = self.vars.len() as u32;
        self.vars.push(None);
        self.written.push(false);
        PrivateVar {
            replay: self.id,
            index,
        }
    }

    fn index_of(&mut self, v: &Var, write: bool) -> u32 {
        let next = self.vars.len() as u32;
        let i = *self.index.entry(v.id()).or_insert(next);
        if i == next {
            self.vars.push(Some(v.clone()));
            self.written.push(false);
        }
        self.written[i as usize] |= write;
        i
    }

    /// How many of the CPU pool's workers the replay's runs may use
    /// ([`ReplayHelpers`]; by default [`ReplayHelpers::Adaptive`]).
    pub fn helpers(&mut self, helpers: ReplayHelpers) -> &mut Self {
        self.helpers = helpers;
        self
    }

    /// Nodes added so far.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when no node was added.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Infers the graph from the nodes' vars, in the order they were added,
    /// and drops the edges two others imply ([`Replay::edges`]). The
    /// pruning reads, for each node, the predecessor lists of its
    /// predecessors (at most 4,096 entries a node): about 0.6 s for a
    /// million nodes that each follow twenty (the `randsum` workload),
    /// once, against about 28 ms saved on every run of it at one worker.
    pub fn build(self) -> Replay {
        let vars = self.vars.len();
        let preds = infer_preds(
            vars,
            self.nodes
                .iter()
                .map(|n| (&n.vars[n.nwrites..], &n.vars[..n.nwrites])),
        );
        let edges = Edges::from_preds(&preds);
        let n_edges = preds.iter().map(Vec::len).sum();
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        let mut private = false;
        for (v, w) in self.vars.into_iter().zip(self.written) {
            match v {
                Some(v) if w => writes.push(v),
                Some(v) => reads.push(v),
                None => private = true,
            }
        }
        if private {
            // Private vars order the runs of this replay too: two pushes
            // of it must not run their nodes on the same private data at
            // once. A var of the replay's own, written by its op, keeps
            // its runs one after another.
            let name = format!("{} (private vars)", self.name);
            writes.push(self.core.new_var(Some(name.into_boxed_str())));
        }
        Replay {
            helper_name: format!("{} (replay helper)", self.name).into(),
            graph: Arc::new(Graph::new(self.name, self.nodes, edges, vars, self.helpers)),
            reads,
            writes,
            n_edges,
        }
    }
}

/// A var private to one replay: see [`ReplayBuilder::private_var`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivateVar {
    replay: u64,
    index: u32,
}

/// The private vars a node reads and writes
/// ([`ReplayBuilder::push_with`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PrivateAccess<'a> {
    reads: &'a [PrivateVar],
    writes: &'a [PrivateVar],
}

impl<'a> PrivateAccess<'a> {
    /// No private var.
    pub fn new() -> Self {
        PrivateAccess::default()
    }

    /// Private vars the node reads (replaces any earlier list).
    pub fn reads(mut self, vars: &'a [PrivateVar]) -> Self {
        self.reads = vars;
        self
    }

    /// Private vars the node writes (replaces any earlier list).
    pub fn writes(mut self, vars: &'a [PrivateVar]) -> Self {
        self.writes = vars;
        self
    }
}

impl fmt::Debug for ReplayBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayBuilder")
            .field("name", &self.name)
            .field("nodes", &self.nodes.len())
            .field("vars", &self.vars.len())
            .finish()
    }
}

/// A graph of ops captured once, pushed whole with [`Engine::push_replay`]
/// as many times as needed.
///
/// A training step pushes the same ops on the same vars every iteration,
/// and the engine infers the same graph from them every time: each push
/// takes the locks of its vars and queues behind what was pushed before.
/// A [`Replay`] does that inference once, when it is built, from the
/// nodes' reads and writes in push order (the edges are exactly the
/// orderings the var queues would enforce), and keeps the graph as
/// successor lists.
///
/// [`Engine::push_replay`] then pushes the whole graph as one op that
/// reads every var the nodes only read and writes every var they write,
/// so it is ordered with the engine's other ops as one op would be. When
/// that op starts, the nodes run on the CPU pool's workers: a node's
/// completion counts down its successors, and the thread that makes a
/// successor ready runs it next (`run.rs` has the protocol). A node costs
/// a countdown and a call, not a push.
///
/// The replay's op still appends to and releases every engine var the
/// nodes use, once per replay. Data that only the replay's nodes touch
/// can be ordered by private vars instead
/// ([`ReplayBuilder::private_var`], [`ReplayBuilder::push_with`]), which
/// the replay's op does not hold and nothing outside the replay can name.
///
/// Failures follow the engine's rule: a node that fails or panics taints
/// the vars it writes, the later nodes that use them are skipped, and the
/// replay's op fails with the first failure, which the engine then reports
/// on every var the replay writes.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, OpDesc};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// let engine = Engine::builder().cpu_workers(2).build()?;
/// let (x, y) = (engine.new_var(), engine.new_var());
/// let (vx, vy) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
///
/// let mut step = engine.replay_builder("step");
/// let w = vx.clone();
/// step.push(OpDesc::new("x += 1").writes(&x), move || {
///     w.fetch_add(1, Ordering::SeqCst);
///     Ok(())
/// })?;
/// let (r, w) = (vx.clone(), vy.clone());
/// step.push(OpDesc::new("y = 10 x").reads(&x).writes(&y), move || {
///     w.store(10 * r.load(Ordering::SeqCst), Ordering::SeqCst);
///     Ok(())
/// })?;
/// let step = step.build();
/// assert_eq!((step.len(), step.edges()), (2, 1));
///
/// for _ in 0..3 {
///     engine.push_replay(&step)?;
/// }
/// engine.wait_for_var(&y)?;
/// assert_eq!(vy.load(Ordering::SeqCst), 30);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Replay {
    graph: Arc<Graph>,
    /// The name of the engine ops that run the nodes.
    helper_name: Cow<'static, str>,
    reads: Vec<Var>,
    writes: Vec<Var>,
    n_edges: usize,
}

impl Replay {
    /// The name given to [`Engine::replay_builder`].
    pub fn name(&self) -> &str {
        &self.graph.name
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.graph.len()
    }

    /// True when the replay has no node.
    pub fn is_empty(&self) -> bool {
        self.graph.len() == 0
    }

    /// How many of the CPU pool's workers its runs may use
    /// ([`ReplayBuilder::helpers`]).
    pub fn helpers(&self) -> ReplayHelpers {
        self.graph.helpers.setting()
    }

    /// Number of edges kept between the nodes: those the var queues
    /// would enforce, less each edge from a node that another predecessor
    /// of the same node follows directly (the ordering stays, through that
    /// predecessor).
    ///
    /// ```
    /// use depengine::{Engine, OpDesc};
    ///
    /// let engine = Engine::builder().build()?;
    /// let (a, b) = (engine.new_var(), engine.new_var());
    /// let mut g = engine.replay_builder("g");
    /// g.push(OpDesc::new("a").writes(&a), || Ok(()))?;
    /// g.push(OpDesc::new("b = a").reads(&a).writes(&b), || Ok(()))?;
    /// // Follows "a" through "b = a": one edge, not two.
    /// g.push(OpDesc::new("a + b").reads(&[&a, &b]), || Ok(()))?;
    /// assert_eq!(g.build().edges(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn edges(&self) -> usize {
        self.n_edges
    }

    /// The vars some node writes, and (when the replay has private vars)
    /// the var of its own that keeps its runs one after another: the
    /// replay's op writes them all.
    pub fn writes(&self) -> &[Var] {
        &self.writes
    }

    /// The vars the nodes only read: the replay's op reads them.
    pub fn reads(&self) -> &[Var] {
        &self.reads
    }
}

impl fmt::Debug for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("name", &self.graph.name)
            .field("nodes", &self.graph.len())
            .field("edges", &self.n_edges)
            .field("reads", &self.reads.len())
            .field("writes", &self.writes.len())
            .finish()
    }
}

impl Engine {
    /// Starts capturing a graph named `name` (see [`Replay`]).
    pub fn replay_builder(&self, name: impl Into<Cow<'static, str>>) -> ReplayBuilder {
        ReplayBuilder {
            core: self.core().arc(),
            id: NEXT_BUILDER.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            nodes: Vec::new(),
            index: HashMap::new(),
            vars: Vec::new(),
            written: Vec::new(),
            max_nodes: graph::MAX_NODES,
            helpers: ReplayHelpers::default(),
            scratch: Vec::new(),
        }
    }

    /// Pushes one run of `replay`: one op that reads the vars its nodes only
    /// read and writes those they write. When it starts, the nodes run on
    /// the CPU pool in the captured graph's order (on as many of its
    /// workers as [`Replay::helpers`] lets them); it completes when the
    /// last node has, and fails with the first node that failed.
    ///
    /// # Errors
    ///
    /// As [`Engine::push`] for the replay's op (a var deleted since the
    /// replay was built, an engine shut down); a replay built on another
    /// engine fails with [`EngineError::ForeignVar`] when it has any var.
    pub fn push_replay(&self, replay: &Replay) -> Result<(), EngineError> {
        let graph = replay.graph.clone();
        let core = self.core().arc();
        let workers = core.replay_helpers();
        let helper_name = replay.helper_name.clone();
        let body = Body::asynchronous(move |_, completion| {
            let spawn_core = core.clone();
            let spawn: run::Spawn = Box::new(move |run: Arc<Run>| {
                let help = Body::sync(move |_| {
                    run.help();
                    Ok(())
                });
                spawn_core
                    .push(OpDesc::new(helper_name.clone()), help, None, false)
                    .is_ok()
            });
            let finish: run::Finish = Box::new(move |outcome| match outcome {
                Ok(()) => completion.done(),
                Err(why) => completion.fail(OpError::msg(why)),
            });
            Run::new(graph, workers, spawn, finish).start();
        });
        let desc = OpDesc::new(replay.graph.name.clone())
            .reads(&replay.reads)
            .writes(&replay.writes);
        self.core().push(desc, body, None, false)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{Engine, EngineError, OpDesc};

    #[test]
    fn a_full_builder_refuses_the_next_node_and_keeps_the_others() {
        let engine = Engine::builder().build().unwrap();
        let mut b = engine.replay_builder("small");
        b.max_nodes = 2;
        b.push(OpDesc::new("a"), || Ok(())).unwrap();
        b.push(OpDesc::new("b"), || Ok(())).unwrap();
        let err = b.push(OpDesc::new("c"), || Ok(())).unwrap_err();
        assert!(
            matches!(err, EngineError::ReplayFull { max: 2, .. }),
            "{err}"
        );
        let msg = err.to_string();
        assert!(msg.contains("`c`") && msg.contains("`small`"), "{msg}");
        let replay = b.build();
        assert_eq!(replay.len(), 2);
        engine.push_replay(&replay).unwrap();
        engine.wait_for_all().unwrap();
    }

    /// A node's vars: each written one once, then each read one once,
    /// less those it writes too, whatever order and repeats they were
    /// named in, engine and private vars alike; and the list one node
    /// leaves behind does not leak into the next.
    #[test]
    fn a_node_names_each_var_once_its_writes_first() {
        let engine = Engine::builder().build().unwrap();
        let (a, b, c) = (engine.new_var(), engine.new_var(), engine.new_var());
        let mut builder = engine.replay_builder("vars");
        let p = builder.private_var();
        // Dense indices in order of first use, writes before reads: p,
        // made first, is 0, then c 1, b 2, a 3.
        let (rd, wr) = ([&a, &a, &b, &c, &a], [&c, &b, &b]);
        let (twice, once) = ([p, p], [p]);
        let access = super::PrivateAccess::new().reads(&twice);
        builder
            .push_with(OpDesc::new("n").reads(&rd).writes(&wr), access, || Ok(()))
            .unwrap();
        let access = super::PrivateAccess::new().writes(&once);
        builder
            .push_with(OpDesc::new("m").reads(&[&b]), access, || Ok(()))
            .unwrap();
        let vars = |i: usize| {
            let n = &builder.nodes[i];
            (n.vars[..n.nwrites].to_vec(), n.vars[n.nwrites..].to_vec())
        };
        assert_eq!(vars(0), (vec![1, 2], vec![0, 3]));
        assert_eq!(vars(1), (vec![0], vec![2]));
    }
}
