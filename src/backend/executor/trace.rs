//! A traced pass' kernel timestamps attributed to the operations that enqueued them.

use super::marks::OpEvent;
use crate::gpu::Activity;
use crate::profile::{KernelTiming, OpTiming};

/// A traced pass' timings, attributed to its operations.
#[derive(Debug, PartialEq)]
pub struct TracedTimings {
    pub ops: Vec<OpTiming>,
    pub kernels: Vec<KernelTiming>,
    /// First start to last end.
    pub span_ms: f64,
    /// The time something ran.
    pub busy_ms: f64,
}

/// Gives each operation, marked by captured-work counts (`first` at the start of the pass), the
/// activities of its nodes: its time runs from its first activity's start to the next
/// operation's (launch gaps count to the operation that waits for them), and each activity is
/// listed under it. `activities` holds one record per work node, in start order (non-empty).
pub fn attribute_trace(marks: &[OpEvent], first: usize, activities: &[Activity]) -> TracedTimings {
    let origin = activities[0].start_ns;
    let span_end = activities
        .last()
        .expect("a traced pass ran something")
        .end_ns;
    let ms = |ns: u64| ns as f64 * 1e-6;
    let start_of = |node: usize| activities.get(node).map_or(span_end, |a| a.start_ns);
    let kernels = marks
        .iter()
        .flat_map(|e| {
            activities[e.start - first..e.end - first]
                .iter()
                .map(|a| KernelTiming {
                    op: e.op,
                    name: a.name.clone(),
                    ms: ms(a.end_ns - a.start_ns),
                })
        })
        .collect();
    let ops = marks
        .iter()
        .map(|e| {
            let (begin, next) = (start_of(e.start - first), start_of(e.end - first));
            OpTiming {
                op: e.op,
                layer: e.layer,
                flops: e.cost.flops,
                bytes: e.cost.bytes,
                start_ms: ms(begin - origin),
                ms: ms(next.saturating_sub(begin)),
            }
        })
        .collect();
    TracedTimings {
        ops,
        kernels,
        span_ms: ms(span_end - origin),
        busy_ms: ms(activities.iter().map(|a| a.end_ns - a.start_ns).sum()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::executor::marks::Cost;

    #[test]
    fn traced_activities_are_attributed_to_the_operations_that_enqueued_them() {
        let activity = |start_ns, end_ns, name: &str| Activity {
            start_ns,
            end_ns,
            name: name.to_owned(),
        };
        // Work nodes 10..15 of a capture: "a" enqueued 10, 11; "b" 12; "c" 13, 14.
        let activities = [
            activity(1_000, 3_000, "gemm"),
            activity(3_500, 4_000, "bias"),
            activity(5_000, 9_000, "attention"),
            activity(9_200, 9_700, "memset"),
            activity(10_000, 12_000, "gemm"),
        ];
        let mark = |op, start, end| OpEvent {
            op,
            layer: Some(0),
            cost: Cost { flops: 7, bytes: 9 },
            start,
            end,
        };
        let marks = [mark("a", 10, 12), mark("b", 12, 13), mark("c", 13, 15)];
        let t = attribute_trace(&marks, 10, &activities);
        let ns = |ms: f64| (ms * 1e6).round() as u64;
        let times: Vec<(&str, u64, u64)> = t
            .ops
            .iter()
            .map(|o| (o.op, ns(o.start_ms), ns(o.ms)))
            .collect();
        // "a" runs until "b" starts (the 1 µs gap is "a"'s), "c" until the pass ends.
        assert_eq!(
            times,
            [("a", 0, 4_000), ("b", 4_000, 4_200), ("c", 8_200, 2_800)]
        );
        assert_eq!(ns(t.span_ms), 11_000);
        assert_eq!(ns(t.busy_ms), 9_000);
        let kernels: Vec<(&str, &str)> =
            t.kernels.iter().map(|k| (k.op, k.name.as_str())).collect();
        assert_eq!(
            kernels,
            [
                ("a", "gemm"),
                ("a", "bias"),
                ("b", "attention"),
                ("c", "memset"),
                ("c", "gemm")
            ]
        );
        assert_eq!((t.ops[0].flops, t.ops[0].bytes), (7, 9));
    }
}
