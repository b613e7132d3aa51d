//! A game as lc0 sees it: the positions since the FEN, each with lc0's en-passant flag, its
//! fifty-move counter and its repetition count.

use shakmaty::fen::Fen;
use shakmaty::uci::UciMove;
use shakmaty::zobrist::Zobrist64;
use shakmaty::{CastlingMode, Chess, Color, EnPassantMode, Move, Position, Role};

/// Why a position or move was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChessError {
    #[error("bad FEN {fen:?}: {reason}")]
    BadFen { fen: String, reason: String },
    #[error("bad move {uci:?} at ply {ply}: {reason}")]
    BadMove {
        uci: String,
        ply: usize,
        reason: String,
    },
    #[error("bad position {spec:?}: expected `startpos [moves ...]` or `fen FEN [moves ...]`")]
    BadSpec { spec: String },
}

/// One position of the game.
#[derive(Debug, Clone)]
pub struct HistoryEntry {
    pub position: Chess,
    /// lc0's en-passant flag: the file of a pawn that has just made a double step (set after
    /// every double step, and from the FEN, whether or not a capture is possible).
    pub ep_file: Option<u8>,
    /// Plies since the last capture or pawn move.
    pub rule50: u32,
    /// How many times this position occurred before (lc0's count).
    pub repetitions: u32,
    /// Zobrist hash of board, side to move, castling rights and `ep_file`.
    pub key: u64,
}

impl HistoryEntry {
    fn new(position: Chess, ep_file: Option<u8>) -> Self {
        let rule50 = position.halfmoves();
        let key = repetition_key(&position, ep_file);
        Self {
            position,
            ep_file,
            rule50,
            repetitions: 0,
            key,
        }
    }

    /// lc0's board equality: pieces, side to move, castling rights and en-passant flag.
    fn same_board(&self, other: &HistoryEntry) -> bool {
        self.key == other.key
            && self.ep_file == other.ep_file
            && self.position.board() == other.position.board()
            && self.position.turn() == other.position.turn()
            && self.position.castles().castling_rights()
                == other.position.castles().castling_rights()
    }

    /// Whether this is the standard start position (for lc0's `fen_only` history fill).
    pub fn is_startpos(&self) -> bool {
        let start = Chess::default();
        self.ep_file.is_none()
            && self.position.board() == start.board()
            && self.position.turn() == Color::White
            && self.position.castles().castling_rights() == start.castles().castling_rights()
    }
}

fn repetition_key(position: &Chess, ep_file: Option<u8>) -> u64 {
    let hash: Zobrist64 = position.zobrist_hash(EnPassantMode::Legal);
    // shakmaty hashes only legal en-passant squares; mix in lc0's wider flag as well.
    let ep = ep_file.map_or(0, |f| {
        0x9e37_79b9_7f4a_7c15u64.rotate_left(u32::from(f) * 7 + 1)
    });
    u64::from(hash) ^ ep
}

/// The positions of a game from its starting FEN to now.
#[derive(Debug, Clone)]
pub struct PositionHistory {
    entries: Vec<HistoryEntry>,
}

impl Default for PositionHistory {
    fn default() -> Self {
        Self::startpos()
    }
}

impl PositionHistory {
    pub fn startpos() -> Self {
        Self {
            entries: vec![HistoryEntry::new(Chess::default(), None)],
        }
    }

