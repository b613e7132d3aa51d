//! The 112 planes against hand-derived values, and the policy index under every transform.
//! Squares are `rank·8 + file` (a1 = 0, h1 = 7, a8 = 56); boards are seen from the side to move.

mod common;

use common::planes::{ALL, AUX, START, board, encode, masks};
use lc0rs::board::POLICY_SIZE;
use lc0rs::chess::policy_index::{
    PolicyMove, legal_moves_with_indices, move_index, policy_index, policy_move, policy_moves,
};
use lc0rs::chess::{EncodedPosition, HistoryFill, PositionHistory, Transform, encode_position};
use lc0rs::weights::format::InputFormat;
use shakmaty::{Chess, Position};

/// The number of history boards with any piece on them.
fn boards_written(e: &EncodedPosition) -> usize {
    (0..8)
        .filter(|&i| board(e, i).iter().any(|&m| m != 0))
        .count()
}

#[test]
fn start_position_classical() {
    let e = encode("startpos", InputFormat::Classical112, HistoryFill::FenOnly);
    assert_eq!(board(&e, 0), START);
    assert_eq!(e.planes[12].mask, 0, "no repetition");
    assert_eq!(
        boards_written(&e),
        1,
        "fen_only stops at the start position"
    );
    let m = masks(&e);
    assert_eq!(&m[AUX..AUX + 4], &[ALL; 4], "all four castling rights");
    assert_eq!(m[AUX + 4], 0, "white to move");
    assert_eq!(
        (m[AUX + 5], e.planes[AUX + 5].value),
        (ALL, 0.0),
        "rule50 = 0"
    );
    assert_eq!(m[AUX + 6], 0);
    assert_eq!(m[AUX + 7], ALL, "edge plane");
    assert_eq!(e.transform, Transform::NONE);
    // fill `always` repeats the start position in all 8 boards.
    let e = encode("startpos", InputFormat::Classical112, HistoryFill::Always);
    assert!((0..8).all(|i| board(&e, i) == START));
}

#[test]
fn black_to_move_is_seen_from_black() {
    let e = encode(
        "startpos moves e2e4",
        InputFormat::Classical112,
        HistoryFill::FenOnly,
    );
    // Black's pieces mirrored onto ranks 1-2; white's pawns (a2-d2, f2-h2, e4) onto ranks 7/5.
    let ours_view: Vec<u64> = START[6..].iter().map(|m| m.swap_bytes()).collect();
    assert_eq!(&board(&e, 0)[..6], &ours_view[..]);
    assert_eq!(board(&e, 0)[6], 0x00EF_0010_0000_0000);
    // The previous board (start position) from black's view too.
    assert_eq!(board(&e, 1)[0], 0xFF00);
    assert_eq!(board(&e, 1)[6], 0x00FF << 48);
    assert_eq!(boards_written(&e), 2);
    assert_eq!(masks(&e)[AUX + 4], ALL, "black to move");
}

#[test]
fn each_castling_right() {
    let fen =
        |rights: &str, side: &str| format!("fen r3k2r/8/8/8/8/8/8/R3K2R {side} {rights} - 0 1");
    let classical = |rights, side| {
        masks(&encode(
            &fen(rights, side),
            InputFormat::Classical112,
            HistoryFill::No,
        ))[AUX..AUX + 4]
            .to_vec()
    };
    assert_eq!(classical("K", "w"), [0, ALL, 0, 0]);
    assert_eq!(classical("Q", "w"), [ALL, 0, 0, 0]);
    assert_eq!(classical("k", "w"), [0, 0, 0, ALL]);
    assert_eq!(classical("q", "w"), [0, 0, ALL, 0]);
    assert_eq!(
        classical("K", "b"),
        [0, 0, 0, ALL],
        "white's right is theirs when black moves"
    );
    // Castling-plane formats: the rooks' squares, ours on rank 1 and theirs on rank 8.
    let planes = |rights, side, format| {
        masks(&encode(&fen(rights, side), format, HistoryFill::No))[AUX..AUX + 2].to_vec()
    };
    assert_eq!(
        planes("K", "w", InputFormat::With112CastlingPlane),
        [0, 0x80]
    );
    assert_eq!(
        planes("Qkq", "w", InputFormat::With112CastlingPlane),
        [0x0100_0000_0000_0001, 1 << 63]
    );
    assert_eq!(planes("Kq", "b", InputFormat::CanonicalV2), [0x01, 1 << 63]);
    assert_eq!(planes("-", "w", InputFormat::Canonical), [0, 0]);
}

