//! The HTTP surface: `app(state)` builds the router that `main` serves and tests call.

mod client_addr;
mod embeddings;
mod extract;
mod files;
mod health;
mod heartbeat;
mod metrics;
mod openapi;
mod origin;
mod rest;
mod session;
mod user_sessions;
mod ws;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware;
use axum::routing::get;
use tower::Layer;
use tower_http::compression::CompressionLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::services::{ServeDir, ServeFile};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

/// The demo pages' Content-Security-Policy: scripts only from this server (and WebAssembly), the
/// token worker from a blob, connections only back here, no framing, no plugins. Styles may be
/// inline (the pages' own `<style>` blocks and the meter's bar width).
pub const DEMO_CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data: https:; connect-src 'self'; \
    worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; \
    frame-ancestors 'none'";

/// The demo pages in `dir`, sent with [`DEMO_CSP`]; a path with no file gets `dir/index.html`.
fn demo_pages(
    dir: &std::path::Path,
) -> tower_http::set_header::SetResponseHeader<
    tower_http::services::ServeDir<tower_http::services::ServeFile>,
    HeaderValue,
> {
    SetResponseHeaderLayer::overriding(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(DEMO_CSP),
    )
    .layer(ServeDir::new(dir).fallback(ServeFile::new(dir.join("index.html"))))
}

/// Tells every tab of the hub's session its context window again, after a change of its
/// settings that moves it (the longest reply of its overrides).
async fn publish_context_info(
    state: &AppState,
    hub: &crate::hub::Hub,
    model: &str,
) -> Result<(), crate::error::AppError> {
    let settings = state.store.settings(&hub.session_id).await?;
    let info = state.windows.info_with(&hub.session_id, model, &settings);
    hub.publish(glassbox_core::wire::ServerEvent::ContextInfo(info));
    Ok(())
}

/// The chat's wasm chunks are in a folder named for their build (`<module>_lazy-<8 hex>/`, written
/// by `cargo xtask build`): what is in one never changes, so it is cached for a year and a page
/// load does not revalidate them one by one.
async fn cache_build_chunks(
    request: axum::extract::Request,
    next: middleware::Next,
) -> axum::response::Response {
    let immutable = in_build_folder(request.uri().path());
    let mut response = next.run(request).await;
    if immutable && response.status().is_success() {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=31536000, immutable"),
        );
    }
    response
}

/// Whether a path is inside a folder named for a build (`…_lazy-<8 hex>/…`).
fn in_build_folder(path: &str) -> bool {
    let mut folders = path.split('/').rev().skip(1);
    folders.any(|folder| glassbox_core::chunk_folder::module_of(folder).is_some())
}

