//! The graph file format (`graphs/<model>.json`), exactly as stored on disk.
//!
//! These types mirror the JSON one to one; validation of the graph (ids, cycles,
//! producers) belongs to the graph IR built on top of them, not here.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What role a tensor plays in the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TensorKind {
    /// A graph input (produced by no op).
    Input,
    /// A graph output.
    Output,
    /// An activation produced and consumed inside the graph.
    Intermediate,
    /// A weight, bias or statistic (produced by no op, outside memory plans).
    Param,
}

/// One tensor of a graph file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorFile {
    /// Tensor id, unique in the file (need not be contiguous).
    pub id: u64,
    /// Size in bytes.
    pub size: u64,
    /// Role of the tensor.
    pub kind: TensorKind,
    /// Shape, for information.
    #[serde(default)]
    pub shape: Vec<i64>,
    /// Name in the source model, for information.
    #[serde(default)]
    pub name: String,
}

/// One op of a graph file; its position in [`GraphFile::ops`] is its execution index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpFile {
    /// Op name in the source model.
    pub name: String,
    /// Op type (`Conv2d`, `add`, `convolution.default`, ...).
    #[serde(rename = "type")]
    pub op_type: String,
    /// Input tensor ids, params included.
    pub inputs: Vec<u64>,
    /// Output tensor ids.
    pub outputs: Vec<u64>,
    /// `[input_idx, output_idx]` pairs: that output may reuse that input's buffer
    /// if the input is not read again later.
    #[serde(default)]
    pub inplace: Vec<[usize; 2]>,
}

/// A whole graph file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphFile {
    /// Model name.
    pub model: String,
    /// Where the model came from.
    #[serde(default)]
    pub source: String,
    /// Every tensor of the graph.
    pub tensors: Vec<TensorFile>,
    /// Ops in execution order.
    pub ops: Vec<OpFile>,
    /// Training graphs only: index of the first backward op.
    #[serde(default)]
    pub forward_ops: Option<usize>,
    /// Training graphs only: batch size.
    #[serde(default)]
    pub batch: Option<u64>,
}

/// A graph file could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum GraphFileError {
    /// The file could not be read.
    #[error("cannot read graph file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a graph in the expected JSON shape.
    #[error("graph file {path} is malformed at line {line}, column {column}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What is wrong.
        message: String,
    },
}

impl GraphFile {
    /// Parses a graph from JSON text; `path` only names the source in errors.
    ///
    /// # Errors
    ///
    /// [`GraphFileError::Parse`] with line and column when the text is not a graph.
    pub fn from_json_str(text: &str, path: &Path) -> Result<Self, GraphFileError> {
        serde_json::from_str(text).map_err(|e| GraphFileError::Parse {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })
    }

    /// Reads and parses a graph file.
    ///
    /// # Errors
    ///
    /// [`GraphFileError::Io`] when the file cannot be read, [`GraphFileError::Parse`]
    /// when it is not a graph.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, GraphFileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| GraphFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json_str(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_small_graph() {
        let text = r#"{"model":"m","tensors":[{"id":3,"size":8,"kind":"input","shape":[2],"name":"x"},
            {"id":5,"size":8,"kind":"output","shape":[2],"name":"y"}],
            "ops":[{"name":"relu","type":"ReLU","inputs":[3],"outputs":[5],"inplace":[[0,0]]}]}"#;
        let g = GraphFile::from_json_str(text, Path::new("m.json")).unwrap();
        assert_eq!(g.ops[0].op_type, "ReLU");
        assert_eq!(g.ops[0].inplace, vec![[0, 0]]);
        assert_eq!(g.tensors[1].kind, TensorKind::Output);
    }

    #[test]
    fn malformed_graph_names_file_and_line() {
        let err = GraphFile::from_json_str("{\n\"model\": 3}", Path::new("bad.json")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("bad.json") && msg.contains("line 2"), "{msg}");
    }
}
