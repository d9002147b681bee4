//! Tensor usage records and the three file formats they are read from.
//!
//! A usage record is TFLite's `TensorUsageRecord`: a tensor's size in bytes and
//! the inclusive interval `[first, last]` of op indices during which it must be
//! in memory. Records come from
//! - the shared records JSON (`records/<model>.json`),
//! - MiniMalloc's CSV (`id,lower,upper,size`, lifetimes half-open), or
//! - a graph file, from which they are derived in execution order.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::graph::format::{GraphFile, GraphFileError, TensorKind};

/// One tensor's size and the inclusive op interval during which it is alive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UsageRecord {
    /// Tensor id from the source file (unique, not necessarily contiguous).
    pub id: u64,
    /// Size in bytes.
    pub size: u64,
    /// First op that needs the tensor.
    pub first: usize,
    /// Last op that needs the tensor (inclusive, `>= first`).
    pub last: usize,
}

impl UsageRecord {
    /// A record of `size` bytes alive from op `first` to op `last` inclusive.
    pub fn new(id: u64, size: u64, first: usize, last: usize) -> Self {
        Self {
            id,
            size,
            first,
            last,
        }
    }

    /// Whether the two tensors are alive during at least one common op.
    pub fn overlaps(&self, other: &UsageRecord) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

/// A set of usage records with the facts of the file they came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Records {
    /// Model name (the file stem when the file does not name one).
    pub model: String,
    /// Number of ops (one more than the largest `last` when the file does not say).
    pub ops: usize,
    /// The records, in file order.
    pub records: Vec<UsageRecord>,
}

impl Records {
    /// Wraps records, counting ops from the largest `last`.
    pub fn from_records(model: impl Into<String>, records: Vec<UsageRecord>) -> Self {
        let ops = records.iter().map(|r| r.last + 1).max().unwrap_or(0);
        Self {
            model: model.into(),
            ops,
            records,
        }
    }

    /// Sum of all sizes: what giving every tensor its own buffer costs.
    pub fn naive_bytes(&self) -> u64 {
        self.records.iter().map(|r| r.size).sum()
    }

