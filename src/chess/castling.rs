//! Castling rights as lc0 keeps them (v0.31.2 `ChessBoard::Castlings`): for each colour and
//! side, whether the right is held and the file of its rook. lc0 keeps separate rook files for
//! white and black, so a Chess960 position may castle with different files per colour, and the
//! castling planes of formats ≥ 2 mark each colour's own rook squares (docs/lc0-format.md §2.2).
//!
//! These rights are what the network sees. They are kept apart from shakmaty's castling state
//! because lc0 accepts rights shakmaty cannot play (a king off its back rank, a Shredder letter
//! naming a file without a rook, an inner rook): such rights are encoded, but no castling move
//! is generated for them.

use shakmaty::uci::UciMove;
use shakmaty::{Bitboard, Board, CastlingSide, Color, File, Move, Rank, Role, Square};

/// lc0's castling rights: `Some(rook file)` per colour and side while the right lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Castling {
    /// Indexed `[colour][side]`: colour white = 0, side a (queen side) = 0, h (king side) = 1.
    rook_files: [[Option<File>; 2]; 2],
}

fn color_index(color: Color) -> usize {
    usize::from(color == Color::Black)
}

fn side_index(side: CastlingSide) -> usize {
    usize::from(side == CastlingSide::KingSide)
}

/// Rank 1 for white, rank 8 for black.
pub fn back_rank(color: Color) -> Rank {
    color.fold_wb(Rank::First, Rank::Eighth)
}

impl Castling {
    /// No rights.
    pub const NONE: Castling = Castling {
        rook_files: [[None; 2]; 2],
    };

    /// The rights of the standard start position: both sides, rooks on files a and h.
    pub fn standard() -> Castling {
        let both = [Some(File::A), Some(File::H)];
        Castling {
            rook_files: [both, both],
        }
    }

    /// The file of the rook of `color`'s right on `side`, if the right is held.
    pub fn rook_file(&self, color: Color, side: CastlingSide) -> Option<File> {
        self.rook_files[color_index(color)][side_index(side)]
    }

    /// The rights in 16 bits, one nibble each: 0 where a right is not held, else its rook's
    /// file plus one.
    pub fn packed(&self) -> u16 {
        self.rook_files.iter().flatten().fold(0, |bits, file| {
            bits << 4 | file.map_or(0, |f| u16::from(f) + 1)
        })
    }

    /// Grants `color` the right on `side` with the rook on `file`.
    pub fn grant(&mut self, color: Color, side: CastlingSide, file: File) {
        self.rook_files[color_index(color)][side_index(side)] = Some(file);
    }

    fn revoke(&mut self, color: Color, side: CastlingSide) {
        self.rook_files[color_index(color)][side_index(side)] = None;
    }

    /// The rook square of `color`'s right on `side`, if held.
    pub fn rook_square(&self, color: Color, side: CastlingSide) -> Option<Square> {
        self.rook_file(color, side)
            .map(|file| Square::from_coords(file, back_rank(color)))
    }

    /// The rook squares of all rights (shakmaty's `Setup::castling_rights`).
    pub fn rook_squares(&self) -> Bitboard {
        let mut squares = Bitboard::EMPTY;
        for color in Color::ALL {
            for side in CastlingSide::ALL {
                if let Some(square) = self.rook_square(color, side) {
                    squares.add(square);
                }
            }
        }
        squares
    }

    /// The rights after `mover` plays `m` on `before`, by lc0's rules (v0.31.2
    /// `ChessBoard::ApplyMove`): a king move (castling included) ends both of the mover's
    /// rights; any move onto the opponent's castling rook square ends that right; a rook or
    /// queen leaving one of the mover's castling rook squares ends that right.
    pub fn after_move(&self, before: &Board, mover: Color, m: Move) -> Castling {
        let mut after = *self;
        let from = m.from().unwrap_or(m.to());
        if before.king_of(mover) == Some(from) {
            for side in CastlingSide::ALL {
                after.revoke(mover, side);
            }
        }
        if m.is_castle() {
            return after;
        }
        for side in CastlingSide::ALL {
            if self.rook_square(!mover, side) == Some(m.to()) {
                after.revoke(!mover, side);
            }
            let slides_like_rook = matches!(m.role(), Role::Rook | Role::Queen);
            if slides_like_rook && self.rook_square(mover, side) == Some(from) {
                after.revoke(mover, side);
            }
        }
        after
    }
}

/// A move in UCI notation as lc0 writes it. With `UCI_Chess960` castling is the king taking
/// its own rook (e1h1); without it lc0 (v0.31.2 `GetLegacyMove`) writes only the standard
/// castlings (king on e1/e8, rook on the a or h file) as the king's destination (e1g1, e8c8)
/// and every other castling still as king-takes-rook.
pub fn uci_notation(m: Move, chess960: bool) -> UciMove {
    match m {
        Move::Castle { king, rook }
            if !chess960 && king.file() == File::E && matches!(rook.file(), File::A | File::H) =>
        {
            UciMove::from_standard(m)
        }
        _ => UciMove::from_chess960(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(role: Role, from: Square, to: Square, capture: Option<Role>) -> Move {
        Move::Normal {
            role,
            from,
            capture,
            to,
            promotion: None,
        }
    }

    #[test]
    fn moves_end_rights_as_in_lc0() {
        let board = Board::new();
        let start = Castling::standard();
        let king_move = normal(Role::King, Square::E1, Square::E2, None);
        let after = start.after_move(&board, Color::White, king_move);
        assert_eq!(after.rook_file(Color::White, CastlingSide::KingSide), None);
        assert_eq!(after.rook_file(Color::White, CastlingSide::QueenSide), None);
        assert_eq!(
            after.rook_file(Color::Black, CastlingSide::KingSide),
            Some(File::H)
        );
        // A queen leaving a castling rook square ends that right (lc0 tests rook-like pieces).
        let queen = normal(Role::Queen, Square::A1, Square::A5, None);
        let after = start.after_move(&board, Color::White, queen);
        assert_eq!(after.rook_file(Color::White, CastlingSide::QueenSide), None);
        assert_eq!(
            after.rook_file(Color::White, CastlingSide::KingSide),
            Some(File::H)
        );
        // Landing on the opponent's rook square ends their right, captured piece or not.
        let knight = normal(Role::Knight, Square::G6, Square::H8, None);
        let after = start.after_move(&board, Color::White, knight);
        assert_eq!(after.rook_file(Color::Black, CastlingSide::KingSide), None);
        assert_eq!(after.rook_squares().count(), 3);
    }
    #[test]
    fn castling_notation_as_lc0_writes_it() {
        let castle = |king, rook| Move::Castle { king, rook };
        let text = |m, chess960| uci_notation(m, chess960).to_string();
        assert_eq!(text(castle(Square::E1, Square::H1), false), "e1g1");
        assert_eq!(text(castle(Square::E8, Square::A8), false), "e8c8");
        assert_eq!(text(castle(Square::E1, Square::H1), true), "e1h1");
        // A Chess960 castling is king-takes-rook even without UCI_Chess960.
        assert_eq!(text(castle(Square::F1, Square::G1), false), "f1g1");
        assert_eq!(text(castle(Square::B8, Square::A8), false), "b8a8");
        assert_eq!(text(castle(Square::E1, Square::G1), false), "e1g1");
        let push = normal(Role::Pawn, Square::E2, Square::E4, None);
        assert_eq!(text(push, false), "e2e4");
    }
}
