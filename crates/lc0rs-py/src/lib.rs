//! The native half of the `lc0rs` Python package (`python/lc0rs/__init__.py` is the other):
//! a network on a backend that evaluates batches of positions (FEN and moves) or of raw input
//! planes. Arrays cross as little-endian bytes that the Python half views as NumPy arrays, so
//! this side needs no NumPy headers. Every evaluation runs with the GIL released; every error
//! is an `lc0rs.Lc0rsError` carrying the Rust message.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use lc0rs::backend::{
    Backend, BatchOutput, best_backend_name, create_backend, evaluate_in_passes,
    legal_move_probabilities,
};
use lc0rs::board::{INPUT_PLANES, POLICY_SIZE};
use lc0rs::chess::castling::uci_notation;
use lc0rs::chess::policy_index::entry_moves_with_indices;
use lc0rs::chess::{HistoryFill, InputPlane, InputPlanes, PositionHistory, encode_position};
use lc0rs::netsource::NetSource;
use lc0rs::weights::LoadOptions;

create_exception!(
    _native,
    Lc0rsError,
    PyException,
    "An lc0rs error: the message is the library's."
);

fn error(e: impl std::fmt::Display) -> PyErr {
    Lc0rsError::new_err(e.to_string())
}

/// A network opened on a backend. Thread-safe: evaluations from several Python threads run
/// at once (each releases the GIL).
#[pyclass(frozen, module = "lc0rs._native")]
struct Net {
    backend: Box<dyn Backend>,
}

/// The outputs of a batch as bytes (f32, little-endian): Q, D, M, WDL `[n][3]`, policy
/// logits `[n][1858]`, and per position its legal moves with their probabilities (empty for
/// planes).
type Outputs<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Vec<Vec<(String, f32)>>,
);

fn bytes_of<'py>(py: Python<'py>, values: &[f32]) -> Bound<'py, PyBytes> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    PyBytes::new(py, &bytes)
}

impl Net {
    /// Evaluates in passes of at most the backend's batch size.
    fn evaluate(&self, planes: &[InputPlanes]) -> PyResult<BatchOutput> {
        evaluate_in_passes(&*self.backend, planes).map_err(error)
    }

    fn outputs<'py>(
        py: Python<'py>,
        out: &BatchOutput,
        moves: Vec<Vec<(String, f32)>>,
    ) -> Outputs<'py> {
        let wdl: Vec<f32> = (0..out.len()).flat_map(|i| out.wdl_of(i)).collect();
        (
            bytes_of(py, &out.q),
            bytes_of(py, &out.d),
            bytes_of(py, &out.m),
            bytes_of(py, &wdl),
            bytes_of(py, &out.policy),
            moves,
        )
    }
}

#[pymethods]
impl Net {
    /// Opens `weights` (a file, `bundled:tiny`, `preset:NAME`; None: the bundled tiny net) on
    /// `backend` (None: the best this machine runs) with lc0-style `options` (`k=v,...`).
    #[new]
    #[pyo3(signature = (weights=None, backend=None, options=None))]
    fn new(
        py: Python<'_>,
        weights: Option<String>,
        backend: Option<String>,
        options: Option<String>,
    ) -> PyResult<Self> {
        py.allow_threads(|| {
            let source = NetSource::parse(weights.as_deref()).map_err(error)?;
            let name = source.display_name();
            let (model, _) = source
                .load(&LoadOptions::default(), &mut |_, _| {})
                .map_err(|e| error(format!("{name}: {e}")))?;
            let name = match backend.as_deref() {
                Some(name) => name,
                None => best_backend_name(),
            };
            let backend =
                create_backend(name, model, options.as_deref().unwrap_or("")).map_err(error)?;
            Ok(Net { backend })
        })
    }

    /// The backend's name.
    #[getter]
    fn backend(&self) -> String {
        self.backend.name().to_owned()
    }

    /// lc0's input format id: how raw planes must be encoded.
    #[getter]
    fn input_format(&self) -> i32 {
        self.backend.input_format().lc0_id()
    }

    #[getter]
    fn has_wdl(&self) -> bool {
        self.backend.attributes().has_wdl
    }

    #[getter]
    fn has_moves_left(&self) -> bool {
        self.backend.attributes().has_mlh
    }

    #[getter]
    fn max_batch(&self) -> usize {
        self.backend.attributes().max_batch
    }

