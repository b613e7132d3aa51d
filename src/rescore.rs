//! Rescoring a file of positions: an EPD stream (one position a line: the FEN's four fields,
//! optionally its two move counters, then EPD operations, of which `id` is kept) evaluated in
//! batches by several threads at once (on a GPU their calls overlap on its lanes) and written
//! as CSV in the input's order. Memory stays bounded: no thread takes a batch more than
//! [`AHEAD_PER_THREAD`] batches a thread past the last one written, so the writer holds at most
//! that many out of order.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::backend::{Backend, BackendError};
use crate::chess::{ChessError, HistoryFill, PositionHistory};
use crate::evaluate::{PositionEval, evaluate_positions};

/// How many batches a thread, at most, are taken ahead of the last one written.
const AHEAD_PER_THREAD: usize = 2;

/// The CSV's header.
pub const HEADER: &str =
    "line,id,fen,q,win,draw,loss,moves_left,best_move,best_probability,top_moves";

/// How a file is rescored.
#[derive(Debug, Clone)]
pub struct RescoreOptions {
    /// Positions a backend call.
    pub batch: usize,
    /// Threads calling the backend at once.
    pub threads: usize,
    /// The policy's softmax temperature (1: the network's own probabilities).
    pub temperature: f32,
    /// Moves written in `top_moves`, most likely first.
    pub top: usize,
}

