//! Graph executor (placeholder).
