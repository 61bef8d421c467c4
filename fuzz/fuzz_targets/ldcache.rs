//! /etc/ld.so.cache bytes through the parser, then a lookup as the loader model does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlint::arch::Arch;
use memlint::facts::ldcache::{accepts, LdCache};

fuzz_target!(|data: &[u8]| {
    if let Ok(cache) = LdCache::parse(data) {
        let ok = accepts(Some(Arch::Amd64));
        let _ = cache.lookup("libc.so.6", &ok).count();
        let names: Vec<String> = cache.entries.iter().take(16).map(|e| e.soname.clone()).collect();
        for n in &names {
            let _ = cache.lookup(n, &ok).count();
        }
    }
});
