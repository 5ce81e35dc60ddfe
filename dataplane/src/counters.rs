//! Counter enums from one list.
//!
//! A counter space — the reasons a frame is not forwarded, say — is an enum whose variants are
//! counters. Its variant list, the counters' metric names, their indices and their number must
//! stay in step; [`named_counters!`] writes all of them from one list, as VPP's
//! `foreach_*_error` macros and Firecracker's metrics do. For each enum it generates:
//!
//! - the enum itself, with the attributes and doc comments given;
//! - `COUNT`, the number of counters, and `ALL`, every value in index order;
//! - `as_index`, the counter's index (`0..COUNT`, the order of the list);
//! - `name`, the counter's metric name (`snake_case`, as written in the list).
//!
//! One variant may wrap another counter enum (the forwarder's `Parse(ParseError)`): it comes
//! first, ends with `;`, and stands for every counter of the inner enum, which take the first
//! indices and keep their own names.

/// Defines a counter enum and its `COUNT`, `ALL`, `as_index` and `name` from one list.
///
/// ```ignore
/// named_counters! {
///     /// Why a frame is dropped.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
///     pub enum DropReason {
///         /// Not for the fast path: one counter per `ParseError`, under its own name.
///         Parse(ParseError);
///         /// No route to the destination.
///         NoRoute = "no_route",
///     }
/// }
/// ```
///
/// The enum must derive `Clone` and `Copy`; a wrapped enum must itself come from this macro.
/// Variants take no explicit discriminants: their order is the index order.
macro_rules! named_counters {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident = $label:literal,
            )+
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(
                $(#[$variant_meta])*
                $variant,
            )+
        }

        impl $name {
            /// Number of counters.
            pub const COUNT: usize = [$($label),+].len();

            /// Every counter, in index order.
            pub const ALL: [Self; Self::COUNT] = [$(Self::$variant),+];

            /// Counter index, `0..COUNT`.
            #[inline]
            pub const fn as_index(self) -> usize {
                self as usize
            }

            /// Metric name (`snake_case`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $label,)+
                }
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(#[$nested_meta:meta])*
            $nested:ident($inner:ty);
            $(
                $(#[$variant_meta:meta])*
                $variant:ident = $label:literal,
            )+
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(#[$nested_meta])*
            $nested($inner),
            $(
                $(#[$variant_meta])*
                $variant,
            )+
        }

        impl $name {
            #[doc = concat!(
                "Number of counters: one per [`", stringify!($inner), "`] and one per other reason."
            )]
            pub const COUNT: usize = <$inner>::COUNT + [$($label),+].len();

            /// Every counter, in index order.
            pub const ALL: [Self; Self::COUNT] = {
                let mut all = [Self::$nested(<$inner>::ALL[0]); Self::COUNT];
                let mut index = 0;
                while index < <$inner>::COUNT {
                    all[index] = Self::$nested(<$inner>::ALL[index]);
                    index += 1;
                }
                $(
                    all[index] = Self::$variant;
                    index += 1;
                )+
                assert!(index == Self::COUNT);
                all
            };

            #[doc = concat!(
                "Counter index, `0..COUNT`: the [`", stringify!($inner),
                "`] counters first, then the others in order."
            )]
            #[inline]
            pub const fn as_index(self) -> usize {
                /// The other reasons' positions after the wrapped ones.
                enum Position {
                    $($variant,)+
                }
                match self {
                    Self::$nested(inner) => inner.as_index(),
                    $(Self::$variant => <$inner>::COUNT + Position::$variant as usize,)+
                }
            }

            #[doc = concat!(
                "Metric name (`snake_case`; [`", stringify!($inner), "`] counters keep theirs)."
            )]
            pub const fn name(self) -> &'static str {
                match self {
                    Self::$nested(inner) => inner.name(),
                    $(Self::$variant => $label,)+
                }
            }
        }
    };
}

pub(crate) use named_counters;
