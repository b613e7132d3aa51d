//! A game as lc0 sees it: the positions since the FEN, each with lc0's castling rights,
//! en-passant flag, fifty-move counter and repetition count.

use shakmaty::uci::UciMove;
use shakmaty::{Board, Chess, Color, Move, Position, Role, Square};

use super::castling::Castling;
use super::fen::{FenError, Lc0Fen};
use super::opposite_check;

/// Why a position or move was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChessError {
    #[error("bad FEN {fen:?}: {reason}")]
    BadFen { fen: String, reason: FenError },
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
    /// The pieces, as lc0 sees them.
    pub board: Board,
    /// The side to move.
    pub turn: Color,
    /// The rules for move generation and play (shakmaty), whose castling rights and
    /// en-passant square serve move generation only (the network sees `castling` and
    /// `en_passant`). `None` where the side not to move is in check: lc0 evaluates such a FEN,
    /// but no game continues from it and shakmaty cannot hold it.
    pub position: Option<Chess>,
    /// lc0's castling rights with their rook files.
    pub castling: Castling,
    /// lc0's en-passant flag as a mask from the side to move's view: after a double pawn push
    /// with an enemy pawn beside the pushed pawn, the pushed pawn's file on rank 8; from a FEN,
    /// its e.p. square as given (on rank 1 if the square lies on the mover's own side). 0 if none.
    pub en_passant: u64,
    /// Plies since the last capture or pawn move.
    pub rule50: u32,
    /// How many times this position occurred before (lc0's count).
    pub repetitions: u32,
    /// Plies back to the position's last occurrence (0 where it is new): the length of the
    /// cycle a repetition closes (lc0's plies since the previous repetition).
    pub cycle: u32,
    /// A hash of board, side to move, castling rights and both en-passant notions (the legal
    /// square that move generation uses and lc0's flag).
    pub key: u64,
}

impl HistoryEntry {
    fn playable(position: Chess, castling: Castling, en_passant: u64) -> Self {
        let entry = Self {
            board: position.board().clone(),
            turn: position.turn(),
            rule50: position.halfmoves(),
            position: Some(position),
            castling,
            en_passant,
            repetitions: 0,
            cycle: 0,
            key: 0,
        };
        entry.with_key()
    }

    fn with_key(mut self) -> Self {
        // XXH3 of the words below in one call, a strong hash: the NN cache may key a position
        // by this alone. Fx, a sum of the words times powers of an odd constant, let boards
        // that differ on the eighth rank (the bitboards' top bits) share a key; XXH3's
        // streaming hasher cost as much as the rest of playing a move.
        let board = &self.board;
        let legal_ep = self.position.as_ref().and_then(|p| p.legal_ep_square());
        let words = [
            board.by_role(Role::Pawn),
            board.by_role(Role::Knight),
            board.by_role(Role::Bishop),
            board.by_role(Role::Rook),
            board.by_role(Role::Queen),
            board.by_role(Role::King),
            board.by_color(Color::White),
        ]
        .map(u64::from)
        .into_iter()
        .chain([
            self.en_passant,
            u64::from(self.castling.packed()) << 16
                | u64::from(legal_ep.map_or(0xff, u8::from)) << 8
                | u64::from(self.turn == Color::White),
        ]);
        let mut bytes = [0u8; 9 * 8];
        for (word, out) in words.zip(bytes.chunks_exact_mut(8)) {
            out.copy_from_slice(&word.to_le_bytes());
        }
        self.key = xxhash_rust::xxh3::xxh3_64(&bytes);
        self
    }

    /// lc0's board equality: pieces, side to move, castling rights and en-passant flag.
    fn same_board(&self, other: &HistoryEntry) -> bool {
        self.en_passant == other.en_passant
            && self.castling == other.castling
            && self.turn == other.turn
            && self.board == other.board
    }

    /// Whether this is the standard start position (for lc0's `fen_only` history fill).
    pub fn is_startpos(&self) -> bool {
        self.en_passant == 0
            && self.castling == Castling::standard()
            && self.turn == Color::White
            && self.board == Board::new()
    }

    /// The legal moves as lc0 lists them: shakmaty's where it holds the position, else (the
    /// side not to move in check) lc0's own rule with king captures (see [`opposite_check`]).
    pub fn legal_moves(&self) -> Vec<Move> {
        match &self.position {
            Some(position) => position.legal_moves().into_iter().collect(),
            None => opposite_check::legal_moves(&self.board, self.turn, self.en_passant),
        }
    }
}

