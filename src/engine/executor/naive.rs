//! The naive executor: no threads. Every ready op runs inline on the thread
//! that made it ready — the pushing thread, or the thread that completed an
//! async op it depended on. Pushes therefore return after the op ran when it
//! was ready at once, which makes programs step-debuggable; the dependency
//! rules are exactly those of the threaded executors.
