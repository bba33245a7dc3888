//! Evaluates translated calls through a real DataFusion session; expected values come from
//! ClickHouse (chdb).

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::catalog::MemTable;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::{Expr, LogicalPlanBuilder, col};
use datafusion::prelude::SessionContext;

use super::super::{Arg, FnContext, FunctionError, WeekStart};
use super::time::{MICROS, local};

pub(crate) const TZ: &str = "America/New_York";

/// Rows of the test table `t`: ts (project-zone timestamps), s (strings), i, f, d.
pub(crate) fn table() -> RecordBatch {
    let ny: chrono_tz::Tz = TZ.parse().unwrap();
    let ts = |s: &str| super::time::parse_best_effort(s, ny);
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some(TZ.into())),
            true,
        ),
        Field::new("s", DataType::Utf8, true),
        Field::new("i", DataType::Int64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("d", DataType::Date32, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(
            TimestampMicrosecondArray::from(vec![
                ts("2024-03-10 01:30:00.123456"),
                ts("2024-11-03 06:30:00Z"),
                ts("2024-02-29 23:59:59"),
                None,
            ])
            .with_timezone(TZ),
        ),
        Arc::new(StringArray::from(vec![
            Some("Hello"),
            Some(""),
            Some("héllo wörld"),
            None,
        ])),
        Arc::new(Int64Array::from(vec![Some(7), Some(-7), Some(0), None])),
        Arc::new(Float64Array::from(vec![
            Some(2.5),
            Some(-2.5),
            Some(0.1),
            None,
        ])),
        Arc::new(Date32Array::from(vec![
            Some(19792),
            Some(0),
            Some(-1),
            None,
        ])),
    ];
    RecordBatch::try_new(schema, cols).unwrap()
}

pub(crate) fn schema() -> DFSchema {
    DFSchema::try_from_qualified_schema("t", &table().schema()).unwrap()
}