/// The whole application router.
pub fn app(state: AppState) -> Router {
    // Vocabularies never change under a name (a new format gets a new file name): cached for a
    // year, so a second page load fetches nothing.
    let vocab = SetResponseHeaderLayer::overriding(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    )
    .layer(
        ServeDir::new(state.config.widget_dir.join("vocab"))
            .precompressed_br()
            .precompressed_gzip(),
    );
    // `cargo xtask build` writes .br and .gz beside each file; those are sent when accepted.
    // Revalidated on every load: a rebuilt widget is picked up at once, an unchanged one costs a 304.
    let widget_files = SetResponseHeaderLayer::overriding(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    )
    .layer(
        ServeDir::new(&state.config.widget_dir)
            .precompressed_br()
            .precompressed_gzip(),
    );
    // The widget's files are public and loaded by pages anywhere (module scripts and fetches need
    // CORS); what they talk to is the API, which checks origins.
    let widget = Router::new()
        .nest_service("/vocab", vocab)
        .fallback_service(widget_files)
        .layer(middleware::from_fn(cache_build_chunks))
        .layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::any())
                .allow_methods([Method::GET, Method::HEAD]),
        );
    // Browsers may call the API only from allowed pages: CORS answers only those (with the two
    // headers we read), and a request from any other page is refused before its handler runs.
    let allowed = state.config.allowed_origins.clone();
    let cors = CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, parts| {
            let host = parts
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok());
            origin.to_str().is_ok_and(|o| allowed.allows(o, host))
        }))
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static(extract::USER_HEADER),
            HeaderName::from_static(extract::USER_HASH_HEADER),
        ])
        .expose_headers([header::RETRY_AFTER, header::CONTENT_DISPOSITION])
        .max_age(std::time::Duration::from_secs(600));
    // The REST routes, each registered with its description (`openapi`): the router and
    // /openapi.json cannot disagree.
    let (api, mut described) = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(rest::chat))
        .routes(routes!(rest::create_session, user_sessions::list))
        .routes(routes!(user_sessions::rename))
        .routes(routes!(
            rest::session_messages,
            rest::patch_session,
            rest::delete_session
        ))
        .routes(routes!(rest::update_settings))
        .routes(routes!(files::upload))
        .routes(routes!(files::download, files::delete))
        .routes(routes!(rest::topics))
        .routes(routes!(rest::items, rest::add_item, rest::remove_item))
        .routes(routes!(rest::set_overrides))
        .routes(routes!(rest::approve))
        .routes(routes!(rest::preview))
        .routes(routes!(rest::set_filter))
        .routes(routes!(rest::set_similarity_mode))
        .routes(routes!(rest::mark_message))
        .routes(routes!(rest::stop_reply))
        .routes(routes!(embeddings::create))
        .split_for_parts();
    let api = api
        .route_layer(middleware::from_fn_with_state(state.clone(), origin::guard))
        .layer(cors);
    let (health, health_described) = OpenApiRouter::new()
        .routes(routes!(health::healthz))
        .split_for_parts();
    described.merge(health_described);
    openapi::finish(&mut described);
    let mut router = Router::new()
        .merge(health)
        .route("/ws", get(ws::upgrade))
        .merge(api)
        .merge(openapi::routes(&described))
        .nest("/widget", widget);
    if let Some(dir) = &state.config.public_dir {
        // The React demo (built by `cargo xtask build` into public/react/) routes in the browser:
        // its paths all answer with its own page.
        router = router
            .nest_service("/react", demo_pages(&dir.join("react")))
            .fallback_service(demo_pages(dir));
    }
    router
        .layer(CompressionLayer::new())
        // Everything we send is what its Content-Type says, and no page address leaks to others.
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("strict-origin-when-cross-origin"),
        ))
        // One id per request in every log line written while it is handled (and, for the
        // WebSocket, while its connection lives).
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &axum::http::Request<_>| {
                tracing::info_span!(
                    "request",
                    request_id = %uuid::Uuid::new_v4(),
                    method = %req.method(),
                    path = %req.uri().path(),
                )
            }),
        )
        .with_state(state)
}

/// The metrics listener's router: `GET /metrics` in Prometheus' text format, nothing else. It is
/// served on its own address (`GLASSBOX_METRICS_ADDR`), never beside the public routes.
pub fn metrics_app(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics::render))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::in_build_folder;

    #[test]
    fn only_files_in_build_folders_are_immutable() {
        assert!(in_build_folder("/glassbox_widget_lazy-0123abcd/load.js"));
        assert!(in_build_folder(
            "/npm/glassbox-chat/glassbox_widget_lazy-89ABCDEF/chunk_3.wasm"
        ));
        assert!(!in_build_folder("/glassbox_widget_lazy-0123abcd"));
        assert!(!in_build_folder("/glassbox_widget_lazy/load.js"));
        assert!(!in_build_folder("/glassbox_widget_lazy-0123abc/load.js"));
        assert!(!in_build_folder("/glassbox_widget_lazy-notahash/load.js"));
        assert!(!in_build_folder("/glassbox_widget.js"));
        assert!(!in_build_folder("/x/_lazy-0123abcd/load.js"));
    }
}
