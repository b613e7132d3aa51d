//! Rescoring an EPD file (`lc0rs::rescore`, the `rescore_epd` example) against the cpu oracle
//! called directly, one position at a time with every logit read: each row names its own
//! position, in the file's order, whatever the batch size and the number of threads.

use lc0rs::backend::oracle::random_histories;
use lc0rs::backend::{create_backend, legal_move_probabilities};
use lc0rs::chess::castling::uci_notation;
use lc0rs::chess::policy_index::entry_moves_with_indices;
use lc0rs::chess::{HistoryFill, PositionHistory, encode_position};
use lc0rs::netsource::NetSource;
use lc0rs::rescore::{HEADER, RescoreError, RescoreOptions, rescore_epd};
use lc0rs::weights::{LoadOptions, Model};
use shakmaty::EnPassantMode;
use shakmaty::fen::Epd;

fn tiny() -> Model {
    NetSource::parse(None)
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap()
        .0
}

/// EPD lines (board, side, castling, e.p.) of random positions, each with an id.
fn epd_lines(count: usize) -> Vec<String> {
    random_histories(count, 29)
        .iter()
        .enumerate()
        .map(|(i, history)| {
            let position = history
                .last()
                .position
                .as_ref()
                .expect("a playable position");
            let epd = Epd::from_position(position, EnPassantMode::Legal);
            format!("{epd} id \"pos {i}\";")
        })
        .collect()
}

#[test]
fn every_row_holds_its_own_positions_evaluation_in_file_order() {
    let lines = epd_lines(23);
    let mut input = String::from("# rescored by the test\n\n");
    for line in &lines {
        input.push_str(line);
        input.push('\n');
    }
    let oracle = create_backend("cpu", tiny(), "").unwrap();
    for (batch, threads) in [(1, 1), (4, 3), (7, 2), (64, 4)] {
        let backend = create_backend("cpu", tiny(), "").unwrap();
        let options = RescoreOptions {
            batch,
            threads,
            temperature: 1.0,
            top: 3,
        };
        let mut csv = Vec::new();
        let summary = rescore_epd(backend.as_ref(), input.as_bytes(), &mut csv, &options).unwrap();
        assert_eq!(summary.positions, lines.len());
        let csv = String::from_utf8(csv).unwrap();
        let mut rows = csv.lines();
        assert_eq!(rows.next(), Some(HEADER));
        for (i, row) in rows.enumerate() {
            let label = format!("batch {batch}, threads {threads}, row {i}: {row}");
            let fields: Vec<&str> = row.split(',').collect();
            assert_eq!(fields.len(), 11, "{label}");
            // Two lines of comment and blank before the positions.
            assert_eq!(fields[0], (i + 3).to_string(), "{label}");
            assert_eq!(fields[1], format!("pos {i}"), "{label}");
            let history = PositionHistory::from_fen(fields[2]).unwrap();
            let encoded = encode_position(&history, oracle.input_format(), HistoryFill::FenOnly);
            let out = oracle.evaluate(&[encoded.planes]).unwrap();
            let q: f32 = fields[3].parse().unwrap();
            assert!((q - out.q[0]).abs() < 1e-4, "{label}: Q {}", out.q[0]);
            let legal = entry_moves_with_indices(history.last(), encoded.transform);
            let p = legal_move_probabilities(out.policy_of(0), &legal, 1.0);
            let best = (0..legal.len())
                .max_by(|&a, &b| p[a].total_cmp(&p[b]))
                .unwrap();
            let best_p: f32 = fields[9].parse().unwrap();
            assert!((best_p - p[best]).abs() < 1e-4, "{label}: {}", p[best]);
            let named = uci_notation(legal[best].0, false).to_string();
            let ties = p.iter().filter(|&&x| x == p[best]).count();
            assert!(ties > 1 || fields[8] == named, "{label}: best {named}");
            assert_eq!(fields[10].split(' ').count(), legal.len().min(3), "{label}");
        }
    }
}

#[test]
fn a_bad_line_is_named_and_bad_options_are_refused() {
    let backend = create_backend("cpu", tiny(), "").unwrap();
    let mut input = epd_lines(3).join("\n");
    input.push_str("\nrnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP w KQkq - id \"short\";\n");
    let options = RescoreOptions {
        batch: 2,
        threads: 2,
        temperature: 1.0,
        top: 1,
    };
    let error = rescore_epd(backend.as_ref(), input.as_bytes(), Vec::new(), &options).unwrap_err();
    assert!(
        matches!(error, RescoreError::Position { line: 4, .. }),
        "{error}"
    );
    let none = RescoreOptions {
        threads: 0,
        ..options
    };
    let error = rescore_epd(backend.as_ref(), input.as_bytes(), Vec::new(), &none).unwrap_err();
    assert!(error.to_string().contains("at least 1"), "{error}");
}

/// An output that fails after `limit` bytes (a full disk).
struct Full {
    limit: usize,
}

impl std::io::Write for Full {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if bytes.len() > self.limit {
            return Err(std::io::Error::other("disk full"));
        }
        self.limit -= bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A failing output ends the call with its error, with many batches still unread: no thread
/// is left waiting to send its rows or for room to take the next batch (a minute's watchdog
/// turns such a hang into a failure).
#[test]
fn a_failing_output_ends_every_thread() {
    let input = epd_lines(4).join("\n").repeat(100);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let backend = create_backend("cpu", tiny(), "").unwrap();
        let options = RescoreOptions {
            batch: 2,
            threads: 3,
            temperature: 1.0,
            top: 1,
        };
        let result = rescore_epd(
            backend.as_ref(),
            input.as_bytes(),
            Full { limit: 600 },
            &options,
        );
        done.send(result.map(|summary| summary.positions)).unwrap();
    });
    let result = finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("rescoring into a failing output did not end");
    assert!(matches!(result, Err(RescoreError::Write(_))), "{result:?}");
}
