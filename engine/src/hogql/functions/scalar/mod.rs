//! HogQL functions: scalar part. See `super` for the contract.
//!
//! Every name is in [`FUNCTIONS`] with its arity and whether it matches in any case (the
//! SQL-standard names and ClickHouse's case-insensitive aliases). Translation goes to one
//! of the group modules; functions DataFusion's built-ins answer like ClickHouse use those,
//! the rest are `udf::KernelUdf` kernels.

mod arrays;
pub(crate) use arrays::elements_nullable;
mod cityhash;
mod conditional;
mod convert;
pub(crate) use cityhash::city_hash_64_of;
mod intarith;
pub(crate) use conditional::agree_numeric;
pub(crate) use convert::{stored_uuid, to_uuid, uuid_order_key, uuid_text};
pub(crate) use intarith::{IntOp, const_array_element, int_arith, int_negate, narrow_const_items};
mod datetime;
mod encode;
mod json;
mod math;
mod polygon;
mod special;
mod strings;
mod text;
mod time;
pub(crate) use time::{DateRange, ch_date};
mod tuples;
mod udf;
mod url;

#[cfg(test)]
mod tests;

use super::{Arg, FnContext, FnInfo, FnKind, FunctionError};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Expr, ExprSchemable};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    DateTime,
    Convert,
    Conditional,
    Strings,
    Url,
    Json,
    Math,
    Special,
    Encode,
    Text,
    Arrays,
    Tuples,
}

use Group::*;

