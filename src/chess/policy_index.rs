//! lc0's policy index space, derived from its rules (docs/lc0-format.md §2.5, §3.2, §3.4), not
//! pasted: the 1858 moves, the attention head's 4288 → 1858 map, and the 64×64 positional
//! encoding of PE_MAP networks.

use std::sync::LazyLock;

use shakmaty::{Chess, Color, Move, Position, Role};

use super::history::HistoryEntry;

use super::transform::Transform;
use crate::board::POLICY_SIZE;

/// The promotion pieces with their own index (a knight promotion shares the plain move's).
pub const PROMOTION_PIECES: [Role; 3] = [Role::Queen, Role::Rook, Role::Bishop];

/// A move in lc0's policy space: from the side to move's view, castling as king-takes-rook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PolicyMove {
    pub from: u8,
    pub to: u8,
    /// Queen, rook or bishop; `None` for every other move, knight promotions included.
    pub promotion: Option<Role>,
}

impl PolicyMove {
    /// The same move with a knight promotion written as the plain move (they share an index).
    pub fn with_knight_as_plain(self) -> Self {
        Self {
            promotion: self.promotion.filter(|&r| r != Role::Knight),
            ..self
        }
    }

    /// The move in UCI-like text from the side to move's view (`e2e4`, `a7a8q`).
    pub fn text(&self) -> String {
        let name = |sq: u8| format!("{}{}", (b'a' + sq % 8) as char, sq / 8 + 1);
        let promo = self
            .promotion
            .map_or(String::new(), |r| r.char().to_string());
        format!("{}{}{promo}", name(self.from), name(self.to))
    }
}

/// Whether `from → to` is a queen-line (rank, file, diagonal) or knight move.
pub fn is_queen_or_knight_move(from: u8, to: u8) -> bool {
    let (dr, df) = (
        (to / 8) as i32 - (from / 8) as i32,
        (to % 8) as i32 - (from % 8) as i32,
    );
    if from == to {
        return false;
    }
    let queen = dr == 0 || df == 0 || dr.abs() == df.abs();
    let knight = (dr.abs() == 1 && df.abs() == 2) || (dr.abs() == 2 && df.abs() == 1);
    queen || knight
}

struct Tables {
    moves: Vec<PolicyMove>,
    /// Index of the plain move `from → to`, or −1.
    plain: Vec<i16>,
    /// Index of the promotion from file `f` (rank 7) to file `t` (rank 8) with piece `c`, at
    /// `f·24 + t·3 + c`, or −1.
    promotions: Vec<i16>,
    attention_map: Vec<i16>,
    positional_encoding: Vec<f32>,
}

static TABLES: LazyLock<Tables> = LazyLock::new(build_tables);

fn build_tables() -> Tables {
    let mut moves = Vec::with_capacity(POLICY_SIZE);
    let mut plain = vec![-1i16; 64 * 64];
    for from in 0..64u8 {
        for to in 0..64u8 {
            if is_queen_or_knight_move(from, to) {
                plain[from as usize * 64 + to as usize] = moves.len() as i16;
                moves.push(PolicyMove {
                    from,
                    to,
                    promotion: None,
                });
            }
        }
    }
    let mut promotions = vec![-1i16; 8 * 24];
    for from_file in 0..8u8 {
        for to_file in from_file.saturating_sub(1)..=(from_file + 1).min(7) {
            for (c, piece) in PROMOTION_PIECES.into_iter().enumerate() {
                promotions[from_file as usize * 24 + to_file as usize * 3 + c] = moves.len() as i16;
                moves.push(PolicyMove {
                    from: 48 + from_file,
                    to: 56 + to_file,
                    promotion: Some(piece),
                });
            }
        }
    }
    assert_eq!(moves.len(), POLICY_SIZE, "lc0's policy has 1858 moves");
    let attention_map = plain.iter().chain(&promotions).copied().collect();
    let positional_encoding = (0..64u8)
        .flat_map(|s| {
            (0..64u8).map(move |j| {
                if j == s {
                    -1.0
                } else if is_queen_or_knight_move(s, j) {
                    1.0
                } else {
                    0.0
                }
            })
        })
        .collect();
    Tables {
        moves,
        plain,
        promotions,
        attention_map,
        positional_encoding,
    }
}

/// The 1858 moves in index order.
pub fn policy_moves() -> &'static [PolicyMove] {
    &TABLES.moves
}

/// The index of a move given from the side to move's view, or `None` if lc0 has none.
pub fn policy_index(m: PolicyMove) -> Option<usize> {
    let t = &*TABLES;
    let index = match m.promotion {
        None | Some(Role::Knight) => t.plain[m.from as usize * 64 + m.to as usize],
        Some(piece) => {
            let c = PROMOTION_PIECES.iter().position(|&p| p == piece)?;
            if m.from / 8 != 6 || m.to / 8 != 7 {
                return None;
            }
            t.promotions[(m.from % 8) as usize * 24 + (m.to % 8) as usize * 3 + c]
        }
    };
    usize::try_from(index).ok()
}

/// For each of the attention head's 4288 raw outputs, its policy index or −1.
pub fn attention_policy_map() -> &'static [i16] {
    &TABLES.attention_map
}

