//! Recency order of a set of up to 16 ways in one `u64`: four bits per rank, the most
//! recently used way in the low nibble, the victim in nibble `ways - 1`. Touching a way
//! moves its nibble to the front, demoting it moves it to the back: a handful of ALU
//! operations, no scan. Nibbles at ranks `ways..16` are zero and never consulted.

/// 0x1111...1: one in every nibble.
const NIBBLES: u64 = u64::MAX / 15;

/// The initial order: way `w` at rank `ways - 1 - w`, so way 0 is the first victim,
/// then way 1, and so on.
pub fn initial(ways: usize) -> u64 {
    debug_assert!((1..=16).contains(&ways));
    (0..ways as u64).fold(0, |o, w| o | w << (4 * (ways as u64 - 1 - w)))
}

/// Bit offset (4 × rank) of `way` in `o`: the lowest zero nibble of `o ^ way × NIBBLES`
/// (exact for the lowest one; ranks at and above `ways` hold zeros and come later).
#[inline(always)]
fn rank_bits(o: u64, way: u64) -> u32 {
    let x = o ^ (way * NIBBLES);
    let z = x.wrapping_sub(NIBBLES) & !x & (NIBBLES << 3);
    z.trailing_zeros() & !3
}

/// `o` with `way` made the most recently used.
#[inline(always)]
pub fn touch(o: u64, way: u64) -> u64 {
    let r = rank_bits(o, way);
    let below = (1u64 << r) - 1;
    (o & !below & !(15 << r)) | (o & below) << 4 | way
}

/// `o` with `way` made the next victim (the ranks after it move up by one).
#[inline]
pub fn demote(o: u64, way: u64, ways: usize) -> u64 {
    let r = rank_bits(o, way);
    let below = (1u64 << r) - 1;
    let top = 4 * (ways as u32 - 1);
    let upto_top = (1u64 << top) - 1;
    (o & below) | ((o >> 4) & !below & upto_top) | way << top
}

/// The least recently used way, and `o` with it made the most recently used: the same
/// as `touch(o, victim(o, ways))` in three ALU operations (the victim is the last rank,
/// so every other way moves down one rank).
#[inline(always)]
pub fn take_victim(o: u64, ways: usize) -> (usize, u64) {
    let top = 4 * (ways as u32 - 1);
    let v = o >> top & 15;
    (v as usize, (o & ((1u64 << top) - 1)) << 4 | v)
}

/// The least recently used way.
#[inline(always)]
pub fn victim(o: u64, ways: usize) -> usize {
    (o >> (4 * (ways - 1)) & 15) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order as a list, most recent first.
    fn list(o: u64, ways: usize) -> Vec<u64> {
        (0..ways).map(|r| o >> (4 * r) & 15).collect()
    }

    #[test]
    fn agrees_with_a_list_model() {
        let mut x = 99u64;
        for ways in 1..=16usize {
            let mut o = initial(ways);
            let mut model: Vec<u64> = (0..ways as u64).rev().collect();
            assert_eq!(list(o, ways), model);
            for _ in 0..2000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let way = x % ways as u64;
                model.retain(|&w| w != way);
                if x >> 32 & 3 == 0 {
                    o = demote(o, way, ways);
                    model.push(way);
                } else {
                    o = touch(o, way);
                    model.insert(0, way);
                }
                assert_eq!(list(o, ways), model, "ways {ways}");
                assert_eq!(victim(o, ways) as u64, *model.last().unwrap());
                let v = victim(o, ways);
                assert_eq!(take_victim(o, ways), (v, touch(o, v as u64)));
                if ways < 16 {
                    assert_eq!(o >> (4 * ways), 0, "ranks above ways stay zero");
                }
            }
        }
    }
}