    /// Reads a records JSON, a MiniMalloc CSV (by the `.csv` extension) or a
    /// graph JSON (a JSON object with a `tensors` key).
    ///
    /// # Errors
    ///
    /// [`RecordsError`] naming the file and the line, record or field at fault.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, RecordsError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| RecordsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let is_csv = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
        if is_csv {
            return Self::from_csv_str(&text, path);
        }
        // Decide between the two JSON shapes without a full typed parse, so the
        // typed parse below can report lines and columns against the right schema.
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| parse(path, &e))?;
        if value.get("tensors").is_some() {
            let graph = GraphFile::from_json_str(&text, path).map_err(RecordsError::Graph)?;
            Self::from_graph(&graph, path)
        } else {
            Self::from_json_str(&text, path)
        }
    }

    /// Parses the records JSON format; `path` only names the source in errors.
    ///
    /// # Errors
    ///
    /// [`RecordsError::Parse`] with line and column when the text is not in the
    /// format, [`RecordsError::Invalid`] naming the record and field when a
    /// record is inconsistent (`first > last`, `last >= ops`).
    pub fn from_json_str(text: &str, path: &Path) -> Result<Self, RecordsError> {
        let file: RecordsFile = serde_json::from_str(text).map_err(|e| parse(path, &e))?;
        let records: Vec<UsageRecord> = file
            .records
            .iter()
            .map(|r| UsageRecord::new(r.id, r.size, r.first, r.last))
            .collect();
        let model = file.model.unwrap_or_else(|| stem(path));
        let mut out = Self::from_records(model, records);
        if let Some(ops) = file.ops {
            out.ops = ops;
        }
        out.check(path)?;
        Ok(out)
    }

    /// Parses MiniMalloc's CSV: a header naming the columns `id`, `lower`,
    /// `upper`, `size` (any order), then one buffer per line alive over the
    /// half-open `[lower, upper)`. Non-numeric ids are numbered by line order.
    /// When the times are sparse (far more time points than buffers) they
    /// are renumbered densely in the same order, which keeps every overlap
    /// and keeps per-op tables small.
    ///
    /// # Errors
    ///
    /// [`RecordsError::Csv`] naming the line and column when a line is malformed.
    pub fn from_csv_str(text: &str, path: &Path) -> Result<Self, RecordsError> {
        let csv_err = |line: usize, message: String| RecordsError::Csv {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty());
        let (header_line, header) = lines.next().ok_or_else(|| {
            csv_err(
                1,
                "empty file, expected the header id,lower,upper,size".into(),
            )
        })?;
        let columns: Vec<&str> = header.split(',').map(str::trim).collect();
        let col = |name: &str| {
            columns.iter().position(|c| *c == name).ok_or_else(|| {
                csv_err(
                    header_line,
                    format!(
                        "header {header:?} has no column {name:?} (expected id,lower,upper,size)"
                    ),
                )
            })
        };
        let (c_id, c_lower, c_upper, c_size) =
            (col("id")?, col("lower")?, col("upper")?, col("size")?);
        let mut records = Vec::new();
        for (index, (line, row)) in lines.enumerate() {
            let cells: Vec<&str> = row.split(',').map(str::trim).collect();
            if cells.len() != columns.len() {
                return Err(csv_err(
                    line,
                    format!("{} fields, the header has {}", cells.len(), columns.len()),
                ));
            }
            let number = |c: usize| {
                cells[c].parse::<u64>().map_err(|_| {
                    csv_err(
                        line,
                        format!(
                            "field {:?} is {:?}, not a non-negative integer",
                            columns[c], cells[c]
                        ),
                    )
                })
            };
            let (lower, upper, size) = (number(c_lower)?, number(c_upper)?, number(c_size)?);
            if upper <= lower {
                return Err(csv_err(
                    line,
                    format!(
                        "upper {upper} must exceed lower {lower} (lifetimes are [lower, upper))"
                    ),
                ));
            }
            let to_usize = |v: u64| {
                usize::try_from(v).map_err(|_| csv_err(line, format!("time {v} is too large")))
            };
            let id = cells[c_id].parse::<u64>().unwrap_or(index as u64);
            records.push(UsageRecord::new(
                id,
                size,
                to_usize(lower)?,
                to_usize(upper - 1)?,
            ));
        }
        compress_times(&mut records);
        let out = Self::from_records(stem(path), records);
        out.check(path)?;
        Ok(out)
    }

    /// Derives records from a graph in execution order: one per non-param
    /// tensor, alive from its producing op (0 for a graph input) to the last op
    /// that reads it (the last op for a graph output; its producer when nothing
    /// reads it).
    ///
    /// # Errors
    ///
    /// [`RecordsError::Invalid`] when an op names a tensor the graph does not
    /// declare, or a tensor is produced twice.
    pub fn from_graph(graph: &GraphFile, path: &Path) -> Result<Self, RecordsError> {
        let ops = graph.ops.len();
        let index: std::collections::HashMap<u64, usize> = graph
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id, i))
            .collect();
        let mut producer: Vec<Option<usize>> = vec![None; graph.tensors.len()];
        let mut last_reader: Vec<Option<usize>> = vec![None; graph.tensors.len()];
        for (op_index, op) in graph.ops.iter().enumerate() {
            let lookup = |id: u64, field: &str| {
                index.get(&id).copied().ok_or_else(|| RecordsError::Invalid {
                    path: path.to_path_buf(),
                    message: format!(
                        "op {op_index} ({}) lists {field} tensor {id}, which the graph does not declare",
                        op.name
                    ),
                })
            };
            for &id in &op.inputs {
                let t = lookup(id, "input")?;
                last_reader[t] = Some(op_index);
            }
            for &id in &op.outputs {
                let t = lookup(id, "output")?;
                if producer[t].is_some() {
                    return Err(RecordsError::Invalid {
                        path: path.to_path_buf(),
                        message: format!("tensor {id} is produced twice (again by op {op_index})"),
                    });
                }
                producer[t] = Some(op_index);
            }
        }
        let mut records = Vec::new();
        for (t, tensor) in graph.tensors.iter().enumerate() {
            if tensor.kind == TensorKind::Param {
                continue;
            }
            let first = producer[t].unwrap_or(0);
            let last = if tensor.kind == TensorKind::Output {
                ops.saturating_sub(1).max(first)
            } else {
                last_reader[t].map_or(first, |r| r.max(first))
            };
            records.push(UsageRecord::new(tensor.id, tensor.size, first, last));
        }
        // Execution order; ties keep the graph's tensor order.
        records.sort_by_key(|r| r.first);
        let out = Self {
            model: graph.model.clone(),
            ops,
            records,
        };
        out.check(path)?;
        Ok(out)
    }

    fn check(&self, path: &Path) -> Result<(), RecordsError> {
        // Planners add offsets and sizes and min-cost flow turns sizes into
        // signed costs; keeping the total below 2^62 keeps all of that exact.
        let total: u128 = self.records.iter().map(|r| r.size as u128).sum();
        if total >= 1u128 << 62 {
            return Err(RecordsError::Invalid {
                path: path.to_path_buf(),
                message: format!("field size: the sizes add up to {total} bytes, more than 2^62"),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for (i, r) in self.records.iter().enumerate() {
            let invalid = |message: String| RecordsError::Invalid {
                path: path.to_path_buf(),
                message: format!("record {i} (tensor {}): {message}", r.id),
            };
            if r.first > r.last {
                return Err(invalid(format!(
                    "field first = {} exceeds field last = {}",
                    r.first, r.last
                )));
            }
            if r.last >= self.ops {
                return Err(invalid(format!(
                    "field last = {} is not below ops = {}",
                    r.last, self.ops
                )));
            }
            if !seen.insert(r.id) {
                return Err(invalid("field id repeats an earlier record's id".into()));
            }
        }
        Ok(())
    }
}

/// A records, CSV or graph file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The JSON is malformed or lacks a field.
    #[error("{path} is malformed at line {line}, column {column}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A CSV line is malformed.
    #[error("{path}, line {line}: {message}")]
    Csv {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The graph file is malformed.
    #[error(transparent)]
    Graph(GraphFileError),
    /// The file parses but its content is inconsistent.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Which record or tensor, which field, and what is wrong.
        message: String,
    },
}

/// Renumbers times into a compact range when they are sparse. Records hold
/// inclusive `[first, last]`; the half-open ends `last + 1` are kept as points
/// too, and the map is strictly increasing, so two intervals overlap after
/// renumbering exactly when they did before. The points are spread in
/// proportion to the original times (within `16 n + 1024` ops) rather than
/// numbered one after another: lifetimes and areas keep their relative
/// sizes, which the exact search's tie-breaking rankings rely on (dense
/// renumbering made MiniMalloc's trace J take millions of search nodes
/// instead of a few thousand).
fn compress_times(records: &mut [UsageRecord]) {
    let max = records.iter().map(|r| r.last).max().unwrap_or(0);
    let budget = 16 * records.len() + 1024;
    if max <= budget {
        return;
    }
    let mut points: Vec<usize> = records.iter().flat_map(|r| [r.first, r.last + 1]).collect();
    points.sort_unstable();
    points.dedup();
    let (origin, range) = (points[0], points[points.len() - 1] - points[0]);
    // Every point keeps its own op (the `k`); the spare ops are shared out in
    // proportion to the distance from the first point.
    let spare = budget.saturating_sub(points.len()) as u128;
    let position = |t: usize| {
        let k = points.partition_point(|&p| p < t);
        k + ((t - origin) as u128 * spare / range.max(1) as u128) as usize
    };
    for r in records.iter_mut() {
        let (f, end) = (position(r.first), position(r.last + 1));
        r.first = f;
        r.last = end - 1;
    }
}

fn parse(path: &Path, e: &serde_json::Error) -> RecordsError {
    RecordsError::Parse {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[derive(Deserialize)]
struct RecordsFile {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    ops: Option<usize>,
    records: Vec<RecordEntry>,
}

#[derive(Deserialize)]
struct RecordEntry {
    id: u64,
    size: u64,
    first: usize,
    last: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_is_half_open_and_names_bad_lines() {
        let p = Path::new("t.csv");
        let r = Records::from_csv_str("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\n", p).unwrap();
        assert_eq!(r.records[0], UsageRecord::new(0, 4, 0, 2));
        assert_eq!(r.records[1], UsageRecord::new(1, 4, 3, 8));
        let err = Records::from_csv_str("id,lower,upper,size\n1,0,3,4\n2,5,5,4\n", p).unwrap_err();
        assert!(err.to_string().contains("line 3"), "{err}");
        let err = Records::from_csv_str("id,lower,upper,size\n1,0,x,4\n", p).unwrap_err();
        assert!(err.to_string().contains("upper"), "{err}");
    }

    #[test]
    fn absurd_sizes_are_an_error() {
        let text = format!(
            "id,lower,upper,size\n0,0,1,{}\n1,0,1,{}\n",
            u64::MAX,
            u64::MAX
        );
        let err = Records::from_csv_str(&text, Path::new("big.csv")).unwrap_err();
        assert!(err.to_string().contains("2^62"), "{err}");
    }

    #[test]
    fn sparse_csv_times_are_renumbered_keeping_overlaps() {
        let p = Path::new("t.csv");
        let text = "id,lower,upper,size\n0,0,1000000,4\n1,999999,5000000,4\n2,1000000,9000000,4\n";
        let r = Records::from_csv_str(text, p).unwrap();
        assert!(r.ops <= 16 * 3 + 1024, "{r:?}");
        let [a, b, c] = [&r.records[0], &r.records[1], &r.records[2]];
        assert!(a.overlaps(b) && b.overlaps(c) && !a.overlaps(c));
        // Lifetimes keep their proportions: c lives twice as long as b.
        let life = |x: &UsageRecord| (x.last - x.first + 1) as f64;
        assert!((life(c) / life(b) - 2.0).abs() < 0.01, "{r:?}");
    }

    #[test]
    fn json_errors_name_record_and_field() {
        let p = Path::new("r.json");
        let err = Records::from_json_str(
            r#"{"ops":4,"records":[{"id":1,"size":8,"first":3,"last":2}]}"#,
            p,
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("r.json") && msg.contains("first"), "{msg}");
        let err =
            Records::from_json_str("{\"records\":[{\"id\":1,\n\"size\":-8}]}", p).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }
}
