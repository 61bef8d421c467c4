//! The tree's two hash tables, small enough for hundreds of thousands of paths: a table of ids
//! whose keys live elsewhere (4 bytes a slot, open addressing), and the interned names.

use std::hash::{BuildHasher, RandomState};

const EMPTY: u32 = u32::MAX;
const GONE: u32 = u32::MAX - 1;

/// A set of ids, found by a hash of a key the caller keeps (the caller's `eq` says whether an
/// id is the one looked for; `rehash` gives an id's hash when the table grows).
#[derive(Clone, Debug, Default)]
pub(super) struct IdTable {
    slots: Vec<u32>,
    /// Live ids.
    live: usize,
    /// Live ids and tombstones.
    used: usize,
}

impl IdTable {
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    pub(crate) fn find(&self, hash: u64, eq: impl Fn(u32) -> bool) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            match self.slots[i] {
                EMPTY => return None,
                GONE => {}
                id if eq(id) => return Some(id),
                _ => {}
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `id`, which must not be in the table.
    pub(crate) fn insert(&mut self, hash: u64, id: u32, rehash: impl Fn(u32) -> u64) {
        debug_assert!(id < GONE);
        if (self.used + 1) * 4 > self.slots.len() * 3 {
            self.grow(&rehash);
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        while self.slots[i] != EMPTY && self.slots[i] != GONE {
            i = (i + 1) & mask;
        }
        if self.slots[i] == EMPTY {
            self.used += 1;
        }
        self.slots[i] = id;
        self.live += 1;
    }

    /// Removes `id`, found at `hash`.
    pub(crate) fn remove(&mut self, hash: u64, id: u32) {
        if self.slots.is_empty() {
            return;
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            match self.slots[i] {
                EMPTY => return,
                s if s == id => {
                    self.slots[i] = GONE;
                    self.live -= 1;
                    return;
                }
                _ => {}
            }
            i = (i + 1) & mask;
        }
    }

    /// Rebuilds the table, tombstones dropped, at least twice as large as its live ids.
    fn grow(&mut self, rehash: &impl Fn(u32) -> u64) {
        let cap = ((self.live + 1) * 2).next_power_of_two().max(16);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; cap]);
        let mask = cap - 1;
        for id in old.into_iter().filter(|&s| s != EMPTY && s != GONE) {
            let mut i = rehash(id) as usize & mask;
            while self.slots[i] != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = id;
        }
        self.used = self.live;
    }
}

/// Interned names: one arena of bytes, each name once.
#[derive(Clone, Debug, Default)]
pub(super) struct Names {
    bytes: String,
    /// Where each name starts in `bytes`; it ends where the next starts.
    starts: Vec<u64>,
    table: IdTable,
    hasher: RandomState,
}

impl Names {
    pub(crate) fn get(&self, id: u32) -> &str {
        let i = id as usize;
        let start = self.starts[i] as usize;
        let end = self.starts.get(i + 1).map_or(self.bytes.len(), |&e| e as usize);
        &self.bytes[start..end]
    }

    pub(crate) fn find(&self, name: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(name);
        self.table.find(hash, |id| self.get(id) == name)
    }

    /// The id of `name`, added when new.
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.find(name) {
            return id;
        }
        let id = self.starts.len() as u32;
        self.starts.push(self.bytes.len() as u64);
        self.bytes.push_str(name);
        let hash = self.hasher.hash_one(name);
        let (bytes, starts, hasher) = (&self.bytes, &self.starts, &self.hasher);
        let get = |id: u32| {
            let i = id as usize;
            let s = starts[i] as usize;
            let e = starts.get(i + 1).map_or(bytes.len(), |&e| e as usize);
            hasher.hash_one(&bytes[s..e])
        };
        self.table.insert(hash, id, get);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids() {
        let mut n = Names::default();
        let a = n.intern("package.json");
        let b = n.intern("index.js");
        assert_eq!(n.intern("package.json"), a);
        assert_eq!(n.get(b), "index.js");
        assert_eq!(n.find("lib"), None);
        for i in 0..10_000 {
            n.intern(&format!("f{i}"));
        }
        assert_eq!(n.find("f9999").map(|id| n.get(id)), Some("f9999"));
        assert_eq!(n.get(a), "package.json");

        let mut t = IdTable::default();
        let h = |id: u32| u64::from(id % 7);
        for id in 0..1000 {
            t.insert(h(id), id, h);
        }
        for id in (0..1000).step_by(2) {
            t.remove(h(id), id);
        }
        assert_eq!(t.find(h(3), |id| id == 3), Some(3));
        assert_eq!(t.find(h(4), |id| id == 4), None);
        for id in 1000..3000 {
            t.insert(h(id), id, h);
        }
        assert_eq!(t.find(h(2999), |id| id == 2999), Some(2999));
        assert_eq!(t.live, 2500);
    }
}
