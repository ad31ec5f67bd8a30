//! Renders a message's markdown by building DOM nodes (see `dom`). A streaming reply goes through a
//! [`MarkdownStream`]: its finished blocks are built once and never touched again, only the open end
//! is patched, once per animation frame at most; a stored message is parsed and built once.
//!
//! The renderer (with the markdown parser) is not in the chat's first download: with the app's
//! `split` feature it is a wasm chunk that [`MarkdownLoader`] fetches as the chat mounts. Until it
//! is there, or if it cannot be fetched (tried again with a growing pause), text shows plain.

use std::collections::VecDeque;

use glassbox_core::markdown::{self, MarkdownStream, MdNode, StreamUpdate};
use glassbox_core::vocab::MessageStatus;
use glassbox_core::wire::ChatMessage;
use leptos::html::Div;
use leptos::prelude::*;
use wasm_bindgen::JsValue;
use web_sys::{Document, Node};

use crate::chunks::{load_in_background, split_fn};
use crate::dom::{append_markdown, create_node};

/// Shows a message's text in an element, keeping what it built between calls.
pub trait Render {
    /// Shows `text` (still `streaming`, or final) in `el`.
    fn show(&mut self, document: &Document, el: &Node, text: &str, streaming: bool);
}

/// Makes a renderer for one message.
pub type NewRenderer = fn() -> Box<dyn Render>;

fn new_renderer() -> Box<dyn Render> {
    Box::new(Shown::default())
}

split_fn! {
    /// The renderer's code: a chunk of its own with the `split` feature.
    load_renderer / preload_renderer () -> NewRenderer => new_renderer
}

/// The markdown renderer once its code is loaded (provided by the chat to its messages).
#[derive(Clone, Copy)]
pub struct MarkdownLoader(RwSignal<Option<NewRenderer>>);

impl MarkdownLoader {
    /// Starts fetching the renderer's code; failures are tried again until it comes.
    pub fn start() -> Self {
        Self(load_in_background(load_renderer))
    }
}

/// A message's text shown as formatted content (plain until the renderer is loaded).
#[component]
pub fn MarkdownView(message: RwSignal<ChatMessage>) -> impl IntoView {
    let target: NodeRef<Div> = NodeRef::new();
    let loader = use_context::<MarkdownLoader>();
    let renderer = StoredValue::new_local(None::<Box<dyn Render>>);
    Effect::new(move |_| {
        let (Some(el), Some(document)) =
            (target.get(), web_sys::window().and_then(|w| w.document()))
        else {
            return;
        };
        let new = loader.and_then(|l| l.0.get());
        message.with(|m| match new {
            Some(new) => {
                let _ = el.remove_attribute("data-plain");
                renderer.update_value(|r| {
                    r.get_or_insert_with(new).show(
                        &document,
                        &el,
                        &m.content,
                        m.status == MessageStatus::Streaming,
                    )
                });
            }
            None => {
                let _ = el.set_attribute("data-plain", "");
                el.set_text_content(Some(&m.content));
            }
        });
    });
    view! { <div class="gb-markdown" dir="auto" node_ref=target></div> }
}

impl Render for Shown {
    fn show(&mut self, document: &Document, el: &Node, text: &str, streaming: bool) {
        Shown::show(self, document, el, text, streaming);
    }
}

/// What one view has built.
#[derive(Default)]
struct Shown {
    stream: Option<MarkdownStream>,
    /// The DOM nodes of each finished block of the stream.
    groups: Vec<Vec<Node>>,
    /// The stream's open end: each top-level node with the DOM node built for it.
    tail: Vec<(MdNode, Node)>,
    /// Fingerprint of the text shown in its final form, if it is.
    final_text: Option<u64>,
}

impl Shown {
    fn show(&mut self, document: &Document, el: &Node, text: &str, streaming: bool) {
        let result = if streaming {
            self.stream_to(document, el, text)
        } else {
            self.finalize(document, el, text)
        };
        if result.is_err() {
            // Never lose the text: show it plain.
            self.forget();
            el.set_text_content(Some(text));
        }
    }

    fn forget(&mut self) {
        self.stream = None;
        self.groups.clear();
        self.tail.clear();
        self.final_text = None;
    }

    /// Shows the text received so far: only what arrived since the last frame is parsed.
    fn stream_to(&mut self, document: &Document, el: &Node, text: &str) -> Result<(), JsValue> {
        // A snapshot after a reconnect may replace the text: continue only what it extends.
        let continues = self
            .stream
            .as_ref()
            .is_some_and(|s| !s.is_finished() && text.starts_with(s.text()));
        if !continues {
            self.forget();
            el.set_text_content(None);
        }
        let stream = self.stream.get_or_insert_with(MarkdownStream::new);
        let seen = stream.text().len();
        if seen == text.len() && seen > 0 {
            return Ok(());
        }
        stream.push(&text[seen..]);
        let update = stream.update();
        self.apply(document, el, update)
    }