/// lc0's en-passant flag after `m` (v0.31.2 `ChessBoard::ApplyMove`): set after a double pawn
/// push only if an enemy pawn stands beside the pushed pawn on its rank (the capture is
/// pseudo-legal: pins and checks are not considered). `after` is the position after the move.
fn en_passant_flag_after(after: &Chess, m: Move) -> u64 {
    let Move::Normal {
        role: Role::Pawn,
        from,
        to,
        ..
    } = m
    else {
        return 0;
    };
    if from.rank().distance(to.rank()) != 2 {
        return 0;
    }
    let enemy_pawns = after.board().pawns() & after.board().by_color(after.turn());
    let beside_pushed_pawn = [-1, 1]
        .into_iter()
        .filter_map(|delta| to.file().offset(delta))
        .map(|file| Square::from_coords(file, to.rank()));
    if beside_pushed_pawn
        .into_iter()
        .any(|square| enemy_pawns.contains(square))
    {
        1u64 << (56 + u32::from(to.file()))
    } else {
        0
    }
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
            entries: vec![HistoryEntry::playable(
                Chess::default(),
                Castling::standard(),
                0,
            )],
        }
    }

    /// A history that starts at `fen`, read as lc0 reads it (see [`Lc0Fen`]).
    pub fn from_fen(fen: &str) -> Result<Self, ChessError> {
        let bad = |reason: FenError| ChessError::BadFen {
            fen: fen.to_owned(),
            reason,
        };
        let parsed = Lc0Fen::parse(fen).map_err(bad)?;
        let en_passant = parsed.en_passant_flag();
        let entry = match parsed.playable_position() {
            Some(position) => HistoryEntry::playable(position, parsed.castling, en_passant),
            None => HistoryEntry {
                board: parsed.board,
                turn: parsed.turn,
                position: None,
                castling: parsed.castling,
                en_passant,
                rule50: parsed.rule50,
                repetitions: 0,
                cycle: 0,
                key: 0,
            }
            .with_key(),
        };
        Ok(Self {
            entries: vec![entry],
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
        let Some(position) = &self.last().position else {
            return Err(bad(
                "no move continues a position whose side not to move is in check".to_owned(),
            ));
        };
        let m = parsed.to_move(position).map_err(|e| bad(e.to_string()))?;
        self.play(m);
        Ok(())
    }

    /// Plays a legal move, updating castling rights and the en-passant flag by lc0's rules.
    /// A position whose side not to move is in check has no legal move to play: there, this
    /// does nothing.
    pub fn play(&mut self, m: Move) {
        let before = self.last();
        let Some(mut position) = before.position.clone() else {
            return;
        };
        let castling = before.castling.after_move(&before.board, before.turn, m);
        position.play_unchecked(m);
        let en_passant = en_passant_flag_after(&position, m);
        let mut entry = HistoryEntry::playable(position, castling, en_passant);
        (entry.repetitions, entry.cycle) = self.repetitions_of(&entry);
        self.entries.push(entry);
    }

    /// lc0's rule: compare with the positions 2, 4, … plies back while no capture or pawn
    /// move lies in between; a match counts 1 plus that position's repetitions. Returns the
    /// count and the plies back to the match (0, 0 where there is none).
    fn repetitions_of(&self, entry: &HistoryEntry) -> (u32, u32) {
        if entry.rule50 < 4 {
            return (0, 0);
        }
        let earlier_ones = self.entries.iter().rev().skip(1).step_by(2);
        for (plies, earlier) in (2..).step_by(2).zip(earlier_ones) {
            if earlier.same_board(entry) {
                return (1 + earlier.repetitions, plies);
            }
            if earlier.rule50 < 2 {
                return (0, 0);
            }
        }
        (0, 0)
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
        // Each repetition closes a cycle of four plies back to the last occurrence.
        let cycles: Vec<_> = h.entries().iter().map(|e| e.cycle).collect();
        assert_eq!(cycles, [0, 0, 0, 0, 4, 4, 4, 4, 4]);
    }

    /// lc0's rule: the flag follows a double push only with an enemy pawn beside the pushed
    /// pawn, pins and checks aside; a FEN's square is kept as given.
    #[test]
    fn ep_flag_only_with_an_enemy_pawn_beside() {
        let flag = |spec: &str| PositionHistory::from_spec(spec).unwrap().last().en_passant;
        let f_file_on_rank_8 = 1u64 << (56 + 5);
        assert_eq!(flag("startpos moves e2e4"), 0, "no black pawn on d4 or f4");
        assert_eq!(flag("startpos moves e2e4 e7e6"), 0);
        assert_eq!(
            flag("startpos moves e2e4 d7d5 e4e5 f7f5"),
            f_file_on_rank_8,
            "white pawn e5 beside f5"
        );
        // exf6 would expose the white king on a5 to the rook on h5: the flag is set anyway.
        assert_eq!(
            flag("fen 4k3/5p2/8/K3P2r/8/8/8/8 b - - 0 1 moves f7f5"),
            f_file_on_rank_8
        );
        assert_eq!(
            flag("fen rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq e6 0 2"),
            1 << 60,
            "a FEN's square without a capturing pawn is kept"
        );
    }

    /// The board after e7e5 returns after c6b8: with lc0's flag rule it is a repetition.
    #[test]
    fn repetition_after_a_double_push_without_a_capture() {
        let h = PositionHistory::from_spec("startpos moves e2e4 e7e5 g1f3 b8c6 f3g1 c6b8 g1f3")
            .unwrap();
        let counts: Vec<_> = h.entries().iter().map(|e| e.repetitions).collect();
        assert_eq!(counts, [0, 0, 0, 0, 0, 0, 1, 1]);
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

    /// The FEN of a position with a black king, rook and bishop on the eighth rank's `files`
    /// and the white king on e1.
    fn eighth_rank_fen(files: [usize; 3]) -> String {
        let mut rank = String::new();
        let mut empty = 0;
        for file in 0..8 {
            match files.iter().position(|&f| f == file) {
                Some(piece) => {
                    if empty > 0 {
                        rank.push_str(&empty.to_string());
                        empty = 0;
                    }
                    rank.push(['k', 'r', 'b'][piece]);
                }
                None => empty += 1,
            }
        }
        if empty > 0 {
            rank.push_str(&empty.to_string());
        }
        format!("fen {rank}/8/8/8/8/8/8/4K3 w - - 0 1")
    }

    /// Positions that differ only in the bitboards' top bits (the eighth rank) get keys of
    /// their own: the NN cache may key a position by this alone. A sum of the words times
    /// powers of an odd constant (Fx) gave 150 of these 336 positions another's key.
    #[test]
    fn positions_differing_on_the_eighth_rank_have_distinct_keys() {
        let mut keys = std::collections::HashMap::new();
        for k in 0..8 {
            for r in (0..8).filter(|&r| r != k) {
                for b in (0..8).filter(|&b| b != k && b != r) {
                    let fen = eighth_rank_fen([k, r, b]);
                    let key = PositionHistory::from_spec(&fen).unwrap().last().key;
                    if let Some(other) = keys.insert(key, fen.clone()) {
                        panic!("{fen} has the key of {other}");
                    }
                }
            }
        }
        assert_eq!(keys.len(), 8 * 7 * 6);
    }

    /// One board with other rights, another side to move or an en-passant square: each its own
    /// key.
    #[test]
    fn castling_turn_and_en_passant_change_the_key() {
        let specs = [
            "fen r3k2r/8/8/8/3p4/8/4P3/R3K2R w KQkq - 0 1",
            "fen r3k2r/8/8/8/3p4/8/4P3/R3K2R w KQk - 0 1",
            "fen r3k2r/8/8/8/3p4/8/4P3/R3K2R w Qkq - 0 1",
            "fen r3k2r/8/8/8/3p4/8/4P3/R3K2R w - - 0 1",
            "fen r3k2r/8/8/8/3p4/8/4P3/R3K2R b KQkq - 0 1",
            "fen r3k2r/8/8/8/3pP3/8/8/R3K2R b KQkq e3 0 1",
            "fen r3k2r/8/8/8/3pP3/8/8/R3K2R b KQkq - 0 1",
        ];
        let keys: std::collections::HashSet<_> = specs
            .iter()
            .map(|spec| PositionHistory::from_spec(spec).unwrap().last().key)
            .collect();
        assert_eq!(keys.len(), specs.len());
    }
}
