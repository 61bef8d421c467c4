//! Content digests (`sha256:<hex>`) and a reader that hashes what passes through it.

use sha2::{Digest as _, Sha256};
use std::fmt;
use std::io::{self, Read};

/// A parsed `algorithm:hex` content digest. Only sha256 is computed; other algorithms are kept
/// so they can be reported, and are never treated as verified.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Digest {
    algorithm: String,
    hex: String,
}

impl Digest {
    /// Parses `sha256:<64 hex>` (or another `alg:encoded`, by the OCI grammar: the algorithm is
    /// lowercase letters and digits in components joined by one of `+._-`, so never `..`);
    /// returns `None` for anything else. A digest becomes a file name (`blobs/ALG/HEX`), so
    /// nothing that could climb out of a folder passes.
    pub(crate) fn parse(s: &str) -> Option<Digest> {
        let (algorithm, hex) = s.split_once(':')?;
        let component =
            |c: &str| !c.is_empty() && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !algorithm.split(['+', '.', '_', '-']).all(component) {
            return None;
        }
        if algorithm == "sha256" {
            if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return None;
            }
        } else if hex.is_empty()
            || !hex
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"=_-".contains(&b))
        {
            return None;
        }
        Some(Digest {
            algorithm: algorithm.to_string(),
            hex: hex.to_string(),
        })
    }

    /// The sha256 of `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Digest {
        Digest::from_sha256(Sha256::digest(bytes).into())
    }

    pub(crate) fn from_sha256(raw: [u8; 32]) -> Digest {
        let mut hex = String::with_capacity(64);
        for b in raw {
            hex.push(char::from_digit((b >> 4) as u32, 16).unwrap_or('0'));
            hex.push(char::from_digit((b & 15) as u32, 16).unwrap_or('0'));
        }
        Digest {
            algorithm: "sha256".to_string(),
            hex,
        }
    }

    pub(crate) fn algorithm(&self) -> &str {
        &self.algorithm
    }

    pub(crate) fn hex(&self) -> &str {
        &self.hex
    }

    /// Whether memlint can compute this digest itself.
    pub(crate) fn is_sha256(&self) -> bool {
        self.algorithm == "sha256"
    }

    /// A short form for messages: `sha256:0123456789ab`.
    pub(crate) fn short(&self) -> String {
        format!("{}:{}", self.algorithm, &self.hex[..self.hex.len().min(12)])
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm, self.hex)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Hashes and counts every byte read through it.
pub(crate) struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// The digest of what was read so far, and its length.
    pub(crate) fn digest_and_count(&self) -> (Digest, u64) {
        (
            Digest::from_sha256(self.hasher.clone().finalize().into()),
            self.count,
        )
    }

    pub(crate) fn into_inner(self) -> R {
        self.inner
    }

    /// Reads whatever is left (so the digest covers the whole stream) and returns the digest
    /// and the byte count.
    pub(crate) fn finish(mut self) -> io::Result<(Digest, u64)> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match self.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok((Digest::from_sha256(self.hasher.finalize().into()), self.count))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_sha256() {
        let d = Digest::of(b"");
        assert_eq!(
            d.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(&d.to_string()), Some(d.clone()));
        assert_eq!(d.short(), "sha256:e3b0c44298fc");
    }

    #[test]
    fn rejects_malformed_digests() {
        for bad in [
            "",
            "sha256",
            "sha256:",
            "sha256:abc",
            "SHA256:00",
            ":00",
            "sha256:../../etc/passwd",
            "..:abc",
            ".:abc",
            "sha256.:abc",
            "+sha:abc",
            "a..b:abc",
            "sha512:../x",
            "sha512:a/b",
        ] {
            assert_eq!(Digest::parse(bad), None, "{bad}");
        }
        let upper = format!("sha256:{}", "A".repeat(64));
        assert_eq!(Digest::parse(&upper), None);
        assert!(Digest::parse("sha512:abcd").is_some_and(|d| !d.is_sha256()));
        assert!(Digest::parse("multihash+base58:QmRZxt2b1FVZPNqd8hsiykDL3TdBDeTSPX9Kv46HmX4Gx8").is_some());
    }

    #[test]
    fn hashing_reader_covers_unread_tail() {
        let data = vec![7u8; 200_000];
        let mut r = HashingReader::new(&data[..]);
        let mut first = [0u8; 10];
        r.read_exact(&mut first).unwrap();
        let (d, n) = r.finish().unwrap();
        assert_eq!(n, 200_000);
        assert_eq!(d, Digest::of(&data));
    }
}
