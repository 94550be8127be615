//! LEB128 varints and zigzag signed mapping, as used by every `.xlt` record.

/// Longest encoding of a `u64`.
pub const MAX_LEN: usize = 10;

/// Appends `v` as an unsigned LEB128 varint (minimal length).
#[inline]
pub fn put(out: &mut Vec<u8>, v: u64) {
    put_with(v, |b| out.push(b));
}

/// Hands `v`'s unsigned LEB128 bytes (minimal length) to `emit`, in order.
#[inline(always)]
pub fn put_with(mut v: u64, mut emit: impl FnMut(u8)) {
    while v >= 0x80 {
        emit((v as u8) | 0x80);
        v >>= 7;
    }
    emit(v as u8);
}

/// Length in bytes of the minimal encoding of `v`.
#[inline]
pub fn len(v: u64) -> usize {
    // 1 + floor(bits/7), with 0 taking one byte.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Why a varint could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarintError {
    /// The buffer ended before the last byte (high bit clear).
    Eof,
    /// More than 64 bits of value (or more than 10 bytes).
    Overflow,
}

impl VarintError {
    pub fn message(self) -> &'static str {
        match self {
            VarintError::Eof => "record cut off by the end of the block",
            VarintError::Overflow => "varint overflows 64 bits",
        }
    }
}

/// Decodes an unsigned varint from `buf` at `*pos`, advancing `*pos`. Accepts
/// non-minimal encodings; rejects values beyond 64 bits.
#[inline(always)]
pub fn get(buf: &[u8], pos: &mut usize) -> Result<u64, VarintError> {
    let p = *pos;
    let Some(&b) = buf.get(p) else {
        return Err(VarintError::Eof);
    };
    if b < 0x80 {
        *pos = p + 1;
        return Ok(b as u64);
    }
    // Fast path: the longest encoding fits, so no per-byte bounds checks.
    if let Some(c) = buf.get(p..p + MAX_LEN) {
        let mut v = 0u64;
        for (i, &b) in c.iter().enumerate() {
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                if i == MAX_LEN - 1 && b > 1 {
                    return Err(VarintError::Overflow);
                }
                *pos = p + i + 1;
                return Ok(v);
            }
        }
        return Err(VarintError::Overflow);
    }
    *pos = p + 1;
    get_slow(buf, pos, (b & 0x7f) as u64)
}

#[cold]
#[inline(never)]
fn get_slow(buf: &[u8], pos: &mut usize, mut v: u64) -> Result<u64, VarintError> {
    let mut shift = 7u32;
    loop {
        let Some(&b) = buf.get(*pos) else {
            return Err(VarintError::Eof);
        };
        *pos += 1;
        let low = (b & 0x7f) as u64;
        if shift == 63 && low > 1 {
            return Err(VarintError::Overflow);
        }
        v |= low << shift;
        if b < 0x80 {
            return Ok(v);
        }
        shift += 7;
        if shift > 63 {
            return Err(VarintError::Overflow);
        }
    }
}

/// Maps a signed value to unsigned so small magnitudes encode short.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_edges() {
        for v in [
            0,
            1,
            127,
            128,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!(b.len(), len(v), "{v}");
            let mut p = 0;
            assert_eq!(get(&b, &mut p), Ok(v));
            assert_eq!(p, b.len());
        }
        for v in [0i64, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn rejects_overflow_and_eof() {
        let mut p = 0;
        assert_eq!(get(&[0x80, 0x80], &mut p), Err(VarintError::Eof));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        p = 0;
        assert_eq!(get(&over, &mut p), Err(VarintError::Overflow));
        let eleven = [
            0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
        ];
        p = 0;
        assert_eq!(get(&eleven, &mut p), Err(VarintError::Overflow));
        // Non-minimal but in range is accepted.
        p = 0;
        assert_eq!(get(&[0x81, 0x00], &mut p), Ok(1));
    }
}
