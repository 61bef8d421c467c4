//! Reads an image's layers, several at a time, and merges them in order into one tree.
//! Workers never run more than a small window ahead of the merge, so memory holds only a few
//! layers' entries at once.

use super::interest::Interests;
use super::layer::{read_layer_in, Budget, GzipCrc, LayerDiff, LayerError};
use super::limits::Limits;
use super::FileTree;
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex};

/// Opens a layer's blob for reading.
pub(crate) type OpenBlob = Box<dyn Fn() -> std::io::Result<Box<dyn Read + Send>> + Send + Sync>;

/// Looks a layer up where it may have been read before (the layer cache); `None` to read it.
pub(crate) type Lookup = Box<dyn FnOnce() -> Option<LayerDiff> + Send>;

/// A layer's blob to stream: how to open it, and whether a gzip blob's CRC-32 is computed
/// (skipped where the caller's check compares the blob with its digest).
pub(crate) struct Blob {
    pub(crate) open: OpenBlob,
    pub(crate) crc: GzipCrc,
}

/// One layer to read: either a blob to stream, or one already read while its archive streamed.
pub(crate) enum LayerInput {
    Blob(Blob),
    Read(Box<LayerDiff>),
    /// A layer that may be known already: the lookup runs on a worker, like a read would, and
    /// the blob is only opened when it finds nothing usable.
    Cached {
        lookup: Lookup,
        blob: Blob,
    },
}

/// A layer failed; `index` says which.
#[derive(Debug)]
pub(crate) struct BuildError {
    pub(crate) index: usize,
    pub(crate) kind: Box<BuildErrorKind>,
}

#[derive(Debug)]
pub(crate) enum BuildErrorKind {
    Read(LayerError),
    Merge(super::merge::MergeError),
    /// The check the caller asked for rejected the layer (e.g. a digest mismatch).
    Rejected(Box<crate::error::Error>),
}

/// What was learnt of each layer while reading it.
#[derive(Clone, Debug)]
pub(crate) struct LayerStats {
    pub(crate) blob_digest: crate::digest::Digest,
    pub(crate) blob_size: u64,
    pub(crate) diff_id: crate::digest::Digest,
    pub(crate) uncompressed_size: u64,
    pub(crate) compression: super::layer::Compression,
    pub(crate) entries: u64,
}

/// Reads `layers` with up to `workers` threads and merges them in order. `check` runs on each
/// layer as soon as it is read (digest verification) and may reject it.
pub(crate) fn build<C>(
    layers: Vec<LayerInput>,
    interests: &Interests,
    limits: &Limits,
    workers: usize,
    check: C,
) -> Result<(FileTree, Vec<LayerStats>), BuildError>
where
    C: Fn(usize, &LayerDiff) -> Result<(), crate::error::Error> + Sync,
{
    let total = layers.len();
    let workers = workers.clamp(1, total.max(1));
    let window = workers * 2;
    let slots: Vec<Mutex<Option<LayerInput>>> = layers.into_iter().map(|l| Mutex::new(Some(l))).collect();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let merged = (Mutex::new(0usize), Condvar::new());
    let (tx, rx) = mpsc::channel::<(usize, Result<LayerDiff, BuildErrorKind>)>();
    let budget = Budget::new();

    std::thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (slots, next, failed, merged, check, budget) =
                (&slots, &next, &failed, &merged, &check, &budget);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= total || failed.load(Ordering::SeqCst) {
                    break;
                }
                {
                    let (lock, cv) = merged;
                    let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
                    while i >= *done + window && !failed.load(Ordering::SeqCst) {
                        done = cv.wait(done).unwrap_or_else(|e| e.into_inner());
                    }
                }
                let input = slots[i].lock().unwrap_or_else(|e| e.into_inner()).take();
                let read_blob = |blob: Blob| {
                    (blob.open)()
                        .map_err(|e| BuildErrorKind::Read(LayerError::Io(e)))
                        .and_then(|r| {
                            read_layer_in(r, interests, limits, budget, blob.crc)
                                .map_err(BuildErrorKind::Read)
                        })
                };
                let result = match input {
                    Some(LayerInput::Read(diff)) => Ok(*diff),
                    Some(LayerInput::Blob(open)) => read_blob(open),
                    Some(LayerInput::Cached { lookup, blob }) => match lookup() {
                        // What was not read here still counts against the image's limits.
                        Some(diff) => budget
                            .take_layer(&diff, limits)
                            .map(|()| diff)
                            .map_err(BuildErrorKind::Read),
                        None => read_blob(blob),
                    },
                    None => break,
                };
                let result = result.and_then(|d| match check(i, &d) {
                    Ok(()) => Ok(d),
                    Err(e) => Err(BuildErrorKind::Rejected(Box::new(e))),
                });
                if result.is_err() {
                    failed.store(true, Ordering::SeqCst);
                    merged.1.notify_all();
                }
                if tx.send((i, result)).is_err() {
                    break;
                }
            });
        }
        drop(tx);

        let mut tree = FileTree::with_limits(limits).keeping(interests.clone());
        let mut stats = Vec::with_capacity(total);
        let mut pending: BTreeMap<usize, LayerDiff> = BTreeMap::new();
        let mut first_error: Option<BuildError> = None;
        for (i, result) in rx {
            match result {
                Ok(diff) => {
                    pending.insert(i, diff);
                }
                Err(kind) => {
                    // Report the lowest failing layer, whatever order the workers finished in.
                    if first_error.as_ref().is_none_or(|e| i < e.index) {
                        first_error = Some(BuildError {
                            index: i,
                            kind: Box::new(kind),
                        });
                    }
                    continue;
                }
            }
            while let Some(diff) = pending.remove(&stats.len()) {
                let index = stats.len();
                stats.push(LayerStats {
                    blob_digest: diff.blob_digest.clone(),
                    blob_size: diff.blob_size,
                    diff_id: diff.diff_id.clone(),
                    uncompressed_size: diff.uncompressed_size,
                    compression: diff.compression,
                    entries: diff.entries.len() as u64,
                });
                if first_error.is_none() {
                    if let Err(e) = tree.apply(diff, index as u32) {
                        failed.store(true, Ordering::SeqCst);
                        first_error = Some(BuildError {
                            index,
                            kind: Box::new(BuildErrorKind::Merge(e)),
                        });
                    }
                }
                let (lock, cv) = &merged;
                *lock.lock().unwrap_or_else(|e| e.into_inner()) = stats.len();
                cv.notify_all();
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok((tree, stats)),
        }
    })
}
