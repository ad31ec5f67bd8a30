//! The REST routes in OpenAPI 3.1, generated from the code: each handler's `#[utoipa::path]`
//! (method, path, body, answers; its doc comment is the description) and the body types' derived
//! schemas, collected as the routes are registered (`utoipa_axum::routes!`), so a route cannot be
//! served without being described. Served as `GET /openapi.json`, and readable at `GET /api/docs`.

use std::fmt::Write;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderValue, header};
use axum::routing::get;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBody;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, ObjectBuilder, OpenApi, Ref, RefOr, Required, ResponseBuilder, Type,
};

/// The description's frame: what the routes have in common. The routes come from the router.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Glassbox",
        description = "REST twin of the WebSocket protocol (docs/protocol.md): sessions, chat \
            (JSON or server-sent events), context sets, items, topics, files, approvals, and \
            OpenAI-compatible embeddings. Every error is `{\"error\": {code, message, retryable, …}}` \
            with the HTTP status its code maps to. Browsers may call it only from allowed origins \
            (`GLASSBOX_ALLOWED_ORIGINS`).",
    ),
    components(schemas(glassbox_core::wire::ErrorBody))
)]
pub struct ApiDoc;

/// What a path's parameters mean, by name.
const PATH_PARAMETERS: &[(&str, &str)] = &[
    ("id", "The session's id"),
    ("message_id", "A message of the session"),
    ("file_id", "A file uploaded to the session"),
    ("approvalId", "A tool call waiting for the user's answer"),
];

/// Adds what every route shares to the description the router collected: the two ways a caller
/// is known (the session's token; a verified user's headers), each path's parameters, and the
/// typed error every route may answer.
pub fn finish(api: &mut OpenApi) {
    let components = api.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "session_token",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "The session's token, given once when the session is created",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        "verified_user",
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "X-Glassbox-User-Hash",
            "With X-Glassbox-User: the user id and its HMAC-SHA256 under GLASSBOX_IDENTITY_SECRET, \
             made by the host's backend (docs/embedding.md)",
        ))),
    );
    for (path, item) in api.paths.paths.iter_mut() {
        let names: Vec<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        for operation in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            add_path_parameters(operation, &names);
            add_errors(operation);
        }
    }
}

fn add_path_parameters(operation: &mut Operation, names: &[&str]) {
    let parameters = operation.parameters.get_or_insert_with(Vec::new);
    for name in names {
        let description = PATH_PARAMETERS
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| *d);
        parameters.insert(
            0,
            ParameterBuilder::new()
                .name(*name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .description(description)
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .build(),
        );
    }
}

fn add_errors(operation: &mut Operation) {
    for (status, description) in [
        (
            "4XX",
            "Refused: a typed error saying why (its code names the status)",
        ),
        (
            "5XX",
            "Failed: a typed error; `retryable` says whether to try again",
        ),
    ] {
        let response = ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build();
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert(RefOr::T(response));
    }
}

/// This page's policy: its own inline style, nothing else.
const DOCS_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// The finished description, written once: `GET /openapi.json` and `GET /api/docs` (the same as
/// a page: every route, its parameters, body and answers).
pub fn routes<S: Clone + Send + Sync + 'static>(api: &OpenApi) -> Router<S> {
    let json = Bytes::from(api.to_json().unwrap_or_default());
    let page = Bytes::from(render(api));
    Router::new()
        .route(
            "/openapi.json",
            get(move || async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    )],
                    json,
                )
            }),
        )
        .route(
            "/api/docs",
            get(move || async move {
                (
                    [
                        (
                            header::CONTENT_TYPE,
                            HeaderValue::from_static("text/html; charset=utf-8"),
                        ),
                        (
                            header::CONTENT_SECURITY_POLICY,
                            HeaderValue::from_static(DOCS_CSP),
                        ),
                    ],
                    page,
                )
            }),
        )
}