/// (name, min args, max args (None: variadic), case-insensitive, group)
const FUNCTIONS: &[(&str, usize, Option<usize>, bool, Group)] = &[
    // Date and time.
    ("now", 0, Some(1), true, DateTime),
    ("today", 0, Some(0), true, DateTime),
    ("yesterday", 0, Some(0), false, DateTime),
    ("toStartOfDay", 1, Some(2), false, DateTime),
    ("toStartOfWeek", 1, Some(2), false, DateTime),
    ("toStartOfMonth", 1, Some(1), false, DateTime),
    ("toStartOfQuarter", 1, Some(1), false, DateTime),
    ("toStartOfYear", 1, Some(1), false, DateTime),
    ("toStartOfHour", 1, Some(1), false, DateTime),
    ("toStartOfMinute", 1, Some(1), false, DateTime),
    ("toStartOfSecond", 1, Some(1), false, DateTime),
    ("toStartOfFiveMinutes", 1, Some(1), false, DateTime),
    ("toStartOfFiveMinute", 1, Some(2), false, DateTime),
    ("toStartOfTenMinutes", 1, Some(1), false, DateTime),
    ("toStartOfFifteenMinutes", 1, Some(1), false, DateTime),
    ("toStartOfInterval", 2, Some(3), false, DateTime),
    ("toMonday", 1, Some(1), false, DateTime),
    ("dateTrunc", 2, Some(3), false, DateTime),
    ("date_trunc", 2, Some(3), true, DateTime),
    ("toDate", 1, Some(1), false, DateTime),
    ("to_date", 1, Some(1), false, DateTime),
    ("DATE", 1, Some(2), true, DateTime),
    ("toDateTime", 1, Some(2), false, DateTime),
    ("toDateTime64", 1, Some(3), false, DateTime),
    ("toModifiedJulianDay", 1, Some(1), false, DateTime),
    ("dateName", 2, Some(2), false, DateTime),
    ("fromModifiedJulianDay", 1, Some(1), false, DateTime),
    ("timeZoneOf", 1, Some(1), false, DateTime),
    ("timeZoneOffset", 1, Some(1), false, DateTime),
    ("toStartOfISOYear", 1, Some(1), false, DateTime),
    ("toTimeZone", 2, Some(2), false, DateTime),
    ("toTimezone", 2, Some(2), false, DateTime),
    ("dateDiff", 3, Some(3), true, DateTime),
    ("date_diff", 3, Some(3), true, DateTime),
    ("timestampDiff", 3, Some(4), true, DateTime),
    ("dateAdd", 2, Some(3), false, DateTime),
    ("date_add", 2, Some(3), true, DateTime),
    ("dateSub", 2, Some(3), true, DateTime),
    ("date_sub", 2, Some(3), true, DateTime),
    ("timeStampAdd", 2, Some(2), false, DateTime),
    ("timeStampSub", 2, Some(2), false, DateTime),
    ("age", 3, Some(4), false, DateTime),
    ("timeSlot", 1, Some(2), false, DateTime),
    ("timeSlots", 2, Some(3), false, DateTime),
    ("nowInBlock", 0, Some(1), false, DateTime),
    ("tumble", 2, Some(3), false, DateTime),
    ("tumbleStart", 2, Some(3), false, DateTime),
    ("tumbleEnd", 2, Some(3), false, DateTime),
    ("hop", 3, Some(4), false, DateTime),
    ("hopStart", 3, Some(4), false, DateTime),
    ("hopEnd", 3, Some(4), false, DateTime),
    ("addSeconds", 2, Some(2), false, DateTime),
    ("addMinutes", 2, Some(2), false, DateTime),
    ("addHours", 2, Some(2), false, DateTime),
    ("addDays", 2, Some(2), false, DateTime),
    ("addWeeks", 2, Some(2), false, DateTime),
    ("addMonths", 2, Some(2), false, DateTime),
    ("addQuarters", 2, Some(2), false, DateTime),
    ("addYears", 2, Some(2), false, DateTime),
    ("subtractSeconds", 2, Some(2), false, DateTime),
    ("subtractMinutes", 2, Some(2), false, DateTime),
    ("subtractHours", 2, Some(2), false, DateTime),
    ("subtractDays", 2, Some(2), false, DateTime),
    ("subtractWeeks", 2, Some(2), false, DateTime),
    ("subtractMonths", 2, Some(2), false, DateTime),
    ("subtractQuarters", 2, Some(2), false, DateTime),
    ("subtractYears", 2, Some(2), false, DateTime),
    ("toIntervalSecond", 1, Some(1), false, DateTime),
    ("toIntervalMinute", 1, Some(1), false, DateTime),
    ("toIntervalHour", 1, Some(1), false, DateTime),
    ("toIntervalDay", 1, Some(1), false, DateTime),
    ("toIntervalWeek", 1, Some(1), false, DateTime),
    ("toIntervalMonth", 1, Some(1), false, DateTime),
    ("toIntervalQuarter", 1, Some(1), false, DateTime),
    ("toIntervalYear", 1, Some(1), false, DateTime),
    ("toYear", 1, Some(1), false, DateTime),
    ("YEAR", 1, Some(2), true, DateTime),
    ("toQuarter", 1, Some(1), false, DateTime),
    ("QUARTER", 1, Some(2), true, DateTime),
    ("toMonth", 1, Some(1), false, DateTime),
    ("MONTH", 1, Some(2), true, DateTime),
    ("toDayOfMonth", 1, Some(1), false, DateTime),
    ("DAYOFMONTH", 1, Some(2), true, DateTime),
    ("DAY", 1, Some(2), true, DateTime),
    ("toDayOfYear", 1, Some(1), false, DateTime),
    ("DAYOFYEAR", 1, Some(2), true, DateTime),
    ("toHour", 1, Some(1), false, DateTime),
    ("HOUR", 1, Some(2), true, DateTime),
    ("toMinute", 1, Some(1), false, DateTime),
    ("MINUTE", 1, Some(2), true, DateTime),
    ("toSecond", 1, Some(1), false, DateTime),
    ("SECOND", 1, Some(2), true, DateTime),
    ("toDayOfWeek", 1, Some(3), false, DateTime),
    ("DAYOFWEEK", 1, Some(3), true, DateTime),
    ("toYYYYMM", 1, Some(1), false, DateTime),
    ("toYYYYMMDD", 1, Some(1), false, DateTime),
    ("toYYYYMMDDhhmmss", 1, Some(1), false, DateTime),
    ("toISOWeek", 1, Some(1), false, DateTime),
    ("toISOYear", 1, Some(1), false, DateTime),
    ("toWeek", 1, Some(3), false, DateTime),
    ("toYearWeek", 1, Some(3), false, DateTime),
    ("monthName", 1, Some(1), false, DateTime),
    ("toUnixTimestamp", 1, Some(2), false, DateTime),
    ("toUnixTimestamp64Milli", 1, Some(1), false, DateTime),
    ("toLastDayOfMonth", 1, Some(1), false, DateTime),
    ("toLastDayOfWeek", 1, Some(2), false, DateTime),
    ("fromUnixTimestamp", 1, Some(1), false, DateTime),
    ("FROM_UNIXTIME", 1, Some(2), true, DateTime),
    ("formatDateTime", 2, Some(3), false, DateTime),
    ("DATE_FORMAT", 2, Some(3), true, DateTime),
    ("parseDateTime", 1, Some(3), false, DateTime),
    ("parseDateTimeBestEffort", 1, Some(2), false, DateTime),
    ("parseDateTimeBestEffortOrNull", 1, Some(2), false, DateTime),
    ("parseDateTime64BestEffort", 1, Some(2), false, DateTime),
    (
        "parseDateTime64BestEffortOrNull",
        1,
        Some(2),
        false,
        DateTime,
    ),
    // Conversion.
    ("toString", 1, Some(2), false, Convert),
    ("toInt", 1, Some(1), false, Convert),
    ("toFloat", 1, Some(1), false, Convert),
    ("toIntOrZero", 1, Some(1), false, Convert),
    ("toFloatOrZero", 1, Some(1), false, Convert),
    ("toIntOrNull", 1, Some(1), false, Convert),
    ("toFloatOrNull", 1, Some(1), false, Convert),
    ("toFloatOrDefault", 1, Some(2), false, Convert),
    ("toDecimal", 2, Some(2), false, Convert),
    ("toInt8", 1, Some(1), false, Convert),
    ("toInt16", 1, Some(1), false, Convert),
    ("toInt32", 1, Some(1), false, Convert),
    ("toInt64", 1, Some(1), false, Convert),
    ("toUInt8", 1, Some(1), false, Convert),
    ("toUInt16", 1, Some(1), false, Convert),
    ("toUInt32", 1, Some(1), false, Convert),
    ("toUInt64", 1, Some(1), false, Convert),
    ("toFloat32", 1, Some(1), false, Convert),
    ("toFloat64", 1, Some(1), false, Convert),
    ("toInt64OrNull", 1, Some(1), false, Convert),
    ("toInt64OrZero", 1, Some(1), false, Convert),
    ("toFloat64OrNull", 1, Some(1), false, Convert),
    ("toFloat64OrZero", 1, Some(1), false, Convert),
    ("toBool", 1, Some(1), false, Convert),
    ("toUUID", 1, Some(1), false, Convert),
    ("toJSONString", 1, Some(1), false, Convert),
    // Null handling and conditionals.
    ("coalesce", 1, None, true, Conditional),
    ("ifNull", 2, Some(2), true, Conditional),
    ("nullIf", 2, Some(2), true, Conditional),
    ("isNull", 1, Some(1), true, Conditional),
    ("isNotNull", 1, Some(1), false, Conditional),
    ("assumeNotNull", 1, Some(1), false, Conditional),
    ("toNullable", 1, Some(1), false, Conditional),
    ("if", 3, Some(3), true, Conditional),
    ("multiIf", 3, None, false, Conditional),
    ("transform", 3, Some(4), false, Conditional),
    // Strings.
    ("lower", 1, Some(1), true, Strings),
    ("lcase", 1, Some(1), true, Strings),
    ("lowerUTF8", 1, Some(1), false, Strings),
    ("upper", 1, Some(1), true, Strings),
    ("ucase", 1, Some(1), true, Strings),
    ("upperUTF8", 1, Some(1), false, Strings),
    ("concat", 2, None, true, Strings),
    ("format", 2, None, false, Strings),
    ("length", 1, Some(1), true, Strings),
    ("lengthUTF8", 1, Some(1), false, Strings),
    ("char_length", 1, Some(1), true, Strings),
    ("character_length", 1, Some(1), true, Strings),
    ("empty", 1, Some(1), false, Strings),
    ("notEmpty", 1, Some(1), false, Strings),
    ("substring", 3, Some(3), true, Strings),
    ("substr", 3, Some(3), true, Strings),
    ("mid", 3, Some(3), true, Strings),
    ("substringUTF8", 3, Some(3), false, Strings),
    ("left", 2, Some(2), true, Strings),
    ("right", 2, Some(2), true, Strings),
    ("trim", 1, Some(2), false, Strings),
    ("ltrim", 1, Some(2), false, Strings),
    ("rtrim", 1, Some(2), false, Strings),
    ("trimBoth", 1, Some(2), false, Strings),
    ("trimLeft", 1, Some(2), false, Strings),
    ("trimRight", 1, Some(2), false, Strings),
    ("replaceOne", 3, Some(3), false, Strings),
    ("replaceAll", 3, Some(3), false, Strings),
    ("replace", 3, Some(3), true, Strings),
    ("replaceRegexpOne", 3, Some(3), false, Strings),
    ("replaceRegexpAll", 3, Some(3), false, Strings),
    ("regexp_replace", 3, Some(3), true, Strings),
    ("extract", 2, Some(2), false, Strings),
    ("extractAll", 2, Some(2), false, Strings),
    ("match", 2, Some(2), false, Strings),
    ("like", 2, Some(2), false, Strings),
    ("ilike", 2, Some(2), false, Strings),
    ("notLike", 2, Some(2), false, Strings),
    ("notILike", 2, Some(2), false, Strings),
    ("position", 2, Some(3), true, Strings),
    ("locate", 2, Some(3), true, Strings),
    ("positionCaseInsensitive", 2, Some(3), false, Strings),
    ("positionUTF8", 2, Some(3), false, Strings),
    ("startsWith", 2, Some(2), false, Strings),
    ("endsWith", 2, Some(2), false, Strings),
    ("splitByChar", 2, Some(3), false, Strings),
    ("splitByString", 2, Some(3), false, Strings),
    ("concatWithSeparator", 2, None, false, Strings),
    ("concat_ws", 1, None, true, Strings),
    ("reverse", 1, Some(1), true, Strings),
    ("reverseUTF8", 1, Some(1), false, Strings),
    ("repeat", 2, Some(2), true, Strings),
    ("leftPad", 2, Some(3), false, Strings),
    ("lpad", 2, Some(3), true, Strings),
    ("rightPad", 2, Some(3), false, Strings),
    ("rpad", 2, Some(3), true, Strings),
    ("leftPadUTF8", 2, Some(3), false, Strings),
    ("rightPadUTF8", 2, Some(3), false, Strings),
    ("base64Encode", 1, Some(1), false, Strings),
    ("base64Decode", 1, Some(1), false, Strings),
    ("tryBase64Decode", 1, Some(1), false, Strings),
    ("appendTrailingCharIfAbsent", 2, Some(2), false, Strings),
    ("ascii", 1, Some(1), false, Strings),
    ("regexpExtract", 2, Some(3), false, Strings),
    ("countSubstrings", 2, Some(3), false, Strings),
    ("countSubstringsCaseInsensitive", 2, Some(3), false, Strings),
    (
        "countSubstringsCaseInsensitiveUTF8",
        2,
        Some(3),
        false,
        Strings,
    ),
    ("countMatches", 2, Some(2), false, Strings),
    ("regexpQuoteMeta", 1, Some(1), false, Strings),
    ("positionCaseInsensitiveUTF8", 2, Some(3), false, Strings),
    ("multiSearchAny", 2, Some(2), false, Strings),
    ("multiSearchFirstIndex", 2, Some(2), false, Strings),
    ("multiSearchFirstPosition", 2, Some(2), false, Strings),
    ("multiSearchAllPositions", 2, Some(2), false, Strings),
    ("multiMatchAny", 2, Some(2), false, Strings),
    ("translate", 3, Some(3), false, Strings),
    ("translateUTF8", 3, Some(3), false, Strings),
    ("isValidUTF8", 1, Some(1), false, Strings),
    ("toValidUTF8", 1, Some(1), false, Strings),
    ("encodeXMLComponent", 1, Some(1), false, Strings),
    ("decodeXMLComponent", 1, Some(1), false, Strings),
    ("alphaTokens", 1, Some(2), false, Strings),
    ("splitByRegexp", 2, Some(3), false, Strings),
    ("splitByWhitespace", 1, Some(2), false, Strings),
    ("splitByNonAlpha", 1, Some(2), false, Strings),
    // URLs.
    ("domain", 1, Some(1), false, Url),
    ("domainWithoutWWW", 1, Some(1), false, Url),
    ("topLevelDomain", 1, Some(1), false, Url),
    ("path", 1, Some(1), false, Url),
    ("pathFull", 1, Some(1), false, Url),
    ("protocol", 1, Some(1), false, Url),
    ("queryString", 1, Some(1), false, Url),
    ("fragment", 1, Some(1), false, Url),
    ("extractURLParameter", 2, Some(2), false, Url),
    ("extractURLParameters", 1, Some(1), false, Url),
    ("cutQueryString", 1, Some(1), false, Url),
    ("cutURLParameter", 2, Some(2), false, Url),
    ("cutQueryStringAndFragment", 1, Some(1), false, Url),
    ("extractURLParameterNames", 1, Some(1), false, Url),
    ("cutWWW", 1, Some(1), false, Url),
    ("cutFragment", 1, Some(1), false, Url),
    ("firstSignificantSubdomain", 1, Some(1), false, Url),
    ("cutToFirstSignificantSubdomain", 1, Some(1), false, Url),
    (
        "cutToFirstSignificantSubdomainWithWWW",
        1,
        Some(1),
        false,
        Url,
    ),
    ("queryStringAndFragment", 1, Some(1), false, Url),
    ("encodeURLComponent", 1, Some(1), false, Url),
    ("encodeURLFormComponent", 1, Some(1), false, Url),
    ("port", 1, Some(2), false, Url),
    ("netloc", 1, Some(1), false, Url),
    ("decodeURLComponent", 1, Some(1), false, Url),
    ("decodeURLFormComponent", 1, Some(1), false, Url),
    ("URLHierarchy", 1, Some(1), false, Url),
    ("URLPathHierarchy", 1, Some(1), false, Url),
    // JSON.
    ("JSONExtractString", 1, None, false, Json),
    ("JSONExtractInt", 1, None, false, Json),
    ("JSONExtractUInt", 1, None, false, Json),
    ("JSONExtractFloat", 1, None, false, Json),
    ("JSONExtractBool", 1, None, false, Json),
    ("JSONExtractRaw", 1, None, false, Json),
    ("JSONExtractArrayRaw", 1, None, false, Json),
    ("JSONExtractKeys", 1, None, false, Json),
    ("JSONExtractKeysAndValuesRaw", 1, None, false, Json),
    ("JSONHas", 1, None, false, Json),
    ("JSONLength", 1, None, false, Json),
    ("JSONExtract", 2, None, false, Json),
    ("JSONType", 1, None, false, Json),
    ("JSONArrayLength", 1, Some(1), false, Json),
    ("isValidJSON", 1, Some(1), false, Json),
    // Math.
    ("round", 1, Some(2), true, Math),
    ("floor", 1, Some(2), true, Math),
    ("ceil", 1, Some(2), true, Math),
    ("ceiling", 1, Some(2), true, Math),
    ("trunc", 1, Some(2), true, Math),
    ("truncate", 1, Some(2), true, Math),
    ("roundBankers", 1, Some(2), false, Math),
    ("moduloOrZero", 2, Some(2), false, Math),
    ("positiveModulo", 2, Some(2), false, Math),
    ("abs", 1, Some(1), true, Math),
    ("pow", 2, Some(2), true, Math),
    ("power", 2, Some(2), true, Math),
    ("sqrt", 1, Some(1), true, Math),
    ("exp", 1, Some(1), true, Math),
    ("log", 1, Some(1), true, Math),
    ("ln", 1, Some(1), true, Math),
    ("log2", 1, Some(1), true, Math),
    ("log10", 1, Some(1), true, Math),
    ("intDiv", 2, Some(2), false, Math),
    ("intDivOrZero", 2, Some(2), false, Math),
    ("modulo", 2, Some(2), false, Math),
    ("mod", 2, Some(2), true, Math),
    ("greatest", 2, Some(2), true, Math),
    ("least", 2, Some(2), true, Math),
    ("sign", 1, Some(1), true, Math),
    ("e", 0, Some(0), false, Math),
    ("pi", 0, Some(0), true, Math),
    ("exp2", 1, Some(1), false, Math),
    ("exp10", 1, Some(1), false, Math),
    ("cbrt", 1, Some(1), false, Math),
    ("roundToExp2", 1, Some(1), false, Math),
    ("width_bucket", 4, Some(4), false, Math),
    ("roundDuration", 1, Some(1), false, Math),
    ("roundAge", 1, Some(1), false, Math),
    ("formatReadableSize", 1, Some(1), false, Math),
    ("formatReadableDecimalSize", 1, Some(1), false, Math),
    ("formatReadableQuantity", 1, Some(1), false, Math),
    ("sin", 1, Some(1), false, Math),
    ("cos", 1, Some(1), false, Math),
    ("tan", 1, Some(1), false, Math),
    ("asin", 1, Some(1), false, Math),
    ("acos", 1, Some(1), false, Math),
    ("atan", 1, Some(1), false, Math),
    ("sinh", 1, Some(1), false, Math),
    ("cosh", 1, Some(1), false, Math),
    ("asinh", 1, Some(1), false, Math),
    ("acosh", 1, Some(1), false, Math),
    ("atanh", 1, Some(1), false, Math),
    ("atan2", 2, Some(2), false, Math),
    ("hypot", 2, Some(2), false, Math),
    ("log1p", 1, Some(1), false, Math),
    ("degrees", 1, Some(1), false, Math),
    ("radians", 1, Some(1), false, Math),
    ("max2", 2, Some(2), false, Math),
    ("min2", 2, Some(2), false, Math),
    ("isFinite", 1, Some(1), false, Math),
    ("isInfinite", 1, Some(1), false, Math),
    ("isNaN", 1, Some(1), false, Math),
    ("ifNotFinite", 2, Some(2), false, Math),
    ("intExp2", 1, Some(1), false, Math),
    ("intExp10", 1, Some(1), false, Math),
    ("factorial", 1, Some(1), false, Math),
    ("negate", 1, Some(1), false, Math),
    ("gcd", 2, Some(2), false, Math),
    ("lcm", 2, Some(2), false, Math),
    ("bitAnd", 2, Some(2), false, Math),
    ("bitOr", 2, Some(2), false, Math),
    ("bitXor", 2, Some(2), false, Math),
    ("bitNot", 1, Some(1), false, Math),
    ("bitShiftLeft", 2, Some(2), false, Math),
    ("bitShiftRight", 2, Some(2), false, Math),
    ("bitCount", 1, Some(1), false, Math),
    ("bitTest", 2, Some(2), false, Math),
    // Special math and bits.
    ("erf", 1, Some(1), false, Special),
    ("erfc", 1, Some(1), false, Special),
    ("lgamma", 1, Some(1), false, Special),
    ("tgamma", 1, Some(1), false, Special),
    ("roundDown", 2, Some(2), false, Special),
    ("bitRotateLeft", 2, Some(2), false, Special),
    ("bitRotateRight", 2, Some(2), false, Special),
    ("bitTestAll", 2, None, false, Special),
    ("bitTestAny", 2, None, false, Special),
    ("bitHammingDistance", 2, Some(2), false, Special),
    ("multiplyDecimal", 2, Some(3), false, Special),
    ("divideDecimal", 2, Some(3), false, Special),
    // Codecs.
    ("base58Encode", 1, Some(1), false, Encode),
    ("base58Decode", 1, Some(1), false, Encode),
    ("tryBase58Decode", 1, Some(1), false, Encode),
    ("geohashEncode", 2, Some(3), false, Encode),
    ("geohashDecode", 1, Some(1), false, Encode),
    ("geohashesInBox", 5, Some(5), false, Encode),
    ("pointInEllipses", 6, None, false, Encode),
    ("pointInPolygon", 2, None, false, Encode),
    // More strings.
    ("ngrams", 2, Some(2), false, Text),
    ("tokens", 1, Some(3), false, Text),
    ("extractAllGroups", 2, Some(2), false, Text),
    ("extractAllGroupsVertical", 2, Some(2), false, Text),
    ("extractAllGroupsHorizontal", 2, Some(2), false, Text),
    ("multiMatchAnyIndex", 2, Some(2), false, Text),
    ("multiMatchAllIndices", 2, Some(2), false, Text),
    ("multiSearchAllPositionsUTF8", 2, Some(2), false, Text),
    ("formatReadableTimeDelta", 1, Some(3), false, Text),
    ("bar", 3, Some(4), false, Text),
    ("extractTextFromHTML", 1, Some(1), false, Text),
    ("ngramDistance", 2, Some(2), false, Text),
    ("ngramSearch", 2, Some(2), false, Text),
    ("multiFuzzyMatchAny", 3, Some(3), false, Text),
    ("multiFuzzyMatchAnyIndex", 3, Some(3), false, Text),
    ("multiFuzzyMatchAllIndices", 3, Some(3), false, Text),
    // Arrays (the lambda ones are with the aggregates).
    ("arrayResize", 2, Some(3), false, Arrays),
    ("arrayAUC", 2, Some(3), false, Arrays),
    // Tuples.
    ("tuplePlus", 2, Some(2), false, Tuples),
    ("tupleMinus", 2, Some(2), false, Tuples),
    ("tupleMultiply", 2, Some(2), false, Tuples),
    ("tupleDivide", 2, Some(2), false, Tuples),
    ("tupleNegate", 1, Some(1), false, Tuples),
    ("tupleMultiplyByNumber", 2, Some(2), false, Tuples),
    ("tupleDivideByNumber", 2, Some(2), false, Tuples),
    ("tupleHammingDistance", 2, Some(2), false, Tuples),
    ("tupleToNameValuePairs", 1, Some(1), false, Tuples),
];

