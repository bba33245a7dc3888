//! RANGE frames with an offset over a key that holds NULLs, framed as ClickHouse frames them.
//!
//! ClickHouse compares a row's key with the current row's key ± offset taking NULL as less
//! than every value (and equal to NULL) whatever the NULLs' place in the window's order, and
//! moves each frame's start and end only forward from the previous row's. Where NULLs sort
//! where that comparison puts them (ASC NULLS FIRST, DESC NULLS LAST) this is SQL's frame and
//! DataFusion's. The other two orders give frames of their own:
//!
//! - ASC NULLS LAST (ASC's default): the NULL rows, last, compare below every bound, so the
//!   end of a frame that reaches the greatest key runs on through them, and a start past the
//!   greatest key runs through them to the partition's end. A NULL row's offset bounds stay
//!   where the last non-NULL row's were. That is the frame of a key with NULL read as the
//!   partition's greatest key, except where a bound is CURRENT ROW: the greatest key's rows
//!   end their frame at their own peers, the NULL rows start theirs at the first NULL row,
//!   as over the key itself.
//! - DESC NULLS FIRST: the NULL rows, first, compare after every bound, so once a partition
//!   has a NULL row no offset start moves off the partition's first row and every offset end
//!   is the partition's end: the offsets are UNBOUNDED.

use super::*;

/// How a window's frame has to be computed for ClickHouse's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// DataFusion's frame over the key is ClickHouse's.
    AsIs,
    /// ASC NULLS LAST: over the key with NULL read as the partition's greatest key; rows
    /// whose CURRENT ROW bound must not reach across (the greatest key's for a CURRENT ROW
    /// end, the NULL rows for a CURRENT ROW start) over the key itself.
    NullAsGreatest {
        current_start: bool,
        current_end: bool,
    },
    /// DESC NULLS FIRST: offsets read as UNBOUNDED in a partition with a NULL key.
    UnboundedWithNulls,
}

fn is_offset(b: &WindowFrameBound) -> bool {
    match b {
        WindowFrameBound::Preceding(v) | WindowFrameBound::Following(v) => !v.is_null(),
        WindowFrameBound::CurrentRow => false,
    }
}

fn plan(order: &[Sort], frame: &WindowFrame, key_nullable: bool) -> Plan {
    let [key] = order else {
        return Plan::AsIs;
    };
    let offsets = is_offset(&frame.start_bound) || is_offset(&frame.end_bound);
    if frame.units != WindowFrameUnits::Range || !offsets || !key_nullable {
        return Plan::AsIs;
    }
    match (key.asc, key.nulls_first) {
        (true, false) => Plan::NullAsGreatest {
            current_start: frame.start_bound == WindowFrameBound::CurrentRow,
            current_end: frame.end_bound == WindowFrameBound::CurrentRow,
        },
        (false, true) => Plan::UnboundedWithNulls,
        _ => Plan::AsIs,
    }
}

/// Whether a window call's answer depends on its frame (aggregates and the in-frame
/// functions; not ranks, row numbers, lag/lead).
fn uses_frame(e: &Expr) -> bool {
    e.exists(|x| {
        Ok(match x {
            Expr::AggregateFunction(_) => true,
            Expr::WindowFunction(w) => matches!(
                w.fun.name(),
                "lagInFrame" | "leadInFrame" | "nth_value" | "first_value" | "last_value"
            ),
            _ => false,
        })
    })
    .unwrap_or(false)
}

/// The aggregate `f` of `key` over each row's whole partition.
fn over_partition(f: Expr, partition: &[Expr]) -> datafusion::error::Result<Expr> {
    to_window(f, partition.to_vec(), vec![], None)
}

