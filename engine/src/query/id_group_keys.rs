//! Groups by a 16-byte id as a 128-bit integer.
//!
//! `person_id` (and every id stored in 16 bytes) is a `FixedSizeBinary(16)`. DataFusion
//! groups such a key with its general column-wise group values, comparing two keys by a
//! call to `memcmp`: in a funnel grouped by person at 10M events, a sixth of the CPU went
//! to interning the person keys and that `memcmp`. A `Decimal128` key of the same 16 bytes
//! is a primitive: hashed and compared as one `i128`, and alone in its GROUP BY it takes the
//! primitive group values. This rule rewrites each aggregate's 16-byte group keys into
//! their bytes read as a `Decimal128(38, 0)` (no copy) and puts the ids back above it
//! under the same names, so nothing above the aggregate sees a difference.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, FixedSizeBinaryArray};
use datafusion::arrow::buffer::{Buffer, ScalarBuffer};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, DFSchema, Result};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    Aggregate, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Projection, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

const ID: DataType = DataType::FixedSizeBinary(16);
const KEY: DataType = DataType::Decimal128(38, 0);

/// The rule: see the module.
#[derive(Debug, Default)]
pub(crate) struct IdGroupKeys;

impl OptimizerRule for IdGroupKeys {
    fn name(&self) -> &str {
        "hedgerow_id_group_keys"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Aggregate(agg) = plan else {
            return Ok(Transformed::no(plan));
        };
        let input = agg.input.schema().clone();
        let is_id = |e: &Expr| {
            !matches!(e, Expr::GroupingSet(_)) && e.get_type(&input).is_ok_and(|t| t == ID)
        };
        if !agg.group_expr.iter().any(is_id)
            || agg
                .group_expr
                .iter()
                .any(|e| matches!(e, Expr::GroupingSet(_)))
        {
            return Ok(Transformed::no(LogicalPlan::Aggregate(agg)));
        }
        let old: Arc<DFSchema> = agg.schema.clone();
        let mut rewritten = vec![false; old.fields().len()];
        let group_expr: Vec<Expr> = agg
            .group_expr
            .iter()
            .enumerate()
            .map(|(i, e)| {
                if !is_id(e) {
                    return e.clone();
                }
                rewritten[i] = true;
                let (q, f) = old.qualified_field(i);
                call(&ID_TO_KEY, e.clone()).alias_qualified(q.cloned(), f.name())
            })
            .collect();
        let new = Aggregate::try_new(agg.input.clone(), group_expr, agg.aggr_expr.clone())?;
        let exprs: Vec<Expr> = (0..old.fields().len())
            .map(|i| {
                let (q, f) = old.qualified_field(i);
                let col = Expr::Column(Column::new(q.cloned(), f.name()));
                if rewritten[i] {
                    call(&KEY_TO_ID, col).alias_qualified(q.cloned(), f.name())
                } else {
                    col
                }
            })
            .collect();
        let projection = Projection::try_new(exprs, Arc::new(LogicalPlan::Aggregate(new)))?;
        Ok(Transformed::yes(LogicalPlan::Projection(projection)))
    }
}

fn call(udf: &std::sync::LazyLock<Arc<ScalarUDF>>, arg: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(udf), vec![arg]))
}

static ID_TO_KEY: std::sync::LazyLock<Arc<ScalarUDF>> =
    std::sync::LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(Reinterpret::new(true))));
static KEY_TO_ID: std::sync::LazyLock<Arc<ScalarUDF>> =
    std::sync::LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(Reinterpret::new(false))));

/// The same 16 bytes as the other type: id → key (`to_key`) or back.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Reinterpret {
    to_key: bool,
    signature: Signature,
}

