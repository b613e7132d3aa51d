//! lc0's legal moves in a position whose side not to move is in check. lc0 evaluates such a
//! FEN (v0.31.2 `SetFromFen` checks nothing) and lists its moves as always
//! (`GenerateLegalMoves`): the pseudo-legal moves, captures of the enemy king included, that
//! leave the mover's own king unattacked. shakmaty cannot hold such a position, so this small
//! generator serves its evaluation; no game continues from it (the search refuses it, and no
//! move can be played on it). Castling is not generated here: a castling right in such a
//! position is encoded but not offered as a move.

use shakmaty::{Bitboard, Board, Color, Move, Piece, Rank, Role, Square, attacks};

/// The legal moves for `us` on `board`, lc0's way; `en_passant` is lc0's flag from `us`'s view
/// (a capture square on rank 6 of that view where its bit is on rank 8).
pub fn legal_moves(board: &Board, us: Color, en_passant: u64) -> Vec<Move> {
    pseudo_legal_moves(board, us, en_passant)
        .into_iter()
        .filter(|&m| king_safe_after(board, us, m))
        .collect()
}

fn pseudo_legal_moves(board: &Board, us: Color, en_passant: u64) -> Vec<Move> {
    let ours = board.by_color(us);
    let occupied = board.occupied();
    let mut moves = Vec::new();
    for from in ours {
        let Some(role) = board.role_at(from) else {
            continue;
        };
        if role == Role::Pawn {
            pawn_moves(board, us, from, en_passant, &mut moves);
            continue;
        }
        let targets = attacks::attacks(from, Piece { color: us, role }, occupied) & !ours;
        for to in targets {
            moves.push(Move::Normal {
                role,
                from,
                capture: board.role_at(to),
                to,
                promotion: None,
            });
        }
    }
    moves
}

fn pawn_moves(board: &Board, us: Color, from: Square, en_passant: u64, moves: &mut Vec<Move>) {
    let occupied = board.occupied();
    let forward = us.fold_wb(8, -8);
    let mut targets = Bitboard::EMPTY;
    if let Some(one) = from.offset(forward).filter(|&sq| !occupied.contains(sq)) {
        targets.add(one);
        let on_start_rank = from.rank() == us.fold_wb(Rank::Second, Rank::Seventh);
        if let Some(two) = one.offset(forward).filter(|&sq| !occupied.contains(sq))
            && on_start_rank
        {
            targets.add(two);
        }
    }
    targets |= attacks::pawn_attacks(us, from) & board.by_color(!us);
    let last_rank = us.fold_wb(Rank::Eighth, Rank::First);
    for to in targets {
        let promotions: &[Option<Role>] = if to.rank() == last_rank {
            &[
                Some(Role::Queen),
                Some(Role::Rook),
                Some(Role::Bishop),
                Some(Role::Knight),
            ]
        } else {
            &[None]
        };
        for &promotion in promotions {
            moves.push(Move::Normal {
                role: Role::Pawn,
                from,
                capture: board.role_at(to),
                to,
                promotion,
            });
        }
    }
    if let Some(to) = en_passant_target(us, en_passant)
        && attacks::pawn_attacks(us, from).contains(to)
        && !occupied.contains(to)
    {
        moves.push(Move::EnPassant { from, to });
    }
}

/// The square an en-passant capture lands on: the flag's file on rank 6 of `us`'s view.
fn en_passant_target(us: Color, en_passant: u64) -> Option<Square> {
    let rank_8_of_view = 0xFF00_0000_0000_0000u64;
    if en_passant & rank_8_of_view == 0 {
        return None;
    }
    let file = (en_passant.trailing_zeros() % 8) as i32;
    let rank_6 = us.fold_wb(Square::A6, Square::A3);
    rank_6.offset(file)
}

fn king_safe_after(board: &Board, us: Color, m: Move) -> bool {
    let mut after = board.clone();
    match m {
        Move::Normal {
            role,
            from,
            to,
            promotion,
            ..
        } => {
            after.discard_piece_at(from);
            after.set_piece_at(
                to,
                Piece {
                    color: us,
                    role: promotion.unwrap_or(role),
                },
            );
        }
        Move::EnPassant { from, to } => {
            after.discard_piece_at(from);
            after.discard_piece_at(Square::from_coords(to.file(), from.rank()));
            after.set_piece_at(
                to,
                Piece {
                    color: us,
                    role: Role::Pawn,
                },
            );
        }
        Move::Castle { .. } | Move::Put { .. } => return false,
    }
    after
        .king_of(us)
        .is_some_and(|king| after.attacks_to(king, !us, after.occupied()).is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shakmaty::fen::Fen;
    use shakmaty::uci::UciMove;
    use shakmaty::{CastlingMode, Chess, Position};

    fn board_of(fen: &str) -> Board {
        let fen: Fen = fen.parse().unwrap();
        fen.as_setup().board.clone()
    }

    fn texts(moves: &[Move]) -> Vec<String> {
        let mut out: Vec<String> = moves
            .iter()
            .map(|&m| UciMove::from_move(m, CastlingMode::Chess960).to_string())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn king_captures_are_moves() {
        // White to move, the black king on e8 in check from the queen on e2.
        let board = board_of("4k3/8/8/8/8/8/4Q3/4K3");
        let moves = legal_moves(&board, Color::White, 0);
        let texts = texts(&moves);
        assert!(texts.contains(&"e2e8".to_owned()), "{texts:?}");
        // Queen: 6 up the file (e3..e8), 7 along rank 2, 9 on the diagonals (d1, f1, d3..a6,
        // f3..h5); king: d1, f1, d2, f2.
        assert_eq!(texts.len(), 6 + 7 + 9 + 4, "{texts:?}");
    }

    /// Where shakmaty can hold the position, the moves are shakmaty's legal moves.
    #[test]
    fn agrees_with_shakmaty_on_playable_positions() {
        let fens = [
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1",
            "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w - - 0 1",
            "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
            "n1n5/PPPk4/8/8/8/8/4Kppp/5N1N b - - 0 1",
            "4k3/8/8/2Pp4/8/8/8/4K3 w - d6 0 1",
            "4k3/8/8/K2pP2r/8/8/8/8 w - d6 0 1",
            "4k3/4r3/8/8/8/8/4B3/4K3 w - - 0 1",
        ];
        for fen in fens {
            let parsed: Fen = fen.parse().unwrap();
            let ep = parsed
                .as_setup()
                .ep_square
                .map_or(0, |sq| 1u64 << (56 + u32::from(sq.file())));
            let chess: Chess = parsed.into_position(CastlingMode::Standard).unwrap();
            let ours = legal_moves(chess.board(), chess.turn(), ep);
            let theirs: Vec<Move> = chess.legal_moves().into_iter().collect();
            assert_eq!(texts(&ours), texts(&theirs), "{fen}");
        }
    }
}
