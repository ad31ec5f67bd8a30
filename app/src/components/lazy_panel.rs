//! A panel whose code is a chunk ([`crate::chunks`]): a quiet line while its code arrives, an
//! error with a retry when it cannot.

use leptos::prelude::*;

use crate::chunks::Loaded;
use crate::words::{Word, words};

/// How a panel's view is loaded, boxed: every panel shares one copy of [`lazy_panel`]'s code
/// (generic, it was compiled once per panel into the first load).
type PanelLoader = std::sync::Arc<
    dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Loaded> + Send>> + Send + Sync,
>;

/// Shows what `load` resolves to, with a quiet placeholder while the code arrives and, if it
/// cannot, an error with a retry. Once loaded, later mounts render at once.
pub fn lazy_panel<F, Fut>(label: Word, load: F) -> AnyView
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Loaded> + Send + 'static,
{
    panel(label, std::sync::Arc::new(move || Box::pin(load())))
}

fn panel(label: Word, load: PanelLoader) -> AnyView {
    let attempt = RwSignal::new(0u32);
    let w = words();
    // Made here, under the view's owner: the error line is built inside the async block.
    let loading = Signal::derive(move || w.fill(Word::PanelLoading, &[("panel", &w.get(label))]));
    let failed = Signal::derive(move || w.fill(Word::PanelLoadFailed, &[("panel", &w.get(label))]));
    let retry = w.text(Word::Retry);
    view! {
        <Suspense fallback=move || {
            view! {
                <p class="gb-panel-loading" role="status">
                    {loading}
                </p>
            }
        }>
            {move || {
                attempt.track();
                let load = load.clone();
                Suspend::new(async move {
                    // The panel's code, then its English (usually fetched by then: the chat
                    // asks for it once mounted). The welcome and the mark menu need none: their
                    // words are the first paint's.
                    let loaded = load().await;
                    let words = if matches!(label, Word::PanelWelcome | Word::PanelMark) {
                        Ok(())
                    } else {
                        w.panels().await
                    };
                    match (loaded, words) {
                        (Ok(panel), Ok(())) => panel,
                        _ => {
                            view! {
                                <div class="gb-panel-error" role="alert">
                                    <span>{failed}</span>
                                    <button
                                        class="gb-link-button"
                                        type="button"
                                        on:click=move |_| attempt.update(|n| *n += 1)
                                    >
                                        {retry}
                                    </button>
                                </div>
                            }
                                .into_any()
                        }
                    }
                })
            }}
        </Suspense>
    }
    .into_any()
}
