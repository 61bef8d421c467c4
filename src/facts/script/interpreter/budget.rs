//! What running scripts may cost: one image's searches, shared by every script of every
//! container that runs it, and one container's assignments and expansions.

use super::Why;
use crate::facts::env::Env;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// How many tree nodes the `find`s and globs of one image's scripts may visit, all calls of all
/// scripts of all its containers together: a budget per call let 2,400 calls over 60,000 files
/// take minutes. Each distinct search is made once per image ([`ImageBudget`] keeps its result),
/// so the Rails templates' one `find /usr/lib` costs once however many containers run it.
pub(crate) const MAX_SEARCH_NODES: usize = 200_000;

/// execve(2) refuses an argument or environment string (`NAME=VALUE`) longer than
/// MAX_ARG_STRLEN, 32 pages (128 KiB) on Linux: no program gets a longer value, so a value a
/// script builds past it is undecided rather than followed (`A="$A$A"` forty times would be a
/// terabyte).
pub(crate) const MAX_ARG_STRLEN: usize = 128 << 10;

/// execve(2) refuses argv and envp together past ARG_MAX, a quarter of the stack limit: 2 MiB
/// under the usual 8 MiB `ulimit -s`. The values one container's scripts assign, with the
/// environment they start with, past it are undecided: no container starts with more.
pub(crate) const MAX_CONTAINER_ENV: usize = 2 << 20;

/// The settings (assignments, exports, unsets) one container's scripts may make, all together:
/// a real entrypoint makes tens; a script of 64 KiB of `A=;` makes 16,000, eight of them in a
/// chain 130,000, each a record in the report.
pub(crate) const MAX_SETTINGS: usize = 2048;

/// The text the expansions of one container's scripts may produce, all together (the words of
/// tests and commands as well as the values assigned): eight ARG_MAX. Past it, what is left to
/// expand is undecided; this bounds the time a script of 64 KiB of `$A$A…` can take.
pub(crate) const MAX_EXPANDED: usize = 16 << 20;

/// What searching one image may cost, shared by every script of every container that runs it
/// (see [`MAX_SEARCH_NODES`]), and the searches made so far.
pub(crate) struct ImageBudget {
    pub(in crate::facts::script) search_left: Cell<usize>,
    /// `find` and glob results by what was searched.
    searches: RefCell<HashMap<String, Result<Vec<String>, Why>>>,
}

impl Default for ImageBudget {
    fn default() -> Self {
        ImageBudget {
            search_left: Cell::new(MAX_SEARCH_NODES),
            searches: RefCell::new(HashMap::new()),
        }
    }
}

impl ImageBudget {
    /// Takes one visited tree node from the budget; false once it is spent.
    pub(super) fn visit(&self) -> bool {
        let left = self.search_left.get();
        self.search_left.set(left.saturating_sub(1));
        left > 0
    }

    /// The result of the search `key`, made once.
    pub(super) fn search(
        &self,
        key: String,
        run: impl FnOnce() -> Result<Vec<String>, Why>,
    ) -> Result<Vec<String>, Why> {
        if let Some(found) = self.searches.borrow().get(&key) {
            return found.clone();
        }
        let found = run();
        self.searches.borrow_mut().insert(key, found.clone());
        found
    }
}

/// What one container's scripts may still assign ([`MAX_CONTAINER_ENV`]) and expand
/// ([`MAX_EXPANDED`]), all scripts of its entrypoint together.
pub(crate) struct Budget {
    pub(in crate::facts::script) assign_left: Cell<usize>,
    pub(in crate::facts::script) settings_left: Cell<usize>,
    pub(in crate::facts::script) expand_left: Cell<usize>,
    /// A setting was refused: none is kept from then on.
    pub(in crate::facts::script) spent: Cell<bool>,
}

impl Budget {
    /// The budget of a container whose scripts start with `env`: what it already holds counts
    /// against ARG_MAX.
    pub(crate) fn new(env: &Env) -> Budget {
        let held: usize = env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        Budget {
            assign_left: Cell::new(MAX_CONTAINER_ENV.saturating_sub(held)),
            settings_left: Cell::new(MAX_SETTINGS),
            expand_left: Cell::new(MAX_EXPANDED),
            spent: Cell::new(false),
        }
    }

    /// Takes `n` bytes from `cell`; false (and nothing taken) when fewer are left.
    pub(super) fn take(cell: &Cell<usize>, n: usize) -> bool {
        let left = cell.get();
        if n > left {
            return false;
        }
        cell.set(left - n);
        true
    }
}