/// A schema as the page names it: the component it refers to, else its kind.
fn schema_name<T>(schema: &RefOr<T>) -> String {
    match schema {
        RefOr::Ref(r) => r
            .ref_location
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        RefOr::T(_) => "object".to_owned(),
    }
}

fn body_line(body: &RequestBody) -> String {
    body.content
        .iter()
        .map(|(media, content)| {
            let schema = content.schema.as_ref().map_or("bytes".into(), schema_name);
            format!("{schema} ({media})")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The page: HTML, every text from the description escaped.
pub fn render(api: &OpenApi) -> String {
    // Every text goes into element content (never an attribute): `<`, `>` and `&` escaped.
    let e = |s: &str| html_escape::encode_text(s).into_owned();
    let mut html = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Glassbox API</title>\
         <style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}\
         code,.m{font-family:ui-monospace,monospace}.m{display:inline-block;min-width:4.5rem;font-weight:700}\
         section{border-top:1px solid #ddd;padding:.5rem 0}p{margin:.3rem 0}ul{margin:.2rem 0}</style></head><body>",
    );
    let _ = write!(
        html,
        "<h1>{} {}</h1><p>{}</p><p>Machine-readable: <a href=\"/openapi.json\">/openapi.json</a> (OpenAPI 3.1).</p>",
        e(&api.info.title),
        e(&api.info.version),
        e(api.info.description.as_deref().unwrap_or_default()),
    );
    for (path, item) in &api.paths.paths {
        for (method, operation) in [
            ("GET", &item.get),
            ("POST", &item.post),
            ("PUT", &item.put),
            ("PATCH", &item.patch),
            ("DELETE", &item.delete),
        ] {
            let Some(op) = operation else { continue };
            let _ = write!(
                html,
                "<section><p><span class=\"m\">{method}</span> <code>{}</code></p>",
                e(path)
            );
            for text in [&op.summary, &op.description].into_iter().flatten() {
                let _ = write!(html, "<p>{}</p>", e(text));
            }
            if let Some(parameters) = op.parameters.as_ref().filter(|p| !p.is_empty()) {
                html.push_str("<ul>");
                for p in parameters {
                    let _ = write!(
                        html,
                        "<li><code>{}</code> — {}</li>",
                        e(&p.name),
                        e(p.description.as_deref().unwrap_or_default())
                    );
                }
                html.push_str("</ul>");
            }
            if let Some(body) = &op.request_body {
                let _ = write!(html, "<p>Body: {}</p>", e(&body_line(body)));
            }
            html.push_str("<ul>");
            for (status, response) in &op.responses.responses {
                let description = match response {
                    RefOr::T(r) => r.description.clone(),
                    RefOr::Ref(r) => schema_name::<()>(&RefOr::Ref(r.clone())),
                };
                let _ = write!(html, "<li>{} — {}</li>", e(status), e(&description));
            }
            html.push_str("</ul></section>");
        }
    }
    html.push_str("</body></html>");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::openapi::path::{OperationBuilder, PathItemBuilder};
    use utoipa::openapi::{HttpMethod, InfoBuilder, OpenApiBuilder, PathsBuilder};

    #[test]
    fn the_page_escapes_what_it_shows() {
        let api = OpenApiBuilder::new()
            .info(
                InfoBuilder::new()
                    .title("<script>alert(1)</script>")
                    .version("1")
                    .build(),
            )
            .paths(
                PathsBuilder::new().path(
                    "/x/{id}",
                    PathItemBuilder::new()
                        .operation(
                            HttpMethod::Get,
                            OperationBuilder::new()
                                .summary(Some("a \"quoted\" <b>summary</b>"))
                                .build(),
                        )
                        .build(),
                ),
            )
            .build();
        let html = render(&api);
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains("a \"quoted\" &lt;b&gt;summary&lt;/b&gt;"),
            "{html}"
        );
        assert!(html.contains("<code>/x/{id}</code>"), "{html}");
    }
}
