//! The operator table: one row per supported ExecuTorch operator, sorted by
//! name. [`register_ops!`] turns the rows into [`OpId`], [`OPS`] and
//! [`from_name`].

/// Declares the operator table.
///
/// Each row is `Variant => "exact.executorch.name"`; rows must be sorted by
/// name (a unit test checks it), so lookups can binary-search.
macro_rules! register_ops {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// A supported operator.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum OpId {
            $(#[doc = $name] $variant,)*
        }

        /// Every supported operator with its ExecuTorch name, sorted by name.
        pub const OPS: &[(OpId, &str)] = &[$((OpId::$variant, $name),)*];
    };
}

register_ops! {}

/// Looks an operator up by its exact ExecuTorch name.
pub fn from_name(name: &str) -> Option<OpId> {
    OPS.binary_search_by(|(_, n)| (*n).cmp(name)).ok().map(|i| OPS[i].0)
}
