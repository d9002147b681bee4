//! Memory planners over tensor usage records.
