//! gzip members (RFC 1952) read over raw deflate, so that the CRC-32 of the unpacked bytes is
//! computed only when nothing else vouches for them.
//!
//! flate2's gzip decoders always compute the trailer's CRC-32, about a tenth of a layer's
//! read on two cores (issue #35's profile). Where the caller checks the blob's digest against
//! the manifest (and the unpacked tar against the config's diff_id) the CRC adds nothing: a
//! blob that differs from what was pushed fails the digest. So this reader parses each
//! member's header itself (`FEXTRA`, `FNAME`, `FCOMMENT`, `FHCRC`), inflates the raw deflate
//! data with flate2's [`Decompress`] (zlib-rs or zlib-ng, as the build chose), and checks the
//! trailer's ISIZE always and its CRC-32 (and the header's CRC-16) only with [`GzipCrc::Check`].
//! Members follow one another as `gzip -dc` reads them: after a member, the end of the input
//! ends the stream, and anything else must be another member's header.

use flate2::{Crc, Decompress, FlushDecompress, Status};
use std::io::{self, BufRead, Read};

/// Whether a gzip stream's checksums are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GzipCrc {
    /// Nothing else checks the bytes (a `dir:` root, a `docker save` stream, a blob whose
    /// manifest gives no digest): the CRC-32 of each member is checked.
    Check,
    /// The caller checks the blob's digest: the CRC-32 is redundant and skipped.
    SkipDigestChecked,
}

const ID: [u8; 2] = [0x1f, 0x8b];
const DEFLATE: u8 = 8;
const FHCRC: u8 = 1 << 1;
const FEXTRA: u8 = 1 << 2;
const FNAME: u8 = 1 << 3;
const FCOMMENT: u8 = 1 << 4;
/// Bits RFC 1952 reserves: "a compliant decompressor must give an error indication if any
/// reserved bit is non-zero".
const RESERVED: u8 = 0xe0;

enum State {
    Header,
    Body,
    Trailer,
    Done,
}

/// A gzip stream (one member or several) as the bytes it unpacks to.
pub struct GzipReader<R> {
    inner: R,
    inflate: Decompress,
    /// The CRC-32 of the member's unpacked bytes so far, when checked.
    crc: Option<Crc>,
    /// The member's unpacked size modulo 2^32, as ISIZE records it.
    size: u32,
    members: u64,
    state: State,
}

fn damaged(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn cut_short(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the gzip stream ends inside {what}: it was cut short"),
    )
}

impl<R: BufRead> GzipReader<R> {
    pub fn new(inner: R, crc: GzipCrc) -> GzipReader<R> {
        GzipReader {
            inner,
            inflate: Decompress::new(false),
            crc: (crc == GzipCrc::Check).then(Crc::new),
            size: 0,
            members: 0,
            state: State::Header,
        }
    }