fn find(name: &str) -> Option<&'static (&'static str, usize, Option<usize>, bool, Group)> {
    FUNCTIONS.iter().find(|f| f.0 == name).or_else(|| {
        FUNCTIONS
            .iter()
            .find(|f| f.3 && f.0.eq_ignore_ascii_case(name))
    })
}

pub(super) fn lookup(name: &str) -> Option<FnInfo> {
    find(name).map(|&(_, min, max, _, _)| FnInfo {
        kind: FnKind::Scalar,
        min_args: min,
        max_args: max,
        params: (0, 0),
    })
}

/// Functions of the groups below that ClickHouse does not give a NULL of no type
/// (`Nullable(Nothing)`) for a NULL literal argument, or that hedgerow does not translate as
/// ClickHouse's function of that name (checked against ClickHouse 26.9, each argument in
/// turn a NULL literal): greatest/least and ifNotFinite type their NULL by the other
/// arguments, toBool gives a Nullable(Bool); now, dateTrunc, timeZoneOf, JSONExtract and
/// tokens refuse a NULL where they need a constant; PostHog compiles concat with each
/// argument through `ifNull(toString(x), '')` (never NULL), and toUUID, toInt, toFloat and
/// toDecimal to accurateCastOrNull, whose NULL has the target type; to_date is PostHog's
/// name only.
const NULL_KEEPS_TYPE: &[&str] = &[
    "concat",
    "toUUID",
    "greatest",
    "least",
    "ifNotFinite",
    "toBool",
    "now",
    "dateTrunc",
    "date_trunc",
    "timeZoneOf",
    "JSONExtract",
    "tokens",
    "to_date",
    "toInt",
    "toFloat",
    "toDecimal",
];

