//! Training-memory profiles: the in-memory model and the loader of the
//! four-file profiler format (`io_info.json`, `resize_info.json`,
//! `tensor_size.json`, `cost_info.json`).
//!
//! Loading converts every string key to a number, gives each tensor a dense
//! index, and checks the profile for consistency. Every error names the file
//! and the entry at fault and says what to fix.
//!
//! What the loader accepts, where the format leaves room:
//!
//! - `io_info.json` entries must carry `"id"` equal to their position; an
//!   op may have several outputs; its `"temporary"` field is read and
//!   ignored (workspaces come from `resize_info.json`);
//! - an input that no op produces is outside memory (never allocated); a
//!   tensor may be read only after its producer, released once, and never
//!   read after its release;
//! - every workspace allocated by an op in `resize_info.json` must be freed
//!   by the same op (allocations happen before compute, frees after);
//! - `tensor_size.json` must size every output and workspace; extra keys
//!   are allowed; `cost_info.json` must time every op, and only those;
//! - the forward pass ends before `forward_ops`, given by the caller or else
//!   the first op whose name contains `backward` (MXNet names its gradient
//!   ops `_backward_*`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The key of a tensor in a profile: a plain output id (`"7"`) or a
/// temporary workspace (`"7:0"`: the first workspace of op 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TensorKey {
    /// An op output (or graph input) id.
    Id(u64),
    /// Temporary workspace `index` of op `op`.
    Workspace {
        /// The op that declares the workspace.
        op: u64,
        /// Its number within the op.
        index: u64,
    },
}

impl TensorKey {
    /// Parses `"7"` or `"7:0"`; `None` when the text is neither.
    pub fn parse(text: &str) -> Option<Self> {
        match text.split_once(':') {
            None => text.trim().parse().ok().map(TensorKey::Id),
            Some((op, index)) => Some(TensorKey::Workspace {
                op: op.trim().parse().ok()?,
                index: index.trim().parse().ok()?,
            }),
        }
    }
}

impl fmt::Display for TensorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TensorKey::Id(id) => write!(f, "{id}"),
            TensorKey::Workspace { op, index } => write!(f, "{op}:{index}"),
        }
    }
}

/// One tensor of a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Its key in the profile files.
    pub key: TensorKey,
    /// Size in bytes.
    pub size: u64,
    /// The op that allocates it (output or workspace), `None` for an input
    /// that no op produces (it is never counted in memory).
    pub producer: Option<usize>,
}

/// One op of a profile, in execution order.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Name, for reports.
    pub name: String,
    /// Tensors read (dense indices into [`Profile::tensors`]).
    pub inputs: Vec<usize>,
    /// Tensors allocated before compute.
    pub outputs: Vec<usize>,
    /// Workspaces allocated before compute, in order.
    pub temp_allocs: Vec<usize>,
    /// Workspaces freed after compute, in order.
    pub temp_frees: Vec<usize>,
    /// Tensors freed after the workspaces.
    pub release: Vec<usize>,
    /// Compute time in milliseconds.
    pub time_ms: f64,
}

/// A whole training profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Model name, for reports.
    pub name: String,
    /// Every tensor; ops refer to them by index.
    pub tensors: Vec<Tensor>,
    /// Ops in execution order.
    pub ops: Vec<Op>,
    /// Index of the first backward op (the forward pass is ops
    /// `0..forward_ops`; the seed's `fp_thres` is `forward_ops - 1`).
    pub forward_ops: usize,
}

/// A feature map: a tensor produced in the forward pass and read in the
/// backward pass, the candidate for swapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureMap {
    /// Dense tensor index.
    pub tensor: usize,
    /// Size in bytes.
    pub size: u64,
    /// The op that produces it.
    pub producer: usize,
    /// The last forward op that reads it (the producer when none does).
    pub last_forward_use: usize,
    /// The first backward op that reads it.
    pub first_backward_use: usize,
}

/// A profile could not be loaded: names the file, the entry and the problem.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A file could not be read.
    #[error("cannot read profile file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not JSON of the expected shape.
    #[error("profile file {path} is malformed at line {line}, column {column}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What serde found.
        message: String,
    },
    /// A JSON key is not a tensor id / op index.
    #[error("profile file {path}: key \"{key}\" is not {expected}; fix or remove that entry")]
    BadKey {
        /// The file.
        path: PathBuf,
        /// The key as written.
        key: String,
        /// What a key must look like there.
        expected: &'static str,
    },
    /// An entry is missing, duplicated or contradicts another.
    #[error("profile file {path}, {entry}: {problem}")]
    Inconsistent {
        /// The file.
        path: PathBuf,
        /// Which entry (`entry 3 (op "conv1")`, `key "7:0"`, ...).
        entry: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// Nothing says where the forward pass ends.
    #[error(
        "profile {path}: cannot tell where the backward pass starts (no op name contains \
         \"backward\"); give the index of the first backward op (--forward-ops N)"
    )]
    NoBoundary {
        /// The io_info file.
        path: PathBuf,
    },
    /// A graph file could not be read.
    #[error(transparent)]
    Graph(#[from] crate::graph::format::GraphFileError),
}

