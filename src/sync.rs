//! The one place that names synchronisation primitives (see the engine design note).
