//! gzip members (RFC 1952) read over raw deflate, so that the CRC-32 of the unpacked bytes is
//! computed only when nothing else vouches for them.
//!
//! flate2's gzip decoders always compute the trailer's CRC-32, about a tenth of a layer's
//! read on two cores (issue #35's profile). Where the caller checks the blob's digest against
//! the manifest (and the unpacked tar against the config's diff_id) the CRC adds nothing: a
//! blob that differs from what was pushed fails the digest. So this reader parses each
//! member's header itself (`FEXTRA`, `FNAME`, `FCOMMENT`, `FHCRC`), inflates the raw deflate
//! data with one [`Inflater`] (flate2's [`Decompress`], zlib-rs or zlib-ng as the build chose;
//! or ISA-L's igzip with the `isal` feature), and checks the trailer's ISIZE always and its
//! CRC-32 (and the header's CRC-16) only with [`GzipCrc::Check`]. The header, trailer and
//! checksum logic is the same whichever library inflates: each sits behind [`RawInflate`].
//! Members follow one another as `gzip -dc` reads them: after a member, the end of the input
//! ends the stream, and anything else must be another member's header.

use flate2::{Crc, Decompress, FlushDecompress, Status};
use std::io::{self, BufRead, Read};

/// Whether a gzip stream's checksums are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GzipCrc {
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

/// Which library inflates each member's deflate data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inflater {
    /// flate2's [`Decompress`]: zlib-rs, or zlib-ng with the `zlib-ng` feature. An `isal`
    /// build reads layers with ISA-L and keeps this one for its tests, which compare the two.
    #[cfg_attr(all(feature = "isal", not(test)), allow(dead_code))]
    Flate2,
    /// ISA-L's igzip (the `isal` feature), whose CRC-32 then serves [`GzipCrc::Check`] too.
    #[cfg(feature = "isal")]
    Isal,
}

impl Inflater {
    /// What layers are read with: ISA-L when it is compiled in (it inflates the bench image
    /// with the least CPU time, bench/results.md), flate2 otherwise.
    #[cfg(feature = "isal")]
    pub(crate) const DEFAULT: Inflater = Inflater::Isal;
    /// What layers are read with: ISA-L when it is compiled in (it inflates the bench image
    /// with the least CPU time, bench/results.md), flate2 otherwise.
    #[cfg(not(feature = "isal"))]
    pub(crate) const DEFAULT: Inflater = Inflater::Flate2;

    fn raw(self) -> Box<dyn RawInflate> {
        match self {
            Inflater::Flate2 => Box::new(Decompress::new(false)),
            #[cfg(feature = "isal")]
            Inflater::Isal => Box::new(isal::Inflate::new()),
        }
    }

    fn crc32(self) -> Crc32 {
        match self {
            Inflater::Flate2 => Crc32::Flate2(Crc::new()),
            #[cfg(feature = "isal")]
            Inflater::Isal => Crc32::Isal(0),
        }
    }
}

/// What one call of a raw-deflate inflater did.
struct Step {
    /// Input bytes taken.
    used: usize,
    /// Bytes written to the output.
    made: usize,
    /// The deflate data ended (its final block is complete and all of it written out).
    end: bool,
    /// Bytes that follow the deflate data but that earlier calls took as input: ISA-L reads up
    /// to 8 bytes ahead into its bit buffer, and those may have come from an earlier slice.
    read_ahead: ReadAhead,
}

/// A raw-deflate inflater for one member's data at a time.
trait RawInflate: Send {
    /// Inflates from `input` into `output`, without the flush that would end the data early.
    fn inflate(&mut self, input: &[u8], output: &mut [u8]) -> io::Result<Step>;
    /// Readies the inflater for the next member's deflate data.
    fn reset(&mut self);
}