    /// Shows the final text: the stream finishes (equal to a whole parse), or the text is parsed once.
    fn finalize(&mut self, document: &Document, el: &Node, text: &str) -> Result<(), JsValue> {
        let fingerprint = fingerprint(text);
        if self.final_text == Some(fingerprint) && self.stream.is_none() {
            return Ok(());
        }
        match self.stream.take() {
            Some(mut stream)
                if !stream.is_finished()
                    && text.is_char_boundary(stream.text().len().min(text.len()))
                    && text.starts_with(stream.text()) =>
            {
                stream.push(&text[stream.text().len()..]);
                let update = stream.finish();
                self.apply(document, el, update)?;
            }
            _ => {
                el.set_text_content(None);
                append_markdown(document, el, &markdown::parse(text))?;
            }
        }
        self.forget();
        self.final_text = Some(fingerprint);
        Ok(())
    }

    /// Applies a stream update: finished blocks are added once; the open end is patched in place,
    /// so only what changed since the last frame touches the DOM.
    fn apply(
        &mut self,
        document: &Document,
        el: &Node,
        update: StreamUpdate,
    ) -> Result<(), JsValue> {
        let mut old: VecDeque<(MdNode, Node)> = std::mem::take(&mut self.tail).into();
        if update.reset {
            for node in self
                .groups
                .drain(..)
                .flatten()
                .chain(old.drain(..).map(|(_, n)| n))
            {
                el.remove_child(&node)?;
            }
        }
        for (index, nodes) in update.replaced {
            let next = self.groups[index.min(self.groups.len())..]
                .iter()
                .flatten()
                .next()
                .or(old.front().map(|(_, n)| n))
                .cloned();
            let Some(group) = self.groups.get_mut(index) else {
                continue;
            };
            let mut built = Vec::with_capacity(nodes.len());
            for md in &nodes {
                let node = create_node(document, md)?;
                el.insert_before(&node, next.as_ref())?;
                built.push(node);
            }
            for node in std::mem::replace(group, built) {
                el.remove_child(&node)?;
            }
        }
        for group in update.appended {
            let mut nodes = Vec::with_capacity(group.len());
            for md in group {
                nodes.push(place(document, el, &mut old, &md)?);
            }
            self.groups.push(nodes);
        }
        for md in update.tail {
            let node = place(document, el, &mut old, &md)?;
            self.tail.push((md, node));
        }
        for (_, node) in old {
            el.remove_child(&node)?;
        }
        Ok(())
    }
}

/// A hash of a final text, to tell a changed text (a snapshot after a reconnect) from a re-run.
fn fingerprint(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// The DOM node for `md`: the first remaining old node, patched to show `md`, or a new node
/// inserted before the remaining old ones when none is left.
fn place(
    document: &Document,
    el: &Node,
    old: &mut VecDeque<(MdNode, Node)>,
    md: &MdNode,
) -> Result<Node, JsValue> {
    if let Some((was, node)) = old.pop_front() {
        return patch(document, el, &node, &was, md);
    }
    let node = create_node(document, md)?;
    el.append_child(&node)?;
    Ok(node)
}

/// Makes `node` (built for `was`, a child of `parent`) show `now`, touching only what differs: an
/// open table or list that gained a row changes one row in the DOM, not all of them.
fn patch(
    document: &Document,
    parent: &Node,
    node: &Node,
    was: &MdNode,
    now: &MdNode,
) -> Result<Node, JsValue> {
    if was == now {
        return Ok(node.clone());
    }
    match (was, now) {
        (MdNode::Text(_), MdNode::Text(text)) => {
            node.set_text_content(Some(text));
            Ok(node.clone())
        }
        (
            MdNode::Element {
                tag: was_tag,
                attrs: was_attrs,
                children: was_children,
            },
            MdNode::Element {
                tag,
                attrs,
                children,
            },
        ) if was_tag == tag && was_attrs == attrs => {
            let kids = node.child_nodes();
            for (i, child) in children.iter().enumerate() {
                match (was_children.get(i), kids.item(i as u32)) {
                    (Some(before), Some(dom)) => {
                        patch(document, node, &dom, before, child)?;
                    }
                    _ => {
                        node.append_child(&create_node(document, child)?)?;
                    }
                }
            }
            while kids.length() as usize > children.len() {
                if let Some(extra) = node.last_child() {
                    node.remove_child(&extra)?;
                }
            }
            Ok(node.clone())
        }
        _ => {
            let fresh = create_node(document, now)?;
            parent.replace_child(&fresh, node)?;
            Ok(fresh)
        }
    }
}
