//! FEN as lc0 v0.31.2 reads it (`ChessBoard::SetFromFen`, docs/lc0-format.md §2.3): lc0 evaluates
//! every FEN it can parse, without checking material, checks, castling rooks or the side of the
//! en-passant square. This reader accepts the same FENs and refuses what lc0 refuses, naming the
//! field; it also refuses a side without a king or with two (lc0 would encode a king on a1, or
//! the second king as a knight, which is meaningless).

use std::num::NonZeroU32;

use shakmaty::{
    Bitboard, Board, CastlingMode, CastlingSide, Chess, Color, File, FromSetup, Piece,
    PositionError, Rank, Role, Setup, Square,
};

use super::castling::{Castling, back_rank};

/// Why lc0 (or this reader) refuses a FEN; each names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FenError {
    #[error("the FEN is empty")]
    Empty,
    #[error("board field: more than 8 ranks")]
    TooManyRanks,
    #[error("board field: more than 8 squares on rank {rank}")]
    TooManySquares { rank: u8 },
    #[error("board field: {symbol:?} is not a piece")]
    UnknownPiece { symbol: char },
    #[error("board field: a pawn on {square} (lc0 refuses pawns on the first and last rank)")]
    PawnOnBackRank { square: Square },
    #[error("board field: no {color} king")]
    MissingKing { color: Color },
    #[error("board field: more than one {color} king")]
    TooManyKings { color: Color },
    #[error("side-to-move field: expected w or b, got {found:?}")]
    BadSideToMove { found: String },
    #[error("castling field: {symbol:?} is not a castling symbol (KQkq or a rook file A-H/a-h)")]
    BadCastlingSymbol { symbol: char },
    #[error("castling field: {symbol:?} but no {color} rook on its back rank outside the king")]
    MissingCastlingRook { symbol: char, color: Color },
    #[error("en-passant field: {found:?} is not a square on rank 3 or 6")]
    BadEnPassant { found: String },
    #[error("{field} field: {found:?} is not a non-negative whole number")]
    BadNumber { field: &'static str, found: String },
}

/// A FEN's fields as lc0 keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lc0Fen {
    pub board: Board,
    pub turn: Color,
    pub castling: Castling,
    /// The en-passant square as written, unchecked (lc0 keeps it as its flag).
    pub ep_square: Option<Square>,
    pub rule50: u32,
    pub fullmoves: u32,
}

impl Lc0Fen {
    /// Reads `fen`. Missing trailing fields take lc0's defaults (`w - - 0 1`); fields after the
    /// sixth are ignored, as lc0 ignores them.
    pub fn parse(fen: &str) -> Result<Lc0Fen, FenError> {
        let mut fields = fen.split_whitespace();
        let board = parse_board(fields.next().ok_or(FenError::Empty)?)?;
        let turn = parse_turn(fields.next().unwrap_or("w"))?;
        let castling = parse_castling(fields.next().unwrap_or("-"), &board)?;
        let ep_square = parse_ep_square(fields.next().unwrap_or("-"))?;
        let rule50 = parse_number(fields.next().unwrap_or("0"), "halfmove clock")?;
        let fullmoves = parse_number(fields.next().unwrap_or("1"), "fullmove number")?;
        Ok(Lc0Fen {
            board,
            turn,
            castling,
            ep_square,
            rule50,
            fullmoves,
        })
    }

    /// lc0's en-passant flag from the side to move's view: the FEN's square moved to the last
    /// rank of its own half (rank 3 → rank 1, rank 6 → rank 8), then seen from the side to move.
    /// A square on the mover's own side (e.g. `e3` with white to move) thus lands on rank 1.
    pub fn en_passant_flag(&self) -> u64 {
        self.ep_square.map_or(0, |square| {
            let rank = if square.rank() == Rank::Third {
                Rank::First
            } else {
                Rank::Eighth
            };
            let flag = Bitboard::from_square(Square::from_coords(square.file(), rank));
            let viewed = match self.turn {
                Color::White => flag,
                Color::Black => flag.flip_vertical(),
            };
            u64::from(viewed)
        })
    }

    /// The position for move generation. shakmaty is strict where lc0 is not, so its
    /// lenient path is used: too much material and impossible checks are accepted, castling
    /// rights shakmaty cannot play and en-passant squares without a capturable pawn are left
    /// out of move generation (the planes keep them, see [`Castling`]). Castling uses
    /// shakmaty's Chess960 mode so that any rook file can castle. `None` where the side not to
    /// move is in check, which shakmaty cannot hold (and from which no game continues).
    pub fn playable_position(&self) -> Option<Chess> {
        let setup = Setup {
            board: self.board.clone(),
            turn: self.turn,
            castling_rights: self.castling.rook_squares(),
            ep_square: self.ep_square,
            halfmoves: self.rule50,
            fullmoves: NonZeroU32::new(self.fullmoves).unwrap_or(NonZeroU32::MIN),
            ..Setup::empty()
        };
        Chess::from_setup(setup, CastlingMode::Chess960)
            .or_else(PositionError::ignore_too_much_material)
            .or_else(PositionError::ignore_impossible_check)
            .or_else(PositionError::ignore_invalid_castling_rights)
            .or_else(PositionError::ignore_invalid_ep_square)
            .ok()
    }
}