impl RawInflate for Decompress {
    fn inflate(&mut self, input: &[u8], output: &mut [u8]) -> io::Result<Step> {
        let (in_before, out_before) = (self.total_in(), self.total_out());
        let status = self
            .decompress(input, output, FlushDecompress::None)
            .map_err(|e| damaged(format!("the gzip stream's deflate data is damaged: {e}")))?;
        // Both deltas are bounded by the slices given, so they fit in usize.
        Ok(Step {
            used: (self.total_in() - in_before) as usize,
            made: (self.total_out() - out_before) as usize,
            end: status == Status::StreamEnd,
            read_ahead: ReadAhead::default(),
        })
    }

    fn reset(&mut self) {
        Decompress::reset(self, false);
    }
}

/// The CRC-32 of a member's unpacked bytes, computed by the library that inflates them.
enum Crc32 {
    Flate2(Crc),
    #[cfg(feature = "isal")]
    Isal(u32),
}

impl Crc32 {
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Crc32::Flate2(c) => c.update(bytes),
            #[cfg(feature = "isal")]
            Crc32::Isal(sum) => *sum = isal::crc32(*sum, bytes),
        }
    }

    fn sum(&self) -> u32 {
        match self {
            Crc32::Flate2(c) => c.sum(),
            #[cfg(feature = "isal")]
            Crc32::Isal(sum) => *sum,
        }
    }

    fn reset(&mut self) {
        match self {
            Crc32::Flate2(c) => c.reset(),
            #[cfg(feature = "isal")]
            Crc32::Isal(sum) => *sum = 0,
        }
    }
}

/// Up to 8 bytes taken from the input and given back, in stream order.
#[derive(Default)]
struct ReadAhead {
    bytes: [u8; 8],
    start: usize,
    end: usize,
}

impl ReadAhead {
    #[cfg(feature = "isal")]
    fn of(bytes: &[u8]) -> ReadAhead {
        let mut ahead = ReadAhead::default();
        let n = bytes.len().min(ahead.bytes.len());
        ahead.bytes[..n].copy_from_slice(&bytes[..n]);
        ahead.end = n;
        ahead
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// The input, with the bytes an inflater read past its deflate data put back in front of it.
struct Resumed<R> {
    ahead: ReadAhead,
    inner: R,
}

impl<R: BufRead> Read for Resumed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Resumed<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.ahead.is_empty() {
            self.inner.fill_buf()
        } else {
            Ok(&self.ahead.bytes[self.ahead.start..self.ahead.end])
        }
    }

    fn consume(&mut self, n: usize) {
        if self.ahead.is_empty() {
            self.inner.consume(n);
        } else {
            self.ahead.start = (self.ahead.start + n).min(self.ahead.end);
        }
    }
}

enum State {
    Header,
    Body,
    Trailer,
    Done,
}

/// A gzip stream (one member or several) as the bytes it unpacks to.
pub(crate) struct GzipReader<R> {
    inner: Resumed<R>,
    inflate: Box<dyn RawInflate>,
    /// The CRC-32 of the member's unpacked bytes so far, when checked.
    crc: Option<Crc32>,
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
    /// A reader that inflates with [`Inflater::DEFAULT`].
    pub(crate) fn new(inner: R, crc: GzipCrc) -> GzipReader<R> {
        GzipReader::with_inflater(inner, crc, Inflater::DEFAULT)
    }

    /// A reader that inflates with `inflater` (the tests read the same streams with each).
    pub(crate) fn with_inflater(inner: R, crc: GzipCrc, inflater: Inflater) -> GzipReader<R> {
        GzipReader {
            inner: Resumed {
                ahead: ReadAhead::default(),
                inner,
            },
            inflate: inflater.raw(),
            crc: (crc == GzipCrc::Check).then(|| inflater.crc32()),
            size: 0,
            members: 0,
            state: State::Header,
        }
    }

    /// The reader after the stream (for the bytes that follow it). Bytes an inflater read
    /// ahead are gone from it: only a stream given up before its end leaves any.
    pub(crate) fn into_inner(self) -> R {
        self.inner.inner
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
        self.inflate.reset();
        Ok(())
    }

