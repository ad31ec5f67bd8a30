//! Code loaded on first use (wasm chunks): the machinery, apart from what is loaded. The first
//! paint does not need the rare panels ("View context", the session drawer, the topic panel, the
//! compression settings, the draft's preview), the markdown renderer or the meter's arithmetic,
//! so the chat's first download leaves them out; each declares its own chunk beside its code with
//! [`split_fn`] or [`lazy_panel_fn`].
//!
//! Each is a function marked `wasm_split(…, fallible)` (with the `split` feature): on wasm32,
//! `cargo xtask build` cuts its code (and whatever only it uses) out of the main module into a
//! chunk fetched the first time the function is called; natively it is called directly. A chunk
//! that cannot be fetched is a visible error with a retry in the panel's place; the chat goes on.

use leptos::prelude::*;
use leptos::wasm_split::SplitLoaderError;

/// A chunk's code could not be fetched: offline, or the server was updated twice since the page
/// loaded (each build keeps the chunks of the one before it).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("this part of the chat could not be loaded")]
pub struct ChunkLoadError;

impl From<SplitLoaderError> for ChunkLoadError {
    fn from(_: SplitLoaderError) -> Self {
        Self
    }
}

/// The result of loading a panel: its view, or why it is missing.
pub type Loaded = Result<AnyView, ChunkLoadError>;

/// First pause before fetching a chunk again after a failure; doubled each time.
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(2);
/// Longest pause between attempts.
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(60);

/// What `load` resolves to (a function in a chunk, say), fetched now in the background: `None`
/// until it has come; a failure is tried again after a pause that grows to a minute.
pub fn load_in_background<T, F, Fut>(load: F) -> RwSignal<Option<T>>
where
    T: Send + Sync + 'static,
    F: Fn() -> Fut + Copy + 'static,
    Fut: Future<Output = Result<T, ChunkLoadError>> + 'static,
{
    let loaded = RwSignal::new(None);
    attempt(load, loaded, RETRY_FIRST);
    loaded
}

fn attempt<T, F, Fut>(load: F, loaded: RwSignal<Option<T>>, pause: std::time::Duration)
where
    T: Send + Sync + 'static,
    F: Fn() -> Fut + Copy + 'static,
    Fut: Future<Output = Result<T, ChunkLoadError>> + 'static,
{
    leptos::task::spawn_local(async move {
        // The chat that wanted it is gone: stop.
        if loaded.is_disposed() {
            return;
        }
        match load().await {
            Ok(value) => loaded.set(Some(value)),
            Err(ChunkLoadError) => set_timeout(
                move || attempt(load, loaded, (pause * 2).min(RETRY_MAX)),
                pause,
            ),
        }
    });
}

/// Declares `pub async fn $name(args) -> Result<$out, ChunkLoadError>` answering `$body`, and
/// `pub async fn $preload()` that only fetches its code. With the crate's `split` feature (the
/// chat's wasm) `$name` is a `wasm_split` function, its code and what only it reaches cut into a
/// chunk; without it (the meter's wasm, native builds) it runs directly, so a module that never
/// calls it does not carry the chunk's exports and everything they reach.
macro_rules! split_fn {
    (
        $(#[$doc:meta])*
        $name:ident / $preload:ident ($($arg:ident: $ty:ty),* $(,)?) -> $out:ty => $body:expr
    ) => {
        $(#[$doc])*
        #[cfg(feature = "split")]
        #[::leptos::wasm_split::wasm_split(
            $name,
            wasm_split_path = ::leptos::wasm_split,
            fallible,
            preload($preload)
        )]
        pub fn $name($($arg: $ty),*) -> Result<$out, $crate::chunks::ChunkLoadError> {
            Ok($body)
        }

        $(#[$doc])*
        #[cfg(not(feature = "split"))]
        pub async fn $name($($arg: $ty),*) -> Result<$out, $crate::chunks::ChunkLoadError> {
            Ok($body)
        }

        /// Fetches the code (nothing to fetch when the module is not split).
        #[cfg(not(feature = "split"))]
        #[allow(dead_code)]
        pub async fn $preload() -> Result<(), ::leptos::wasm_split::SplitLoaderError> {
            Ok(())
        }
    };
}
pub(crate) use split_fn;

/// A panel rendering `$view`, loaded by [`split_fn`] (show it with [`lazy_panel`]).
macro_rules! lazy_panel_fn {
    (
        $(#[$doc:meta])*
        $name:ident / $preload:ident ($($arg:ident: $ty:ty),* $(,)?) => $view:expr
    ) => {
        $crate::chunks::split_fn! {
            $(#[$doc])*
            $name / $preload ($($arg: $ty),*) -> ::leptos::prelude::AnyView => $view.into_any()
        }
    };
}
pub(crate) use lazy_panel_fn;

/// Starts fetching a panel's code when the user shows they may open it (pointer over, or focus
/// on, its button), so it is usually there by the click. A failure is left to the opening, which
/// tries again and shows it.
pub fn prefetch<F>(preload: impl FnOnce() -> F)
where
    F: Future<Output = Result<(), SplitLoaderError>> + 'static,
{
    let load = preload();
    leptos::task::spawn_local(async move {
        let _ = load.await;
    });
}
