//! Progress of layer reads on standard error: bars on a terminal, one line per finished layer
//! when `--progress` asks for it elsewhere (CI logs), nothing otherwise. Which of these is for
//! `commands/` to say (it knows the flags and the terminal); drawing stays here, beside the
//! blob readers whose bytes it counts, on the threads that read them.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{self, Read};
use std::time::Instant;

/// Layers smaller than this are read too fast for a bar to mean anything.
const MIN_BYTES: u64 = 4 << 20;

/// How layer reads show their progress on standard error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ProgressMode {
    #[default]
    Off,
    /// A bar per layer being read (standard error is a terminal).
    Bars,
    /// One line per layer once it is read (standard error is a log).
    Lines,
}

/// The progress display of one image read.
pub(crate) struct Progress {
    mode: Mode,
    total_layers: usize,
}

enum Mode {
    Off,
    Bars(MultiProgress),
    Lines,
}

impl Progress {
    pub(crate) fn new(mode: ProgressMode, total_layers: usize) -> Progress {
        let mode = match mode {
            ProgressMode::Off => Mode::Off,
            ProgressMode::Bars => Mode::Bars(MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
            ProgressMode::Lines => Mode::Lines,
        };
        Progress { mode, total_layers }
    }

    /// Wraps the blob reader of layer `index` (from 0) so that reading it moves its bar.
    pub(crate) fn track(
        &self,
        index: usize,
        digest: &str,
        size: Option<u64>,
        reader: Box<dyn Read + Send>,
    ) -> Box<dyn Read + Send> {
        // A digest here may be a `docker save` member name, chosen by whoever built the
        // archive: `##[stop-commands]…` would silence the runner for the rest of the step.
        let label = format!(
            "layer {}/{} {}",
            index + 1,
            self.total_layers,
            crate::untrusted::line(short_digest(digest))
        );
        match &self.mode {
            Mode::Off => reader,
            _ if size.is_some_and(|s| s < MIN_BYTES) => reader,
            Mode::Bars(multi) => {
                let bar = multi.add(match size {
                    Some(s) => ProgressBar::new(s),
                    None => ProgressBar::no_length(),
                });
                let style = ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
                bar.set_style(style);
                bar.set_prefix(label);
                Box::new(Tracked {
                    reader,
                    sink: Sink::Bar(bar),
                })
            }
            Mode::Lines => Box::new(Tracked {
                reader,
                sink: Sink::Line {
                    label,
                    read: 0,
                    started: Instant::now(),
                    done: false,
                },
            }),
        }
    }
}

fn short_digest(digest: &str) -> &str {
    let end = digest.char_indices().nth(7 + 12).map_or(digest.len(), |(i, _)| i);
    &digest[..end]
}

enum Sink {
    Bar(ProgressBar),
    Line {
        label: String,
        read: u64,
        started: Instant,
        done: bool,
    },
}

struct Tracked {
    reader: Box<dyn Read + Send>,
    sink: Sink,
}

impl Read for Tracked {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.reader.read(buf)?;
        match &mut self.sink {
            Sink::Bar(bar) => {
                if n == 0 {
                    bar.finish_and_clear();
                } else {
                    bar.inc(n as u64);
                }
            }
            Sink::Line {
                label,
                read,
                started,
                done,
            } => {
                *read += n as u64;
                if n == 0 && !*done {
                    *done = true;
                    let secs = started.elapsed().as_secs_f64();
                    eprintln!(
                        "memlint: {label}: {:.1} MiB in {secs:.1} s",
                        *read as f64 / (1u64 << 20) as f64
                    );
                }
            }
        }
        Ok(n)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Sink::Bar(bar) = &self.sink {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracking_passes_every_byte_through() {
        let data: Vec<u8> = (0..10_000_000u32).map(|i| i as u8).collect();
        for mode in [ProgressMode::Off, ProgressMode::Bars, ProgressMode::Lines] {
            let p = Progress::new(mode, 3);
            let mut r = p.track(
                1,
                "sha256:0123456789abcdef0123",
                Some(data.len() as u64),
                Box::new(io::Cursor::new(data.clone())),
            );
            let mut out = Vec::new();
            r.read_to_end(&mut out).map_err(|e| e.to_string()).ok();
            assert_eq!(out, data);
        }
    }

    #[test]
    fn short_digests_keep_the_algorithm_and_twelve_hex_digits() {
        assert_eq!(short_digest("sha256:0123456789abcdef"), "sha256:0123456789ab");
        assert_eq!(short_digest("member/layer.tar"), "member/layer.tar");
    }
}
