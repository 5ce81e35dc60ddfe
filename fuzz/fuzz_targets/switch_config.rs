//! Arbitrary bytes as a `switch.toml` (`ofan_switch::config`): the TOML schema, then the
//! validation `ofan-switch` runs. A file naming a topology file is only parsed: resolving it
//! would read that path. Checked: no panic, and every error names a key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofan_switch::config::{names_topology, parse_file, resolve, Overrides};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = match parse_file("switch.toml", text) {
        Ok(file) => file,
        Err(error) => {
            assert_eq!(error.key, "switch.toml");
            return;
        }
    };
    if names_topology(&file) {
        return;
    }
    if let Err(error) = resolve(file, &Overrides::default()) {
        assert!(!error.key.is_empty());
    }
});