pub(crate) fn with_ctx<T>(f: impl FnOnce(&FnContext<'_>) -> T) -> T {
    let schema = schema();
    let ctx = FnContext {
        timezone: TZ,
        week_start: WeekStart::Sunday,
        now: Utc.with_ymd_and_hms(2024, 5, 6, 3, 4, 5).unwrap(),
        schema: &schema,
    };
    f(&ctx)
}

pub(crate) fn call(name: &str, args: Vec<Expr>) -> Expr {
    try_call(name, args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub(crate) fn try_call(name: &str, args: Vec<Expr>) -> Result<Expr, FunctionError> {
    with_ctx(|ctx| {
        super::super::translate(
            name,
            vec![],
            args.into_iter().map(Arg::Expr).collect(),
            false,
            ctx,
        )
    })
}

pub(crate) fn s(v: &str) -> Expr {
    Expr::Literal(ScalarValue::Utf8(Some(v.to_string())), None)
}

pub(crate) fn i(v: i64) -> Expr {
    Expr::Literal(ScalarValue::Int64(Some(v)), None)
}

pub(crate) fn fl(v: f64) -> Expr {
    Expr::Literal(ScalarValue::Float64(Some(v)), None)
}

pub(crate) fn null() -> Expr {
    Expr::Literal(ScalarValue::Utf8(None), None)
}

/// A project-zone DateTime64(6) literal read from local time.
pub(crate) fn ts(v: &str) -> Expr {
    ts_in(v, TZ)
}

pub(crate) fn ts_in(v: &str, tz: &str) -> Expr {
    let z: chrono_tz::Tz = tz.parse().unwrap();
    let m = super::time::parse_best_effort(v, z).unwrap();
    Expr::Literal(
        ScalarValue::TimestampMicrosecond(Some(m), Some(tz.into())),
        None,
    )
}

pub(crate) fn c(name: &str) -> Expr {
    col(name)
}

/// Evaluates expressions over the test table; returns (type, values as ClickHouse prints
/// them, NULL as `\N`) per expression.
pub(crate) fn eval(exprs: Vec<Expr>) -> Vec<(DataType, Vec<String>)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async move {
        let batch = table();
        let mem = MemTable::try_new(batch.schema(), vec![vec![batch]]).unwrap();
        let named: Vec<Expr> = exprs
            .into_iter()
            .enumerate()
            .map(|(n, e)| e.alias(format!("c{n}")))
            .collect();
        let plan = LogicalPlanBuilder::scan("t", provider_as_source(Arc::new(mem)), None)
            .unwrap()
            .project(named)
            .unwrap()
            .build()
            .unwrap();
        let ctx = SessionContext::new();
        let batches = ctx
            .execute_logical_plan(plan)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let out_schema = batches[0].schema();
        (0..out_schema.fields().len())
            .map(|ci| {
                let ty = out_schema.field(ci).data_type().clone();
                let mut vals = vec![];
                for b in &batches {
                    let a = b.column(ci);
                    for r in 0..a.len() {
                        vals.push(show(a, r));
                    }
                }
                (ty, vals)
            })
            .collect()
    })
}

/// One value as ClickHouse's TSV shows it.
pub(crate) fn show(a: &ArrayRef, r: usize) -> String {
    if a.is_null(r) {
        return "\\N".to_string();
    }
    match a.data_type() {
        DataType::Timestamp(unit, Some(tz)) => {
            let z: chrono_tz::Tz = tz.parse().unwrap();
            let v = ScalarValue::try_from_array(a, r).unwrap();
            let micros = match v {
                ScalarValue::TimestampSecond(Some(x), _) => x * MICROS,
                ScalarValue::TimestampMillisecond(Some(x), _) => x * 1000,
                ScalarValue::TimestampMicrosecond(Some(x), _) => x,
                ScalarValue::TimestampNanosecond(Some(x), _) => x / 1000,
                _ => unreachable!(),
            };
            let l = local(z, micros).unwrap();
            let base = l.format("%Y-%m-%d %H:%M:%S").to_string();
            match unit {
                TimeUnit::Second => base,
                TimeUnit::Millisecond => format!("{base}.{:03}", micros.rem_euclid(MICROS) / 1000),
                _ => format!("{base}.{:06}", micros.rem_euclid(MICROS)),
            }
        }
        DataType::Float64 => {
            let v = ScalarValue::try_from_array(a, r).unwrap();
            let ScalarValue::Float64(Some(x)) = v else {
                unreachable!()
            };
            super::convert::format_float(x)
        }
        // HogQL's UUID type, shown as PostHog shows it.
        DataType::FixedSizeBinary(16) => crate::storage::ids::to_text(a.as_ref())
            .unwrap()
            .as_string::<i32>()
            .value(r)
            .to_string(),
        DataType::Boolean => {
            let v = ScalarValue::try_from_array(a, r).unwrap();
            if v == ScalarValue::Boolean(Some(true)) {
                "true"
            } else {
                "false"
            }
            .to_string()
        }
        _ => {
            let opts = FormatOptions::default();
            ArrayFormatter::try_new(a.as_ref(), &opts)
                .unwrap()
                .value(r)
                .to_string()
        }
    }
}

/// Evaluates one expression over the table's rows.
pub(crate) fn rows(e: Expr) -> Vec<String> {
    eval(vec![e]).remove(0).1
}

pub(crate) fn typ(e: Expr) -> DataType {
    eval(vec![e]).remove(0).0
}

/// Asserts each (expression, ClickHouse's answer) pair on the first row.
pub(crate) fn check(cases: Vec<(Expr, &str)>) {
    let (exprs, want): (Vec<Expr>, Vec<&str>) = cases.into_iter().unzip();
    let names: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
    let got = eval(exprs);
    for ((n, w), (_, g)) in names.iter().zip(want).zip(got) {
        assert_eq!(g[0], w, "{n}");
    }
}

#[test]
fn arity_and_lookup() {
    assert!(super::lookup("toStartOfDay").is_some());
    assert!(super::lookup("tostartofday").is_none());
    assert!(super::lookup("COALESCE").is_some());
    assert!(super::lookup("nope").is_none());
    assert_eq!(
        try_call(
            "toStartOfDay",
            vec![ts("2024-01-01 00:00:00"), s("UTC"), s("x")]
        ),
        Err(FunctionError::Arity(
            "Function `toStartOfDay` expects at most 2 arguments, found 3".into()
        ))
    );
    assert_eq!(
        try_call("toYYYYMM", vec![]),
        Err(FunctionError::Arity(
            "Function `toYYYYMM` expects 1 argument, found 0".into()
        ))
    );
}

#[test]
fn week_start_follows_the_project() {
    let schema = schema();
    let ctx = FnContext {
        timezone: TZ,
        week_start: WeekStart::Monday,
        now: Utc.with_ymd_and_hms(2024, 5, 6, 3, 4, 5).unwrap(),
        schema: &schema,
    };
    let e = super::super::translate(
        "toStartOfWeek",
        vec![],
        vec![Arg::Expr(ts("2024-05-05 10:00:00"))],
        false,
        &ctx,
    )
    .unwrap();
    let sunday = call("toStartOfWeek", vec![ts("2024-05-05 10:00:00")]);
    check(vec![(e, "2024-04-29"), (sunday, "2024-05-05")]);
}

#[test]
fn null_literal_gives_null_only_for_default_null_handling() {
    use super::null_literal_gives_null as f;
    for name in [
        "upper",
        "UPPER",
        "length",
        "positionUTF8",
        "toUInt64",
        "toStartOfDay",
    ] {
        assert!(f(name), "{name}");
    }
    // NULL-aware in ClickHouse, compiled otherwise by PostHog, or not a scalar entry.
    for name in [
        "coalesce",
        "ifNull",
        "isNull",
        "isNotNull",
        "if",
        "multiIf",
        "assumeNotNull",
        "greatest",
        "least",
        "concat",
        "toInt",
        "toUUID",
        "toInt64OrNull",
        "toFloat64OrDefault",
        "has",
        "indexOf",
        "arrayResize",
        "count",
        "nope",
    ] {
        assert!(!f(name), "{name}");
    }
}
