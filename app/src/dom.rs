//! Builds DOM nodes from markdown nodes with `createElement`/`createTextNode`: text is never parsed
//! as HTML, so nothing from the model, the user or the host page can inject markup.

use glassbox_core::markdown::MdNode;
use wasm_bindgen::JsValue;
use web_sys::{Document, Node};

/// The DOM node for one markdown node (with its subtree).
pub fn create_node(document: &Document, node: &MdNode) -> Result<Node, JsValue> {
    Ok(match node {
        MdNode::Text(t) => document.create_text_node(t).into(),
        MdNode::Element {
            tag,
            attrs,
            children,
        } => {
            let el = document.create_element(tag)?;
            for (name, value) in attrs {
                el.set_attribute(name, value)?;
            }
            append_markdown(document, &el, children)?;
            el.into()
        }
    })
}

/// Appends `nodes` under `parent`.
pub fn append_markdown(
    document: &Document,
    parent: &Node,
    nodes: &[MdNode],
) -> Result<(), JsValue> {
    for node in nodes {
        parent.append_child(&create_node(document, node)?)?;
    }
    Ok(())
}