    /// Inflates into `buf`; `None` when the member's deflate data ended with nothing more.
    fn inflate_into(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let input = self.inner.fill_buf()?;
        let at_end = input.is_empty();
        let step = self.inflate.inflate(input, buf)?;
        self.inner.consume(step.used);
        if !step.read_ahead.is_empty() {
            // Read-ahead bytes come from this member's earlier slices, so nothing is put back
            // yet: the trailer's 8 bytes take all of the last member's before another starts.
            debug_assert!(self.inner.ahead.is_empty());
            self.inner.ahead = step.read_ahead;
        }
        let made = step.made;
        if let Some(crc) = &mut self.crc {
            crc.update(&buf[..made]);
        }
        self.size = self.size.wrapping_add(made as u32);
        if step.end {
            self.state = State::Trailer;
        } else if made == 0 && (at_end || step.used == 0) {
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

/// ISA-L through isal-sys's bindings: the only unsafe code in memlint, kept to four calls.
#[cfg(feature = "isal")]
mod isal {
    use super::{damaged, RawInflate, ReadAhead, Step};
    use isal_sys::igzip_lib as ffi;
    use std::io;
    use std::ptr;

    extern "C" {
        // crc.h, built into the same static libisal as igzip (isal-sys binds igzip_lib.h only):
        // the reflected CRC-32 that gzip uses, continued from `init_crc` (0 to start).
        fn crc32_gzip_refl(init_crc: u32, buf: *const u8, len: u64) -> u32;
    }

    pub(super) fn crc32(crc: u32, bytes: &[u8]) -> u32 {
        // SAFETY: the call reads `bytes.len()` bytes from the start of a live slice.
        unsafe { crc32_gzip_refl(crc, bytes.as_ptr(), bytes.len() as u64) }
    }

    /// igzip's stateful inflate over raw deflate (`ISAL_DEFLATE`: no wrapper, no checksum).
    pub(super) struct Inflate {
        // About 90 KiB (Huffman tables, a 64 KiB window): boxed, and never moved by a call.
        state: Box<ffi::inflate_state>,
    }

    // SAFETY: between calls the state's only pointers (`next_in`, `next_out`) are null: `inflate`
    // sets them from its slices and clears them before it returns. Nothing else is shared.
    unsafe impl Send for Inflate {}

    impl Inflate {
        pub(super) fn new() -> Inflate {
            // Zeroed in place (`Box::new_zeroed` is newer than the crate's rust-version), not
            // built on the stack and moved.
            let mut state = Box::<ffi::inflate_state>::new_uninit();
            // SAFETY: the box holds room for one `inflate_state`, written whole with zeros:
            // integers, arrays of them and pointers, for which all zeros is a valid value (null
            // pointers); `isal_inflate_init` then sets it up.
            let mut state = unsafe {
                state.as_mut_ptr().write_bytes(0, 1);
                ffi::isal_inflate_init(state.as_mut_ptr());
                state.assume_init()
            };
            state.crc_flag = ffi::ISAL_DEFLATE;
            Inflate { state }
        }
    }

    fn describe(code: i32) -> String {
        match code {
            ffi::ISAL_INVALID_BLOCK => "invalid block".to_string(),
            ffi::ISAL_INVALID_SYMBOL => "invalid symbol".to_string(),
            ffi::ISAL_INVALID_LOOKBACK => "invalid distance too far back".to_string(),
            other => format!("ISA-L error {other}"),
        }
    }

    impl RawInflate for Inflate {
        fn inflate(&mut self, input: &[u8], output: &mut [u8]) -> io::Result<Step> {
            // ISA-L counts bytes in u32: longer slices are offered in part.
            let input = &input[..input.len().min(u32::MAX as usize)];
            let room = output.len().min(u32::MAX as usize);
            let s = &mut *self.state;
            // ISA-L only reads through `next_in`; the field is not const in C.
            s.next_in = input.as_ptr().cast_mut();
            s.avail_in = input.len() as u32;
            s.next_out = output.as_mut_ptr();
            s.avail_out = room as u32;
            // SAFETY: `next_in`/`avail_in` and `next_out`/`avail_out` describe live slices that
            // the call reads and writes within; the state was set up by `isal_inflate_init`.
            let code = unsafe { ffi::isal_inflate(s) };
            let mut used = input.len() - s.avail_in as usize;
            let made = room - s.avail_out as usize;
            s.next_in = ptr::null_mut();
            s.avail_in = 0;
            s.next_out = ptr::null_mut();
            s.avail_out = 0;
            if code != ffi::ISAL_DECOMP_OK as i32 {
                return Err(damaged(format!(
                    "the gzip stream's deflate data is damaged: {}",
                    describe(code)
                )));
            }
            let end = s.block_state == ffi::isal_block_state_ISAL_BLOCK_FINISH;
            let mut read_ahead = ReadAhead::default();
            if end {
                // ISA-L loads input 8 bytes at a time into a bit buffer and, in its stateful
                // API, keeps what it loaded past the final block: the whole bytes above the
                // last byte's padding bits belong to the trailer. Those taken in this call stay
                // in the caller's buffer; those taken by earlier calls come before them.
                let bits = u32::try_from(s.read_in_length).unwrap_or(0).min(64);
                let ahead = (bits / 8) as usize;
                let bytes = s.read_in.checked_shr(bits % 8).unwrap_or(0).to_le_bytes();
                s.read_in = 0;
                s.read_in_length = 0;
                let from_this_call = ahead.min(used);
                used -= from_this_call;
                read_ahead = ReadAhead::of(&bytes[..ahead - from_this_call]);
            }
            Ok(Step {
                used,
                made,
                end,
                read_ahead,
            })
        }

        fn reset(&mut self) {
            // SAFETY: the state was set up by `isal_inflate_init`; reset keeps `crc_flag`.
            unsafe { ffi::isal_inflate_reset(&mut *self.state) };
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

    /// Every backend compiled in.
    const INFLATERS: &[Inflater] = &[
        Inflater::Flate2,
        #[cfg(feature = "isal")]
        Inflater::Isal,
    ];

    fn unpack_with(bytes: &[u8], crc: GzipCrc, inflater: Inflater, capacity: usize) -> io::Result<Vec<u8>> {
        unpack_in_reads(bytes, crc, inflater, capacity, 1 << 16)
    }

    /// Unpacks through an input buffer of `capacity` bytes, `read` at most `chunk` at a time.
    fn unpack_in_reads(
        bytes: &[u8],
        crc: GzipCrc,
        inflater: Inflater,
        capacity: usize,
        chunk: usize,
    ) -> io::Result<Vec<u8>> {
        let input = io::BufReader::with_capacity(capacity, bytes);
        let mut r = GzipReader::with_inflater(input, crc, inflater);
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            match r.read(&mut buf)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Checked and skipped, with each backend. A small input buffer, so that headers and
    /// trailers straddle refills and ISA-L reads ahead across them.
    fn both(bytes: &[u8]) -> Vec<[io::Result<Vec<u8>>; 2]> {
        INFLATERS
            .iter()
            .map(|&inflater| {
                [
                    unpack_with(bytes, GzipCrc::Check, inflater, 7),
                    unpack_with(bytes, GzipCrc::SkipDigestChecked, inflater, 7),
                ]
            })
            .collect()
    }

    fn data() -> Vec<u8> {
        (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect()
    }

    #[test]
    fn reads_what_flate2_reads() {
        let d = data();
        for r in both(&gzip(&d)).into_iter().flatten() {
            assert_eq!(r.unwrap(), d);
        }
        for r in both(&gzip(b"")).into_iter().flatten() {
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
        for r in both(&bytes).into_iter().flatten() {
            assert_eq!(r.unwrap(), d);
        }
        // A wrong header CRC is damage when checksums are checked.
        bytes[header_len] ^= 0xff;
        for [checked, skipped] in both(&bytes) {
            assert!(checked.unwrap_err().to_string().contains("CRC-16"));
            assert_eq!(skipped.unwrap(), d);
        }
    }

    #[test]
    fn reads_several_members() {
        let mut bytes = gzip(b"first ");
        bytes.extend(gzip(b""));
        bytes.extend(gzip(b"second"));
        for r in both(&bytes).into_iter().flatten() {
            assert_eq!(r.unwrap(), b"first second");
        }
        // Anything after a member other than another one is damage.
        bytes.extend(b"\0\0\0\0\0\0\0\0\0\0\0\0");
        for r in both(&bytes).into_iter().flatten() {
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
        for [checked, skipped] in both(&bytes) {
            assert!(checked.unwrap_err().to_string().contains("CRC-32"));
            assert_eq!(skipped.unwrap(), d);
        }
    }

    #[test]
    fn a_changed_size_always_fails() {
        let mut bytes = gzip(&data());
        let size_at = bytes.len() - 4;
        bytes[size_at] ^= 1;
        for r in both(&bytes).into_iter().flatten() {
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
            for [checked, skipped] in both(&bytes) {
                assert!(checked.is_err(), "a flip at {at} went unnoticed");
                if let Ok(out) = skipped {
                    assert_ne!(out, d, "a flip at {at} changed nothing");
                }
            }
        }
    }

    #[test]
    fn cut_streams_fail() {
        let bytes = gzip(&data());
        for end in [0, 1, 5, 10, 11, bytes.len() / 2, bytes.len() - 8, bytes.len() - 1] {
            for r in both(&bytes[..end]).into_iter().flatten() {
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
            for r in both(bytes).into_iter().flatten() {
                assert!(r.is_err(), "{bytes:?}");
            }
        }
    }

    #[test]
    fn every_inflater_reads_the_same_and_refuses_the_same_damage() {
        let d = data();
        // Several members: default and stored (type 0) blocks, an empty member, a member
        // whose deflate data ends within the bytes ISA-L reads ahead of the trailer.
        let mut stream = gzip(&d);
        let mut stored = GzEncoder::new(Vec::new(), flate2::Compression::none());
        stored.write_all(&d[..70_000]).unwrap();
        stream.extend(stored.finish().unwrap());
        stream.extend(gzip(b""));
        stream.extend(gzip(b"x"));
        let mut expected = d.clone();
        expected.extend_from_slice(&d[..70_000]);
        expected.push(b'x');
        let member = gzip(&d);
        let deflate_at = 10 + (member.len() - 18) / 2;
        for &inflater in INFLATERS {
            // Input buffers from 1 byte, reads from 1 byte: a member's deflate data then ends in
            // a later call than the one that read its last bytes ahead (ISA-L's bit buffer).
            for (capacity, chunk) in [
                (1, 1 << 16),
                (7, 1),
                (8, 3),
                (9, 1 << 16),
                (4096, 100),
                (1 << 20, 1 << 20),
            ] {
                for crc in [GzipCrc::Check, GzipCrc::SkipDigestChecked] {
                    let out = unpack_in_reads(&stream, crc, inflater, capacity, chunk);
                    assert!(
                        out.as_ref().is_ok_and(|o| *o == expected),
                        "{inflater:?}, {capacity}-byte input buffer, {chunk}-byte reads, {crc:?}: {:?}",
                        out.map(|o| o.len())
                    );
                }
            }
            // Damaged deflate data, a damaged CRC-32, a damaged ISIZE: each an error.
            for (at, crc) in [
                (deflate_at, GzipCrc::Check),
                (member.len() - 8, GzipCrc::Check),
                (member.len() - 4, GzipCrc::Check),
                (member.len() - 4, GzipCrc::SkipDigestChecked),
            ] {
                let mut bytes = member.clone();
                bytes[at] ^= 0x10;
                for capacity in [7, 1 << 20] {
                    let e = unpack_with(&bytes, crc, inflater, capacity).unwrap_err();
                    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{inflater:?}, {at}: {e}");
                    assert!(e.to_string().contains("damaged"), "{e}");
                }
            }
        }
    }
}