#[test]
fn en_passant_and_rule50() {
    let spec = "fen rnbqkbnr/ppp1pppp/8/8/3pP3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 3";
    // Canonical formats: plane 108 marks the file of the pawn that can be taken, on rank 8.
    let e = encode(spec, InputFormat::Canonical, HistoryFill::FenOnly);
    assert_eq!(masks(&e)[AUX + 4], 1 << (56 + 4));
    // Classical, fill always: the synthesized history undoes e2e4 (seen from black: e5 → e7).
    let e = encode(spec, InputFormat::Classical112, HistoryFill::Always);
    let their_pawns_now = board(&e, 0)[6];
    assert_eq!(
        their_pawns_now & (1 << 36),
        1 << 36,
        "white pawn e4 seen on e5"
    );
    assert_eq!(board(&e, 1)[6], (their_pawns_now & !(1 << 36)) | 1 << 52);
    assert_eq!(boards_written(&e), 8);

    let rule50 = |format| {
        encode(
            "fen 8/8/8/4k3/8/8/8/4K2R w K - 37 60",
            format,
            HistoryFill::No,
        )
        .planes[AUX + 5]
    };
    assert_eq!(
        (
            rule50(InputFormat::Classical112).value,
            rule50(InputFormat::Canonical).value
        ),
        (37.0, 37.0)
    );
    assert_eq!(rule50(InputFormat::CanonicalHectoplies).value, 0.37);
    assert_eq!(rule50(InputFormat::CanonicalV2Armageddon).value, 0.37);
}

#[test]
fn armageddon_marks_black_to_move() {
    let black = encode(
        "startpos moves e2e4",
        InputFormat::CanonicalHectopliesArmageddon,
        HistoryFill::No,
    );
    assert_eq!(black.planes[AUX + 6].mask, ALL);
    let white = encode(
        "startpos",
        InputFormat::CanonicalV2Armageddon,
        HistoryFill::No,
    );
    assert_eq!(white.planes[AUX + 6].mask, 0);
}

#[test]
fn repetitions_and_history() {
    let spec = "startpos moves g1f3 g8f6 f3g1 f6g8";
    let e = encode(spec, InputFormat::Classical112, HistoryFill::FenOnly);
    assert_eq!(
        e.planes[12].mask, ALL,
        "the current position occurred before"
    );
    assert!((1..8).all(|i| e.planes[i * 13 + 12].mask == 0));
    assert_eq!(
        boards_written(&e),
        5,
        "4 moves back to the start position, then fen_only stops"
    );
    assert_eq!(board(&e, 4), START);
    // Board 1 is the position after f3g1, seen from white (to move now): their knight on f6.
    assert_eq!(board(&e, 1)[7], (1 << 57) | (1 << 45));

    // V2 writes older boards only if they are repetitions.
    let twice = format!("{spec} g1f3 g8f6 f3g1 f6g8");
    let e = encode(&twice, InputFormat::CanonicalV2, HistoryFill::FenOnly);
    let reps: Vec<u64> = (0..8).map(|i| e.planes[i * 13 + 12].mask).collect();
    assert_eq!(reps, [ALL, ALL, ALL, ALL, ALL, 0, 0, 0]);
    assert_eq!(boards_written(&e), 5);
    assert_eq!(
        board(&e, 4),
        START,
        "the 5th board written is the first repetition of the start"
    );
    let e = encode(spec, InputFormat::CanonicalV2, HistoryFill::FenOnly);
    assert_eq!(boards_written(&e), 1);
}

