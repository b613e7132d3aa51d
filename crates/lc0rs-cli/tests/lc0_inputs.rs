//! lc0's input rules (docs/lc0-format.md §2.3) against planes derived by hand from the rules as
//! written: the en-passant flag, FENs lc0 evaluates that strict validation would refuse,
//! per-colour castling rooks, the synthesized board of history fill `no`; then random games,
//! where a position reached by moves and the same position given as a FEN must encode alike.
//! Squares are `rank·8 + file` (a1 = 0, h1 = 7, a8 = 56); boards are seen from the side to move.

// The root package's shared test helpers and references.
#[path = "../../../tests/common/mod.rs"]
mod common;

use common::planes::{ALL, AUX, START, board, encode, masks};
use lc0rs::chess::{
    ChessError, EncodedPosition, FenError, HistoryFill, PositionHistory, Transform, encode_position,
};
use lc0rs::weights::format::InputFormat;
use lc0rs_engine::search::terminal_value;
use proptest::prelude::*;
use shakmaty::{CastlingSide, Color, Move, Role, Square};

fn boards_written(e: &EncodedPosition) -> usize {
    (0..8)
        .filter(|&i| board(e, i).iter().any(|&m| m != 0))
        .count()
}

fn square(s: &str) -> u64 {
    1 << u32::from(s.parse::<Square>().unwrap())
}

// ---- The en-passant flag ----------------------------------------------------------------

#[test]
fn ep_flag_needs_an_enemy_pawn_beside_the_pushed_pawn() {
    let flag = |spec| masks(&encode(spec, InputFormat::Canonical, HistoryFill::FenOnly))[AUX + 4];
    assert_eq!(flag("startpos moves e2e4"), 0, "no black pawn on d4 or f4");
    assert_eq!(flag("startpos"), 0);
    // White pawn e5 beside f5: the flag marks file f on rank 8 (white to move).
    assert_eq!(flag("startpos moves e2e4 d7d5 e4e5 f7f5"), square("f8"));
    // Black to move after d2d4 with a black pawn on e4: file d on rank 8 of black's view.
    assert_eq!(
        flag("fen 4k3/8/8/8/4p3/8/3P4/4K3 w - - 0 1 moves d2d4"),
        square("d8")
    );
    // exf6 e.p. would expose the white king on a5 to the rook on h5; lc0 sets the flag anyway.
    // Our king on file a: the canonical file flip moves the flag from f8 to c8.
    let e = encode(
        "fen 4k3/5p2/8/K3P2r/8/8/8/8 b - - 0 1 moves f7f5",
        InputFormat::Canonical,
        HistoryFill::No,
    );
    assert_eq!(e.transform, Transform::from_bits(1).unwrap());
    assert_eq!(masks(&e)[AUX + 4], square("c8"));
}

#[test]
fn ep_flag_decides_repetitions() {
    // The board after e7e5 returns after c6b8, and the one after g1f3 after the second g1f3.
    let e = encode(
        "startpos moves e2e4 e7e5 g1f3 b8c6 f3g1 c6b8 g1f3",
        InputFormat::Classical112,
        HistoryFill::FenOnly,
    );
    let repeated: Vec<bool> = (0..8).map(|i| masks(&e)[i * 13 + 12] == ALL).collect();
    assert_eq!(
        repeated,
        [true, true, false, false, false, false, false, false]
    );
    // Twice more round the knights: the e7e5 board occurs a third time, a draw for the search.
    let spec = "startpos moves e2e4 e7e5 g1f3 b8c6 f3g1 c6b8 g1f3 b8c6 f3g1 c6b8";
    let history = PositionHistory::from_spec(spec).unwrap();
    assert_eq!(history.last().repetitions, 2);
    assert_eq!(terminal_value(&history), Some(0.0));
}