/// lc0's positional encoding `[64][64]` for PE_MAP: −1 on the square itself, +1 on squares a
/// queen or knight move away, 0 elsewhere.
pub fn positional_encoding() -> &'static [f32] {
    &TABLES.positional_encoding
}

/// A legal move in lc0's policy space for the side to move of `position`, with `transform`
/// (lc0 v0.31.2's square transform, which matches the plane transform).
pub fn policy_move(position: &Chess, m: Move, transform: Transform) -> PolicyMove {
    policy_move_for(position.turn(), m, transform)
}

/// [`policy_move`] for a move of `us`.
fn policy_move_for(us: Color, m: Move, transform: Transform) -> PolicyMove {
    let (from, to, promotion) = match m {
        Move::Normal {
            from,
            to,
            promotion,
            ..
        } => (from, to, promotion),
        Move::EnPassant { from, to } => (from, to, None),
        Move::Castle { king, rook } => (king, rook, None),
        Move::Put { to, .. } => (to, to, None),
    };
    // Black's moves are seen from Black's side: ranks mirrored (square ^ 56).
    let view = u8::from(us == Color::Black) * 56;
    let square = |sq: shakmaty::Square| transform.apply_square(u32::from(sq) as u8 ^ view);
    PolicyMove {
        from: square(from),
        to: square(to),
        promotion: promotion.filter(|&r| r != Role::Knight),
    }
}

/// The policy index of a legal move. Every legal chess move has one (it is a queen-line or
/// knight move, or a promotion from rank 7 to rank 8).
pub fn move_index(position: &Chess, m: Move, transform: Transform) -> usize {
    move_index_for(position.turn(), m, transform)
}

fn move_index_for(us: Color, m: Move, transform: Transform) -> usize {
    let pm = policy_move_for(us, m, transform);
    policy_index(pm)
        .unwrap_or_else(|| panic!("legal move {m:?} ({}) has no policy index", pm.text()))
}

/// The legal moves of `position` with their policy indices.
pub fn legal_moves_with_indices(position: &Chess, transform: Transform) -> Vec<(Move, usize)> {
    moves_with_indices(position.turn(), position.legal_moves(), transform)
}

/// The legal moves of a history entry (lc0's list, see [`HistoryEntry::legal_moves`]) with
/// their policy indices.
pub fn entry_moves_with_indices(entry: &HistoryEntry, transform: Transform) -> Vec<(Move, usize)> {
    moves_with_indices(entry.turn, entry.legal_moves(), transform)
}

/// `moves` (played by `us`) with their policy indices under `transform`.
pub fn moves_with_indices(
    us: Color,
    moves: impl IntoIterator<Item = Move>,
    transform: Transform,
) -> Vec<(Move, usize)> {
    moves
        .into_iter()
        .map(|m| (m, move_index_for(us, m, transform)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::ATTENTION_POLICY_SIZE;

    #[test]
    fn hand_checked_indices() {
        let moves = policy_moves();
        // lc0's list starts a1b1, a1c1, ... and ends with h7h8 promotions.
        assert_eq!(moves[0].text(), "a1b1");
        assert_eq!(moves[1].text(), "a1c1");
        assert_eq!(moves[1791].text(), "h8g8");
        assert_eq!(moves[1792].text(), "a7a8q");
        assert_eq!(moves[1857].text(), "h7h8b");
        // a1 has 7 + 7 + 7 queen-line targets and 2 knight targets: 23 moves.
        assert_eq!(moves.iter().filter(|m| m.from == 0).count(), 23);
        let e2e4 = PolicyMove {
            from: 12,
            to: 28,
            promotion: None,
        };
        assert_eq!(moves[policy_index(e2e4).unwrap()], e2e4);
        let knight_promo = PolicyMove {
            from: 52,
            to: 60,
            promotion: Some(Role::Knight),
        };
        assert_eq!(
            policy_index(knight_promo),
            policy_index(PolicyMove {
                promotion: None,
                ..knight_promo
            })
        );
        assert_eq!(
            policy_index(PolicyMove {
                from: 0,
                to: 63 - 6,
                promotion: None
            }),
            None
        );
    }

    #[test]
    fn attention_map_covers_every_index_once() {
        let map = attention_policy_map();
        assert_eq!(map.len(), ATTENTION_POLICY_SIZE);
        let mut seen = vec![0; POLICY_SIZE];
        for &i in map.iter().filter(|&&i| i >= 0) {
            seen[i as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n == 1));
        assert_eq!(map.iter().filter(|&&i| i >= 0).count(), 1792 + 66);
        // Promotion slot a7→c8 (|Δfile| = 2) does not exist.
        assert_eq!(map[4096 + 2 * 3], -1);
    }

    #[test]
    fn positional_encoding_hand_checked() {
        let pe = positional_encoding();
        assert_eq!(pe[0], -1.0); // a1 itself
        assert_eq!(pe[7], 1.0); // a1 → h1
        assert_eq!(pe[10], 1.0); // a1 → c2 (knight)
        assert_eq!(pe[11], 0.0); // a1 → d2
        assert_eq!(pe.iter().filter(|&&v| v == 1.0).count(), 1792);
    }
}