/// Whether `name` is a scalar function ClickHouse runs with its default NULL handling, which
/// answers a NULL literal argument with a NULL of no type (`Nullable(Nothing)`) before it
/// looks at the other arguments: what uses the result then types it as it types a NULL
/// literal (`greatest(toInt64(-7), upper(NULL))` is an Int64). Conservative: the
/// conditional, array and tuple groups are left out whole (coalesce, ifNull, isNull, if,
/// multiIf, assumeNotNull, has, indexOf, … handle NULLs themselves; the array functions that
/// answer a NULL literal array with NULL have their own list), and so are the
/// -OrNull/-OrZero/-OrDefault converters, some of which PostHog compiles to other calls,
/// besides [`NULL_KEEPS_TYPE`]. Aggregates, window functions and the functions the planner
/// builds itself (and, or, tuple, array, in, the operators) are not scalar entries here.
pub(crate) fn null_literal_gives_null(name: &str) -> bool {
    find(name).is_some_and(|&(canonical, _, _, _, group)| {
        !matches!(group, Conditional | Arrays | Tuples)
            && !NULL_KEEPS_TYPE.contains(&canonical)
            && !["OrNull", "OrZero", "OrDefault"]
                .iter()
                .any(|s| canonical.ends_with(s))
    })
}

pub(super) fn translate(
    name: &str,
    params: Vec<Expr>,
    args: Vec<Arg>,
    distinct: bool,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let &(canonical, min, max, _, group) =
        find(name).ok_or_else(|| FunctionError::Unknown(name.to_string()))?;
    if !params.is_empty() {
        return Err(invalid(format!("Function `{name}` is not parametric")));
    }
    if distinct {
        return Err(invalid(format!(
            "DISTINCT is only valid in aggregates, not in `{name}`"
        )));
    }
    let n = args.len();
    if n < min || max.is_some_and(|m| n > m) {
        return Err(FunctionError::Arity(arity_message(name, min, max, n)));
    }
    let args = args
        .into_iter()
        .map(|a| match a {
            Arg::Expr(e) => Ok(e),
            Arg::Lambda { .. } => Err(invalid(format!(
                "Function `{name}` does not take a lambda argument"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    match group {
        DateTime => datetime::translate(canonical, args, ctx),
        Convert => convert::translate(canonical, args, ctx),
        Conditional => conditional::translate(canonical, args, ctx),
        Strings => strings::translate(canonical, args, ctx),
        Url => url::translate(canonical, args, ctx),
        Json => json::translate(canonical, args, ctx),
        Math => math::translate(canonical, args, ctx),
        Special => special::translate(canonical, args, ctx),
        Encode => encode::translate(canonical, args, ctx),
        Text => text::translate(canonical, args, ctx),
        Arrays => arrays::translate(canonical, args, ctx),
        Tuples => tuples::translate(canonical, args, ctx),
    }
}

/// PostHog's wording: "expects N arguments" when the count is fixed, otherwise "at least" /
/// "at most" the bound that was missed.
fn arity_message(name: &str, min: usize, max: Option<usize>, got: usize) -> String {
    let plural = |n: usize| if n == 1 { "argument" } else { "arguments" };
    let expects = match max {
        Some(m) if m == min => format!("{min} {}", plural(min)),
        Some(m) if got > m => format!("at most {m} {}", plural(m)),
        _ => format!("at least {min} {}", plural(min)),
    };
    format!("Function `{name}` expects {expects}, found {got}")
}

pub(crate) fn invalid(msg: impl Into<String>) -> FunctionError {
    FunctionError::Invalid(msg.into())
}

/// The value of a constant string argument.
pub(crate) fn lit_str(e: &Expr) -> Option<String> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) => Some(s.clone()),
        Expr::Cast(c) => lit_str(&c.expr),
        Expr::Alias(a) => lit_str(&a.expr),
        _ => None,
    }
}

pub(crate) fn lit_i64(v: i64) -> Expr {
    Expr::Literal(ScalarValue::Int64(Some(v)), None)
}

pub(crate) fn type_of(e: &Expr, ctx: &FnContext<'_>) -> Result<DataType, FunctionError> {
    e.get_type(ctx.schema)
        .map_err(|err| invalid(format!("Cannot type argument `{e}`: {err}")))
}

pub(crate) fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}
