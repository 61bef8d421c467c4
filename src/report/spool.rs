//! Rendered reports kept on disk, not in memory, until a run writes them out in its order: a
//! fleet renders each container's report as its image is read, in no useful order, and a
//! merge reads shards in the order given; both write in manifest order at the end.

use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};

/// Where one rendered piece lies in the spool.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Chunk {
    at: u64,
    len: u64,
}

impl Chunk {
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// An unnamed temporary file (gone when it is closed, even on a crash) that rendered pieces
/// are appended to.
pub(crate) struct Spool {
    file: BufWriter<File>,
    len: u64,
}

impl Spool {
    pub(crate) fn new() -> io::Result<Spool> {
        Ok(Spool {
            file: BufWriter::with_capacity(256 << 10, tempfile::tempfile()?),
            len: 0,
        })
    }

    /// Appends `bytes`; where they lie.
    pub(crate) fn put(&mut self, bytes: &[u8]) -> io::Result<Chunk> {
        self.file.write_all(bytes)?;
        let chunk = Chunk {
            at: self.len,
            len: bytes.len() as u64,
        };
        self.len += chunk.len;
        Ok(chunk)
    }

    /// The spool, written, to read pieces back from.
    pub(crate) fn finish(self) -> io::Result<Spooled> {
        let file = self.file.into_inner().map_err(io::IntoInnerError::into_error)?;
        Ok(Spooled { file })
    }
}

/// A spool whose pieces are all written.
pub(crate) struct Spooled {
    file: File,
}

impl Spooled {
    /// Copies one piece to `w`.
    pub(crate) fn copy(&self, chunk: Chunk, w: &mut dyn Write) -> io::Result<()> {
        let mut f = &self.file;
        f.seek(SeekFrom::Start(chunk.at))?;
        let copied = io::copy(&mut f.take(chunk.len), w)?;
        if copied != chunk.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the spool of rendered reports is shorter than was written",
            ));
        }
        Ok(())
    }

    /// One piece's bytes.
    pub(crate) fn read(&self, chunk: Chunk) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(usize::try_from(chunk.len).unwrap_or(0));
        self.copy(chunk, &mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_come_back_in_any_order() {
        let mut s = Spool::new().unwrap();
        let a = s.put(b"first").unwrap();
        let e = s.put(b"").unwrap();
        let b = s.put(b"second piece").unwrap();
        let s = s.finish().unwrap();
        assert_eq!(s.read(b).unwrap(), b"second piece");
        assert_eq!(s.read(a).unwrap(), b"first");
        assert!(e.is_empty() && s.read(e).unwrap().is_empty());
    }
}
