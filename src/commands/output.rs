//! Reports written to their file whole or not at all: into a new file in the destination
//! folder, then renamed over the path. A link at the path is replaced, never followed (a
//! pull request's checkout may hold one pointing at `~/.docker/config.json`); a FIFO, device,
//! socket or folder there is refused before anything is read, so a run never blocks on one.

use crate::error::{Error, Result};
use crate::untrusted::{Allow, SafeWriter};
use std::io::Write;
use std::path::Path;

/// What is at a report's path, when it is not something a report may replace.
fn refused_kind(path: &Path) -> Option<&'static str> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let t = meta.file_type();
    if t.is_file() || t.is_symlink() {
        return None;
    }
    if t.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO");
        }
        if t.is_socket() {
            return Some("a socket");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("a device");
        }
    }
    Some("not a regular file")
}

/// A path that names one of this process's own streams rather than a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
    Null,
}

/// The stream `path` names: `/dev/stdout`, `/dev/fd/2`, `/proc/self/fd/1` (any path to the
/// very file this process writes its standard output or error to), and `/dev/null`. CI scripts
/// write `-o json=/dev/stdout`; replacing such a path by rename would replace `/dev/stdout`
/// itself when memlint runs as root in a job's container, so the report goes to the stream.
fn stream(path: &Path) -> Option<Stream> {
    // `/proc/self/fd/1` of a pipe resolves to no path (`pipe:[…]`): not canonicalized, compared.
    if std::fs::canonicalize(path).is_ok_and(|p| p == Path::new("/dev/null")) {
        return Some(Stream::Null);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let target = std::fs::metadata(path).ok()?;
        let same = |fd: std::os::fd::BorrowedFd<'_>| {
            fd.try_clone_to_owned()
                .map(std::fs::File::from)
                .and_then(|f| f.metadata())
                .is_ok_and(|m| m.dev() == target.dev() && m.ino() == target.ino())
        };
        use std::os::fd::AsFd;
        if same(std::io::stdout().as_fd()) {
            return Some(Stream::Stdout);
        }
        if same(std::io::stderr().as_fd()) {
            return Some(Stream::Stderr);
        }
    }
    None
}

/// Refuses a report path that holds a FIFO, a device, a socket or a folder; `given` is the
/// option as given (`--output out.sarif`, `-o sarif=out.sarif`).
pub(crate) fn check_destination(given: &str, path: &Path) -> Result<()> {
    if stream(path).is_some() {
        return Ok(());
    }
    match refused_kind(path) {
        None => Ok(()),
        Some(kind) => Err(Error::BadArgument {
            what: format!("{given} ({kind}, not a regular file)"),
            help: "memlint writes a report to a new file beside the path and renames it over the path, so the path must be a regular file (or a link, which is replaced) or not exist yet; leave the option out to print the report on standard output".to_string(),
        }),
    }
}

/// Writes a report to `path` through a temporary file in its folder, renamed over the path
/// once complete; `allow`: memlint's own colour or workflow commands in this report.
pub(crate) fn write_file(
    path: &Path,
    allow: Allow,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    write_own_file(path, |file| {
        let mut w = SafeWriter::new(std::io::BufWriter::new(file), allow);
        write(&mut w).and_then(|_| w.finish())
    })
}

/// [`write_file`] of text that is memlint's own from end to end (a man page), as it is.
pub(crate) fn write_own_file(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let failed = |source| Error::Output {
        path: path.display().to_string(),
        source,
    };
    match stream(path) {
        Some(Stream::Stdout) => {
            let mut out = std::io::stdout().lock();
            return write(&mut out).and_then(|_| out.flush()).map_err(failed);
        }
        Some(Stream::Stderr) => {
            let mut err = std::io::stderr().lock();
            return write(&mut err).and_then(|_| err.flush()).map_err(failed);
        }
        Some(Stream::Null) => return write(&mut std::io::sink()).map_err(failed),
        None => {}
    }
    // Checked again here: the path may have changed since the run began.
    check_destination(&format!("the report path {}", path.display()), path)?;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".memlint-tmp");
    #[cfg(unix)]
    {
        // As `File::create` makes it: readable by all unless the umask says otherwise.
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut temp = builder.tempfile_in(folder).map_err(failed)?;
    {
        let mut w = std::io::BufWriter::new(temp.as_file_mut());
        write(&mut w).and_then(|_| w.flush()).map_err(failed)?;
    }
    temp.as_file().sync_all().map_err(failed)?;
    // rename(2): the path's entry now names the new file, whatever it named before (a link
    // included); on failure the temporary file is removed as `temp` drops.
    temp.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_replaced_and_its_target_kept() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("secret");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("out.json");
        #[cfg(unix)]
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_file(&link, Allow::default(), |w| w.write_all(b"report")).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "report");
        assert!(!std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporary file left"
        );
        assert!(check_destination("--output", dir.path()).is_err());
    }
}
