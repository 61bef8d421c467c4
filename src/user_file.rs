//! Files the user names (`--config`, a `.memlint.toml` found by walking up, `--dockerfile`,
//! `--registry-ca`): read only when they are regular files, and only up to a bound, so that a
//! path to `/dev/zero` cannot fill memory and a FIFO cannot block the run. A base module: it
//! uses no other module of the crate; callers turn a [`ReadError`] into their diagnostic.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The bound of every file the user names: configs, Dockerfiles and CA bundles are far
/// smaller (a system CA bundle is about 200 KiB).
pub(crate) const MAX_BYTES: u64 = 4 << 20;

/// Why a file the user named was not read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Opening, inspecting or reading failed.
    Io(io::Error),
    /// Not a regular file (after following symbolic links): what it is instead.
    NotRegular(&'static str),
    /// Larger than the bound.
    TooLarge { max: u64 },
    /// A file of a kernel pseudo-filesystem (procfs, sysfs…): which one.
    Pseudo(&'static str),
    /// A file memlint found by itself whose links lead out of the folder it was found under.
    Outside { folder: PathBuf },
}

impl ReadError {
    /// What is wrong, as a clause: "it is a FIFO (named pipe), not a regular file".
    pub(crate) fn reason(&self) -> String {
        match self {
            ReadError::Io(e) => e.to_string(),
            ReadError::NotRegular(kind) => format!("it is {kind}, not a regular file"),
            ReadError::TooLarge { max } => format!("it is larger than {} MiB", max >> 20),
            ReadError::Pseudo(fs) => format!("it is a file of the kernel's {fs}, not a regular file"),
            ReadError::Outside { folder } => {
                format!("it is a symbolic link that leads out of {}", folder.display())
            }
        }
    }

    /// What to do about it.
    pub(crate) fn help(&self) -> &'static str {
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
            ReadError::Pseudo(_) => {
                "name a regular file: memlint reads no kernel files (/proc, /sys), which can hold the environment of this job"
            }
            ReadError::Outside { .. } => {
                "memlint follows the links of files it finds by itself only inside the repository or the --k8s folder: replace the link with the file, or name the file on the command line (--config, --dockerfile, --k8s FILE)"
            }
        }
    }

    /// The error as an [`io::Error`] whose message is [`ReadError::reason`].
    pub(crate) fn into_io(self) -> io::Error {
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
pub(crate) fn read(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
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
    if let Some(fs) = pseudo_filesystem(&file) {
        return Err(ReadError::Pseudo(fs));
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge { max });
    }
    read_bounded(file, max)
}

/// [`read`] for a file memlint found by itself (`.memlint.toml` above the working folder,
/// `./Dockerfile`, the manifests of a `--k8s` folder): refused when it is a link whose target
/// lies outside `folder`, so that a file added to a repository cannot make memlint read, and
/// print in a diagnostic, a file of the machine that runs it (`~/.docker/config.json`).
pub(crate) fn read_inside(path: &Path, folder: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let target = std::fs::canonicalize(path).map_err(ReadError::Io)?;
    let folder = std::fs::canonicalize(folder).map_err(ReadError::Io)?;
    if !target.starts_with(&folder) {
        return Err(ReadError::Outside { folder });
    }
    read(&target, max)
}

/// [`read_inside`], as UTF-8 text.
pub(crate) fn read_inside_to_string(path: &Path, folder: &Path, max: u64) -> Result<String, ReadError> {
    utf8(read_inside(path, folder, max)?)
}

/// The folder a file memlint finds by itself under `start` may link within: the repository
/// that holds `start` (the nearest folder above it with a `.git`), else `start` itself.
pub(crate) fn repository_of(start: &Path) -> PathBuf {
    start
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(start)
        .to_path_buf()
}

/// The kernel pseudo-filesystem `file` is on, if any: their files claim to be regular files
/// of size 0 and hold what the kernel makes up on read (`/proc/self/environ`: the job's
/// secrets).
#[cfg(target_os = "linux")]
fn pseudo_filesystem(file: &File) -> Option<&'static str> {
    let magic = rustix::fs::fstatfs(file).ok()?.f_type as u64;
    Some(match magic {
        0x9fa0 => "proc filesystem",
        0x6265_6572 => "sysfs",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0x0027_e0eb | 0x6367_7270 => "cgroup filesystem",
        0x6265_6570 => "configfs",
        0xcafe_4a11 => "bpf filesystem",
        0xde5e_81e4 => "efivarfs",
        0x6165_676c => "pstore",
        _ => return None,
    })
}

#[cfg(not(target_os = "linux"))]
fn pseudo_filesystem(_file: &File) -> Option<&'static str> {
    None
}

/// [`read`], as UTF-8 text.
pub(crate) fn read_to_string(path: &Path, max: u64) -> Result<String, ReadError> {
    utf8(read(path, max)?)
}

fn utf8(bytes: Vec<u8>) -> Result<String, ReadError> {
    String::from_utf8(bytes)
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
pub(crate) fn read_stream(input: impl Read, max: u64) -> Result<Vec<u8>, ReadError> {
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
