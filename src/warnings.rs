//! Warnings: what a module has to say that is not an error (a layer cache that cannot be
//! written, a Docker config that cannot be read). Deep modules hand them to a [`Warnings`]
//! sink and go on; `commands/` decides where they end up (standard error, as
//! `memlint: warning: …`). A base module: it uses no other module of the crate, so every
//! layer may take a sink.

use std::fmt;
use std::sync::Arc;
#[cfg(test)]
use std::sync::{Mutex, PoisonError};

/// Where warnings go. Clones share the destination, so one sink can be handed to every part of
/// a run, threads included.
#[derive(Clone)]
pub(crate) struct Warnings {
    sink: Arc<dyn Fn(&str) + Send + Sync>,
}

impl Warnings {
    /// Warnings handed to `sink` as they happen.
    pub(crate) fn to(sink: impl Fn(&str) + Send + Sync + 'static) -> Warnings {
        Warnings { sink: Arc::new(sink) }
    }

    /// Warnings dropped: for callers that have nowhere to show them.
    pub(crate) fn ignored() -> Warnings {
        Warnings::to(|_| {})
    }

    #[cfg(test)]
    /// Warnings kept in memory, to be read back from the [`Collected`] handle.
    pub(crate) fn collected() -> (Warnings, Collected) {
        let kept = Collected::default();
        let into = kept.clone();
        let warnings = Warnings::to(move |message| {
            into.messages
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(message.to_string())
        });
        (warnings, kept)
    }

    /// Passes one warning on: a whole sentence, without the `memlint: warning:` prefix.
    pub(crate) fn warn(&self, message: &str) {
        (self.sink)(message)
    }
}

/// By default warnings are dropped: a library caller that wants them passes a sink.
impl Default for Warnings {
    fn default() -> Self {
        Warnings::ignored()
    }
}

impl fmt::Debug for Warnings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Warnings")
    }
}

#[cfg(test)]
/// The warnings a [`Warnings::collected`] sink kept.
#[derive(Clone, Debug, Default)]
pub(crate) struct Collected {
    messages: Arc<Mutex<Vec<String>>>,
}

#[cfg(test)]
impl Collected {
    /// The warnings kept so far, oldest first; they are not kept any longer.
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.messages.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_destination_across_threads() {
        let (warnings, kept) = Warnings::collected();
        let other = warnings.clone();
        std::thread::spawn(move || other.warn("from a thread"))
            .join()
            .unwrap();
        warnings.warn("from here");
        assert_eq!(kept.take(), ["from a thread", "from here"]);
        assert!(kept.take().is_empty());
        // Dropped warnings go nowhere and cost nothing.
        Warnings::default().warn("nobody listens");
    }
}