#[test]
fn canonical_history_continues_past_a_push_without_flag() {
    // Format 4 stops after the board with rule50 = 0 (after e2e4, no flag): 3 boards.
    let e = encode(
        "startpos moves e2e4 g8f6 b1c3",
        InputFormat::CanonicalHectoplies,
        HistoryFill::FenOnly,
    );
    assert_eq!(boards_written(&e), 3);
    let mut after_e4 = START.to_vec();
    after_e4[0] = 0xEF00 | square("e4");
    // Seen from black (to move now): mirrored, ours and theirs swapped.
    let mirrored: Vec<u64> = after_e4[6..]
        .iter()
        .chain(&after_e4[..6])
        .map(|m| m.swap_bytes())
        .collect();
    assert_eq!(board(&e, 2), mirrored);
}

// ---- FENs lc0 evaluates -------------------------------------------------------------------

#[test]
fn too_much_material_is_encoded() {
    let e = encode(
        "fen 4k3/8/8/8/8/8/PPPPPPPP/3BKB2 w - - 0 1",
        InputFormat::Classical112,
        HistoryFill::No,
    );
    let bishops = square("d1") | square("f1");
    assert_eq!(
        board(&e, 0),
        [
            0xFF00,
            0,
            bishops,
            0,
            0,
            square("e1"),
            0,
            0,
            0,
            0,
            0,
            square("e8")
        ]
    );
    assert_eq!(&masks(&e)[AUX..AUX + 5], &[0, 0, 0, 0, 0]);
}

#[test]
fn impossible_check_is_encoded_from_blacks_view() {
    let e = encode(
        "fen 4k3/8/3N1N2/8/8/8/8/4K3 b - - 0 1",
        InputFormat::Classical112,
        HistoryFill::No,
    );
    let knights = square("d3") | square("f3");
    assert_eq!(
        board(&e, 0),
        [
            0,
            0,
            0,
            0,
            0,
            square("e1"),
            0,
            knights,
            0,
            0,
            0,
            square("e8")
        ]
    );
    assert_eq!(masks(&e)[AUX + 4], ALL, "black to move");
}

#[test]
fn side_not_to_move_in_check_is_encoded_with_lc0s_moves() {
    let spec = "fen 4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1";
    let e = encode(spec, InputFormat::Classical112, HistoryFill::No);
    assert_eq!(
        board(&e, 0),
        [
            0,
            0,
            0,
            0,
            square("e2"),
            square("e1"),
            0,
            0,
            0,
            0,
            0,
            square("e8")
        ]
    );
    // lc0's list holds the capture of the king; no game continues after it.
    let history = PositionHistory::from_spec(spec).unwrap();
    let legal = history.last().legal_moves();
    assert!(legal.iter().any(|m| m.to() == Square::E8 && m.is_capture()));
    assert!(history.last().position.is_none());
    assert_eq!(terminal_value(&history), None);
    assert!(matches!(
        PositionHistory::from_spec(&format!("{spec} moves e1d1")),
        Err(ChessError::BadMove { ply: 0, .. })
    ));
}

#[test]
fn castling_right_with_king_off_its_square() {
    // K: the outermost white rook right of the king on d1 is h1.
    let spec = "fen 4k3/8/8/8/8/8/8/3K3R w K - 0 1";
    let classical = encode(spec, InputFormat::Classical112, HistoryFill::No);
    assert_eq!(&masks(&classical)[AUX..AUX + 4], &[0, ALL, 0, 0]);
    let planes = encode(spec, InputFormat::With112CastlingPlane, HistoryFill::No);
    assert_eq!(&masks(&planes)[AUX..AUX + 2], &[0, square("h1")]);
}

#[test]
fn ep_square_on_the_movers_side() {
    let spec = "fen rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR w KQkq e3 0 1";
    // lc0 keeps the flag on rank 1 of the mover's view.
    let e = encode(spec, InputFormat::Canonical, HistoryFill::FenOnly);
    assert_eq!(masks(&e)[AUX + 4], square("e1"));
    // Its synthesized board moves our pawn on the flag's file from rank 4 back to rank 2:
    // the start position. Fill `no` still writes that one board.
    let e = encode(spec, InputFormat::Classical112, HistoryFill::No);
    assert_eq!(boards_written(&e), 2);
    assert_eq!(board(&e, 1), START);
    let e = encode(spec, InputFormat::Classical112, HistoryFill::FenOnly);
    assert!((1..8).all(|i| board(&e, i) == START));
}

