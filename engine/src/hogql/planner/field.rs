//! Names: columns, properties (promoted columns or the JSON), lazy-joined fields, and the
//! errors that say what exists.

use super::*;

impl Planner<'_> {
    /// If `parts` names a JSON column plus a path (`properties.a.b`), that column and path.
    pub(super) fn json_base(
        &self,
        parts: &[String],
        scope: &Scope<'_>,
    ) -> PResult<Option<(Expr, Vec<String>)>> {
        let (rel, rest) = match self.relation_of(parts, scope) {
            Some(x) => x,
            None => return Ok(None),
        };
        if rest.is_empty() {
            return Ok(None);
        }
        let q = Some(TableReference::bare(rel.alias.clone()));
        if rel.events
            && rest[0] == "person"
            && rest.get(1).map(String::as_str) == Some("properties")
            && !self.ctx.persons_mode.joined_properties()
        {
            return Ok(Some((
                Expr::Column(Column::new(q, "person_properties")),
                rest[2..].to_vec(),
            )));
        }
        if rest[0] == "properties" && rel.columns.contains("properties") {
            return Ok(Some((
                Expr::Column(Column::new(q, "properties")),
                rest[1..].to_vec(),
            )));
        }
        // The events' `person_properties` as a whole (with its promoted columns put back).
        if rel.events && rest.len() == 1 && rest[0] == "person_properties" {
            return Ok(Some((
                Expr::Column(Column::new(q, "person_properties")),
                vec![],
            )));
        }
        Ok(None)
    }

    /// Which relation `parts` starts in, and the parts after a qualifier.
    pub(super) fn relation_of<'s>(
        &self,
        parts: &'s [String],
        scope: &'s Scope<'_>,
    ) -> Option<(&'s Relation, &'s [String])> {
        if parts.len() > 1
            && let Some(r) = scope.relations.iter().find(|r| r.alias == parts[0])
        {
            return Some((r, &parts[1..]));
        }
        let first = &parts[0];
        let mut found = scope.relations.iter().filter(|r| {
            r.columns.contains(first) || (r.events && (EVENTS_LAZY_JOINS.contains(&first.as_str())))
        });
        let r = found.next()?;
        Some((r, parts))
    }

    /// `json` at `path`, typed by the project's property definitions.
    pub(super) fn property(&self, json: Expr, path: &[String], scope: &Scope<'_>) -> PResult<Expr> {
        let Expr::Column(c) = &json else {
            return Ok(crate::hogql::property::property(json, path));
        };
        let rel = c
            .relation
            .as_ref()
            .and_then(|q| scope.relations.iter().find(|r| r.alias == q.table()));
        let kind = match c.name.as_str() {
            "person_properties" => Some(PropertyKind::Person),
            "properties" => rel.and_then(|r| r.props),
            _ => None,
        };
        // A person property the persons snapshot holds as a typed column.
        if let ([key], Some(r)) = (path, rel)
            && !r.events
            && r.props == Some(PropertyKind::Person)
            && c.name == "properties"
            && let Some(e) = self.snapshot_person_column(
                c.relation.clone(),
                key,
                &|col| r.columns.contains(&col.name),
                scope,
            )?
        {
            return Ok(e);
        }
        // `$session_id`, `$window_id`: the events' own column where it holds the value (a
        // non-empty string), the residual where it does not (other values, and rows
        // written before the residual left them, which hold them in both).
        if let ([key], Some(r), Some(Family::Event)) = (path, rel, Family::of_json_column(&c.name))
            && r.events
            && COLUMN_PROPERTIES.contains(&key.as_str())
            && r.columns.contains(key)
        {
            let column = Expr::Column(Column::new(c.relation.clone(), key.clone()));
            let from_json = crate::hogql::property::property(json, path);
            return self.typed_property(
                core_fn::coalesce(vec![column, from_json]),
                kind,
                path,
                scope,
            );
        }
        // A promoted property: its column where the row holds it (`props_layout`, or
        // `person_props_layout`, > its position), the residual JSON where it does not (rows
        // written before).
        if let ([key], Some(r), Some(family)) = (path, rel, Family::of_json_column(&c.name))
            && r.events
        {
            let layout = self.ctx.catalog.property_layout(family);
            if let Some((idx, pc)) = layout.find(key)
                && r.columns.contains(&pc.column)
                && r.columns.contains(family.layout_column())
                && self.ctx.catalog.property_type(family.kind(), key) == Some(pc.ty)
            {
                let column = Expr::Column(Column::new(c.relation.clone(), pc.column.clone()));
                let column = match pc.ty {
                    PropertyType::DateTime => self.typed_property(column, kind, path, scope)?,
                    _ => column,
                };
                if idx < self.ctx.catalog.properties_held_by_every_row(family) {
                    return Ok(column);
                }
                let held = Expr::Column(Column::new(c.relation.clone(), family.layout_column()))
                    .gt(lit(idx as i32));
                let from_json = self.typed_property(
                    crate::hogql::property::property(json, path),
                    kind,
                    path,
                    scope,
                )?;
                return when(held, column).otherwise(from_json).map_err(df);
            }
        }
        self.typed_property(
            crate::hogql::property::property(json, path),
            kind,
            path,
            scope,
        )
    }

    /// A person property that the persons snapshot holds as a hidden typed column
    /// (`storage::layout::snapshot_person_column`), when `has` says `table` has it: that
    /// column, read as the JSON would be read (by the property's type).
    fn snapshot_person_column(
        &self,
        table: Option<TableReference>,
        key: &str,
        has: &dyn Fn(&Column) -> bool,
        scope: &Scope<'_>,
    ) -> PResult<Option<Expr>> {
        let Some(ty) = self.ctx.catalog.property_type(PropertyKind::Person, key) else {
            return Ok(None);
        };
        let col = Column::new(
            table,
            crate::storage::layout::snapshot_person_column(key, ty),
        );
        if !has(&col) {
            return Ok(None);
        }
        let e = Expr::Column(col);
        Ok(Some(match ty {
            PropertyType::DateTime => {
                self.typed_property(e, Some(PropertyKind::Person), &[key.to_owned()], scope)?
            }
            _ => e,
        }))
    }

    /// `json` as a whole: for the events table's `properties` and `person_properties`, the
    /// residual JSON with the promoted columns put back (`storage::layout::rebuild`), the
    /// text as it was written.
    pub(super) fn whole_properties(&self, json: Expr, scope: &Scope<'_>) -> Expr {
        let Expr::Column(c) = &json else {
            return json;
        };
        let rel = c
            .relation
            .as_ref()
            .and_then(|q| scope.relations.iter().find(|r| r.alias == q.table()));
        let (Some(rel), Some(family)) = (rel, Family::of_json_column(&c.name)) else {
            return json;
        };
        if !rel.events {
            return json;
        }
        let layout = self.ctx.catalog.property_layout(family);
        let mut cols: Vec<(String, Expr)> = layout
            .columns
            .iter()
            .filter(|pc| rel.columns.contains(&pc.column))
            .map(|pc| {
                (
                    pc.key.clone(),
                    Expr::Column(Column::new(c.relation.clone(), pc.column.clone())),
                )
            })
            .collect();
        if family == Family::Event {
            cols.extend(
                COLUMN_PROPERTIES
                    .iter()
                    .filter(|k| rel.columns.contains(**k))
                    .map(|k| {
                        let col = Expr::Column(Column::new(c.relation.clone(), *k));
                        (k.to_string(), col)
                    }),
            );
        }
        if cols.is_empty() {
            return json;
        }
        crate::hogql::property::rebuild_properties(json, cols)
    }

    /// A property's string value read as its definition's type, as PostHog does: Numeric
    /// through `toFloat`, DateTime through `toDateTime`, Boolean as `'true'` → true,
    /// `'false'` → false, anything else NULL. Only top-level properties have definitions.
    pub(super) fn typed_property(
        &self,
        value: Expr,
        kind: Option<PropertyKind>,
        path: &[String],
        scope: &Scope<'_>,
    ) -> PResult<Expr> {
        let (Some(kind), [name]) = (kind, path) else {
            return Ok(value);
        };
        let cast_with = |f: &str| {
            functions::translate(
                f,
                vec![],
                vec![Arg::Expr(value.clone())],
                false,
                &self.fn_ctx(&scope.schema),
            )
            .map_err(|e| PlanError::new(e.to_string(), None))
        };
        match self.ctx.catalog.property_type(kind, name) {
            None | Some(PropertyType::String) => Ok(value),
            Some(PropertyType::Numeric) => cast_with("toFloat"),
            Some(PropertyType::DateTime) => cast_with("toDateTime"),
            Some(PropertyType::Boolean) => when(value.clone().eq(lit("true")), lit(true))
                .when(value.eq(lit("false")), lit(false))
                .otherwise(lit(ScalarValue::Boolean(None)))
                .map_err(df),
        }
    }

    pub(super) fn field(&self, parts: &[String], span: Span, scope: &Scope<'_>) -> PResult<Expr> {
        let first = &parts[0];
        if parts.len() == 1 && scope.lambda.contains(first) {
            return Ok(Expr::Column(Column::from_name(first.clone())));
        }
        if parts.len() == 1 && scope.extra.contains(first) {
            return Ok(Expr::Column(Column::from_name(first.clone())));
        }
        if parts.len() == 1
            && let Some(def) = scope.aliases.get(first)
            && !scope.expanding.borrow().contains(first)
        {
            // An alias that is just the column of the same name is that column.
            let same_column = matches!(&def.kind, ExprKind::Field(p)
                if p.last() == Some(first)
                    && (p.len() == 1 || (p.len() == 2 && scope.relations.iter().any(|r| r.alias == p[0]))));
            if !same_column {
                scope.expanding.borrow_mut().push(first.clone());
                let r = self.expr(def, scope);
                scope.expanding.borrow_mut().pop();
                return r;
            }
        }
        if let Some((json, path)) = self.json_base(parts, scope)? {
            if path.is_empty() {
                return Ok(self.whole_properties(json, scope));
            }
            return self.property(json, &path, scope);
        }
        let Some((rel, rest)) = self.relation_of(parts, scope) else {
            return err(self.unknown_field(parts, scope), span);
        };
        let q = Some(TableReference::bare(rel.alias.clone()));
        let name = &rest[0];
        if rel.events && EVENTS_LAZY_JOINS.contains(&name.as_str()) && !rel.columns.contains(name) {
            let Some(sub) = rest.get(1) else {
                return err(
                    format!(
                        "`{name}` is a table; name one of its fields, e.g. `{name}.properties`"
                    ),
                    span,
                );
            };
            // person.id is the event's person_id; the other person fields come from the
            // persons table.
            if name == "person" && sub == "id" {
                return Ok(Expr::Column(Column::new(q, "person_id")));
            }
            let Some(jq) = rel.lazy.get(name.as_str()) else {
                return err(format!("internal: join `{name}` was not prepared"), span);
            };
            let jq = Some(TableReference::bare(jq.clone()));
            if sub == "properties" {
                let json = Expr::Column(Column::new(jq.clone(), "properties"));
                if rest.len() <= 2 {
                    return Ok(json);
                }
                if let ("person", [key]) = (name.as_str(), &rest[2..])
                    && let Some(e) = self.snapshot_person_column(
                        jq.clone(),
                        key,
                        &|col| scope.schema.has_column(col),
                        scope,
                    )?
                {
                    return Ok(e);
                }
                let kind = match name.as_str() {
                    "person" => Some(PropertyKind::Person),
                    g => g
                        .strip_prefix("group_")
                        .and_then(|i| i.parse().ok())
                        .map(PropertyKind::Group),
                };
                let value = crate::hogql::property::property(json, &rest[2..]);
                return self.typed_property(value, kind, &rest[2..], scope);
            }
            if rest.len() > 2 {
                return err(
                    format!("`{}` has no field `{}`", rest[..2].join("."), rest[2]),
                    span,
                );
            }
            let col = Expr::Column(Column::new(jq, sub));
            let joined_schema = &scope.schema;
            if !joined_schema.has_column(
                &col.try_as_col()
                    .cloned()
                    .unwrap_or_else(|| Column::from_name("")),
            ) {
                return err(format!("`{name}` has no field `{sub}`"), span);
            }
            return Ok(col);
        }
        if !rel.columns.contains(name) {
            return err(self.unknown_field(parts, scope), span);
        }
        let col = Expr::Column(Column::new(q, name));
        if rest.len() > 1 {
            return err(
                format!(
                    "`{}` is not an object; cannot read `{}` from it",
                    name,
                    rest[1..].join(".")
                ),
                span,
            );
        }
        Ok(col)
    }

    pub(super) fn unknown_field(&self, parts: &[String], scope: &Scope<'_>) -> String {
        let name = parts.join(".");
        let mut known: Vec<&str> = scope
            .relations
            .iter()
            .flat_map(|r| r.visible.iter().map(String::as_str))
            .collect();
        known.sort();
        known.dedup();
        if known.is_empty() {
            format!("Unknown field `{name}`")
        } else {
            format!("Unknown field `{name}`. Fields here: {}", known.join(", "))
        }
    }
}
