//! The turn's own tool for the tools its receipt left out over the tool budget
//! (docs/agents.md, "Tool costs and the tool budget"): the model describes a need, the matching
//! tools are loaded — offered from its next round on, and kept in the session — and it is told
//! which. Offered only by a turn that left tools out.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use glassbox_core::context::items::ItemRef;
use glassbox_core::context::receipt::{LeftOut, LeftOutWhy, Receipt};
use glassbox_core::context::tool_parts::{LOAD_TOOLS, deferred_matching, load_tools_definition};
use glassbox_core::vocab::ToolDefinition;
use serde::Deserialize;
use serde_json::Value;

use crate::tools::{Tool, ToolCtx, ToolError, ToolOutput, parse};

/// Most tools one call loads.
const MOST_PER_CALL: usize = 5;

/// `load_tools(need)` for one turn.
pub struct LoadTools {
    /// The receipt's `tool_cap` left-outs when the turn began.
    deferred: Vec<LeftOut>,
    /// Loaded by calls and not yet taken by the turn.
    loaded: Mutex<Vec<ItemRef>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    need: String,
}

impl LoadTools {
    /// The tool for a turn planned as `receipt`; `None` when it left no tool out.
    pub fn for_receipt(receipt: &Receipt) -> Option<Arc<Self>> {
        let deferred: Vec<LeftOut> = receipt
            .left_out
            .iter()
            .filter(|l| l.why == LeftOutWhy::ToolCap)
            .cloned()
            .collect();
        (!deferred.is_empty()).then(|| {
            Arc::new(Self {
                deferred,
                loaded: Mutex::default(),
            })
        })
    }

    /// The tools loaded since the last take.
    pub fn take(&self) -> Vec<ItemRef> {
        std::mem::take(&mut *self.loaded.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn label(item: &ItemRef) -> String {
        match &item.kind {
            glassbox_core::context::items::ItemKind::Tool { server } => {
                format!("{server}.{}", item.name)
            }
            _ => item.name.clone(),
        }
    }
}

impl Tool for LoadTools {
    fn name(&self) -> &str {
        LOAD_TOOLS
    }

    fn definition(&self) -> ToolDefinition {
        load_tools_definition()
    }

    /// It only changes what this session's model is offered, which the user sees in the receipt.
    fn asks(&self) -> bool {
        false
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn call<'a>(
        &'a self,
        _ctx: ToolCtx<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let Args { need } = parse(args)?;
            let found = deferred_matching(&self.deferred, &need, MOST_PER_CALL);
            if found.is_empty() {
                let names: Vec<String> = self
                    .deferred
                    .iter()
                    .filter_map(|l| l.item.as_ref())
                    .map(|n| Self::label(&n.item))
                    .collect();
                return Ok(ToolOutput {
                    text: format!(
                        "No tool matches that need. Tools not offered yet: {}.",
                        names.join(", ")
                    ),
                    line: "nothing matched".to_owned(),
                    images: Vec::new(),
                });
            }
            let names: Vec<String> = found.iter().map(Self::label).collect();
            self.loaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(found);
            Ok(ToolOutput {
                text: format!(
                    "Loaded: {}. They are offered from your next step on.",
                    names.join(", ")
                ),
                line: format!("loaded {}", names.len()),
                images: Vec::new(),
            })
        })
    }
}