#[test]
fn chess960_castling_rooks_per_colour() {
    let planes = |fen: &str| {
        let e = encode(
            &format!("fen {fen}"),
            InputFormat::With112CastlingPlane,
            HistoryFill::No,
        );
        [masks(&e)[AUX], masks(&e)[AUX + 1]]
    };
    // Shredder letters: G and E around the king on f1 (and g, e on f8).
    let same_files = "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1";
    assert_eq!(
        planes(same_files),
        [square("e1") | square("e8"), square("g1") | square("g8")]
    );
    // Different files per colour: white rooks b1, h1 (king g1), black a8, h8 (king c8).
    let white = "r1k4r/8/8/8/8/8/8/1R4KR w HBha - 0 1";
    assert_eq!(
        planes(white),
        [square("b1") | square("a8"), square("h1") | square("h8")]
    );
    let black = "r1k4r/8/8/8/8/8/8/1R4KR b HBha - 0 1";
    assert_eq!(
        planes(black),
        [square("a1") | square("b8"), square("h1") | square("h8")]
    );
    // X-FEN KQkq in a Chess960 position: the outermost rook on each side of each king.
    let xfen = "1r3k1r/8/8/8/8/8/8/R3K1R1 w KQkq - 0 1";
    assert_eq!(
        planes(xfen),
        [square("a1") | square("b8"), square("g1") | square("h8")]
    );
}

#[test]
fn chess960_castling_is_played_and_updates_rights() {
    // A Shredder letter is taken without a rook (as lc0 takes it): the planes show g1 ...
    let spec = "fen bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRK1N w GEge - 0 1";
    let e = encode(spec, InputFormat::With112CastlingPlane, HistoryFill::No);
    assert_eq!(masks(&e)[AUX + 1], square("g1") | square("g8"));
    // ... but no castling is generated for it: f1g1 is a king move, which ends the rights.
    let history = PositionHistory::from_spec(&format!("{spec} moves f1g1")).unwrap();
    assert_eq!(
        history
            .last()
            .castling
            .rook_file(Color::White, CastlingSide::KingSide),
        None
    );
    assert_eq!(history.last().board.role_at(Square::F1), None);
    // White castles h-side with the rook on g1 (king takes rook), which ends white's rights.
    let spec = "fen bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKR1 w GEge - 0 1 moves f1g1";
    let history = PositionHistory::from_spec(spec).unwrap();
    let board = &history.last().board;
    assert_eq!(board.king_of(Color::White), Some(Square::G1));
    assert_eq!(board.role_at(Square::F1), Some(Role::Rook));
    let castling = history.last().castling;
    assert_eq!(
        castling.rook_file(Color::White, CastlingSide::KingSide),
        None
    );
    assert_eq!(
        castling.rook_file(Color::White, CastlingSide::QueenSide),
        None
    );
    assert!(
        castling
            .rook_file(Color::Black, CastlingSide::QueenSide)
            .is_some()
    );
}