fn parse_board(field: &str) -> Result<Board, FenError> {
    let mut board = Board::empty();
    let mut rank = 7i32;
    let mut file = 0u32;
    for symbol in field.chars() {
        if symbol == '/' {
            rank -= 1;
            if rank < 0 {
                return Err(FenError::TooManyRanks);
            }
            file = 0;
            continue;
        }
        if let Some(skip) = symbol.to_digit(10) {
            file += skip;
            continue;
        }
        if file >= 8 {
            return Err(FenError::TooManySquares {
                rank: rank as u8 + 1,
            });
        }
        let piece = Piece::from_char(symbol).ok_or(FenError::UnknownPiece { symbol })?;
        let square = Square::from_coords(File::new(file), Rank::new(rank as u32));
        if piece.role == Role::Pawn && matches!(square.rank(), Rank::First | Rank::Eighth) {
            return Err(FenError::PawnOnBackRank { square });
        }
        board.set_piece_at(square, piece);
        file += 1;
    }
    for color in Color::ALL {
        let kings = board.kings() & board.by_color(color);
        if kings.is_empty() {
            return Err(FenError::MissingKing { color });
        }
        if kings.more_than_one() {
            return Err(FenError::TooManyKings { color });
        }
    }
    Ok(board)
}

fn parse_turn(field: &str) -> Result<Color, FenError> {
    match field {
        "w" | "W" => Ok(Color::White),
        "b" | "B" => Ok(Color::Black),
        _ => Err(FenError::BadSideToMove {
            found: field.to_owned(),
        }),
    }
}

/// X-FEN (`KQkq`: the outermost rook on that side of the king) and Shredder-FEN (a rook file;
/// left of the king's file is the a side), per colour. A Shredder letter is taken without
/// checking for a rook, as lc0 does; `K`/`Q` without a rook are refused, as lc0 refuses them.
fn parse_castling(field: &str, board: &Board) -> Result<Castling, FenError> {
    let mut castling = Castling::NONE;
    if field == "-" {
        return Ok(castling);
    }
    for symbol in field.chars() {
        let color = Color::from_white(symbol.is_ascii_uppercase());
        let king_file = board
            .king_of(color)
            .ok_or(FenError::MissingKing { color })?
            .file();
        let (side, file) = match symbol.to_ascii_lowercase() {
            'k' => (
                CastlingSide::KingSide,
                outermost_rook(board, color, king_file, CastlingSide::KingSide)
                    .ok_or(FenError::MissingCastlingRook { symbol, color })?,
            ),
            'q' => (
                CastlingSide::QueenSide,
                outermost_rook(board, color, king_file, CastlingSide::QueenSide)
                    .ok_or(FenError::MissingCastlingRook { symbol, color })?,
            ),
            letter @ 'a'..='h' => {
                let file = File::new(u32::from(letter) - u32::from('a'));
                let side = if file < king_file {
                    CastlingSide::QueenSide
                } else {
                    CastlingSide::KingSide
                };
                (side, file)
            }
            _ => return Err(FenError::BadCastlingSymbol { symbol }),
        };
        castling.grant(color, side, file);
    }
    Ok(castling)
}

/// The rook of `color` on its back rank farthest from the king on `side`, searched from the
/// board's edge towards the king's file (exclusive); queens do not count.
fn outermost_rook(
    board: &Board,
    color: Color,
    king_file: File,
    side: CastlingSide,
) -> Option<File> {
    let rooks = board.rooks() & board.by_color(color);
    let candidates: Vec<File> = match side {
        CastlingSide::KingSide => File::ALL
            .into_iter()
            .rev()
            .take_while(|&f| f != king_file)
            .collect(),
        CastlingSide::QueenSide => File::ALL
            .into_iter()
            .take_while(|&f| f != king_file)
            .collect(),
    };
    candidates
        .into_iter()
        .find(|&file| rooks.contains(Square::from_coords(file, back_rank(color))))
}

fn parse_ep_square(field: &str) -> Result<Option<Square>, FenError> {
    if field == "-" {
        return Ok(None);
    }
    let bad = || FenError::BadEnPassant {
        found: field.to_owned(),
    };
    let square: Square = field.parse().map_err(|_| bad())?;
    match square.rank() {
        Rank::Third | Rank::Sixth => Ok(Some(square)),
        _ => Err(bad()),
    }
}

fn parse_number(field: &str, name: &'static str) -> Result<u32, FenError> {
    field.parse().map_err(|_| FenError::BadNumber {
        field: name,
        found: field.to_owned(),
    })
}