    /// The reader after the stream (for the bytes that follow it).
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// Reads exactly `buf.len()` header bytes, adding them to the header's CRC when kept.
    fn header_bytes(&mut self, buf: &mut [u8], header_crc: &mut Option<Crc>) -> io::Result<()> {
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => cut_short("a member's header"),
            _ => e,
        })?;
        if let Some(c) = header_crc {
            c.update(buf);
        }
        Ok(())
    }

    /// Skips a zero-terminated header field (`FNAME`, `FCOMMENT`) without keeping it: its
    /// length is not bounded by the format, so nothing of it is stored.
    fn skip_zero_terminated(&mut self, header_crc: &mut Option<Crc>) -> io::Result<()> {
        loop {
            let available = self.inner.fill_buf()?;
            if available.is_empty() {
                return Err(cut_short("a member's header"));
            }
            let (used, done) = match available.iter().position(|&b| b == 0) {
                Some(end) => (end + 1, true),
                None => (available.len(), false),
            };
            if let Some(c) = header_crc {
                c.update(&available[..used]);
            }
            self.inner.consume(used);
            if done {
                return Ok(());
            }
        }
    }

    fn read_header(&mut self) -> io::Result<()> {
        let mut header_crc = self.crc.as_ref().map(|_| Crc::new());
        let mut fixed = [0u8; 10];
        self.header_bytes(&mut fixed, &mut header_crc)?;
        if fixed[..2] != ID {
            return Err(damaged(if self.members == 0 {
                "it is not a gzip stream (its first bytes are not a gzip header)".to_string()
            } else {
                format!(
                    "the bytes after gzip member {} are neither the end of the stream nor another member",
                    self.members
                )
            }));
        }
        if fixed[2] != DEFLATE {
            return Err(damaged(format!(
                "a gzip member uses compression method {}, not deflate (8)",
                fixed[2]
            )));
        }
        let flags = fixed[3];
        if flags & RESERVED != 0 {
            return Err(damaged(format!(
                "a gzip member's header sets reserved flag bits ({flags:#04x})"
            )));
        }
        if flags & FEXTRA != 0 {
            let mut len = [0u8; 2];
            self.header_bytes(&mut len, &mut header_crc)?;
            let mut left = u16::from_le_bytes(len) as usize;
            let mut chunk = [0u8; 256];
            while left > 0 {
                let n = left.min(chunk.len());
                self.header_bytes(&mut chunk[..n], &mut header_crc)?;
                left -= n;
            }
        }
        if flags & FNAME != 0 {
            self.skip_zero_terminated(&mut header_crc)?;
        }
        if flags & FCOMMENT != 0 {
            self.skip_zero_terminated(&mut header_crc)?;
        }
        if flags & FHCRC != 0 {
            let mut stored = [0u8; 2];
            let expected = header_crc.as_ref().map(|c| c.sum() as u16);
            self.header_bytes(&mut stored, &mut None)?;
            if let Some(expected) = expected {
                if u16::from_le_bytes(stored) != expected {
                    return Err(damaged("a gzip member's header does not match its CRC-16"));
                }
            }
        }
        Ok(())
    }

    fn read_trailer(&mut self) -> io::Result<()> {
        let mut trailer = [0u8; 8];
        self.inner.read_exact(&mut trailer).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => cut_short("a member's trailer"),
            _ => e,
        })?;
        let [c0, c1, c2, c3, s0, s1, s2, s3] = trailer;
        if let Some(crc) = &self.crc {
            if u32::from_le_bytes([c0, c1, c2, c3]) != crc.sum() {
                return Err(damaged(
                    "a gzip member's unpacked bytes do not match its CRC-32: the stream is damaged",
                ));
            }
        }
        let size = u32::from_le_bytes([s0, s1, s2, s3]);
        if size != self.size {
            return Err(damaged(format!(
                "a gzip member unpacks to {} bytes (modulo 2^32) where its trailer says {size}: the stream is damaged",
                self.size
            )));
        }
        self.members += 1;
        self.size = 0;
        if let Some(crc) = &mut self.crc {
            crc.reset();
        }
        self.inflate.reset(false);
        Ok(())
    }

    /// Inflates into `buf`; `None` when the member's deflate data ended with nothing more.
    fn inflate_into(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let input = self.inner.fill_buf()?;
        let at_end = input.is_empty();
        let (in_before, out_before) = (self.inflate.total_in(), self.inflate.total_out());
        let status = self
            .inflate
            .decompress(input, buf, FlushDecompress::None)
            .map_err(|e| damaged(format!("the gzip stream's deflate data is damaged: {e}")))?;
        // Both deltas are bounded by the slices given, so they fit in usize.
        let used = (self.inflate.total_in() - in_before) as usize;
        let made = (self.inflate.total_out() - out_before) as usize;
        self.inner.consume(used);
        if let Some(crc) = &mut self.crc {
            crc.update(&buf[..made]);
        }
        self.size = self.size.wrapping_add(made as u32);
        if status == Status::StreamEnd {
            self.state = State::Trailer;
        } else if made == 0 && (at_end || used == 0) {
            // With input and room, inflate always moves; without input, the data was cut.
            return Err(cut_short("a member's deflate data"));
        }
        Ok((made > 0).then_some(made))
    }
}

impl<R: BufRead> Read for GzipReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.state {
                State::Header => {
                    if self.members > 0 && self.inner.fill_buf()?.is_empty() {
                        self.state = State::Done;
                        continue;
                    }
                    self.read_header()?;
                    self.state = State::Body;
                }
                State::Body => {
                    if let Some(n) = self.inflate_into(buf)? {
                        return Ok(n);
                    }
                }
                State::Trailer => {
                    self.read_trailer()?;
                    self.state = State::Header;
                }
                State::Done => return Ok(0),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::GzBuilder;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn unpack(bytes: &[u8], crc: GzipCrc) -> io::Result<Vec<u8>> {
        // A small buffer, so that headers and trailers straddle refills.
        let mut r = GzipReader::new(io::BufReader::with_capacity(7, bytes), crc);
        let mut out = Vec::new();
        r.read_to_end(&mut out)?;
        Ok(out)
    }

    fn both(bytes: &[u8]) -> [io::Result<Vec<u8>>; 2] {
        [
            unpack(bytes, GzipCrc::Check),
            unpack(bytes, GzipCrc::SkipDigestChecked),
        ]
    }

