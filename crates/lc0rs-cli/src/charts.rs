//! The profile's SVG charts: the share of GPU time by operation kind, and the operations on the
//! device's roofline.

use plotters::prelude::*;

use lc0rs::profile::{PassProfile, Peak, by_operation};

/// A horizontal bar chart of the share of time by operation kind, as SVG.
pub fn svg_chart(passes: &[PassProfile], title: &str) -> Result<String, String> {
    let (rows, _) = by_operation(passes);
    let total: f64 = rows.iter().map(|r| r.ms).sum();
    let shares: Vec<f64> = rows.iter().map(|r| 100.0 * r.ms / total).collect();
    let widest = shares.iter().copied().fold(0.0, f64::max);
    let height = 90 + 26 * rows.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, height)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(170)
            .build_cartesian_2d(
                0.0..(widest * 1.15).max(1.0),
                (0..rows.len()).into_segmented(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows.len())
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => {
                    rows.get(*i).map_or(String::new(), |r| r.op.to_owned())
                }
                _ => String::new(),
            })
            .x_desc("% of the GPU time of the operations")
            .draw()
            .map_err(err)?;
        let bar = RGBColor(0x48, 0x78, 0xa8).filled();
        chart
            .draw_series(shares.iter().enumerate().map(|(i, &share)| {
                Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(i)),
                        (share, SegmentValue::Exact(i + 1)),
                    ],
                    bar,
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(shares.iter().enumerate().map(|(i, &share)| {
                Text::new(
                    format!("{share:.1} %"),
                    (share + widest * 0.01, SegmentValue::CenterOf(i)),
                    ("sans-serif", 12),
                )
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// One operation kind on the roofline: its arithmetic intensity and achieved rate.
#[derive(Debug, Clone, PartialEq)]
pub struct RooflinePoint {
    pub op: &'static str,
    /// FLOPs per byte of compulsory traffic.
    pub intensity: f64,
    pub tflops: f64,
    /// Its share of the operations' time, in percent.
    pub share: f64,
}

/// The operation kinds that do arithmetic, placed by their intensity and rate (kinds without
/// FLOPs or bytes have no place on a log-log roofline and are left out).
pub fn roofline_points(passes: &[PassProfile]) -> Vec<RooflinePoint> {
    let (rows, _) = by_operation(passes);
    let total: f64 = rows.iter().map(|r| r.ms).sum();
    rows.iter()
        .filter(|r| r.flops > 0 && r.bytes > 0 && r.ms > 0.0)
        .map(|r| RooflinePoint {
            op: r.op,
            intensity: r.flops as f64 / r.bytes as f64,
            tflops: r.flops as f64 / (r.ms / 1e3) / 1e12,
            share: 100.0 * r.ms / total,
        })
        .collect()
}

/// The operations of the passes on the roofline of `peak` (log-log: FLOPs per byte against
/// TFLOP/s; the roof is the bandwidth slope up to the ridge point, then the FLOP/s peak), each
/// labelled with its name and share of the time, as SVG.
pub fn roofline_chart(passes: &[PassProfile], peak: Peak, title: &str) -> Result<String, String> {
    let points = roofline_points(passes);
    if points.is_empty() {
        return Err("no operation with FLOPs and bytes to place".to_owned());
    }
    let tb_per_s = peak.gbytes_per_s / 1e3;
    let ridge = peak.tflops / tb_per_s;
    let fold = |init: f64, f: fn(f64, f64) -> f64, value: fn(&RooflinePoint) -> f64| {
        points.iter().map(value).fold(init, f)
    };
    let x_min = fold(ridge, f64::min, |p| p.intensity) / 4.0;
    let x_max = fold(ridge, f64::max, |p| p.intensity) * 4.0;
    let y_min = fold(peak.tflops, f64::min, |p| p.tflops).min(x_min * tb_per_s) / 2.0;
    let y_max = peak.tflops * 2.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 600)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((x_min..x_max).log_scale(), (y_min..y_max).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("arithmetic intensity (FLOPs per byte of compulsory traffic)")
            .y_desc("TFLOP/s")
            .draw()
            .map_err(err)?;
        let roof = [
            (x_min, x_min * tb_per_s),
            (ridge, peak.tflops),
            (x_max, peak.tflops),
        ];
        chart
            .draw_series(std::iter::once(PathElement::new(
                roof,
                BLACK.stroke_width(2),
            )))
            .map_err(err)?
            .label(peak.source)
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK.stroke_width(2)));
        let dot = RGBColor(0xc0, 0x39, 0x2b);
        chart
            .draw_series(points.iter().map(|p| {
                let radius = (3.0 + p.share.sqrt() * 1.5) as i32;
                EmptyElement::at((p.intensity, p.tflops))
                    + Circle::new((0, 0), radius, dot.filled())
                    + Text::new(
                        format!("{} ({:.1} %)", p.op, p.share),
                        (radius + 3, -6),
                        ("sans-serif", 12),
                    )
            }))
            .map_err(err)?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lc0rs::profile::{OpTiming, PassTiming};

    fn pass(ops: Vec<OpTiming>) -> PassProfile {
        PassProfile {
            batch: 64,
            pass_ms: 3.0,
            instrumented_ms: 3.0,
            timing: PassTiming::DeviceEvents,
            ops,
            kernels: Vec::new(),
        }
    }

    fn op(op: &'static str, flops: u64, bytes: u64, ms: f64) -> OpTiming {
        OpTiming {
            op,
            layer: Some(0),
            flops,
            bytes,
            start_ms: 0.0,
            ms,
        }
    }

    const H200: Peak = Peak {
        tflops: 785.0,
        gbytes_per_s: 4800.0,
        source: "test peak",
    };

    #[test]
    fn operations_sit_at_their_intensity_and_rate() {
        // 2 GFLOP over 1 MB in 1 ms: 2000 FLOPs per byte at 2 TFLOP/s; 1 GFLOP over 4 MB in
        // 3 ms: 250 FLOPs per byte at 1/3 TFLOP/s; the FLOP-less copy has no place.
        let passes = [pass(vec![
            op("qkv", 2_000_000_000, 1_000_000, 1.0),
            op("copy", 0, 1_000_000, 1.0),
            op("ffn", 1_000_000_000, 4_000_000, 3.0),
        ])];
        let points = roofline_points(&passes);
        assert_eq!(points.len(), 2);
        let ffn = &points[0];
        assert_eq!(ffn.op, "ffn");
        assert!((ffn.intensity - 250.0).abs() < 1e-9);
        assert!((ffn.tflops - 1.0 / 3.0).abs() < 1e-9);
        assert!((ffn.share - 60.0).abs() < 1e-9);
        let qkv = &points[1];
        assert!((qkv.intensity - 2000.0).abs() < 1e-9 && (qkv.tflops - 2.0).abs() < 1e-9);
        let svg = roofline_chart(&passes, H200, "roofline").unwrap();
        assert!(
            svg.contains("qkv (20.0 %)") && svg.contains("ffn (60.0 %)"),
            "{svg}"
        );
        assert!(!svg.contains("copy"));
        assert!(svg.contains("test peak"));
    }

    #[test]
    fn a_pass_without_arithmetic_has_no_roofline() {
        let passes = [pass(vec![op("copy", 0, 1_000_000, 1.0)])];
        assert!(roofline_chart(&passes, H200, "roofline").is_err());
    }

    /// Two operation kinds: attention 4 of 7 ms, qkv 3.
    fn bar_pass() -> PassProfile {
        pass(vec![
            op("qkv", 2_000_000_000, 1_000_000, 3.0),
            op("attention", 0, 1_000_000, 4.0),
        ])
    }

    #[test]
    fn chart_has_one_bar_per_operation_kind() {
        let svg = svg_chart(&[bar_pass()], "T82 <batch 64>").unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("&lt;batch 64&gt;"),
            "{svg}"
        );
        // One bar per operation kind, labelled with its share: attention 4 of 7 ms, qkv 3.
        for (label, share) in [("attention", "57.1 %"), ("qkv", "42.9 %")] {
            assert!(svg.contains(label) && svg.contains(share), "{svg}");
        }
        let bars = svg.matches("fill=\"#4878A8\"").count();
        assert_eq!(bars, 2, "{svg}");
    }
}