    /// A history that starts at `fen` (lc0 keeps the FEN's en-passant square as its flag).
    pub fn from_fen(fen: &str) -> Result<Self, ChessError> {
        let bad = |reason: String| ChessError::BadFen {
            fen: fen.to_owned(),
            reason,
        };
        let parsed = Fen::from_ascii(fen.trim().as_bytes()).map_err(|e| bad(e.to_string()))?;
        let ep_file = parsed
            .as_setup()
            .ep_square
            .map(|sq| u32::from(sq.file()) as u8);
        let position: Chess = parsed
            .into_position(CastlingMode::Standard)
            .map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            entries: vec![HistoryEntry::new(position, ep_file)],
        })
    }

    /// Parses lc0/UCI's `startpos [moves m1 m2 ...]` or `fen FEN [moves m1 ...]`.
    pub fn from_spec(spec: &str) -> Result<Self, ChessError> {
        let spec = spec.trim();
        let bad_spec = || ChessError::BadSpec {
            spec: spec.to_owned(),
        };
        let (start, moves) = match spec.split_once(" moves") {
            Some((start, moves)) => (start.trim(), Some(moves)),
            None => (spec, None),
        };
        let mut history = if start == "startpos" {
            Self::startpos()
        } else if let Some(fen) = start.strip_prefix("fen ") {
            Self::from_fen(fen)?
        } else {
            return Err(bad_spec());
        };
        if let Some(moves) = moves {
            if !moves.is_empty() && !moves.starts_with(' ') {
                return Err(bad_spec());
            }
            for uci in moves.split_whitespace() {
                history.play_uci(uci)?;
            }
        }
        Ok(history)
    }

    /// Plays a move given in UCI notation (castling as e1g1 or e1h1), checking legality.
    pub fn play_uci(&mut self, uci: &str) -> Result<(), ChessError> {
        let ply = self.entries.len() - 1;
        let bad = |reason: String| ChessError::BadMove {
            uci: uci.to_owned(),
            ply,
            reason,
        };
        let parsed: UciMove = uci.parse().map_err(|_| bad("not a UCI move".to_owned()))?;
        let m = parsed
            .to_move(&self.last().position)
            .map_err(|e| bad(e.to_string()))?;
        self.play(m);
        Ok(())
    }

    /// Plays a legal move.
    pub fn play(&mut self, m: Move) {
        let ep_file = match m {
            Move::Normal {
                role: Role::Pawn,
                from,
                to,
                ..
            } if from.rank().distance(to.rank()) == 2 => Some(u32::from(to.file()) as u8),
            _ => None,
        };
        let mut position = self.last().position.clone();
        position.play_unchecked(m);
        let mut entry = HistoryEntry::new(position, ep_file);
        entry.repetitions = self.repetitions_of(&entry);
        self.entries.push(entry);
    }

    /// lc0's rule: compare with the positions 2, 4, … plies back while no capture or pawn
    /// move lies in between; a match counts 1 plus that position's repetitions.
    fn repetitions_of(&self, entry: &HistoryEntry) -> u32 {
        if entry.rule50 < 4 {
            return 0;
        }
        for earlier in self.entries.iter().rev().skip(1).step_by(2) {
            if earlier.same_board(entry) {
                return 1 + earlier.repetitions;
            }
            if earlier.rule50 < 2 {
                return 0;
            }
        }
        0
    }

    /// Takes back moves until `len` positions remain (at least the first).
    pub fn truncate(&mut self, len: usize) {
        self.entries.truncate(len.max(1));
    }

    pub fn last(&self) -> &HistoryEntry {
        self.entries.last().expect("a history is never empty")
    }

    /// All positions, oldest first.
    pub fn entries(&self) -> &[HistoryEntry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Always false: a history holds at least its starting position.
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitions_are_counted_like_lc0() {
        let mut h = PositionHistory::startpos();
        for uci in ["g1f3", "g8f6", "f3g1", "f6g8"] {
            h.play_uci(uci).unwrap();
        }
        assert_eq!(h.last().repetitions, 1, "start position reached again");
        for uci in ["g1f3", "g8f6", "f3g1", "f6g8"] {
            h.play_uci(uci).unwrap();
        }
        assert_eq!(h.last().repetitions, 2);
        let counts: Vec<_> = h.entries().iter().map(|e| e.repetitions).collect();
        assert_eq!(counts, [0, 0, 0, 0, 1, 1, 1, 1, 2]);
    }

    #[test]
    fn ep_flag_is_set_after_any_double_step() {
        let h = PositionHistory::from_spec("startpos moves e2e4").unwrap();
        assert_eq!(h.last().ep_file, Some(4));
        let h = PositionHistory::from_spec("startpos moves e2e4 e7e6").unwrap();
        assert_eq!(h.last().ep_file, None);
        let h = PositionHistory::from_fen(
            "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq e6 0 2",
        )
        .unwrap();
        assert_eq!(h.last().ep_file, Some(4));
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            PositionHistory::from_fen("not a fen"),
            Err(ChessError::BadFen { .. })
        ));
        assert!(matches!(
            PositionHistory::from_spec("startpos moves e2e5"),
            Err(ChessError::BadMove { ply: 0, .. })
        ));
        assert!(matches!(
            PositionHistory::from_spec("startpos moves e2e4 zz"),
            Err(ChessError::BadMove { ply: 1, .. })
        ));
        assert!(matches!(
            PositionHistory::from_spec("middlegame"),
            Err(ChessError::BadSpec { .. })
        ));
        assert!(matches!(
            PositionHistory::from_spec("startpos movese2e4"),
            Err(ChessError::BadSpec { .. })
        ));
    }
}
