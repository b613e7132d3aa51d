//! lc0's convolution policy map: the 80 × 64 outputs of a `POLICY_CONVOLUTION` head (plane ·
//! 64 + from-square) to the 1858 policy indices. Only the first 73 planes are used:
//!
//! * planes 0..56: queen-line moves, 8 directions clockwise from north (N, NE, E, SE, S, SW,
//!   W, NW), 7 distances each (`plane = 7·direction + distance − 1`);
//! * planes 56..64: knight moves, clockwise from (+2 ranks, +1 file);
//! * planes 64..73: under- and queen promotions from the 7th rank, file offset −1, 0, +1, each
//!   with rook, bishop, queen.
//!
//! A knight promotion shares the index of the plain pawn move, as everywhere in lc0's policy.

use std::sync::LazyLock;

use shakmaty::Role;

use super::policy_index::{PolicyMove, policy_index};
use crate::board::CONV_POLICY_PLANES;

/// (rank, file) steps of the 8 queen directions, clockwise from north.
const DIRECTIONS: [(i32, i32); 8] = [
    (1, 0),
    (1, 1),
    (0, 1),
    (-1, 1),
    (-1, 0),
    (-1, -1),
    (0, -1),
    (1, -1),
];
/// (rank, file) offsets of the 8 knight moves, clockwise from (+2, +1).
const KNIGHT: [(i32, i32); 8] = [
    (2, 1),
    (1, 2),
    (-1, 2),
    (-2, 1),
    (-2, -1),
    (-1, -2),
    (1, -2),
    (2, -1),
];
/// The promotion pieces of planes 64..73, in plane order within each file offset.
const PROMOTION_ORDER: [Role; 3] = [Role::Rook, Role::Bishop, Role::Queen];

static MAP: LazyLock<Vec<i16>> = LazyLock::new(build);

/// For each of the 80·64 head outputs (`plane·64 + from`), its policy index or −1.
pub fn conv_policy_map() -> &'static [i16] {
    &MAP
}

/// The move a plane encodes from `from`, if it stays on the board.
fn plane_move(plane: usize, from: u8) -> Option<PolicyMove> {
    let (rank, file) = ((from / 8) as i32, (from % 8) as i32);
    let (dr, df, promotion) = match plane {
        0..56 => {
            let (r, f) = DIRECTIONS[plane / 7];
            let distance = (plane % 7 + 1) as i32;
            (r * distance, f * distance, None)
        }
        56..64 => {
            let (r, f) = KNIGHT[plane - 56];
            (r, f, None)
        }
        64..73 => {
            if rank != 6 {
                return None;
            }
            let k = plane - 64;
            (1, k as i32 / 3 - 1, Some(PROMOTION_ORDER[k % 3]))
        }
        _ => return None,
    };
    let (to_rank, to_file) = (rank + dr, file + df);
    if !(0..8).contains(&to_rank) || !(0..8).contains(&to_file) {
        return None;
    }
    Some(PolicyMove {
        from,
        to: (to_rank * 8 + to_file) as u8,
        promotion,
    })
}

fn build() -> Vec<i16> {
    (0..CONV_POLICY_PLANES)
        .flat_map(|plane| {
            (0..64u8).map(move |from| {
                plane_move(plane, from)
                    .and_then(policy_index)
                    .map_or(-1, |i| i as i16)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{CONV_POLICY_USED_PLANES, POLICY_SIZE};

    fn index_of(text: &str) -> usize {
        crate::chess::policy_index::policy_moves()
            .iter()
            .position(|m| m.text() == text)
            .expect("a policy move")
    }

    #[test]
    fn every_policy_index_appears_exactly_once() {
        let mut seen = vec![0u32; POLICY_SIZE];
        for &i in conv_policy_map().iter().filter(|&&i| i >= 0) {
            seen[i as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n == 1));
        assert!(
            conv_policy_map()[CONV_POLICY_USED_PLANES * 64..]
                .iter()
                .all(|&i| i == -1)
        );
    }

    #[test]
    fn hand_checked_entries() {
        let map = conv_policy_map();
        // a1a2 is index 7 in lc0's order (a1b1 .. a1h1 come first).
        assert_eq!(map[0], 7);
        assert_eq!(index_of("a1a2"), 7);
        // Plane 2·7 + 0: east, distance 1, from e4 (square 28): e4f4.
        assert_eq!(map[14 * 64 + 28] as usize, index_of("e4f4"));
        // Plane 56: knight (+2, +1) from g1 (6): g1h3.
        assert_eq!(map[56 * 64 + 6] as usize, index_of("g1h3"));
        // Plane 64 + 3 + 2: straight queen promotion from b7 (49): b7b8q.
        assert_eq!(map[69 * 64 + 49] as usize, index_of("b7b8q"));
        // Plane 64 + 0 + 1: bishop promotion capturing left from b7: b7a8b.
        assert_eq!(map[65 * 64 + 49] as usize, index_of("b7a8b"));
        // Off the board: north from h8, a promotion plane from a2.
        assert_eq!(map[63], -1);
        assert_eq!(map[66 * 64 + 8], -1);
    }
}
