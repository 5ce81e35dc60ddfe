//! Workspace-level tests live in `tests/`; this library is intentionally empty.
