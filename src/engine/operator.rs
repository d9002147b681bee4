//! Reusable operators: describe an op once, push it many times, delete it.

use std::borrow::Cow;
use std::fmt;

use super::op::{Context, OpDesc, Property, SharedBody};
use super::var::Var;

/// An op description and body kept by the engine for repeated pushes
/// (MXNet's `NewOperator` / `PushAsync(opr)` / `DeleteOperator`).
///
/// Not `Clone`: [`crate::Engine::delete_operator`] consumes it, so an operator
/// cannot be pushed after its deletion.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, OpDesc};
/// let engine = Engine::builder().build().unwrap();
/// let v = engine.new_var();
/// let op = engine
///     .new_operator(OpDesc::new("step").writes(&v), |_| Ok(()))
///     .unwrap();
/// for _ in 0..5 {
///     engine.push_operator(&op, 0).unwrap();
/// }
/// engine.delete_operator(op).unwrap();
/// engine.wait_for_all().unwrap();
/// assert_eq!(v.version(), 5);
/// ```
///
/// A deleted operator cannot be pushed again: deletion consumes it.
///
/// ```compile_fail,E0382
/// use depengine::{Engine, OpDesc};
/// let engine = Engine::builder().build().unwrap();
/// let op = engine.new_operator(OpDesc::new("step"), |_| Ok(())).unwrap();
/// engine.delete_operator(op).unwrap();
/// engine.push_operator(&op, 0).unwrap();
/// ```
pub struct Operator {
    pub(crate) engine: u64,
    pub(crate) name: Cow<'static, str>,
    pub(crate) reads: Vec<Var>,
    pub(crate) writes: Vec<Var>,
    pub(crate) context: Context,
    pub(crate) property: Property,
    pub(crate) body: SharedBody,
}

impl Operator {
    /// The operator's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn desc(&self, priority: i32) -> OpDesc<'_> {
        OpDesc::new(self.name.clone())
            .reads(&self.reads)
            .writes(&self.writes)
            .context(self.context)
            .property(self.property)
            .priority(priority)
    }
}

impl fmt::Debug for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operator")
            .field("name", &self.name)
            .field("reads", &self.reads)
            .field("writes", &self.writes)
            .field("context", &self.context)
            .field("property", &self.property)
            .finish()
    }
}
