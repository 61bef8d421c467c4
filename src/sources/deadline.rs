//! Time bounds of one image read: the overall deadline of `--timeout` (default 10 minutes,
//! counted from the start of each image's read, so that a run over many images is not cut
//! short as a whole) and the idle timeout of one transfer (`idle_timeout_secs`: no byte for
//! that long). A source that waits on the network, an engine or a pipe asks [`Deadline::wait`]
//! how long it may wait, and turns a wait that ran out into a [`TimeoutHit`], carried through
//! `io::Error` like a [`crate::tree::layer::LimitHit`].

use std::io;
use std::time::{Duration, Instant};

/// The default of `--timeout`: trivy's is 5 minutes, for a scan that also downloads a
/// vulnerability database; an image read alone gets twice that.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// When the current image read must end, and how long one transfer may stay silent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Deadline {
    /// The instant the read must be over by, and the `--timeout` it came from.
    pub(crate) overall: Option<(Instant, Duration)>,
    /// The longest silence of one transfer; `None` waits for ever.
    pub(crate) idle: Option<Duration>,
    /// The end of the whole run the read is part of (a fleet's `fleet_timeout_secs`), and that
    /// bound.
    pub(crate) run: Option<(Instant, Duration)>,
}

/// A wait that ran out, naming the bound that ended it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TimeoutHit {
    #[error("the read passed the --timeout of {}", show(*.0))]
    Overall(Duration),
    #[error("no byte came for {} (idle_timeout_secs)", show(*.0))]
    Idle(Duration),
    #[error("the fleet passed its bound of {} (fleet_timeout_secs)", show(*.0))]
    Run(Duration),
}

impl From<TimeoutHit> for io::Error {
    fn from(hit: TimeoutHit) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, hit)
    }
}

impl TimeoutHit {
    /// What to do about it.
    pub(crate) fn help(&self) -> String {
        match self {
            TimeoutHit::Overall(d) => format!(
                "the source is slow or stalled; raise the bound with --timeout {} (or --timeout 0 for none)",
                show(d.saturating_mul(4).max(Duration::from_secs(1)))
            ),
            TimeoutHit::Idle(d) => format!(
                "the source stopped sending; raise the bound with --limit idle_timeout_secs={} (or MEMLINT_LIMITS, or [limits] in .memlint.toml; 0 for none)",
                d.as_secs().saturating_mul(4).max(1)
            ),
            TimeoutHit::Run(d) => format!(
                "the fleet's images take longer than its bound; raise it with --limit fleet_timeout_secs={} (or MEMLINT_LIMITS, or [limits] in .memlint.toml; 0 for none), or split the fleet into runs with --shard I/N",
                d.as_secs().saturating_mul(2).max(1)
            ),
        }
    }

    /// The timeout an I/O error carries, if it carries one.
    pub(crate) fn in_io(e: &io::Error) -> Option<TimeoutHit> {
        e.get_ref()?.downcast_ref::<TimeoutHit>().copied()
    }
}

pub(crate) use crate::duration::show;

impl Deadline {
    /// The bounds of a read that starts now.
    pub(crate) fn start(timeout: Option<Duration>, idle: Option<Duration>) -> Deadline {
        Deadline {
            overall: timeout.map(|t| (Instant::now() + t, t)),
            idle,
            run: None,
        }
    }

    /// These bounds, ended by `run` too (the end of the run the read is part of).
    pub(crate) fn within_run(self, run: Option<(Instant, Duration)>) -> Deadline {
        Deadline { run, ..self }
    }

    /// How long the next wait for a byte may last, and what ends it when it runs out; `None`
    /// when nothing bounds it.
    pub(crate) fn wait(&self) -> Option<(Duration, TimeoutHit)> {
        let overall = self.overall.map(|(at, t)| {
            (
                at.saturating_duration_since(Instant::now()),
                TimeoutHit::Overall(t),
            )
        });
        let idle = self.idle.map(|d| (d, TimeoutHit::Idle(d)));
        let run = self
            .run
            .map(|(at, d)| (at.saturating_duration_since(Instant::now()), TimeoutHit::Run(d)));
        [overall, idle, run].into_iter().flatten().min_by_key(|(d, _)| *d)
    }