#[test]
fn history_fill_modes_for_a_fen() {
    let spec = "fen 4k3/8/8/8/8/8/4P3/4K3 w - - 3 40";
    let written = |format, fill| boards_written(&encode(spec, format, fill));
    assert_eq!(written(InputFormat::Classical112, HistoryFill::No), 1);
    assert_eq!(written(InputFormat::Classical112, HistoryFill::FenOnly), 8);
    assert_eq!(written(InputFormat::Classical112, HistoryFill::Always), 8);
    // lc0 never ends this loop (V2, non-zero halfmove clock, no moves); we stop as fill `no`.
    assert_eq!(written(InputFormat::CanonicalV2, HistoryFill::FenOnly), 1);
    // Canonical formats stop after a position with rule50 = 0, at an older board with an
    // en-passant flag, and at castling changes.
    let e = encode(
        "startpos moves g1f3 e7e6 b1c3",
        InputFormat::Canonical,
        HistoryFill::Always,
    );
    assert_eq!(boards_written(&e), 2, "e7e6 zeroed rule50");
    // lc0 flags e7e5 only if a white pawn stands on d5 or f5: no flag, but rule50 = 0.
    let e = encode(
        "startpos moves e2e4 e7e5 g1f3 b8c6",
        InputFormat::Canonical,
        HistoryFill::Always,
    );
    assert_eq!(boards_written(&e), 3, "e7e5 zeroed rule50 and left no flag");
    let e = encode(
        "startpos moves e2e4 d7d5 e4e5 f7f5 g1f3",
        InputFormat::Canonical,
        HistoryFill::Always,
    );
    assert_eq!(
        boards_written(&e),
        1,
        "f7f5 left an en-passant flag (white pawn e5 beside f5)"
    );
    let e = encode(
        "fen r3k3/8/8/8/8/8/8/4K2R w Kq - 4 30 moves h1h2 a8a7 h2h1",
        InputFormat::Canonical,
        HistoryFill::No,
    );
    // Rights: Kq, then q after h1h2, none after a8a7: boards after a8a7 and h2h1 are written.
    assert_eq!(boards_written(&e), 2, "castling rights differ before a8a7");
}

#[test]
fn canonical_transforms_hand_derived() {
    let t = |flip, mirror, transpose| {
        Transform::from_bits(u8::from(flip) | u8::from(mirror) << 1 | u8::from(transpose) << 2)
            .unwrap()
    };
    let case = |fen: &str| {
        encode(
            &format!("fen {fen}"),
            InputFormat::CanonicalV2,
            HistoryFill::No,
        )
    };
    // Castling rights: never transformed.
    assert_eq!(
        case("r3k3/8/8/8/8/8/8/K7 w q - 0 1").transform,
        Transform::NONE
    );
    // K a1 (file a) → flip to h1, on the anti-diagonal. k c2 → f2; f2 < its transpose g3: no
    // transpose.
    let e = case("8/8/8/8/8/8/2k5/K7 w - - 0 1");
    assert_eq!(e.transform, t(true, false, false));
    assert_eq!((e.planes[5].mask, e.planes[11].mask), (1 << 7, 1 << 13));
    // k b3 → flip g3 → the tie goes to transpose: g3 → f2.
    let e = case("8/8/8/8/8/1k6/8/K7 w - - 0 1");
    assert_eq!(e.transform, t(true, false, true));
    assert_eq!((e.planes[5].mask, e.planes[11].mask), (1 << 7, 1 << 13));
    // K e8: mirror to e1 (not near the diagonal).
    let e = case("4K3/8/8/8/8/8/8/k7 w - - 0 1");
    assert_eq!(e.transform, t(false, true, false));
    assert_eq!((e.planes[5].mask, e.planes[11].mask), (1 << 4, 1 << 56));
    // K g3: above the anti-diagonal, transposed to f2; k a8 stays.
    let e = case("k7/8/8/8/8/6K1/8/8 w - - 0 1");
    assert_eq!(e.transform, t(false, false, true));
    assert_eq!((e.planes[5].mask, e.planes[11].mask), (1 << 13, 1 << 56));
    // Black to move: k g2 seen on g7, mirrored to g2 (diagonal); K a1 seen on a8 → a1.
    let e = case("8/8/8/8/8/8/6k1/K7 b - - 0 1");
    assert_eq!(e.transform, t(false, true, false));
    assert_eq!((e.planes[5].mask, e.planes[11].mask), (1 << 14, 1));
    // With pawns only the file flip is allowed.
    let e = case("4k3/8/8/8/8/8/P7/K7 w - - 0 1");
    assert_eq!(e.transform, t(true, false, false));
    assert_eq!(e.planes[0].mask, 1 << 15);
    // Classical format never transforms.
    let e = encode(
        "fen k7/8/8/8/8/6K1/8/8 w - - 0 1",
        InputFormat::Classical112,
        HistoryFill::No,
    );
    assert_eq!(e.transform, Transform::NONE);
}

