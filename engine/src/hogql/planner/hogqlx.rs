//! HogQLX tags as values. PostHog's resolver turns a tag it renders itself (its HTML-like
//! tags and its components, such as `<strong>` and `<Sparkline>`) into a tuple its UI
//! draws: `('__hx_tag', name, attribute, value, …, 'children', (child, …))`, with arrays
//! and tuples inside attribute values turned into tuples the same way and nested tags into
//! their own tuples. A tag naming a query (`<HogQLQuery query='…' />`) runs that query.

use crate::hogql::ast::{self, Expr, ExprKind, Literal, Span, Tag, TagChild, TagValue};

/// PostHog's components and the HTML-like tags its UI renders (a tag of another name names
/// a query).
const RENDERED: &[&str] = &[
    "Sparkline",
    "RecordingButton",
    "ExplainCSPReport",
    "a",
    "blink",
    "marquee",
    "redacted",
    "em",
    "strong",
    "span",
    "div",
    "p",
    "pre",
    "code",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "ul",
    "ol",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "blockquote",
    "hr",
    "b",
    "i",
    "u",
];

/// Whether PostHog renders a tag of this name (rather than running it as a query).
pub(super) fn is_rendered(name: &str) -> bool {
    RENDERED.contains(&name)
}

/// The tuple a rendered tag stands for.
pub(super) fn to_tuple(tag: &Tag, span: Span) -> Expr {
    let s = |v: &str| Expr::new(ExprKind::Literal(Literal::String(v.to_string())), span);
    let mut items = vec![s("__hx_tag"), s(&tag.name)];
    for (name, value) in &tag.attrs {
        items.push(s(name));
        items.push(match value {
            TagValue::String(v) => s(v),
            TagValue::Expr(e) => value_of(e),
            TagValue::Flag => Expr::new(ExprKind::Literal(Literal::Bool(true)), span),
        });
    }
    if !tag.children.is_empty() {
        items.push(s("children"));
        let children = tag
            .children
            .iter()
            .map(|c| match c {
                TagChild::Text(t) => s(t),
                TagChild::Expr(e) => value_of(e),
                TagChild::Tag(t) => to_tuple(t, span),
            })
            .collect();
        items.push(Expr::new(ExprKind::Tuple(children), span));
    }
    Expr::new(ExprKind::Tuple(items), span)
}

/// An attribute's or child's expression as PostHog hands it to the UI: arrays and tuples as
/// tuples of their converted items, tags as their tuples, anything else as it is.
fn value_of(e: &Expr) -> Expr {
    match &e.kind {
        ExprKind::Tag(t) if is_rendered(&t.name) => to_tuple(t, e.span),
        ExprKind::Array(xs) | ExprKind::Tuple(xs) => {
            Expr::new(ExprKind::Tuple(xs.iter().map(value_of).collect()), e.span)
        }
        _ => e.clone(),
    }
}

/// The query a `<HogQLQuery query='…' />` tag names, parsed; None for any other tag.
pub(super) fn hogql_query(tag: &Tag) -> Option<Result<ast::Query, String>> {
    if tag.name != "HogQLQuery" {
        return None;
    }
    let text = tag.attrs.iter().find_map(|(n, v)| match (n.as_str(), v) {
        ("query", TagValue::String(q)) => Some(q.clone()),
        _ => None,
    });
    Some(match text {
        Some(q) => crate::hogql::parser::parse_query(&q)
            .map_err(|e| format!("The query of <HogQLQuery query='…' /> does not parse: {e}")),
        None => Err("<HogQLQuery /> needs a query='…' attribute holding the HogQL text".into()),
    })
}