#[test]
fn what_lc0_refuses_is_refused_naming_the_field() {
    let reason = |fen: &str| match PositionHistory::from_fen(fen) {
        Err(ChessError::BadFen { reason, .. }) => reason,
        other => panic!("{fen}: {other:?}"),
    };
    assert!(matches!(
        reason("4k3/8/8/8/8/8/8/P3K3 w - - 0 1"),
        FenError::PawnOnBackRank { .. }
    ));
    assert!(matches!(
        reason("8/8/8/8/8/8/8/4K3 w - - 0 1"),
        FenError::MissingKing {
            color: Color::Black
        }
    ));
    assert!(matches!(
        reason("4k3/8/8/8/8/8/8/4K3 w K - 0 1"),
        FenError::MissingCastlingRook { symbol: 'K', .. }
    ));
    assert!(matches!(
        reason("4k3/8/8/8/8/8/8/4K3 x - - 0 1"),
        FenError::BadSideToMove { .. }
    ));
    assert!(matches!(
        reason("4k3/8/8/8/8/8/8/4K3 w - e4 0 1"),
        FenError::BadEnPassant { .. }
    ));
    assert!(matches!(
        reason("4k3/8/8/8/8/8/8/4K3 w 1 - 0 1"),
        FenError::BadCastlingSymbol { symbol: '1' }
    ));
    assert!(matches!(
        reason("4k3/8/8/8/8/8/8/4K2X w - - 0 1"),
        FenError::UnknownPiece { symbol: 'X' }
    ));
    assert!(matches!(
        reason("4k3/8/8/8/8/8/8/4K3/8 w - - 0 1"),
        FenError::TooManyRanks
    ));
    assert!(matches!(
        reason("4k3/8/8/8/8/8/8/4K3 w - - x 1"),
        FenError::BadNumber { .. }
    ));
    // lc0 takes missing trailing fields as `w - - 0 1`, and fewer ranks as empty ones.
    let short = PositionHistory::from_fen("4k3/8/8/8/8/8/8/4K3").unwrap();
    assert_eq!(short.last().turn, Color::White);
    assert!(PositionHistory::from_fen("4k3/8/4K3 b").is_ok());
}

// ---- History fill `no` with an en-passant flag ----------------------------------------------

#[test]
fn fill_no_writes_the_board_before_the_double_push() {
    let spec = "fen rnbqkbnr/ppp1pppp/8/8/3pP3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 3";
    for format in [InputFormat::Classical112, InputFormat::With112CastlingPlane] {
        let e = encode(spec, format, HistoryFill::No);
        assert_eq!(boards_written(&e), 2, "{format:?}");
        let now = board(&e, 0);
        let mut before = now.clone();
        // White's e4 pawn, seen from black on e5, goes back to e2 (seen on e7).
        before[6] = (now[6] & !square("e5")) | square("e7");
        assert_eq!(board(&e, 1), before, "{format:?}");
    }
    let e = encode(spec, InputFormat::Canonical, HistoryFill::No);
    assert_eq!(boards_written(&e), 1, "canonical formats stop at the flag");
}

// ---- Random games: moves and FEN agree -----------------------------------------------------

/// Starts: the standard position, a Chess960 one, and a middlegame with both castlings.
const STARTS: [&str; 3] = [
    "startpos",
    "fen bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1",
    "fen r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
];

/// lc0's flag after `m`, derived on raw bitboards: a double pawn push with a pawn of the side
/// now to move on an adjacent file of the pushed pawn's rank.
fn naive_flag(history: &PositionHistory, m: Move) -> u64 {
    let Move::Normal {
        role: Role::Pawn,
        from,
        to,
        ..
    } = m
    else {
        return 0;
    };
    let (from, to) = (u32::from(from), u32::from(to));
    if from.abs_diff(to) != 16 {
        return 0;
    }
    let board = &history.last().board;
    let enemy = u64::from(board.pawns() & board.by_color(history.last().turn));
    let file = to % 8;
    let left = file > 0 && enemy >> (to - 1) & 1 == 1;
    let right = file < 7 && enemy >> (to + 1) & 1 == 1;
    if left || right { 1 << (56 + file) } else { 0 }
}