#[test]
fn move_indices_follow_the_transform() {
    // Flip + transpose: a1 → h1 → h1, b1 → g1 → h2; so Kb1... Ka1-b1 is h1h2.
    let h = PositionHistory::from_spec("fen 8/8/8/8/8/1k6/8/K7 w - - 0 1").unwrap();
    let e = encode_position(&h, InputFormat::CanonicalV2, HistoryFill::No);
    let pos = h.last().position.as_ref().unwrap();
    let ka1b1 = pos
        .legal_moves()
        .into_iter()
        .find(|m| m.to() == shakmaty::Square::B1)
        .unwrap();
    let h1h2 = PolicyMove {
        from: 7,
        to: 15,
        promotion: None,
    };
    assert_eq!(
        move_index(pos, ka1b1, e.transform),
        policy_index(h1h2).unwrap()
    );
    // Black's moves are mirrored: e7e5 is e2e4 in policy space; castling is king-takes-rook.
    let h = PositionHistory::from_spec("startpos moves e2e4").unwrap();
    let e7e5 = "e7e5"
        .parse::<shakmaty::uci::UciMove>()
        .unwrap()
        .to_move(h.last().position.as_ref().unwrap())
        .unwrap();
    assert_eq!(
        policy_move(h.last().position.as_ref().unwrap(), e7e5, Transform::NONE).text(),
        "e2e4"
    );
    let h = PositionHistory::from_fen("4k3/8/8/8/8/8/8/4K2R w K - 0 1").unwrap();
    let castle = "e1g1"
        .parse::<shakmaty::uci::UciMove>()
        .unwrap()
        .to_move(h.last().position.as_ref().unwrap())
        .unwrap();
    assert_eq!(
        policy_move(h.last().position.as_ref().unwrap(), castle, Transform::NONE).text(),
        "e1h1"
    );
}

/// The transforms lc0 can choose for a position: none with castling rights, only the file flip
/// with pawns on the board (promotions cannot be mirrored), all 8 otherwise.
fn possible_transforms(pos: &Chess) -> Vec<Transform> {
    let pawns = pos.board().by_role(shakmaty::Role::Pawn).any();
    if pos.castles().any() {
        vec![Transform::NONE]
    } else if pawns {
        vec![Transform::NONE, Transform::from_bits(1).unwrap()]
    } else {
        Transform::all().collect()
    }
}

/// Random games from several starts (with pawnless endings among them): every legal move of
/// every position has a distinct index that maps back to the same move, under every transform
/// lc0 can choose for the position.
#[test]
fn legal_moves_map_uniquely_and_back_under_every_transform() {
    let starts = [
        Chess::default(),
        PositionHistory::from_fen(
            "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
        )
        .unwrap()
        .last()
        .position
        .clone()
        .unwrap(),
        PositionHistory::from_fen("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1")
            .unwrap()
            .last()
            .position
            .clone()
            .unwrap(),
        PositionHistory::from_fen("n1n5/PPPk4/8/8/8/8/4Kppp/5N1N b - - 0 1")
            .unwrap()
            .last()
            .position
            .clone()
            .unwrap(),
        PositionHistory::from_fen("8/8/3k4/8/8/2QK4/8/6r1 w - - 0 1")
            .unwrap()
            .last()
            .position
            .clone()
            .unwrap(),
        PositionHistory::from_fen("7k/8/8/8/8/8/1R6/K3N3 b - - 0 1")
            .unwrap()
            .last()
            .position
            .clone()
            .unwrap(),
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut checked = 0;
    for start in starts {
        for _game in 0..20 {
            let mut pos = start.clone();
            for _ply in 0..60 {
                let legal = pos.legal_moves();
                if legal.is_empty() {
                    break;
                }
                for t in possible_transforms(&pos) {
                    let indexed = legal_moves_with_indices(&pos, t);
                    let mut seen = std::collections::HashSet::new();
                    for (m, index) in indexed {
                        assert!(index < POLICY_SIZE);
                        assert!(
                            seen.insert(index),
                            "two moves share index {index} in {pos:?}"
                        );
                        assert_eq!(
                            policy_moves()[index],
                            policy_move(&pos, m, t).with_knight_as_plain()
                        );
                    }
                }
                checked += 1;
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                pos.play_unchecked(legal[(state % legal.len() as u64) as usize]);
            }
        }
    }
    assert!(checked > 300, "{checked} positions");
}