/// Why a file could not be rescored.
#[derive(Debug, thiserror::Error)]
pub enum RescoreError {
    #[error("line {line}: reading the positions: {error}")]
    Read { line: usize, error: std::io::Error },
    #[error("writing the CSV: {0}")]
    Write(std::io::Error),
    #[error("line {line}: {error}")]
    Position { line: usize, error: ChessError },
    #[error("rescore options: {0}")]
    Options(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// What was rescored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RescoreSummary {
    pub positions: usize,
    pub seconds: f64,
}

/// One position read: its line, `id` operation, FEN and history.
struct Entry {
    line: usize,
    id: String,
    fen: String,
    history: PositionHistory,
}

/// Reads `input` as EPD, evaluates every position with `backend` and writes the CSV (header
/// first) to `output`, rows in the input's order.
pub fn rescore_epd(
    backend: &dyn Backend,
    input: impl BufRead + Send,
    mut output: impl Write,
    options: &RescoreOptions,
) -> Result<RescoreSummary, RescoreError> {
    if options.batch == 0 || options.threads == 0 {
        return Err(RescoreError::Options(format!(
            "batch {} and threads {} must both be at least 1",
            options.batch, options.threads
        )));
    }
    let start = Instant::now();
    let shared = Shared {
        source: Mutex::new(Source {
            lines: input.lines(),
            read: 0,
            next_batch: 0,
            written: 0,
            failed: false,
        }),
        room: Condvar::new(),
        ahead: AHEAD_PER_THREAD * options.threads,
    };
    let (sender, receiver) =
        sync_channel::<Result<(usize, String, usize), RescoreError>>(options.threads);
    let written = std::thread::scope(|scope| {
        for _ in 0..options.threads {
            let (shared, sender) = (&shared, sender.clone());
            scope.spawn(move || {
                while let Some(next) = shared.take_batch(options.batch) {
                    let result = next.and_then(|(seq, entries)| {
                        let rows = evaluate_rows(backend, &entries, options)?;
                        Ok((seq, rows, entries.len()))
                    });
                    let failed = result.is_err();
                    if failed {
                        shared.fail();
                    }
                    if sender.send(result).is_err() || failed {
                        return;
                    }
                }
            });
        }
        drop(sender);
        let written = write_in_order(receiver, &mut output, &|| shared.batch_written());
        if written.is_err() {
            // The receiver went with the writer, so a thread sending gets an error; those
            // waiting for room are woken to stop.
            shared.fail();
        }
        written
    })?;
    output.flush().map_err(RescoreError::Write)?;
    Ok(RescoreSummary {
        positions: written,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// What the threads share: the lines still to read, and the room the writer makes.
struct Shared<L> {
    source: Mutex<Source<L>>,
    /// Signalled when a batch is written or anything fails.
    room: Condvar,
    /// Batches that may be taken past the last one written.
    ahead: usize,
}

/// The lines still to read and how far the batches have got.
struct Source<L> {
    lines: L,
    /// Lines read so far.
    read: usize,
    /// The number of the next batch handed out.
    next_batch: usize,
    /// Batches written so far.
    written: usize,
    /// Set once anything failed: the threads stop taking batches.
    failed: bool,
}

impl<L: Iterator<Item = std::io::Result<String>>> Shared<L> {
    fn lock(&self) -> MutexGuard<'_, Source<L>> {
        self.source.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the work: no batch is handed out any more.
    fn fail(&self) {
        self.lock().failed = true;
        self.room.notify_all();
    }

    /// Counts a batch written and wakes the threads waiting for room.
    fn batch_written(&self) {
        self.lock().written += 1;
        self.room.notify_all();
    }

    /// The next batch of up to `size` positions with its number, once it is within `ahead`
    /// batches of the last one written; `None` at the end or after a failure.
    fn take_batch(&self, size: usize) -> Option<Result<(usize, Vec<Entry>), RescoreError>> {
        let mut source = self.lock();
        while !source.failed && source.next_batch >= source.written + self.ahead {
            source = self.room.wait(source).unwrap_or_else(|e| e.into_inner());
        }
        if source.failed {
            return None;
        }
        let mut entries = Vec::with_capacity(size);
        while entries.len() < size {
            let Some(line) = source.lines.next() else {
                break;
            };
            source.read += 1;
            let number = source.read;
            let parsed = line
                .map_err(|error| RescoreError::Read {
                    line: number,
                    error,
                })
                .and_then(|text| parse_epd_line(number, &text));
            match parsed {
                Ok(Some(entry)) => entries.push(entry),
                Ok(None) => {}
                Err(error) => {
                    source.failed = true;
                    self.room.notify_all();
                    return Some(Err(error));
                }
            }
        }
        if entries.is_empty() {
            return None;
        }
        source.next_batch += 1;
        Some(Ok((source.next_batch - 1, entries)))
    }
}

/// One EPD line as an entry; `None` for an empty line or a `#` comment.
fn parse_epd_line(line: usize, text: &str) -> Result<Option<Entry>, RescoreError> {
    let text = text.trim();
    if text.is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    let counters = fields.len() >= 6 && fields[4..6].iter().all(|f| f.parse::<u32>().is_ok());
    let (fen, operations) = if counters {
        (fields[..6].join(" "), fields[6..].join(" "))
    } else {
        let board = fields[..fields.len().min(4)].join(" ");
        (
            format!("{board} 0 1"),
            fields[fields.len().min(4)..].join(" "),
        )
    };
    let history =
        PositionHistory::from_fen(&fen).map_err(|error| RescoreError::Position { line, error })?;
    Ok(Some(Entry {
        line,
        id: epd_id(&operations),
        fen,
        history,
    }))
}

/// The operand of an EPD `id` operation (`id "name";`, whose quotes may hold `;`), or empty.
fn epd_id(operations: &str) -> String {
    let mut rest = operations;
    while let Some(at) = rest.find("id ") {
        let operand = rest[at + 3..].trim_start();
        if at == 0 || rest[..at].ends_with([' ', ';']) {
            return match operand.strip_prefix('"') {
                Some(quoted) => quoted.split('"').next().unwrap_or_default().to_owned(),
                None => operand
                    .split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            };
        }
        rest = &rest[at + 3..];
    }
    String::new()
}

/// The CSV rows of a batch.
fn evaluate_rows(
    backend: &dyn Backend,
    entries: &[Entry],
    options: &RescoreOptions,
) -> Result<String, RescoreError> {
    let histories: Vec<PositionHistory> = entries.iter().map(|e| e.history.clone()).collect();
    let evals = evaluate_positions(
        backend,
        &histories,
        HistoryFill::FenOnly,
        options.temperature,
    )?;
    let mut rows = String::new();
    for (entry, eval) in entries.iter().zip(&evals) {
        rows.push_str(&row(entry, eval, options.top));
        rows.push('\n');
    }
    Ok(rows)
}

/// One position's CSV row.
fn row(entry: &Entry, eval: &PositionEval, top: usize) -> String {
    let (best, best_p) = eval
        .policy
        .first()
        .map_or(("", 0.0), |(m, p)| (m.as_str(), *p));
    let top_moves: Vec<String> = eval
        .policy
        .iter()
        .take(top)
        .map(|(m, p)| format!("{m}:{p:.4}"))
        .collect();
    let [w, d, l] = eval.wdl;
    format!(
        "{},{},{},{:.5},{:.5},{:.5},{:.5},{:.2},{},{:.5},{}",
        entry.line,
        csv_field(&entry.id),
        entry.fen,
        eval.q,
        w,
        d,
        l,
        eval.m,
        best,
        best_p,
        top_moves.join(" ")
    )
}

/// A CSV field, quoted where it holds a comma, quote or line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// Writes the header, then each batch's rows in batch order as they arrive, calling `written`
/// after each batch written; the first error ends the writing (and drops `batches`, so that
/// no thread waits to send). Returns the positions written.
fn write_in_order(
    batches: Receiver<Result<(usize, String, usize), RescoreError>>,
    output: &mut impl Write,
    written: &dyn Fn(),
) -> Result<usize, RescoreError> {
    writeln!(output, "{HEADER}").map_err(RescoreError::Write)?;
    let mut waiting = BTreeMap::new();
    let (mut next, mut positions) = (0, 0);
    for batch in batches {
        let (seq, rows, count) = batch?;
        waiting.insert(seq, (rows, count));
        while let Some((rows, count)) = waiting.remove(&next) {
            output
                .write_all(rows.as_bytes())
                .map_err(RescoreError::Write)?;
            positions += count;
            next += 1;
            written();
        }
    }
    Ok(positions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epd_lines_with_and_without_counters_and_ids() {
        let e = parse_epd_line(
            3,
            "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - bm e5; id \"open, 1\";",
        )
        .unwrap()
        .unwrap();
        assert_eq!(e.line, 3);
        assert_eq!(
            e.fen,
            "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
        );
        assert_eq!(e.id, "open, 1");
        assert_eq!(csv_field(&e.id), "\"open, 1\"");
        let e = parse_epd_line(1, "8/8/8/8/8/8/8/K1k5 w - - 12 40 id \"x\";")
            .unwrap()
            .unwrap();
        assert_eq!(e.fen, "8/8/8/8/8/8/8/K1k5 w - - 12 40");
        assert_eq!(e.id, "x");
        assert_eq!(epd_id("bm e4; id \"a;b\"; c0 \"hid x\";"), "a;b");
        assert_eq!(epd_id("c0 \"hid x\"; id plain;"), "plain");
        assert_eq!(epd_id("bm e4;"), "");
        assert!(parse_epd_line(2, "   ").unwrap().is_none());
        assert!(parse_epd_line(2, "# a comment").unwrap().is_none());
        let error = parse_epd_line(9, "not a fen").err().unwrap().to_string();
        assert!(error.starts_with("line 9: bad FEN"), "{error}");
    }

    #[test]
    fn rows_are_written_in_batch_order_whatever_order_they_arrive_in() {
        let (sender, receiver) = sync_channel(3);
        for (seq, rows, count) in [(2, "c\n", 1), (0, "a\n", 1), (1, "b\nb\n", 2)] {
            sender.send(Ok((seq, rows.to_owned(), count))).unwrap();
        }
        drop(sender);
        let (mut out, calls) = (Vec::new(), std::cell::Cell::new(0));
        let positions = write_in_order(receiver, &mut out, &|| calls.set(calls.get() + 1));
        assert_eq!(positions.unwrap(), 4);
        assert_eq!(calls.get(), 3);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{HEADER}\na\nb\nb\nc\n")
        );
    }
}