    /// Runs `work` within the next wait.
    pub(crate) async fn bound<T>(&self, work: impl std::future::Future<Output = T>) -> Result<T, TimeoutHit> {
        match self.wait() {
            None => Ok(work.await),
            Some((d, hit)) => tokio::time::timeout(d, work).await.map_err(|_| hit),
        }
    }
}

/// A blocking reader (standard input, a FIFO) read on a thread of its own, so that a read
/// that blocks ends at the deadline: at most two pieces of 64 KiB wait in between. On a
/// timeout the thread stays blocked until the process exits; it holds nothing else.
pub(crate) struct BoundedReader {
    pieces: std::sync::mpsc::Receiver<io::Result<Vec<u8>>>,
    current: Vec<u8>,
    at: usize,
    deadline: Deadline,
    failed: Option<TimeoutHit>,
}

impl BoundedReader {
    pub(crate) fn new(mut input: impl io::Read + Send + 'static, deadline: Deadline) -> BoundedReader {
        let (tx, rx) = std::sync::mpsc::sync_channel(2);
        std::thread::spawn(move || loop {
            let mut piece = vec![0u8; 64 * 1024];
            match input.read(&mut piece) {
                Ok(0) => break,
                Ok(n) => {
                    piece.truncate(n);
                    if tx.send(Ok(piece)).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                    break;
                }
            }
        });
        BoundedReader {
            pieces: rx,
            current: Vec::new(),
            at: 0,
            deadline,
            failed: None,
        }
    }
}

impl io::Read for BoundedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::sync::mpsc::RecvTimeoutError;
        if let Some(hit) = self.failed {
            return Err(hit.into());
        }
        while self.at >= self.current.len() {
            let next = match self.deadline.wait() {
                None => self.pieces.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some((d, hit)) => self.pieces.recv_timeout(d).inspect_err(|e| {
                    if *e == RecvTimeoutError::Timeout {
                        self.failed = Some(hit);
                    }
                }),
            };
            match next {
                Ok(Ok(piece)) => {
                    self.current = piece;
                    self.at = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(RecvTimeoutError::Disconnected) => return Ok(0),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self
                        .failed
                        .map(io::Error::from)
                        .unwrap_or_else(|| io::ErrorKind::TimedOut.into()))
                }
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_nearer_bound_ends_a_wait() {
        let d = Deadline::start(Some(Duration::from_secs(5)), Some(Duration::from_secs(60)));
        assert!(matches!(d.wait(), Some((w, TimeoutHit::Overall(_))) if w <= Duration::from_secs(5)));
        let d = Deadline::start(Some(Duration::from_secs(600)), Some(Duration::from_secs(60)));
        assert!(matches!(d.wait(), Some((_, TimeoutHit::Idle(_)))));
        assert_eq!(Deadline::start(None, None).wait(), None);
        // The end of the run, when it is nearer than the read's own bounds.
        let run = Some((Instant::now() + Duration::from_secs(2), Duration::from_secs(7)));
        let d =
            Deadline::start(Some(Duration::from_secs(600)), Some(Duration::from_secs(60))).within_run(run);
        assert!(
            matches!(d.wait(), Some((w, TimeoutHit::Run(t))) if w <= Duration::from_secs(2) && t == Duration::from_secs(7))
        );
        assert!(TimeoutHit::Run(Duration::from_secs(7))
            .help()
            .contains("fleet_timeout_secs=14"));
    }

    #[test]
    fn a_blocked_reader_ends_at_the_deadline() {
        // A pipe whose writer never writes: a read on it blocks for ever.
        let (reader, _writer) = std::os::unix::net::UnixStream::pair()
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        let started = Instant::now();
        let mut r = BoundedReader::new(reader, Deadline::start(Some(Duration::from_millis(300)), None));
        let mut buf = [0u8; 16];
        let e = r.read(&mut buf).err();
        assert_eq!(
            e.as_ref().and_then(TimeoutHit::in_io),
            Some(TimeoutHit::Overall(Duration::from_millis(300)))
        );
        assert!(started.elapsed() < Duration::from_secs(3));
        let mut ok = BoundedReader::new(&b"hello"[..], Deadline::start(Some(Duration::from_secs(5)), None));
        let mut text = String::new();
        assert!(ok.read_to_string(&mut text).is_ok());
        assert_eq!(text, "hello");
    }
}
