//! Unit tests of `bench`: the summaries and percentiles.

use super::*;

#[test]
fn summary_and_percentiles() {
    let s = Summary::of(&[1.0, 2.0, 3.0, 4.0]).expect("non-empty");
    assert_eq!((s.n, s.mean, s.median), (4, 2.5, 2.5));
    assert!((s.sd - 1.290_994_448_7).abs() < 1e-9, "{}", s.sd);
    assert_eq!(Summary::of(&[5.0]).map(|s| (s.sd, s.median)), Some((0.0, 5.0)));
    assert!(Summary::of(&[]).is_none());
    let xs: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(percentile(&xs, 0.5), Some(50.0));
    assert_eq!(percentile(&xs, 0.9), Some(90.0));
    assert_eq!(percentile(&xs, 0.99), Some(99.0));
    assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
    assert_eq!(bench_tokens(3, 100), vec![13, 32, 51]);
}
