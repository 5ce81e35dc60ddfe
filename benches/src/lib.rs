//! Benchmarks live in `benches/benches/`; this library is intentionally empty.