/// The last position of `history` as a FEN: castling as Shredder letters, the en-passant
/// square only where lc0's flag is set.
fn fen_of(history: &PositionHistory) -> String {
    let entry = history.last();
    let turn = entry.turn;
    let mut castling = String::new();
    for color in [Color::White, Color::Black] {
        for side in [CastlingSide::KingSide, CastlingSide::QueenSide] {
            if let Some(file) = entry.castling.rook_file(color, side) {
                let letter = file.char();
                castling.push(if color == Color::White {
                    letter.to_ascii_uppercase()
                } else {
                    letter
                });
            }
        }
    }
    if castling.is_empty() {
        castling.push('-');
    }
    let ep = match entry.en_passant.trailing_zeros() {
        64 => "-".to_owned(),
        bit => {
            let file = (b'a' + (bit % 8) as u8) as char;
            format!("{file}{}", if turn == Color::White { 6 } else { 3 })
        }
    };
    format!(
        "{} {} {castling} {ep} {} 1",
        entry.board,
        if turn == Color::White { 'w' } else { 'b' },
        entry.rule50
    )
}

const FORMATS: [InputFormat; 4] = [
    InputFormat::Classical112,
    InputFormat::With112CastlingPlane,
    InputFormat::CanonicalHectoplies,
    InputFormat::CanonicalV2Armageddon,
];

/// After every ply of a random game: the flag matches the naive rule; the current board and
/// the auxiliary planes match those of the position's FEN in every format; and after a
/// capture or pawn move (no history worth writing), canonical formats match in all 112.
fn check_random_game(start: &str, seed: u64, plies: usize) -> Result<(), TestCaseError> {
    let mut history = PositionHistory::from_spec(start).unwrap();
    let mut state = seed | 1;
    for _ in 0..plies {
        let legal = history.last().legal_moves();
        if legal.is_empty() {
            break;
        }
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let m = legal[(state % legal.len() as u64) as usize];
        history.play(m);
        prop_assert_eq!(
            history.last().en_passant,
            naive_flag(&history, m),
            "{:?}",
            m
        );
        let fen = fen_of(&history);
        let from_fen = PositionHistory::from_fen(&fen).unwrap();
        for format in FORMATS {
            for fill in [HistoryFill::No, HistoryFill::FenOnly] {
                let game = encode_position(&history, format, fill);
                let alone = encode_position(&from_fen, format, fill);
                prop_assert_eq!(game.transform, alone.transform, "{}", fen);
                prop_assert_eq!(&masks(&game)[..12], &masks(&alone)[..12], "{}", fen);
                prop_assert_eq!(&game.planes[AUX..], &alone.planes[AUX..], "{}", fen);
                let canonical = matches!(
                    format,
                    InputFormat::CanonicalHectoplies | InputFormat::CanonicalV2Armageddon
                );
                if canonical && history.last().rule50 == 0 {
                    prop_assert_eq!(&game.planes[..], &alone.planes[..], "{}", fen);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn moves_and_fen_encode_alike(seed in any::<u64>(), start in 0..STARTS.len()) {
        check_random_game(STARTS[start], seed, 80)?;
    }
}

// ---- UCI ---------------------------------------------------------------------------------

/// The engine's whole output for `commands` (ending with `quit`).
fn uci_session(commands: &str) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_lc0rs"))
        .args(["uci", "-b", "cpu"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(commands.as_bytes()).unwrap();
    drop(stdin);
    String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
}

#[test]
fn uci_takes_chess960_castling_and_the_option() {
    let out = uci_session(
        "uci\n\
         setoption name UCI_Chess960 value true\n\
         position fen bqnbrkr1/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKR1 w GEge - 0 1 moves f1g1 f8g8\n\
         position startpos moves e2e4 e7e5 g1f3 b8c6 f1c4 g8f6 e1g1\n\
         position startpos moves e2e4 e7e5 g1f3 b8c6 f1c4 g8f6 e1h1\n\
         setoption name UCI_Chess960 value maybe\n\
         isready\nquit\n",
    );
    assert!(
        out.contains("option name UCI_Chess960 type check default false"),
        "{out}"
    );
    let errors: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("info string"))
        .collect();
    assert_eq!(errors.len(), 1, "only the bad value is refused: {errors:?}");
    assert!(errors[0].contains("UCI_Chess960"), "{errors:?}");
    assert!(out.contains("readyok"), "{out}");
}