/// File names of a profile folder, used to name the file in errors.
#[derive(Debug, Clone)]
struct Origin {
    io_info: PathBuf,
    resize_info: PathBuf,
    tensor_size: PathBuf,
    cost_info: PathBuf,
}

#[derive(Deserialize)]
struct IoEntry {
    #[serde(default)]
    op: String,
    id: u64,
    #[serde(default)]
    inputs: Vec<u64>,
    #[serde(default)]
    outputs: Vec<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    temporary: serde_json::Value,
    #[serde(default)]
    release: Vec<u64>,
}

fn read(path: &Path) -> Result<String, ProfileError> {
    std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn parse<T: for<'de> Deserialize<'de>>(text: &str, path: &Path) -> Result<T, ProfileError> {
    serde_json::from_str(text).map_err(|e| ProfileError::Parse {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// Finds `<stem>.json` in `dir`, or else the one file named `*.<stem>.json`
/// (the seed's `model.batch.stem.json` naming).
fn find(dir: &Path, stem: &str) -> PathBuf {
    let plain = dir.join(format!("{stem}.json"));
    if plain.exists() {
        return plain;
    }
    let suffix = format!(".{stem}.json");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.ends_with(&suffix))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    if found.len() == 1 {
        found.remove(0)
    } else {
        plain
    }
}

fn entry_name(i: usize, op: &str) -> String {
    if op.is_empty() {
        format!("entry {i}")
    } else {
        format!("entry {i} (op \"{op}\")")
    }
}

fn inconsistent(path: &Path, entry: String, problem: impl Into<String>) -> ProfileError {
    ProfileError::Inconsistent {
        path: path.to_path_buf(),
        entry,
        problem: problem.into(),
    }
}

impl Profile {
    /// Loads a profile folder holding `io_info.json`, `resize_info.json`,
    /// `tensor_size.json` and `cost_info.json` (or one `*.io_info.json`,
    /// ... each, as the seed's profiler names them).
    ///
    /// `forward_ops` is the index of the first backward op; when `None`, it
    /// is the first op whose name contains `backward` (any case).
    ///
    /// # Errors
    ///
    /// [`ProfileError`] naming the file and entry when a file is missing,
    /// malformed, or inconsistent with the others.
    pub fn load_dir(
        dir: impl AsRef<Path>,
        forward_ops: Option<usize>,
    ) -> Result<Self, ProfileError> {
        let dir = dir.as_ref();
        let origin = Origin {
            io_info: find(dir, "io_info"),
            resize_info: find(dir, "resize_info"),
            tensor_size: find(dir, "tensor_size"),
            cost_info: find(dir, "cost_info"),
        };
        let io: Vec<IoEntry> = parse(&read(&origin.io_info)?, &origin.io_info)?;
        let resize: Vec<Vec<(String, String)>> =
            parse(&read(&origin.resize_info)?, &origin.resize_info)?;
        let sizes: BTreeMap<String, u64> = parse(&read(&origin.tensor_size)?, &origin.tensor_size)?;
        let costs: BTreeMap<String, f64> = parse(&read(&origin.cost_info)?, &origin.cost_info)?;
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("profile")
            .to_string();
        build(name, &origin, io, resize, sizes, costs, forward_ops)
    }

    /// The feature maps: tensors produced by a forward op (and of non-zero
    /// size) that some backward op reads, ordered by tensor index.
    pub fn feature_maps(&self) -> Vec<FeatureMap> {
        let n = self.tensors.len();
        let mut last_fwd = vec![None::<usize>; n];
        let mut first_bwd = vec![None::<usize>; n];
        for (i, op) in self.ops.iter().enumerate() {
            for &t in &op.inputs {
                if i < self.forward_ops {
                    last_fwd[t] = Some(i);
                } else if first_bwd[t].is_none() {
                    first_bwd[t] = Some(i);
                }
            }
        }
        self.tensors
            .iter()
            .enumerate()
            .filter_map(|(t, info)| {
                let producer = info.producer?;
                let first_backward_use = first_bwd[t]?;
                (producer < self.forward_ops && info.size > 0).then(|| FeatureMap {
                    tensor: t,
                    size: info.size,
                    producer,
                    last_forward_use: last_fwd[t].unwrap_or(producer).max(producer),
                    first_backward_use,
                })
            })
            .collect()
    }

    /// The dense index of the tensor with this key, if the profile has one.
    pub fn tensor_index(&self, key: TensorKey) -> Option<usize> {
        self.tensors.iter().position(|t| t.key == key)
    }

    /// Sum of the op times in milliseconds.
    pub fn compute_ms(&self) -> f64 {
        self.ops.iter().map(|o| o.time_ms).sum()
    }
}

/// Builds and checks a profile from the parsed files.
fn build(
    name: String,
    origin: &Origin,
    io: Vec<IoEntry>,
    resize: Vec<Vec<(String, String)>>,
    sizes: BTreeMap<String, u64>,
    costs: BTreeMap<String, f64>,
    forward_ops: Option<usize>,
) -> Result<Profile, ProfileError> {
    let n_ops = io.len();
    if resize.len() != n_ops {
        return Err(inconsistent(
            &origin.resize_info,
            format!("the top-level list ({} entries)", resize.len()),
            format!(
                "io_info.json has {n_ops} ops; give exactly one list of workspace actions per op"
            ),
        ));
    }
    // Sizes by key.
    let mut size_of: HashMap<TensorKey, u64> = HashMap::with_capacity(sizes.len());
    for (k, v) in &sizes {
        let key = TensorKey::parse(k).ok_or_else(|| ProfileError::BadKey {
            path: origin.tensor_size.clone(),
            key: k.clone(),
            expected: "a tensor id (\"7\") or a workspace id (\"7:0\")",
        })?;
        size_of.insert(key, *v);
    }
    // Costs by op.
    let mut cost = vec![None::<f64>; n_ops];
    for (k, v) in &costs {
        let i: usize = k.trim().parse().map_err(|_| ProfileError::BadKey {
            path: origin.cost_info.clone(),
            key: k.clone(),
            expected: "an op index",
        })?;
        if i >= n_ops {
            return Err(inconsistent(
                &origin.cost_info,
                format!("key \"{k}\""),
                format!("there are only {n_ops} ops in io_info.json; remove this entry"),
            ));
        }
        if !v.is_finite() || *v < 0.0 {
            return Err(inconsistent(
                &origin.cost_info,
                format!("key \"{k}\""),
                format!("time {v} ms is not a non-negative number of milliseconds"),
            ));
        }
        cost[i] = Some(*v);
    }

    let mut b = Builder::default();
    let mut ops = Vec::with_capacity(n_ops);
    for (i, (entry, actions)) in io.into_iter().zip(resize).enumerate() {
        let here = entry_name(i, &entry.op);
        if entry.id != i as u64 {
            return Err(inconsistent(
                &origin.io_info,
                here,
                format!("\"id\" is {} but the entry is at position {i}; ids must be 0, 1, 2, ... in order", entry.id),
            ));
        }
        let time_ms = cost[i].ok_or_else(|| {
            inconsistent(
                &origin.cost_info,
                format!("op {i} (\"{}\")", entry.op),
                "no time for this op; add \"{i}\": milliseconds".replace("{i}", &i.to_string()),
            )
        })?;
        let mut op = Op {
            name: entry.op.clone(),
            inputs: entry
                .inputs
                .iter()
                .map(|&id| b.tensor(TensorKey::Id(id)))
                .collect(),
            outputs: Vec::with_capacity(entry.outputs.len()),
            temp_allocs: Vec::new(),
            temp_frees: Vec::new(),
            release: Vec::new(),
            time_ms,
        };
        for &id in &entry.outputs {
            let key = TensorKey::Id(id);
            let t = b.tensor(key);
            if let Some(p) = b.tensors[t].producer {
                return Err(inconsistent(
                    &origin.io_info,
                    here,
                    format!(
                        "output {id} is already produced by op {p}; each tensor has one producer"
                    ),
                ));
            }
            b.tensors[t].producer = Some(i);
            b.tensors[t].size = *size_of.get(&key).ok_or_else(|| {
                inconsistent(
                    &origin.tensor_size,
                    format!("key \"{key}\""),
                    format!(
                        "missing: output of op {i} (\"{}\") in io_info.json; add its size in bytes",
                        entry.op
                    ),
                )
            })?;
            op.outputs.push(t);
        }
        for (a, (action, key_text)) in actions.iter().enumerate() {
            let where_ = format!("entry {i}, action {a} ([\"{action}\", \"{key_text}\"])");
            let key = TensorKey::parse(key_text).ok_or_else(|| {
                inconsistent(
                    &origin.resize_info,
                    where_.clone(),
                    "the tensor is not a workspace id like \"7:0\"",
                )
            })?;
            match action.as_str() {
                "alloc" => {
                    let t = b.tensor(key);
                    if b.tensors[t].producer.is_some() {
                        return Err(inconsistent(
                            &origin.resize_info,
                            where_,
                            "this workspace is allocated twice; use a new id for each workspace",
                        ));
                    }
                    b.tensors[t].producer = Some(i);
                    b.tensors[t].size = *size_of.get(&key).ok_or_else(|| {
                        inconsistent(
                            &origin.tensor_size,
                            format!("key \"{key}\""),
                            format!("missing: workspace of op {i} in resize_info.json; add its size in bytes"),
                        )
                    })?;
                    op.temp_allocs.push(t);
                }
                "free" => {
                    let t = b.index.get(&key).copied();
                    match t {
                        Some(t) if op.temp_allocs.contains(&t) && !op.temp_frees.contains(&t) => {
                            op.temp_frees.push(t)
                        }
                        _ => return Err(inconsistent(
                            &origin.resize_info,
                            where_,
                            "frees a workspace that this op did not allocate (or frees it twice)",
                        )),
                    }
                }
                other => {
                    return Err(inconsistent(
                        &origin.resize_info,
                        where_,
                        format!("unknown action \"{other}\"; use \"alloc\" or \"free\""),
                    ))
                }
            }
        }
        if let Some(&t) = op.temp_allocs.iter().find(|t| !op.temp_frees.contains(t)) {
            return Err(inconsistent(
                &origin.resize_info,
                format!("entry {i}"),
                format!(
                    "workspace \"{}\" is allocated but never freed; add [\"free\", \"{}\"]",
                    b.tensors[t].key, b.tensors[t].key
                ),
            ));
        }
        for &id in &entry.release {
            let key = TensorKey::Id(id);
            let t = b.index.get(&key).copied();
            match t {
                Some(t) if b.tensors[t].producer.is_some() => op.release.push(t),
                _ => {
                    return Err(inconsistent(
                        &origin.io_info,
                        here,
                        format!("releases tensor {id}, which no op up to this one produces"),
                    ))
                }
            }
        }
        ops.push(op);
    }
    let tensors = b.tensors;
    check_releases(&tensors, &ops, &origin.io_info)?;
    let forward_ops = match forward_ops {
        Some(f) => f,
        None => ops
            .iter()
            .position(|o| o.name.to_ascii_lowercase().contains("backward"))
            .ok_or_else(|| ProfileError::NoBoundary {
                path: origin.io_info.clone(),
            })?,
    };
    if forward_ops == 0 || forward_ops > ops.len() {
        return Err(inconsistent(
            &origin.io_info,
            "the forward/backward boundary".into(),
            format!(
                "first backward op {forward_ops} is not in 1..={}",
                ops.len()
            ),
        ));
    }
    Ok(Profile {
        name,
        tensors,
        ops,
        forward_ops,
    })
}

/// Checks that every tensor is read only after its producer, released at
/// most once and never read after its release.
pub(crate) fn check_releases(
    tensors: &[Tensor],
    ops: &[Op],
    path: &Path,
) -> Result<(), ProfileError> {
    let mut released = vec![None::<usize>; tensors.len()];
    for (i, op) in ops.iter().enumerate() {
        for &t in &op.inputs {
            if let Some(p) = tensors[t].producer.filter(|&p| p > i) {
                return Err(inconsistent(
                    path,
                    entry_name(i, &op.name),
                    format!(
                        "reads tensor {} which op {p} only produces later; fix the op order",
                        tensors[t].key
                    ),
                ));
            }
            if let Some(r) = released[t] {
                return Err(inconsistent(
                    path,
                    entry_name(i, &op.name),
                    format!("reads tensor {} after op {r} released it; move the release to the last reader", tensors[t].key),
                ));
            }
        }
        for &t in &op.release {
            if let Some(r) = released[t] {
                return Err(inconsistent(
                    path,
                    entry_name(i, &op.name),
                    format!(
                        "releases tensor {} which op {r} already released",
                        tensors[t].key
                    ),
                ));
            }
            released[t] = Some(i);
        }
    }
    Ok(())
}

#[derive(Default)]
struct Builder {
    tensors: Vec<Tensor>,
    index: HashMap<TensorKey, usize>,
}

impl Builder {
    fn tensor(&mut self, key: TensorKey) -> usize {
        if let Some(&t) = self.index.get(&key) {
            return t;
        }
        let t = self.tensors.len();
        self.tensors.push(Tensor {
            key,
            size: 0,
            producer: None,
        });
        self.index.insert(key, t);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_print() {
        assert_eq!(TensorKey::parse("7"), Some(TensorKey::Id(7)));
        assert_eq!(
            TensorKey::parse("7:1"),
            Some(TensorKey::Workspace { op: 7, index: 1 })
        );
        assert_eq!(TensorKey::parse("x"), None);
        assert_eq!(TensorKey::parse("7:").map(|k| k.to_string()), None);
        assert_eq!(TensorKey::Workspace { op: 3, index: 0 }.to_string(), "3:0");
    }
}
