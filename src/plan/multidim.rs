//! Shared objects for tensors whose size has several dimensions (GPU
//! textures: `BHWC`, 2-D and 3-D images). An object can hold a tensor only if
//! it covers it in every dimension, so objects never grow: a tensor takes a
//! free object that covers it or a new one.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// A usage record with a multi-dimensional size.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultiDimRecord {
    /// The size, one entry per dimension.
    pub dims: Vec<u64>,
    /// First op that needs the tensor.
    pub first: usize,
    /// Last op that needs the tensor (inclusive).
    pub last: usize,
}

/// Tensors assigned to multi-dimensional shared objects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiDimAssignment {
    /// `object_ids[i]` is the object of record `i`.
    pub object_ids: Vec<usize>,
    /// Each object's size, one entry per dimension.
    pub object_sizes: Vec<Vec<u64>>,
}

/// One object per tensor.
pub fn naive(records: &[MultiDimRecord]) -> MultiDimAssignment {
    MultiDimAssignment {
        object_ids: (0..records.len()).collect(),
        object_sizes: records.iter().map(|r| r.dims.clone()).collect(),
    }
}

/// Equality with a pool keyed by size (TFLite's hashed version): a tensor
/// takes the most recently freed object of exactly its size. Records are
/// walked in the given order, which should be by first op.
pub fn equality_hash(records: &[MultiDimRecord]) -> MultiDimAssignment {
    let mut out = MultiDimAssignment {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    let mut pool: HashMap<Vec<u64>, Vec<usize>> = HashMap::new();
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for (i, r) in records.iter().enumerate() {
        while let Some(&Reverse((last, obj))) = in_use.peek() {
            if last >= r.first {
                break;
            }
            in_use.pop();
            pool.entry(out.object_sizes[obj].clone())
                .or_default()
                .push(obj);
        }
        let obj = match pool.get_mut(&r.dims).and_then(Vec::pop) {
            Some(obj) => obj,
            None => {
                out.object_sizes.push(r.dims.clone());
                out.object_sizes.len() - 1
            }
        };
        out.object_ids[i] = obj;
        in_use.push(Reverse((r.last, obj)));
    }
    out
}

/// Equality by scanning (TFLite's version for unhashable sizes): a tensor
/// takes the lowest-numbered object of exactly its size whose last tensor
/// died before it starts.
pub fn equality_scan(records: &[MultiDimRecord]) -> MultiDimAssignment {
    let mut out = MultiDimAssignment {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    let mut free_after: Vec<usize> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let found = (0..out.object_sizes.len())
            .find(|&o| free_after[o] < r.first && out.object_sizes[o] == r.dims);
        let obj = match found {
            Some(o) => {
                free_after[o] = r.last;
                o
            }
            None => {
                out.object_sizes.push(r.dims.clone());
                free_after.push(r.last);
                out.object_sizes.len() - 1
            }
        };
        out.object_ids[i] = obj;
    }
    out
}

fn elements(d: &[u64]) -> u64 {
    d.iter().product()
}

/// Greedy in order for multi-dimensional sizes: freed objects join an
/// unordered pool (in the order they are freed); a tensor takes the pooled
/// object that covers it with the fewest spare elements, or a new object.
pub fn greedy_in_order(records: &[MultiDimRecord]) -> MultiDimAssignment {
    let mut out = MultiDimAssignment {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    let mut pool: Vec<usize> = Vec::new();
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for (i, r) in records.iter().enumerate() {
        while let Some(&Reverse((last, obj))) = in_use.peek() {
            if last >= r.first {
                break;
            }
            in_use.pop();
            pool.push(obj);
        }
        let mut best: Option<(usize, u64)> = None;
        for (k, &obj) in pool.iter().enumerate() {
            let size = &out.object_sizes[obj];
            let covers =
                size.len() == r.dims.len() && size.iter().zip(&r.dims).all(|(a, b)| a >= b);
            if covers {
                let diff = elements(size).abs_diff(elements(&r.dims));
                if best.is_none_or(|(_, d)| diff < d) {
                    best = Some((k, diff));
                }
            }
        }
        let obj = match best {
            Some((k, _)) => pool.remove(k),
            None => {
                out.object_sizes.push(r.dims.clone());
                out.object_sizes.len() - 1
            }
        };
        out.object_ids[i] = obj;
        in_use.push(Reverse((r.last, obj)));
    }
    out
}
