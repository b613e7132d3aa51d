//! lc0's canonicalising transforms of the board: flip files, mirror ranks, and transpose across
//! the a8–h1 anti-diagonal, applied in that order (docs/lc0-format.md §2.4).

/// A set of the three transforms, as lc0's bit set (Flip = 1, Mirror = 2, Transpose = 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Transform(u8);

impl Transform {
    pub const NONE: Transform = Transform(0);
    pub const FLIP: u8 = 1;
    pub const MIRROR: u8 = 2;
    pub const TRANSPOSE: u8 = 4;

    /// Every one of the 8 transforms.
    pub fn all() -> impl Iterator<Item = Transform> {
        (0..8).map(Transform)
    }

    pub fn from_bits(bits: u8) -> Option<Transform> {
        (bits < 8).then_some(Transform(bits))
    }

    pub fn bits(self) -> u8 {
        self.0
    }

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    pub fn with(self, bit: u8) -> Transform {
        Transform(self.0 | bit)
    }

    /// Transforms a bitboard (bit `rank·8 + file`).
    pub fn apply_bits(self, mut bb: u64) -> u64 {
        if self.has(Self::FLIP) {
            bb = flip_files(bb);
        }
        if self.has(Self::MIRROR) {
            bb = mirror_ranks(bb);
        }
        if self.has(Self::TRANSPOSE) {
            bb = transpose(bb);
        }
        bb
    }

    /// Transforms a square index `rank·8 + file`, consistently with [`Transform::apply_bits`].
    /// Branch-free: it runs for both squares of every legal move of every leaf a search
    /// prepares.
    pub fn apply_square(self, square: u8) -> u8 {
        // Flip: file → 7 − file (square ^ 7); mirror: rank → 7 − rank (square ^ 56).
        let flip = (self.0 & Self::FLIP) * 7;
        let mirror = ((self.0 & Self::MIRROR) >> 1) * 56;
        let s = square ^ flip ^ mirror;
        // Transpose: (rank, file) → (7 − file, 7 − rank), i.e. 63 − (file·8 + rank).
        let transposed = 63 - (((s & 7) << 3) | (s >> 3));
        if self.has(Self::TRANSPOSE) {
            transposed
        } else {
            s
        }
    }
}

/// Mirrors files (a ↔ h): reverses the bits of each rank's byte.
pub fn flip_files(bb: u64) -> u64 {
    u64::from_le_bytes(bb.to_le_bytes().map(u8::reverse_bits))
}

/// Mirrors ranks (1 ↔ 8): reverses the byte order.
pub fn mirror_ranks(bb: u64) -> u64 {
    bb.swap_bytes()
}

/// Reflects across the a8–h1 anti-diagonal: (rank, file) → (7 − file, 7 − rank).
pub fn transpose(bb: u64) -> u64 {
    let mut out = 0u64;
    let mut rest = bb;
    while rest != 0 {
        let square = rest.trailing_zeros() as u8;
        rest &= rest - 1;
        let (rank, file) = (square / 8, square % 8);
        out |= 1u64 << ((7 - file) * 8 + (7 - rank));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const A1: u8 = 0;
    const H1: u8 = 7;
    const B2: u8 = 9;
    const A8: u8 = 56;
    const H8: u8 = 63;

    #[test]
    fn squares_hand_checked() {
        let flip = Transform(Transform::FLIP);
        let mirror = Transform(Transform::MIRROR);
        let transpose = Transform(Transform::TRANSPOSE);
        assert_eq!(flip.apply_square(A1), H1);
        assert_eq!(mirror.apply_square(A1), A8);
        // The anti-diagonal a8–h1 is fixed; a1 ↔ h8, b2 ↔ g7.
        assert_eq!(transpose.apply_square(A8), A8);
        assert_eq!(transpose.apply_square(H1), H1);
        assert_eq!(transpose.apply_square(A1), H8);
        assert_eq!(transpose.apply_square(B2), 54);
        // e4 = (rank 3, file 4) lies on the anti-diagonal too.
        assert_eq!(transpose.apply_square(28), 28);
    }

    #[test]
    fn bits_agree_with_squares_for_every_transform() {
        for t in Transform::all() {
            for square in 0..64u8 {
                assert_eq!(
                    t.apply_bits(1 << square),
                    1 << t.apply_square(square),
                    "{t:?} {square}"
                );
            }
        }
    }
}
