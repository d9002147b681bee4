//! Storage managers: naive, pooled (exact-size and round), unpooled.

pub mod rounding;