    fn data() -> Vec<u8> {
        (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect()
    }

    #[test]
    fn reads_what_flate2_reads() {
        let d = data();
        for r in both(&gzip(&d)) {
            assert_eq!(r.unwrap(), d);
        }
        for r in both(&gzip(b"")) {
            assert_eq!(r.unwrap(), b"");
        }
    }

    #[test]
    fn reads_every_header_field() {
        let d = data();
        let mut e = GzBuilder::new()
            .filename("layer.tar")
            .comment("a comment")
            .extra(vec![1, 2, 3, 4, 5])
            .mtime(7)
            .write(Vec::new(), flate2::Compression::fast());
        e.write_all(&d).unwrap();
        let mut bytes = e.finish().unwrap();
        // Set FHCRC and insert the header's CRC-16 before the deflate data.
        let header_len = 10 + 2 + 5 + "layer.tar\0".len() + "a comment\0".len();
        bytes[3] |= FHCRC;
        let mut crc = Crc::new();
        crc.update(&bytes[..header_len]);
        let crc16 = (crc.sum() as u16).to_le_bytes();
        bytes.splice(header_len..header_len, crc16);
        for r in both(&bytes) {
            assert_eq!(r.unwrap(), d);
        }
        // A wrong header CRC is damage when checksums are checked.
        bytes[header_len] ^= 0xff;
        let [checked, skipped] = both(&bytes);
        assert!(checked.unwrap_err().to_string().contains("CRC-16"));
        assert_eq!(skipped.unwrap(), d);
    }

    #[test]
    fn reads_several_members() {
        let mut bytes = gzip(b"first ");
        bytes.extend(gzip(b""));
        bytes.extend(gzip(b"second"));
        for r in both(&bytes) {
            assert_eq!(r.unwrap(), b"first second");
        }
        // Anything after a member other than another one is damage.
        bytes.extend(b"\0\0\0\0\0\0\0\0\0\0\0\0");
        for r in both(&bytes) {
            let e = r.unwrap_err();
            assert!(e.to_string().contains("after gzip member 3"), "{e}");
        }
    }

    #[test]
    fn a_changed_crc_fails_only_when_checked() {
        let d = data();
        let mut bytes = gzip(&d);
        let crc_at = bytes.len() - 8;
        bytes[crc_at] ^= 1;
        let [checked, skipped] = both(&bytes);
        assert!(checked.unwrap_err().to_string().contains("CRC-32"));
        assert_eq!(skipped.unwrap(), d);
    }

    #[test]
    fn a_changed_size_always_fails() {
        let mut bytes = gzip(&data());
        let size_at = bytes.len() - 4;
        bytes[size_at] ^= 1;
        for r in both(&bytes) {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            assert!(e.to_string().contains("its trailer says"), "{e}");
        }
    }

    #[test]
    fn damaged_deflate_data_fails_either_way_or_is_caught_by_the_size() {
        let d = data();
        let clean = gzip(&d);
        // Flip bytes all over the deflate data: each flip is an error, or unpacks to other
        // bytes that the CRC catches (checked) or that only the blob digest would catch
        // (skipped, which the callers then check).
        for at in (10..clean.len() - 8).step_by(997) {
            let mut bytes = clean.clone();
            bytes[at] ^= 0x55;
            let [checked, skipped] = both(&bytes);
            assert!(checked.is_err(), "a flip at {at} went unnoticed");
            if let Ok(out) = skipped {
                assert_ne!(out, d, "a flip at {at} changed nothing");
            }
        }
    }

    #[test]
    fn cut_streams_fail() {
        let bytes = gzip(&data());
        for end in [0, 1, 5, 10, 11, bytes.len() / 2, bytes.len() - 8, bytes.len() - 1] {
            for r in both(&bytes[..end]) {
                let e = r.unwrap_err();
                assert!(
                    matches!(
                        e.kind(),
                        io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData
                    ),
                    "cut at {end}: {e}"
                );
            }
        }
    }

    #[test]
    fn refuses_what_is_not_gzip() {
        for bytes in [
            &b"PK\x03\x04 not gzip"[..],
            &b"\x1f\x8b\x09\x00\x00\x00\x00\x00\x00\x03"[..],
            &b"\x1f\x8b\x08\x20\x00\x00\x00\x00\x00\x03"[..],
            &b"\x1f\x8b\x08\x00garbage that is not deflate at all"[..],
        ] {
            for r in both(bytes) {
                assert!(r.is_err(), "{bytes:?}");
            }
        }
    }
}
