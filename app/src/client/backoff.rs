//! The reconnect schedule: how long the connection waits before each attempt.

/// Delay before reconnect attempt `attempt` (0-based): 0.5 s doubling to 30 s, plus up to 30%
/// jitter, `random` (in `0..1`) choosing how much.
pub fn backoff_ms(attempt: u32, random: f64) -> u32 {
    let base = 500u32.saturating_mul(1 << attempt.min(6)).min(30_000);
    let jitter = (random * 0.3 * f64::from(base)) as u32;
    base + jitter
}

/// Whole seconds the countdown shows for a wait of `delay_ms` (a started second counts).
pub fn countdown_secs(delay_ms: u32) -> u32 {
    delay_ms.div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_half_a_second_and_stops_at_thirty() {
        let plain: Vec<u32> = (0..9).map(|n| backoff_ms(n, 0.0)).collect();
        assert_eq!(
            plain,
            [
                500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000
            ]
        );
        // Far attempts neither overflow nor exceed the cap.
        assert_eq!(backoff_ms(u32::MAX, 0.0), 30_000);
    }

    #[test]
    fn jitter_adds_at_most_thirty_percent() {
        assert_eq!(backoff_ms(0, 0.5), 575);
        assert_eq!(backoff_ms(2, 0.999_999), 2_599);
        assert_eq!(backoff_ms(10, 0.999_999), 38_999);
        for attempt in 0..12 {
            let base = backoff_ms(attempt, 0.0);
            let most = backoff_ms(attempt, 0.999_999);
            assert!(
                most >= base && most < base + base * 3 / 10 + 1,
                "attempt {attempt}"
            );
        }
    }

    #[test]
    fn countdown_rounds_a_started_second_up() {
        assert_eq!(countdown_secs(0), 0);
        assert_eq!(countdown_secs(500), 1);
        assert_eq!(countdown_secs(1_000), 1);
        assert_eq!(countdown_secs(1_001), 2);
        assert_eq!(countdown_secs(30_000), 30);
    }
}
