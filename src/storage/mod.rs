//! Pooled storage managers.
