//! The weekly schedule of the deletion run (PostHog batches person-event deletions and runs
//! them at 05:00 UTC every Sunday).

use chrono::{DateTime, Datelike, Duration, NaiveTime, Utc, Weekday};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weekly {
    pub weekday: Weekday,
    pub time: NaiveTime,
}

impl Default for Weekly {
    fn default() -> Self {
        Self {
            weekday: Weekday::Sun,
            time: NaiveTime::from_hms_opt(5, 0, 0).expect("valid"),
        }
    }
}

impl Weekly {
    /// `"sun 05:00"` (UTC); weekday names in English, any case, three letters or full.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = s.split_whitespace();
        let (Some(day), Some(time), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!(
                "schedule '{s}': expected '<weekday> <HH:MM>' (UTC), e.g. 'sun 05:00'"
            ));
        };
        let weekday: Weekday = day
            .parse()
            .map_err(|_| format!("schedule '{s}': '{day}' is not a weekday"))?;
        let time = NaiveTime::parse_from_str(time, "%H:%M")
            .map_err(|_| format!("schedule '{s}': '{time}' is not HH:MM"))?;
        Ok(Self { weekday, time })
    }

    /// The first run strictly after `now`.
    pub fn next_after(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        let days_ahead = (7 + self.weekday.num_days_from_monday() as i64
            - now.weekday().num_days_from_monday() as i64)
            % 7;
        let day = now.date_naive() + Duration::days(days_ahead);
        let at = day.and_time(self.time).and_utc();
        if at > now { at } else { at + Duration::days(7) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn next_run() {
        let w = Weekly::default();
        let t = |y, m, d, h, mi| Utc.with_ymd_and_hms(y, m, d, h, mi, 0).unwrap();
        // 2026-11-21 is a Saturday.
        assert_eq!(w.next_after(t(2026, 11, 21, 12, 0)), t(2026, 11, 22, 5, 0));
        assert_eq!(w.next_after(t(2026, 11, 22, 4, 59)), t(2026, 11, 22, 5, 0));
        assert_eq!(w.next_after(t(2026, 11, 22, 5, 0)), t(2026, 11, 29, 5, 0));
        assert_eq!(w.next_after(t(2026, 11, 23, 0, 0)), t(2026, 11, 29, 5, 0));
        let m = Weekly::parse("Monday 23:30").unwrap();
        assert_eq!(m.next_after(t(2026, 11, 22, 5, 0)), t(2026, 11, 23, 23, 30));
        assert!(Weekly::parse("sun").is_err());
        assert!(Weekly::parse("sun 25:00").is_err());
        assert!(Weekly::parse("someday 05:00").is_err());
    }
}
