use super::super::tests::*;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::logical_expr::{Expr, Operator, binary_expr};

/// The batch path (integer arithmetic when the offset is steady) gives what converting
/// each row gives, in zones with DST, half-hour shifts and none, for batches that sit
/// beside, straddle and follow a transition.
#[test]
fn batch_truncation_matches_row_by_row() {
    use super::super::time::{DateRange, MICROS, ch_date};
    use super::Trunc;
    use datafusion::arrow::array::{ArrayRef, AsArray};
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::Int64Type;
    use std::sync::Arc;
    let zones = [
        "UTC",
        "America/New_York",
        "Europe/London",
        "Asia/Kolkata",
        "Australia/Lord_Howe",
        "Pacific/Chatham",
    ];
    let truncs = [
        Trunc::Seconds(60),
        Trunc::Hour,
        Trunc::Hours(6),
        Trunc::Days(1),
        Trunc::Days(7),
        Trunc::Weeks(1, true),
        Trunc::Weeks(2, false),
        Trunc::Months(1),
        Trunc::Months(3),
        Trunc::Years(1),
    ];
    let h = 3_600 * MICROS;
    // 2024-03-10 07:00 UTC (New York springs forward), 2024-10-27 01:00 UTC (London falls
    // back), 2024-04-06 15:00 UTC (Lord Howe), 1900-01-01, 2024-01-01.
    let anchors = [
        1_710_054_000,
        1_729_990_800,
        1_712_415_600,
        -2_208_988_800,
        1_704_067_200,
    ];
    let mut checked = 0;
    let mut one_pass = 0;
    for name in zones {
        let tz: chrono_tz::Tz = name.parse().unwrap();
        for &a in &anchors {
            let a = a * MICROS;
            for (from, to) in [(-30 * h, -h), (-3 * h, 3 * h), (h, 30 * h), (0, 24 * h)] {
                let mut batch: Vec<Option<i64>> = (0..2000)
                    .map(|i| Some(a + from + (to - from) * i / 2000 + i * 7_919))
                    .collect();
                batch.push(None);
                for tr in truncs {
                    let want: Vec<Option<i64>> = batch
                        .iter()
                        .map(|m| m.and_then(|m| tr.apply(tz, m)))
                        .collect();
                    let got = tr.apply_all(tz, &batch);
                    let bad = (0..want.len()).find(|&i| got[i] != want[i]);
                    assert_eq!(bad, None, "{tr:?} in {name} near {a}: row {bad:?} differs");
                    // The one-pass form over a stored column (no NULLs), where it answers:
                    // in time order and shuffled (it keeps the last answer's local day).
                    let values: Vec<i64> = batch.iter().flatten().copied().collect();
                    let n = values.len();
                    for order in [
                        (0..n).collect::<Vec<_>>(),
                        (0..n).map(|i| i * 7 % n).collect(),
                    ] {
                        let col: ArrayRef = Arc::new(
                            datafusion::arrow::array::TimestampMicrosecondArray::from(
                                order.iter().map(|&i| values[i]).collect::<Vec<_>>(),
                            )
                            .with_timezone("UTC"),
                        );
                        let date = tr.gives_date();
                        if let Some(out) = tr.apply_micros(tz, &col, date, name) {
                            let out = cast(&out, &DataType::Int64).unwrap();
                            let out = out.as_primitive::<Int64Type>();
                            // Date starts come out in ClickHouse's Date range.
                            let want = |i: usize| match want[i] {
                                Some(d) if date => Some(i64::from(ch_date(d, DateRange::Clamp))),
                                w => w,
                            };
                            let bad =
                                (0..out.len()).find(|&i| Some(out.value(i)) != want(order[i]));
                            assert_eq!(
                                bad, None,
                                "{tr:?} in {name} near {a}: one pass, row {bad:?}"
                            );
                            one_pass += 1;
                        }
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, zones.len() * anchors.len() * 4 * truncs.len());
    // Each batch is tried in two orders.
    assert!(
        one_pass > checked,
        "{one_pass} of {} batches in one pass",
        2 * checked
    );
}

fn ny_s() -> DataType {
    DataType::Timestamp(TimeUnit::Second, Some(TZ.into()))
}

/// Each call on the `ts` column: ClickHouse's type and values for the three rows (the
/// fourth row is NULL).
fn column_cases(cases: Vec<(Expr, DataType, [&str; 3])>) {
    let (exprs, want): (Vec<Expr>, Vec<(DataType, [&str; 3])>) =
        cases.into_iter().map(|(e, t, v)| (e, (t, v))).unzip();
    let names: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
    for ((n, (t, v)), (gt, gv)) in names.iter().zip(want).zip(eval(exprs)) {
        assert_eq!(gt, t, "type of {n}");
        assert_eq!(gv[..3], v, "{n}");
        assert_eq!(gv[3], "\\N", "{n} on NULL");
    }
}

#[test]
fn truncations_on_timestamps() {
    let t = || c("ts");
    let date = DataType::Date32;
    column_cases(vec![
        (
            call("toStartOfDay", vec![t()]),
            ny_s(),
            [
                "2024-03-10 00:00:00",
                "2024-11-03 00:00:00",
                "2024-02-29 00:00:00",
            ],
        ),
        (
            call("toStartOfHour", vec![t()]),
            ny_s(),
            [
                "2024-03-10 01:00:00",
                "2024-11-03 01:00:00",
                "2024-02-29 23:00:00",
            ],
        ),
        (
            call("toUnixTimestamp", vec![call("toStartOfHour", vec![t()])]),
            DataType::UInt32,
            ["1710050400", "1730613600", "1709265600"],
        ),
        (
            call("toStartOfWeek", vec![t()]),
            date.clone(),
            ["2024-03-10", "2024-11-03", "2024-02-25"],
        ),
        (
            call("toStartOfWeek", vec![t(), i(1)]),
            date.clone(),
            ["2024-03-04", "2024-10-28", "2024-02-26"],
        ),
        (
            call("toMonday", vec![t()]),
            date.clone(),
            ["2024-03-04", "2024-10-28", "2024-02-26"],
        ),
        (
            call("toStartOfMonth", vec![t()]),
            date.clone(),
            ["2024-03-01", "2024-11-01", "2024-02-01"],
        ),
        (
            call("toStartOfQuarter", vec![t()]),
            date.clone(),
            ["2024-01-01", "2024-10-01", "2024-01-01"],
        ),
        (
            call("toStartOfYear", vec![t()]),
            date.clone(),
            ["2024-01-01", "2024-01-01", "2024-01-01"],
        ),
        (
            call("toStartOfMinute", vec![t()]),
            ny_s(),
            [
                "2024-03-10 01:30:00",
                "2024-11-03 01:30:00",
                "2024-02-29 23:59:00",
            ],
        ),
        (
            call("toStartOfFifteenMinutes", vec![t()]),
            ny_s(),
            [
                "2024-03-10 01:30:00",
                "2024-11-03 01:30:00",
                "2024-02-29 23:45:00",
            ],
        ),
        (
            call(
                "toStartOfInterval",
                vec![t(), call("toIntervalHour", vec![i(2)])],
            ),
            ny_s(),
            [
                "2024-03-10 00:00:00",
                "2024-11-03 00:00:00",
                "2024-02-29 22:00:00",
            ],
        ),
        (
            call(
                "toStartOfInterval",
                vec![t(), call("toIntervalMinute", vec![i(10)])],
            ),
            ny_s(),
            [
                "2024-03-10 01:30:00",
                "2024-11-03 01:30:00",
                "2024-02-29 23:50:00",
            ],
        ),
        (
            call("toStartOfDay", vec![t(), s("UTC")]),
            DataType::Timestamp(TimeUnit::Second, Some("UTC".into())),
            [
                "2024-03-10 00:00:00",
                "2024-11-03 00:00:00",
                "2024-03-01 00:00:00",
            ],
        ),
        (
            call("dateTrunc", vec![s("week"), t()]),
            date.clone(),
            ["2024-03-04", "2024-10-28", "2024-02-26"],
        ),
        (
            call("dateTrunc", vec![s("minute"), t()]),
            ny_s(),
            [
                "2024-03-10 01:30:00",
                "2024-11-03 01:30:00",
                "2024-02-29 23:59:00",
            ],
        ),
        (
            call("toDate", vec![t()]),
            date,
            ["2024-03-10", "2024-11-03", "2024-02-29"],
        ),
        (
            call("toDateTime", vec![t()]),
            ny_s(),
            [
                "2024-03-10 01:30:00",
                "2024-11-03 01:30:00",
                "2024-02-29 23:59:59",
            ],
        ),
    ]);
}

#[test]
fn parts_of_timestamps() {
    let t = || c("ts");
    let u8t = DataType::UInt8;
    column_cases(vec![
        (
            call("toYear", vec![t()]),
            DataType::UInt16,
            ["2024", "2024", "2024"],
        ),
        (call("toQuarter", vec![t()]), u8t.clone(), ["1", "4", "1"]),
        (call("toMonth", vec![t()]), u8t.clone(), ["3", "11", "2"]),
        (
            call("toDayOfMonth", vec![t()]),
            u8t.clone(),
            ["10", "3", "29"],
        ),
        (
            call("toDayOfYear", vec![t()]),
            DataType::UInt16,
            ["70", "308", "60"],
        ),
        (call("toHour", vec![t()]), u8t.clone(), ["1", "1", "23"]),
        (call("toMinute", vec![t()]), u8t.clone(), ["30", "30", "59"]),
        (call("toSecond", vec![t()]), u8t.clone(), ["0", "0", "59"]),
        (call("toDayOfWeek", vec![t()]), u8t.clone(), ["7", "7", "4"]),
        (
            call("toYYYYMM", vec![t()]),
            DataType::UInt32,
            ["202403", "202411", "202402"],
        ),
        (
            call("toYYYYMMDD", vec![t()]),
            DataType::UInt32,
            ["20240310", "20241103", "20240229"],
        ),
        (
            call("toUnixTimestamp", vec![t()]),
            DataType::UInt32,
            ["1710052200", "1730615400", "1709269199"],
        ),
        (
            call(
                "toHour",
                vec![call("toTimeZone", vec![t(), s("Asia/Tokyo")])],
            ),
            u8t,
            ["15", "15", "13"],
        ),
        (
            call(
                "formatDateTime",
                vec![t(), s("%Y/%m/%d %H:%i:%S.%f %a %W %p %j %V %z")],
            ),
            DataType::Utf8,
            [
                "2024/03/10 01:30:00.123456 Sun Sunday AM 070 10 -0500",
                "2024/11/03 01:30:00.000000 Sun Sunday AM 308 44 -0500",
                "2024/02/29 23:59:59.000000 Thu Thursday PM 060 09 -0500",
            ],
        ),
    ]);
}

#[test]
fn arithmetic_on_timestamps() {
    let t = || c("ts");
    let ny6 = DataType::Timestamp(TimeUnit::Microsecond, Some(TZ.into()));
    let end = || ts("2024-12-25 00:00:00");
    column_cases(vec![
        (
            call("addMonths", vec![t(), i(1)]),
            ny6.clone(),
            [
                "2024-04-10 01:30:00.123456",
                "2024-12-03 01:30:00.000000",
                "2024-03-29 23:59:59.000000",
            ],
        ),
        (
            call("addDays", vec![t(), i(-1)]),
            ny6.clone(),
            [
                "2024-03-09 01:30:00.123456",
                "2024-11-02 01:30:00.000000",
                "2024-02-28 23:59:59.000000",
            ],
        ),
        (
            call("addHours", vec![t(), i(24)]),
            ny6.clone(),
            [
                "2024-03-11 02:30:00.123456",
                "2024-11-04 01:30:00.000000",
                "2024-03-01 23:59:59.000000",
            ],
        ),
        (
            call("subtractYears", vec![t(), i(1)]),
            ny6.clone(),
            [
                "2023-03-10 01:30:00.123456",
                "2023-11-03 01:30:00.000000",
                "2023-02-28 23:59:59.000000",
            ],
        ),
        (
            call("dateAdd", vec![t(), call("toIntervalDay", vec![i(1)])]),
            ny6.clone(),
            [
                "2024-03-11 01:30:00.123456",
                "2024-11-04 01:30:00.000000",
                "2024-03-01 23:59:59.000000",
            ],
        ),
        (
            call("dateSub", vec![s("month"), i(1), t()]),
            ny6.clone(),
            [
                "2024-02-10 01:30:00.123456",
                "2024-10-03 01:30:00.000000",
                "2024-01-29 23:59:59.000000",
            ],
        ),
        (
            binary_expr(t(), Operator::Plus, call("toIntervalHour", vec![i(3)])),
            ny6.clone(),
            [
                "2024-03-10 05:30:00.123456",
                "2024-11-03 04:30:00.000000",
                "2024-03-01 02:59:59.000000",
            ],
        ),
        (
            binary_expr(t(), Operator::Plus, call("toIntervalDay", vec![i(1)])),
            ny6.clone(),
            [
                "2024-03-11 01:30:00.123456",
                "2024-11-04 01:30:00.000000",
                "2024-03-01 23:59:59.000000",
            ],
        ),
        (
            binary_expr(t(), Operator::Minus, call("toIntervalMonth", vec![i(1)])),
            ny6.clone(),
            [
                "2024-02-10 01:30:00.123456",
                "2024-10-03 01:30:00.000000",
                "2024-01-29 23:59:59.000000",
            ],
        ),
        (
            call("dateDiff", vec![s("day"), t(), end()]),
            DataType::Int64,
            ["290", "52", "300"],
        ),
        (
            call("dateDiff", vec![s("week"), t(), end()]),
            DataType::Int64,
            ["42", "8", "43"],
        ),
        (
            call("dateDiff", vec![s("month"), t(), end()]),
            DataType::Int64,
            ["9", "1", "10"],
        ),
        (
            call("dateDiff", vec![s("hour"), t(), end()]),
            DataType::Int64,
            ["6959", "1247", "7177"],
        ),
    ]);
}

#[test]
fn constants_and_edge_cases() {
    check(vec![
        // Interval starts (ClickHouse: months from 1970, years from 0, weeks from 1970-01-05).
        (
            call(
                "toStartOfInterval",
                vec![
                    ts("2024-11-03 01:30:00"),
                    call("toIntervalMonth", vec![i(7)]),
                ],
            ),
            "2024-11-01",
        ),
        (
            call(
                "toStartOfInterval",
                vec![
                    ts("2024-11-03 01:30:00"),
                    call("toIntervalYear", vec![i(3)]),
                ],
            ),
            "2022-01-01",
        ),
        (
            call(
                "toStartOfInterval",
                vec![
                    ts("2024-11-03 01:30:00"),
                    call("toIntervalWeek", vec![i(3)]),
                ],
            ),
            "2024-10-21",
        ),
        (
            call(
                "toStartOfInterval",
                vec![
                    ts("2024-11-03 01:30:00"),
                    call("toIntervalWeek", vec![i(1)]),
                ],
            ),
            "2024-10-28",
        ),
        (
            call(
                "toStartOfInterval",
                vec![ts("2024-11-03 01:30:00"), call("toIntervalDay", vec![i(7)])],
            ),
            "2024-10-31 00:00:00",
        ),
        (
            call(
                "toStartOfInterval",
                vec![ts("2024-11-03 01:30:00"), call("toIntervalDay", vec![i(3)])],
            ),
            "2024-11-01 00:00:00",
        ),
        (
            call(
                "toStartOfInterval",
                vec![
                    ts("2024-11-03 01:30:00"),
                    call("toIntervalQuarter", vec![i(2)]),
                ],
            ),
            "2024-07-01",
        ),
        (
            call(
                "toStartOfInterval",
                vec![
                    ts_in("2024-11-03 03:37:00", "Asia/Kolkata"),
                    call("toIntervalHour", vec![i(2)]),
                ],
            ),
            "2024-11-03 02:00:00",
        ),
        // Dates.
        (
            call(
                "addMonths",
                vec![call("toDate", vec![s("2024-01-31")]), i(1)],
            ),
            "2024-02-29",
        ),
        (
            call(
                "addYears",
                vec![call("toDate", vec![s("2024-02-29")]), i(1)],
            ),
            "2025-02-28",
        ),
        (
            call(
                "addHours",
                vec![call("toDate", vec![s("2024-01-31")]), i(1)],
            ),
            "2024-01-31 01:00:00",
        ),
        (
            call(
                "addWeeks",
                vec![call("toDate", vec![s("2024-01-01")]), i(-1)],
            ),
            "2023-12-25",
        ),
        (
            call(
                "addDays",
                vec![ts_in("2024-01-01 00:00:00", "UTC"), fl(1.7)],
            ),
            "2024-01-02 00:00:00.000000",
        ),
        (
            call(
                "dateDiff",
                vec![
                    s("week"),
                    call("toDate", vec![s("2024-01-07")]),
                    call("toDate", vec![s("2024-01-08")]),
                ],
            ),
            "1",
        ),
        (
            call(
                "dateDiff",
                vec![
                    s("month"),
                    call("toDate", vec![s("2024-01-31")]),
                    call("toDate", vec![s("2024-02-01")]),
                ],
            ),
            "1",
        ),
        (
            call(
                "dateDiff",
                vec![
                    s("second"),
                    ts_in("2024-01-01 00:00:00.9", "UTC"),
                    ts_in("2024-01-01 00:00:01.1", "UTC"),
                ],
            ),
            "1",
        ),
        (
            call(
                "dateDiff",
                vec![
                    s("hour"),
                    ts("2024-03-10 00:30:00"),
                    ts("2024-03-10 03:30:00"),
                ],
            ),
            "2",
        ),
        (
            call("toStartOfWeek", vec![call("toDate", vec![s("2024-05-05")])]),
            "2024-05-05",
        ),
        (
            call(
                "toStartOfWeek",
                vec![call("toDate", vec![s("2024-05-05")]), i(1)],
            ),
            "2024-04-29",
        ),
        (
            call("toStartOfDay", vec![call("toDate", vec![s("2024-05-05")])]),
            "2024-05-05 00:00:00",
        ),
        (
            call(
                "dateTrunc",
                vec![s("month"), call("toDate", vec![s("2024-05-05")])],
            ),
            "2024-05-01",
        ),
        (
            call(
                "toDayOfWeek",
                vec![call("toDate", vec![s("2024-01-07")]), i(1)],
            ),
            "6",
        ),
        (
            call(
                "toDayOfWeek",
                vec![call("toDate", vec![s("2024-01-07")]), i(2)],
            ),
            "0",
        ),
        (
            call(
                "toDayOfWeek",
                vec![call("toDate", vec![s("2024-01-07")]), i(3)],
            ),
            "1",
        ),
        (call("toDate", vec![i(19000)]), "2022-01-08"),
        (call("toDate", vec![i(1700000000)]), "2023-11-14"),
        (call("toDate", vec![s("2024-01-15 10:00:00")]), "2024-01-15"),
        (call("toDate", vec![s("2024-1-5")]), "2024-01-05"),
        (call("toDate", vec![s("x")]), "\\N"),
        (
            call("toDateTime", vec![i(1700000000), s("UTC")]),
            "2023-11-14 22:13:20",
        ),
        (
            call("fromUnixTimestamp", vec![i(1700000000)]),
            "2023-11-14 17:13:20",
        ),
        (
            call("toDateTime", vec![s("2024-03-10 02:30:00")]),
            "2024-03-10 01:30:00",
        ),
        (
            call("toDateTime", vec![s("2024-01-02T03:04:05Z")]),
            "2024-01-01 22:04:05.000000",
        ),
        (call("toDateTime", vec![s("garbage")]), "\\N"),
        (
            call("parseDateTimeBestEffort", vec![s("2024-01-02 03:04:05")]),
            "2024-01-02 03:04:05.000000",
        ),
        (call("parseDateTimeBestEffortOrNull", vec![s("")]), "\\N"),
        (
            call("toUnixTimestamp", vec![s("2024-01-01 00:00:00")]),
            "1704085200",
        ),
        (
            call("toTimeZone", vec![ts("2024-01-01 00:00:00"), s("UTC")]),
            "2024-01-01 05:00:00.000000",
        ),
        (
            call(
                "toDateTime64",
                vec![s("2024-01-01 00:00:00.5"), i(3), s("UTC")],
            ),
            "2024-01-01 00:00:00.500",
        ),
        (
            call(
                "formatDateTime",
                vec![
                    ts_in("2024-03-05 17:00:00", "UTC"),
                    s("%F %T %f %z"),
                    s("Asia/Kolkata"),
                ],
            ),
            "2024-03-05 22:30:00 000000 +0530",
        ),
        (
            call(
                "formatDateTime",
                vec![
                    ts("2024-03-05 07:08:09.123456"),
                    s(
                        "%Y-%m-%d %H:%M:%S|%a %b %c %C %d %D %e %F %g %G %h %i %I %j %k %l %Q %r %R %s %T %u %V %w %y %%",
                    ),
                ],
            ),
            "2024-03-05 07:March:09|Tue Mar 03 20 05 03/05/24 5 2024-03-05 24 2024 07 08 07 065 07 07 1 07:08 AM 07:08 09 07:08:09 2 10 2 24 %",
        ),
        // Now is 2024-05-06 03:04:05 UTC, still the 5th in New York.
        (call("today", vec![]), "2024-05-05"),
        (call("yesterday", vec![]), "2024-05-04"),
        (call("now", vec![]), "2024-05-05 23:04:05.000000"),
        (call("now", vec![s("UTC")]), "2024-05-06 03:04:05.000000"),
    ]);
    assert_eq!(typ(call("today", vec![])), DataType::Date32);
    assert!(
        try_call(
            "toStartOfDay",
            vec![ts("2024-01-01 00:00:00"), s("Mars/Base")]
        )
        .is_err()
    );
    assert!(
        try_call(
            "dateDiff",
            vec![
                s("fortnight"),
                ts("2024-01-01 00:00:00"),
                ts("2024-01-01 00:00:00")
            ]
        )
        .is_err()
    );
}
