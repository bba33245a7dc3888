//! Authentication and scopes for everything under `/api/`, as one layer.
//!
//! A route declares its scope with [`scoped`]; the layer reads `Authorization: Bearer
//! <personal key>` and asks the engine ([`Engine::authorize`]) whether the key holds the
//! scope and, when the path names a project, may see it (an unseen project is a 404, as
//! PostHog answers). Handlers get a [`Caller`].
//!
//! [`Engine::authorize`]: hedgerow_engine::Engine::authorize

use axum::extract::{RawPathParams, Request, State};
use axum::http::header;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use axum::routing::MethodRouter;
use hedgerow_engine::error::ErrorKind;
use hedgerow_engine::meta::{KeyGrant, Project};
use hedgerow_engine::model::TeamId;

use super::App;
use crate::error::ApiError;

/// Who is calling, and the project the path names (if any), already checked.
#[derive(Debug, Clone)]
pub struct Caller {
    pub grant: KeyGrant,
    /// The project the path names, if it names one.
    pub project: Option<Project>,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = ApiError;
    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::internal("route has no scope declared"))
    }
}

impl Caller {
    /// The project of a `/api/projects/{project_id}/…` route.
    pub fn project(&self) -> Result<&Project, ApiError> {
        self.project
            .as_ref()
            .ok_or_else(|| ApiError::internal("route has no project in its path"))
    }

    /// The id of the project of a `/api/projects/{project_id}/…` route.
    pub fn team(&self) -> Result<TeamId, ApiError> {
        self.project().map(|p| p.id)
    }
}

/// Wraps a method router so each request needs a personal key with `scope`.
pub(super) fn scoped(
    app: &App,
    scope: &'static str,
    route: MethodRouter<App>,
) -> MethodRouter<App> {
    route.route_layer(from_fn_with_state((app.clone(), scope), check))
}

fn unauthorized(code: &'static str, detail: &str) -> ApiError {
    ApiError::new(ErrorKind::Unauthorized, code, detail)
}

async fn check(
    State((app, scope)): State<(App, &'static str)>,
    params: RawPathParams,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .map(str::trim);
    let secret = match header {
        None => {
            return Err(unauthorized(
                "not_authenticated",
                "Authentication credentials were not provided: send Authorization: Bearer <personal API key>.",
            ));
        }
        Some(h) => match h.split_once(' ') {
            Some((scheme, key))
                if scheme.eq_ignore_ascii_case("bearer") && !key.trim().is_empty() =>
            {
                key.trim()
            }
            _ => {
                return Err(unauthorized(
                    "authentication_failed",
                    "The Authorization header must be 'Bearer <personal API key>'.",
                ));
            }
        },
    };
    let project = params
        .iter()
        .find(|(k, _)| *k == "project_id")
        .map(|(_, raw)| raw);
    let access = app.engine.authorize(secret, scope, project)?;
    req.extensions_mut().insert(Caller {
        grant: access.grant,
        project: access.project,
    });
    Ok(next.run(req).await)
}
