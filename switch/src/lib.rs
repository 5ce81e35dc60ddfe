//! The library side of `ofan-switch`: its configuration (`switch.toml` and the flags that
//! override it, parsed once into validated types). The binary (`src/main.rs`) runs it; the
//! fuzz target `switch_config` and the tests reach the same code through this crate.

pub mod config;
