//! Files the user names (`--config`, a `.memlint.toml` found by walking up, `--dockerfile`,
//! `--registry-ca`): read only when they are regular files, and only up to a bound, so that a
//! path to `/dev/zero` cannot fill memory and a FIFO cannot block the run. A base module: it
//! uses no other module of the crate; callers turn a [`ReadError`] into their diagnostic.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The bound of every file the user names: configs, Dockerfiles and CA bundles are far
/// smaller (a system CA bundle is about 200 KiB).
pub const MAX_BYTES: u64 = 4 << 20;

/// Why a file the user named was not read.
#[derive(Debug)]
pub enum ReadError {
    /// Opening, inspecting or reading failed.
    Io(io::Error),
    /// Not a regular file (after following symbolic links): what it is instead.
    NotRegular(&'static str),
    /// Larger than the bound.
    TooLarge { max: u64 },
}

impl ReadError {
    /// What is wrong, as a clause: "it is a FIFO (named pipe), not a regular file".
    pub fn reason(&self) -> String {
        match self {
            ReadError::Io(e) => e.to_string(),
            ReadError::NotRegular(kind) => format!("it is {kind}, not a regular file"),
            ReadError::TooLarge { max } => format!("it is larger than {} MiB", max >> 20),
        }
    }

    /// What to do about it.
    pub fn help(&self) -> &'static str {
        match self {
            ReadError::Io(e) => match e.kind() {
                io::ErrorKind::NotFound => "check the path; relative paths start at the current folder",
                io::ErrorKind::PermissionDenied => "run memlint as a user that can read this file",
                io::ErrorKind::InvalidData => "save the file as UTF-8 text",
                _ => "check that the file is complete and readable",
            },
            ReadError::NotRegular(_) => {
                "name a regular file (memlint reads no devices, pipes or folders, which could block the run or never end); to pass a file made on the fly, write it to a temporary file first"
            }
            ReadError::TooLarge { .. } => {
                "check the path: a config file, Dockerfile or CA bundle is far smaller than that"
            }
        }
    }

    /// The error as an [`io::Error`] whose message is [`ReadError::reason`].
    pub fn into_io(self) -> io::Error {
        match self {
            ReadError::Io(e) => e,
            other => io::Error::other(other.reason()),
        }
    }
}

/// The contents of the regular file at `path` (symbolic links followed), when it holds at
/// most `max` bytes.
///
/// The file is opened without blocking (a FIFO with no writer would block `open` itself),
/// then the opened handle is inspected, so that nothing can be swapped in between a check and
/// the read, and at most `max + 1` bytes are read, so that a file that grows while it is read
/// is refused too.
pub fn read(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(ReadError::Io)?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(ReadError::NotRegular(if kind.is_dir() {
            "a folder"
        } else if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a file"
        }));
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge { max });
    }
    read_bounded(file, max)
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, max: u64) -> Result<String, ReadError> {
    String::from_utf8(read(path, max)?)
        .map_err(|_| ReadError::Io(io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text")))
}

fn read_bounded(file: File, max: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge { max });
    }
    Ok(bytes)
}

/// At most `max` bytes of `input` (standard input, say): more is an error rather than memory
/// without end.
pub fn read_stream(input: impl Read, max: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    input
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge { max });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn only_bounded_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.toml");
        std::fs::write(&file, b"x = 1\n").unwrap();
        assert_eq!(read(&file, 6).unwrap(), b"x = 1\n");
        assert!(matches!(read(&file, 5), Err(ReadError::TooLarge { max: 5 })));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_to_string(&link, 64).unwrap(), "x = 1\n");

        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let started = Instant::now();
        for (path, kind) in [
            (Path::new("/dev/zero"), "a character device"),
            (fifo.as_path(), "a FIFO (named pipe)"),
            (dir.path(), "a folder"),
        ] {
            match read(path, MAX_BYTES) {
                Err(e @ ReadError::NotRegular(_)) => assert!(e.reason().contains(kind), "{}", e.reason()),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(matches!(read(&dir.path().join("none"), 1), Err(ReadError::Io(_))));

        let zero = File::open("/dev/zero").unwrap();
        assert!(matches!(
            read_stream(zero, 1024),
            Err(ReadError::TooLarge { max: 1024 })
        ));
        assert_eq!(read_stream(&b"secret\n"[..], 7).unwrap(), b"secret\n");
    }
}