impl Reinterpret {
    fn new(to_key: bool) -> Self {
        Reinterpret {
            to_key,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Reinterpret {
    fn name(&self) -> &str {
        if self.to_key {
            "hogql_id_group_key"
        } else {
            "hogql_id_of_group_key"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(if self.to_key { KEY } else { ID })
    }

    /// An input already of the result type is handed back: the hash join's dynamic
    /// filter evaluates the join key `hogql_id_of_group_key(id)` on the scan below the
    /// aggregate, where the id is still an id (found by the retention query at 10M).
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let a = args.args[0].to_array(args.number_rows)?;
        Ok(ColumnarValue::Array(match (self.to_key, a.data_type()) {
            (true, DataType::FixedSizeBinary(16)) => id_to_key(a.as_fixed_size_binary()),
            (false, DataType::Decimal128(_, _)) => key_to_id(a.as_primitive()),
            (true, DataType::Decimal128(_, _)) | (false, DataType::FixedSizeBinary(16)) => a,
            (_, other) => {
                return datafusion::common::exec_err!("{} of {other}", self.name());
            }
        }))
    }
}

/// The ids' bytes as `i128`s: the same buffer when it is aligned for them (Arrow's are),
/// a copy otherwise.
fn id_to_key(ids: &FixedSizeBinaryArray) -> ArrayRef {
    let bytes: Buffer = ids.values().clone();
    let values = if bytes.as_ptr().align_offset(align_of::<i128>()) == 0 {
        ScalarBuffer::<i128>::new(bytes, 0, ids.len())
    } else {
        ScalarBuffer::from(
            bytes
                .chunks_exact(16)
                .map(|c| i128::from_ne_bytes(c.try_into().expect("16 bytes")))
                .collect::<Vec<_>>(),
        )
    };
    Arc::new(Decimal128Array::new(values, ids.nulls().cloned()).with_data_type(KEY))
}

fn key_to_id(keys: &Decimal128Array) -> ArrayRef {
    let bytes = keys.values().inner().clone();
    Arc::new(FixedSizeBinaryArray::new(16, bytes, keys.nulls().cloned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::datasource::MemTable;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::prelude::SessionContext;

    fn ctx(rule: bool) -> SessionContext {
        // Partitioned hash joins, as at scale, whose dynamic filter reaches the scan.
        let mut config = datafusion::prelude::SessionConfig::new().with_target_partitions(2);
        config.options_mut().optimizer.hash_join_single_partition_threshold = 0;
        config.options_mut().optimizer.hash_join_single_partition_threshold_rows = 0;
        config.options_mut().execution.parquet.pushdown_filters = true;
        let mut b = SessionStateBuilder::new()
            .with_config(config)
            .with_default_features();
        if rule {
            b = b.with_optimizer_rule(Arc::new(IdGroupKeys));
        }
        let ctx = SessionContext::new_with_state(b.build());
        let ids = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
            (0..200u32).map(|i| (i % 7 != 0).then_some([(i % 5) as u8; 16])),
            16,
        )
        .unwrap();
        let x = Int64Array::from_iter_values((0..200).map(|i| i % 3));
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", ID, true),
            Field::new("x", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(x)]).unwrap();
        // Two batches, the second a slice: its ids start 16 bytes into their buffer.
        let table = MemTable::try_new(
            schema,
            vec![vec![batch.slice(0, 120), batch.slice(120, 80)]],
        )
        .unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        ctx
    }

    /// The same rows as Parquet (`p`): a scan takes the hash join's dynamic filter.
    async fn with_parquet(ctx: &SessionContext, dir: &std::path::Path) {
        let batches = ctx
            .sql("SELECT * FROM t")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let path = dir.join("p.parquet");
        let file = std::fs::File::create(&path).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), None).unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();
        ctx.register_parquet("p", path.to_str().unwrap(), Default::default())
            .await
            .unwrap();
    }

    async fn run(ctx: &SessionContext, sql: &str) -> (String, String) {
        let df = ctx.sql(sql).await.unwrap();
        let plan = df.clone().into_optimized_plan().unwrap();
        let rows = pretty_format_batches(&df.collect().await.unwrap())
            .unwrap()
            .to_string();
        (format!("{}", plan.display_indent_schema()), rows)
    }

    #[tokio::test]
    async fn groups_by_ids_as_keys_and_answers_the_same() {
        let (with, without) = (ctx(true), ctx(false));
        let dir = tempfile::tempdir().unwrap();
        with_parquet(&with, dir.path()).await;
        with_parquet(&without, dir.path()).await;
        for sql in [
            "SELECT id, count(*) AS n FROM t GROUP BY id ORDER BY n, id",
            "SELECT id, x, count(*) AS n FROM t GROUP BY id, x ORDER BY id, x",
            "SELECT DISTINCT id FROM t ORDER BY id",
            "SELECT t.id FROM t GROUP BY t.id HAVING count(*) > 30 ORDER BY t.id",
            "SELECT a.id, a.n, b.m FROM (SELECT id, count(*) AS n FROM t GROUP BY id) a \
             JOIN (SELECT id, sum(x) AS m FROM t GROUP BY id) b ON a.id = b.id ORDER BY a.id",
            "SELECT f.c, a.x - f.c AS k, count(*) AS n FROM (SELECT id, x FROM t GROUP BY id, x) a \
             JOIN (SELECT id, min(x) AS c FROM t GROUP BY id) f ON a.id = f.id \
             GROUP BY f.c, k ORDER BY f.c, k",
            // Over Parquet the join's dynamic filter evaluates the key on the scan.
            "SELECT f.c, a.x - f.c AS k, count(*) AS n FROM (SELECT id, x FROM p GROUP BY id, x) a \
             JOIN (SELECT id, min(x) AS c FROM p WHERE x > 0 GROUP BY id) f ON a.id = f.id \
             GROUP BY f.c, k ORDER BY f.c, k",
        ] {
            let (plan, rows) = run(&with, sql).await;
            let (plain, want) = run(&without, sql).await;
            assert!(plan.contains("hogql_id_group_key"), "{sql}\n{plan}");
            assert!(!plain.contains("hogql_id_group_key"));
            assert_eq!(rows, want, "{sql}");
            // The ids come back as ids.
            if !sql.starts_with("SELECT f.c") {
                assert!(
                    plan.lines().next().unwrap().contains("FixedSizeBinary(16)"),
                    "{plan}"
                );
            }
        }
    }

    #[test]
    fn keys_round_trip_aligned_or_not() {
        let ids = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
            (0..9u8).map(|i| (i != 4).then_some([i; 16])),
            16,
        )
        .unwrap();
        for a in [ids.clone(), ids.slice(3, 5)] {
            let keys = id_to_key(&a);
            let back = key_to_id(keys.as_primitive());
            assert_eq!(back.as_fixed_size_binary(), &a);
        }
        // Bytes one past an aligned start: copied, the same values.
        let bytes = Buffer::from_vec((0..=16 * 3).map(|i| i as u8).collect::<Vec<u8>>());
        let odd = FixedSizeBinaryArray::new(16, bytes.slice(1), None);
        let back = key_to_id(id_to_key(&odd).as_primitive());
        assert_eq!(back.as_fixed_size_binary(), &odd);
    }
}
