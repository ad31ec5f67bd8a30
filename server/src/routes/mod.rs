//! The HTTP surface: `app(state)` builds the router that `main` serves and tests call.

mod embeddings;
mod extract;
mod health;
mod rest;
mod ws;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::routing::{get, post, put};
use tower::Layer;
use tower_http::compression::CompressionLayer;
use tower_http::cors::{Any, CorsLayer};
use tower_http::services::{ServeDir, ServeFile};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

use crate::state::AppState;

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
    let widget = Router::new()
        .nest_service("/vocab", vocab)
        .fallback_service(widget_files);
    let public = ServeDir::new(&state.config.public_dir)
        .fallback(ServeFile::new(state.config.public_dir.join("index.html")));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/ws", get(ws::upgrade))
        .route("/api/chat", post(rest::chat))
        .route("/api/sessions", post(rest::create_session))
        .route(
            "/api/sessions/{id}",
            get(rest::session_messages).patch(rest::patch_session),
        )
        .route("/api/sessions/{id}/settings", put(rest::update_settings))
        .route("/v1/embeddings", post(embeddings::create))
        .nest("/widget", widget)
        .fallback_service(public)
        .layer(CompressionLayer::new())
        // Sessions are guarded by bearer tokens, never cookies, so any origin may embed the widget.
        .layer(
            CorsLayer::new()
                .allow_origin(Any)
                .allow_methods(Any)
                .allow_headers(Any),
        )
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