    /// Evaluates positions given as `(fen or None for the start position, [uci moves])` with
    /// lc0's `history_fill` (`no`, `fen_only`, `always`); the legal moves' probabilities are
    /// the softmax of their logits at `temperature`.
    #[pyo3(signature = (positions, temperature, history_fill="fen_only"))]
    fn evaluate_positions<'py>(
        &self,
        py: Python<'py>,
        positions: Vec<(Option<String>, Vec<String>)>,
        temperature: f32,
        history_fill: &str,
    ) -> PyResult<Outputs<'py>> {
        if !(temperature > 0.0 && temperature.is_finite()) {
            return Err(error(format!(
                "temperature must be a positive number, not {temperature}"
            )));
        }
        let fill = history_fill_named(history_fill)?;
        let (out, moves) = py.allow_threads(|| -> PyResult<_> {
            let format = self.backend.input_format();
            let mut planes = Vec::with_capacity(positions.len());
            let mut legal = Vec::with_capacity(positions.len());
            for (i, position) in positions.iter().enumerate() {
                let history = history(i, position)?;
                let encoded = encode_position(&history, format, fill);
                legal.push(entry_moves_with_indices(history.last(), encoded.transform));
                planes.push(encoded.planes);
            }
            let out = self.evaluate(&planes)?;
            let moves = legal
                .iter()
                .enumerate()
                .map(|(i, legal)| {
                    let p = legal_move_probabilities(out.policy_of(i), legal, temperature);
                    legal
                        .iter()
                        .zip(p)
                        .map(|(&(m, _), p)| (uci_notation(m, false).to_string(), p))
                        .collect()
                })
                .collect();
            Ok((out, moves))
        })?;
        Ok(Self::outputs(py, &out, moves))
    }

    /// The input planes of positions given as for `evaluate_positions`, in the network's
    /// input format: n·112 masks (u64) and n·112 values (f32) as little-endian bytes.
    #[pyo3(signature = (positions, history_fill="fen_only"))]
    fn encode_positions<'py>(
        &self,
        py: Python<'py>,
        positions: Vec<(Option<String>, Vec<String>)>,
        history_fill: &str,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let fill = history_fill_named(history_fill)?;
        let format = self.backend.input_format();
        let mut masks = Vec::new();
        let mut values = Vec::new();
        for (i, position) in positions.iter().enumerate() {
            let encoded = encode_position(&history(i, position)?, format, fill);
            for plane in encoded.planes {
                masks.extend(plane.mask.to_le_bytes());
                values.extend(plane.value.to_le_bytes());
            }
        }
        Ok((PyBytes::new(py, &masks), PyBytes::new(py, &values)))
    }

    /// Evaluates raw input planes: `masks` holds n·112 u64 and `values` n·112 f32, both
    /// little-endian bytes (plane p of position i: `values[i][p]` where bit s of
    /// `masks[i][p]` is set).
    fn evaluate_planes<'py>(
        &self,
        py: Python<'py>,
        masks: &[u8],
        values: &[u8],
    ) -> PyResult<Outputs<'py>> {
        if !masks.len().is_multiple_of(8 * INPUT_PLANES) || values.len() * 2 != masks.len() {
            return Err(error(format!(
                "planes: {} mask bytes and {} value bytes are not n·112 u64 and n·112 f32",
                masks.len(),
                values.len()
            )));
        }
        let out = py.allow_threads(|| {
            let planes: Vec<InputPlanes> = masks
                .chunks_exact(8 * INPUT_PLANES)
                .zip(values.chunks_exact(4 * INPUT_PLANES))
                .map(|(m, v)| {
                    let mut planes = [InputPlane {
                        mask: 0,
                        value: 0.0,
                    }; INPUT_PLANES];
                    for (p, plane) in planes.iter_mut().enumerate() {
                        let mask = m[8 * p..8 * p + 8].try_into().expect("8 bytes");
                        let value = v[4 * p..4 * p + 4].try_into().expect("4 bytes");
                        *plane = InputPlane {
                            mask: u64::from_le_bytes(mask),
                            value: f32::from_le_bytes(value),
                        };
                    }
                    planes
                })
                .collect();
            self.evaluate(&planes)
        })?;
        let moves = vec![Vec::new(); out.len()];
        Ok(Self::outputs(py, &out, moves))
    }
}

fn history_fill_named(name: &str) -> PyResult<HistoryFill> {
    HistoryFill::from_name(name).ok_or_else(|| {
        error(format!(
            "unknown history fill {name:?}; one of no, fen_only, always"
        ))
    })
}

/// The history of position `i`: its FEN (None: the start position) and the moves from it.
fn history(i: usize, (fen, moves): &(Option<String>, Vec<String>)) -> PyResult<PositionHistory> {
    let at = |e: lc0rs::chess::ChessError| error(format!("position {i}: {e}"));
    let mut history = match fen {
        Some(fen) => PositionHistory::from_fen(fen).map_err(at)?,
        None => PositionHistory::startpos(),
    };
    for uci in moves {
        history.play_uci(uci).map_err(at)?;
    }
    Ok(history)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Net>()?;
    m.add("Lc0rsError", m.py().get_type::<Lc0rsError>())?;
    m.add("POLICY_SIZE", POLICY_SIZE)?;
    m.add("INPUT_PLANES", INPUT_PLANES)?;
    m.add(
        "DEFAULT_POLICY_TEMPERATURE",
        lc0rs::backend::DEFAULT_POLICY_TEMPERATURE,
    )?;
    Ok(())
}
