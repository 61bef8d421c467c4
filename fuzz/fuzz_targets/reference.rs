//! Image reference text through the reference parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlint::reference::Reference;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        // The parser checks which prefixes exist on disk: keep that to a sane length.
        if text.len() <= 1024 {
            if let Ok(r) = Reference::parse(text) {
                let _ = format!("{r:?}");
            }
        }
    }
});
