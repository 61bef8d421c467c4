//! xz and bzip2 streams, which containers/image reads as it reads gzip and zstd (layers whose
//! media type ends `+xz` or `+bzip2`, `docker save | xz` archives such as podman's test
//! fixtures). Told by their magic bytes like the others, and bounded like them: the unpacked
//! size and ratio limits of [`super::Limits`] apply to what these decoders give, and the xz
//! decoder refuses a dictionary above [`XZ_MEMORY_KIB`] before allocating it. Kept apart
//! from the gzip and zstd paths so that either can change without the other.

use std::io::{BufRead, Read};

/// The most memory one xz block's decoder may take, in KiB. `xz -9` (and `-9e`), the largest
/// preset, uses a 64 MiB dictionary; a stream asking for more is refused, not allocated.
pub(crate) const XZ_MEMORY_KIB: u32 = 96 * 1024;

/// xz's stream header magic.
const XZ_MAGIC: [u8; 6] = [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00];

/// Whether a stream's first bytes are xz's.
pub(crate) fn is_xz(head: &[u8]) -> bool {
    head.starts_with(&XZ_MAGIC)
}

/// Whether a stream's first bytes are bzip2's: `BZh`, the block size `1`–`9`, then a block's
/// magic (the digits of pi) or the end of an empty stream (those of sqrt(pi)). Ten bytes, so
/// a tar whose first member is named `BZh…` is not taken for bzip2.
pub(crate) fn is_bzip2(head: &[u8]) -> bool {
    let [b'B', b'Z', b'h', level, rest @ ..] = head else {
        return false;
    };
    let block = [0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
    let end = [0x17, 0x72, 0x45, 0x38, 0x50, 0x90];
    (b'1'..=b'9').contains(level) && (rest.starts_with(&block) || rest.starts_with(&end))
}

/// Unpacks an xz stream (and any streams concatenated after it, as `xz` writes them).
pub(crate) fn xz<R: Read>(inner: R) -> lzma_rust2::XzReader<R> {
    lzma_rust2::XzReader::new_mem_limit(inner, true, XZ_MEMORY_KIB)
}

/// Unpacks a bzip2 stream (and any streams concatenated after it, as `pbzip2` writes them).
pub(crate) fn bzip2<R: BufRead>(inner: R) -> bzip2::bufread::MultiBzDecoder<R> {
    bzip2::bufread::MultiBzDecoder::new(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn sniffs_xz_and_bzip2_and_nothing_else() {
        assert!(is_xz(&XZ_MAGIC));
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
        bz.write_all(b"hello").unwrap();
        let bz = bz.finish().unwrap();
        assert!(is_bzip2(&bz) && !is_xz(&bz));
        let empty = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best())
            .finish()
            .unwrap();
        assert!(is_bzip2(&empty));
        // A tar member named like a bzip2 header is not bzip2.
        let mut tar = b"BZh9 notes.txt".to_vec();
        tar.resize(1024, 0);
        assert!(!is_bzip2(&tar));
        assert!(!is_bzip2(b"BZh"));
        assert!(!is_xz(&[0x1f, 0x8b]) && !is_bzip2(&[0x1f, 0x8b]));
    }

    #[test]
    fn unpacks_both() {
        let data = b"some bytes to round-trip".repeat(100);
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
        bz.write_all(&data).unwrap();
        let bz = bz.finish().unwrap();
        let mut out = Vec::new();
        bzip2(&bz[..]).read_to_end(&mut out).unwrap();
        assert_eq!(out, data);

        let mut xz_bytes = Vec::new();
        let mut w = lzma_rust2::XzWriter::new(&mut xz_bytes, lzma_rust2::XzOptions::default()).unwrap();
        w.write_all(&data).unwrap();
        w.finish().unwrap();
        let mut out = Vec::new();
        xz(&xz_bytes[..]).read_to_end(&mut out).unwrap();
        assert_eq!(out, data);
    }

    /// Skips one xz varint at `at`, returning the position after it.
    fn skip_varint(bytes: &[u8], mut at: usize) -> usize {
        while bytes[at] & 0x80 != 0 {
            at += 1;
        }
        at + 1
    }

    #[test]
    fn xz_dictionary_over_the_limit_is_refused_before_allocation() {
        let mut stream = Vec::new();
        let mut w = lzma_rust2::XzWriter::new(&mut stream, lzma_rust2::XzOptions::default()).unwrap();
        w.write_all(b"small").unwrap();
        w.finish().unwrap();
        // The first block header follows the 12-byte stream header: its size byte, its flags,
        // optional sizes, then the LZMA2 filter (id 0x21, one property byte: the dictionary).
        let start = 12;
        let header_len = (stream[start] as usize + 1) * 4;
        let flags = stream[start + 1];
        let mut at = start + 2;
        if flags & 0x40 != 0 {
            at = skip_varint(&stream, at);
        }
        if flags & 0x80 != 0 {
            at = skip_varint(&stream, at);
        }
        assert_eq!(&stream[at..at + 2], &[0x21, 0x01], "the LZMA2 filter");
        // 36: a 1 GiB dictionary, over XZ_MEMORY_KIB.
        stream[at + 2] = 36;
        let mut crc = flate2::Crc::new();
        crc.update(&stream[start..start + header_len - 4]);
        stream[start + header_len - 4..start + header_len].copy_from_slice(&crc.sum().to_le_bytes());
        let mut out = Vec::new();
        let err = xz(&stream[..]).read_to_end(&mut out).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::OutOfMemory, "{err}");
    }
}