/// `e`'s aggregate and window calls over the window, framed as ClickHouse frames them when
/// the one ORDER BY key is nullable (see the module's comment).
pub(super) fn clickhouse_window(
    e: Expr,
    partition: Vec<Expr>,
    order: Vec<Sort>,
    frame: Option<WindowFrame>,
    key_nullable: bool,
) -> datafusion::error::Result<Expr> {
    use datafusion::functions_aggregate::expr_fn::{count, max};
    let how = match &frame {
        Some(f) if uses_frame(&e) => plan(&order, f, key_nullable),
        _ => Plan::AsIs,
    };
    let (Some(frame), [key]) = (frame.clone(), order.as_slice()) else {
        return to_window(e, partition, order, frame);
    };
    let key = key.expr.clone();
    match how {
        Plan::AsIs => to_window(e, partition, order, Some(frame)),
        Plan::NullAsGreatest {
            current_start,
            current_end,
        } => {
            let greatest = over_partition(max(key.clone()), &partition)?;
            let read = core_fn::coalesce(vec![key.clone(), greatest.clone()]);
            let framed = to_window(
                e.clone(),
                partition.clone(),
                vec![Sort::new(read, true, false)],
                Some(frame.clone()),
            )?;
            let mut own = Vec::new();
            if current_start {
                own.push(key.clone().is_null());
            }
            if current_end {
                own.push(key.clone().is_not_null().and(key.eq(greatest)));
            }
            let Some(own) = own.into_iter().reduce(Expr::or) else {
                return Ok(framed);
            };
            when(own, to_window(e, partition, order, Some(frame))?).otherwise(framed)
        }
        Plan::UnboundedWithNulls => {
            let unbounded = |b: WindowFrameBound, start: bool| {
                if !is_offset(&b) {
                    b
                } else if start {
                    WindowFrameBound::Preceding(ScalarValue::UInt64(None))
                } else {
                    WindowFrameBound::Following(ScalarValue::UInt64(None))
                }
            };
            let whole = WindowFrame::new_bounds(
                WindowFrameUnits::Range,
                unbounded(frame.start_bound.clone(), true),
                unbounded(frame.end_bound.clone(), false),
            );
            let rows = over_partition(count(lit(1u8)), &partition)?;
            let keys = over_partition(count(key), &partition)?;
            when(
                keys.lt(rows),
                to_window(e.clone(), partition.clone(), order.clone(), Some(whole))?,
            )
            .otherwise(to_window(e, partition, order, Some(frame))?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::col;

    fn range(start: WindowFrameBound, end: WindowFrameBound) -> WindowFrame {
        WindowFrame::new_bounds(WindowFrameUnits::Range, start, end)
    }
    fn preceding(n: i64) -> WindowFrameBound {
        WindowFrameBound::Preceding(ScalarValue::Int64(Some(n)))
    }
    fn following(n: i64) -> WindowFrameBound {
        WindowFrameBound::Following(ScalarValue::Int64(Some(n)))
    }
    fn unbounded_preceding() -> WindowFrameBound {
        WindowFrameBound::Preceding(ScalarValue::UInt64(None))
    }
    fn key(asc: bool, nulls_first: bool) -> Vec<Sort> {
        vec![Sort::new(col("x"), asc, nulls_first)]
    }

    #[test]
    fn only_the_orders_against_the_null_comparison_need_their_own_frames() {
        let f = range(preceding(1), following(2));
        let greatest = Plan::NullAsGreatest {
            current_start: false,
            current_end: false,
        };
        assert_eq!(plan(&key(true, false), &f, true), greatest);
        assert_eq!(plan(&key(false, true), &f, true), Plan::UnboundedWithNulls);
        assert_eq!(plan(&key(true, true), &f, true), Plan::AsIs);
        assert_eq!(plan(&key(false, false), &f, true), Plan::AsIs);
    }

    #[test]
    fn frames_without_an_offset_or_a_nullable_key_stay() {
        let current = WindowFrameBound::CurrentRow;
        let no_offset = range(unbounded_preceding(), current.clone());
        assert_eq!(plan(&key(true, false), &no_offset, true), Plan::AsIs);
        let rows = WindowFrame::new_bounds(WindowFrameUnits::Rows, preceding(1), current);
        assert_eq!(plan(&key(true, false), &rows, true), Plan::AsIs);
        let f = range(preceding(1), following(2));
        assert_eq!(plan(&key(true, false), &f, false), Plan::AsIs);
        let two = [key(true, false), key(true, false)].concat();
        assert_eq!(plan(&two, &f, true), Plan::AsIs);
    }

    #[test]
    fn current_row_bounds_are_noted() {
        let f = range(preceding(1), WindowFrameBound::CurrentRow);
        assert_eq!(
            plan(&key(true, false), &f, true),
            Plan::NullAsGreatest {
                current_start: false,
                current_end: true
            }
        );
        let f = range(WindowFrameBound::CurrentRow, following(0));
        assert_eq!(
            plan(&key(true, false), &f, true),
            Plan::NullAsGreatest {
                current_start: true,
                current_end: false
            }
        );
    }

    #[test]
    fn ranks_keep_the_window_as_written() {
        let rank = rank_expr();
        assert!(!uses_frame(&rank));
        let sum = datafusion::functions_aggregate::expr_fn::sum(col("x"));
        assert!(uses_frame(&sum));
    }
}
