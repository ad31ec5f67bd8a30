//! The tools of a turn as its receipt lists them (docs/context-items.md, "Tools and their cost"):
//! one part per tool item offered, with the tokens of the exact definition sent and how it came
//! in; one part for the tools that are not items (the built-in ones) with the instructions about
//! tools; and, under a tool budget, the lowest-ranked tool items left out (`tool_cap`) with their
//! cost. A turn that left tools out is offered [`LOAD_TOOLS`], through which the model loads the
//! ones matching a need for the rest of the reply (and the server for the rest of the session).

use serde_json::json;

use super::items::{ItemKind, ItemRef};
use super::receipt::{ItemNote, LeftOut, LeftOutWhy, Overflow, Part, PartKind, Reason, Receipt};
use crate::vocab::ToolDefinition;

/// The built-in tool a turn that left tools out offers, to load them.
pub const LOAD_TOOLS: &str = "load_tools";

/// The definition of [`LOAD_TOOLS`]: `need` in words, answered with the tools loaded.
pub fn load_tools_definition() -> ToolDefinition {
    ToolDefinition {
        name: LOAD_TOOLS.to_owned(),
        description: "More tools exist than were offered. Describe what you need a tool for; \
                      the matching tools are offered from your next step on."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {"need": {"type": "string", "description": "What the tool should do."}},
            "required": ["need"],
        }),
    }
}

/// Counts a text's tokens (the plan's counter).
pub type CountText<'c> = dyn FnMut(Option<&str>, &str) -> u32 + 'c;

/// The tokens of one tool's definition as the plan counts them: its JSON, as sent.
pub fn definition_tokens(definition: &ToolDefinition, count: &mut CountText<'_>) -> u32 {
    count(None, &serde_json::to_string(definition).unwrap_or_default())
}

/// One tool item a request may offer.
#[derive(Debug, Clone)]
pub struct ToolCandidate<'a> {
    /// Its note in the receipt (identity, how it came in, score).
    pub note: ItemNote,
    /// Why its part goes.
    pub reason: Reason,
    /// Its definition's tokens when counted elsewhere (the widget); `None`: counted here.
    pub tokens: Option<u32>,
    /// The definition offered for it (`None` in the widget).
    pub definition: Option<&'a ToolDefinition>,
    /// The model loaded it earlier in the session: it goes whatever the budget.
    pub loaded: bool,
}

/// What the tools of a turn are planned from.
#[derive(Debug, Clone, Copy)]
pub struct ToolInputs<'a> {
    /// The tool items, best-ranked first, each once.
    pub candidates: &'a [ToolCandidate<'a>],
    /// Every definition offered (tool items' and built-in ones); empty in the widget.
    pub tools: &'a [ToolDefinition],
    /// The system-prompt section about tools.
    pub instructions: Option<&'a str>,
    /// Most tokens the tool items may take (`None`: no limit).
    pub budget: Option<u32>,
    /// In the widget (`tools` empty): the built-in tools' and instructions' tokens.
    pub builtin_tokens: u32,
}

/// The tools of a turn as planned: their parts, the tool items left out and the tokens sent.
#[derive(Default)]
pub struct PlannedTools {
    pub parts: Vec<Part>,
    pub left_out: Vec<LeftOut>,
    pub tokens: u32,
}

/// Plans the tools of a turn: the ones the model loaded earlier in the session first (they always
/// go), then the others in rank order; under the budget the best-ranked that fit go, and once one
/// does not, it and every one ranked below it are left out (`tool_cap`).
pub fn plan_tools(input: ToolInputs<'_>, count: &mut CountText<'_>) -> PlannedTools {
    let mut items: Vec<(&ToolCandidate, u32)> = Vec::new();
    for c in input.candidates {
        let tokens = match (c.tokens, c.definition) {
            (Some(t), _) => t,
            (None, Some(d)) => definition_tokens(d, count),
            // A tool item with no definition is not offered (its server went away).
            (None, None) => continue,
        };
        items.push((c, tokens));
    }
    // Stable: the rank order stays within each group.
    items.sort_by_key(|(c, _)| !c.loaded);
    let budget = input.budget.unwrap_or(u32::MAX);
    let (mut used, mut cut) = (0u32, None);
    for (i, (c, tokens)) in items.iter().enumerate() {
        if used.saturating_add(*tokens) > budget && !c.loaded {
            cut = Some(i);
            break;
        }
        used = used.saturating_add(*tokens);
    }
    let cut = cut.unwrap_or(items.len());
    let left_out = items[cut..]
        .iter()
        .map(|(c, tokens)| LeftOut::item(c.note.clone(), LeftOutWhy::ToolCap, *tokens))
        .collect::<Vec<_>>();
    let mut kept = items[..cut].to_vec();
    kept.sort_by(|(a, _), (b, _)| {
        a.note
            .item
            .kind
            .cmp(&b.note.item.kind)
            .then_with(|| a.note.item.name.cmp(&b.note.item.name))
    });

    // The tools that are not items, the loader when tools were left out, and the instructions.
    let item_names: Vec<&str> = input
        .candidates
        .iter()
        .filter_map(|c| c.definition.map(|d| d.name.as_str()))
        .collect();
    let builtin: Vec<&ToolDefinition> = input
        .tools
        .iter()
        .filter(|d| !item_names.contains(&d.name.as_str()) && d.name != LOAD_TOOLS)
        .collect();
    let mut names: Vec<String> = builtin.iter().map(|d| d.name.clone()).collect();
    let mut builtin_tokens = if input.tools.is_empty() {
        input.builtin_tokens
    } else {
        builtin.iter().map(|d| definition_tokens(d, count)).sum()
    };
    if !left_out.is_empty() {
        names.push(LOAD_TOOLS.to_owned());
        builtin_tokens += definition_tokens(&load_tools_definition(), count);
    }
    if !input.tools.is_empty() && (!names.is_empty() || !kept.is_empty()) {
        builtin_tokens += input.instructions.map_or(0, |t| count(None, t));
    }
    let mut parts = Vec::with_capacity(kept.len() + 1);
    if builtin_tokens > 0 || !names.is_empty() {
        parts.push(Part {
            kind: PartKind::Tools { names },
            reason: Reason::Always,
            tokens: builtin_tokens,
        });
    }
    parts.extend(kept.iter().map(|(c, tokens)| Part {
        kind: PartKind::Item(c.note.clone()),
        reason: c.reason,
        tokens: *tokens,
    }));
    PlannedTools {
        tokens: parts.iter().map(|p| p.tokens).sum(),
        parts,
        left_out,
    }
}

/// The definitions a request built from `receipt` offers: of `tools` (in their order), the
/// built-in ones its tools part names and those of the tool items among its parts
/// (`item_definitions`: each tool item's definition), then [`LOAD_TOOLS`] when the part names it.
pub fn offered(
    receipt: &Receipt,
    tools: &[ToolDefinition],
    item_definitions: &[(&ItemRef, &ToolDefinition)],
) -> Vec<ToolDefinition> {
    let mut names: Vec<&str> = Vec::new();
    for part in &receipt.parts {
        match &part.kind {
            PartKind::Tools { names: builtin } => names.extend(builtin.iter().map(String::as_str)),
            PartKind::Item(note) if matches!(note.item.kind, ItemKind::Tool { .. }) => names
                .extend(
                    item_definitions
                        .iter()
                        .filter(|(item, _)| *item == &note.item)
                        .map(|(_, d)| d.name.as_str()),
                ),
            _ => {}
        }
    }
    let mut offered: Vec<ToolDefinition> = tools
        .iter()
        .filter(|d| names.contains(&d.name.as_str()))
        .cloned()
        .collect();
    if names.contains(&LOAD_TOOLS) && !offered.iter().any(|d| d.name == LOAD_TOOLS) {
        offered.push(load_tools_definition());
    }
    offered
}

/// Moves the tool items `loaded` (among the receipt's `tool_cap` left-outs) into its parts, so the
/// requests built from it from now on offer them: answers the ones moved. Their tokens join the
/// totals, and the receipt says whether the next request still fits.
pub fn load_tools(receipt: &mut Receipt, loaded: &[ItemRef]) -> Vec<ItemRef> {
    let mut moved = Vec::new();
    let mut added = 0;
    let at = receipt
        .parts
        .iter()
        .rposition(|p| match &p.kind {
            PartKind::Tools { .. } => true,
            PartKind::Item(n) => matches!(n.item.kind, ItemKind::Tool { .. }),
            _ => false,
        })
        .map_or(0, |i| i + 1);
    let mut insert = at;
    receipt.left_out.retain(|l| {
        let Some(note) = l
            .item
            .as_ref()
            .filter(|n| l.why == LeftOutWhy::ToolCap && loaded.contains(&n.item))
        else {
            return true;
        };
        moved.push(note.item.clone());
        added += l.tokens;
        receipt.parts.insert(
            insert,
            Part {
                kind: PartKind::Item(note.clone()),
                reason: Reason::Loaded,
                tokens: l.tokens,
            },
        );
        insert += 1;
        false
    });
    receipt.totals.breakdown.tools += added;
    receipt.totals.counted_input_tokens += added;
    let (needed, room) = (receipt.totals.counted_input_tokens, receipt.input_room());
    receipt.overflow = (needed > room).then_some(Overflow { needed, room });
    moved
}

/// The tool items among `left_out` (a receipt's) left out over the tool budget that match `need`, best first: the
/// ones `need` names, then those sharing the most words (of three letters or more) with their
/// name and description; at most `most`.
pub fn deferred_matching(left_out: &[LeftOut], need: &str, most: usize) -> Vec<ItemRef> {
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .map(str::to_lowercase)
            .collect()
    };
    let wanted = words(need);
    let lowered = need.to_lowercase();
    let mut scored: Vec<(usize, &ItemRef)> = left_out
        .iter()
        .filter(|l| l.why == LeftOutWhy::ToolCap)
        .filter_map(|l| l.item.as_ref())
        .filter_map(|n| {
            let named = lowered.contains(&n.item.name.to_lowercase());
            let own = words(&format!("{} {}", n.item.name, n.description));
            let shared = wanted.iter().filter(|w| own.contains(w)).count();
            let score = if named { usize::MAX } else { shared };
            (score > 0).then_some((score, &n.item))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    scored
        .into_iter()
        .take(most)
        .map(|(_, i)| i.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::context::CompressionSettings;
    use crate::context::items::{Included, RequestItem};
    use crate::context::meter::ContextInfo;
    use crate::context::plan::ChosenItem;
    use crate::context::plan::{
        CurrentReply, ItemSearch, ItemsInput, Sources, TurnInput, TurnMessage, build_request,
        plan_turn,
    };
    use crate::context::score::Score;
    use crate::vocab::Role;

    /// One token per word (JSON counts as its spaces make it: a definition is a few words).
    fn words(_: Option<&str>, text: &str) -> u32 {
        text.split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .count() as u32
    }

    fn definition(name: &str, description: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters: json!({"type": "object"}),
        }
    }

    #[test]
    fn each_tool_item_is_a_part_with_its_cost_and_the_budget_defers_the_lowest_ranked() {
        let builtin = crate::context::sets::context_tools();
        let defs = vec![
            builtin[0].clone(),
            builtin[1].clone(),
            definition("demo__current_time", "The time now in a time zone"),
            definition(
                "demo__convert_units",
                "Convert a quantity between units of length and mass",
            ),
            definition("demo__add_note", "Keep a note for this conversation"),
        ];
        let tools = |n: &str| ItemRef::tool("demo", n);
        let requests = [
            RequestItem {
                item: tools("current_time"),
                included: Included::Always,
                score: None,
            },
            RequestItem {
                item: tools("add_note"),
                included: Included::Agent,
                score: Some(Score::of(0.9)),
            },
            RequestItem {
                item: tools("convert_units"),
                included: Included::Agent,
                score: Some(Score::of(0.5)),
            },
        ];
        let def_of = |r: &RequestItem| {
            defs.iter()
                .find(|d| d.name == format!("demo__{}", r.item.name))
        };
        let chosen: Vec<ChosenItem> = requests
            .iter()
            .map(|request| ChosenItem {
                request,
                priority: 0,
                description: "",
                text: "",
                tokens: None,
                definition: def_of(request),
            })
            .collect();
        let cost = |name: &str| {
            definition_tokens(defs.iter().find(|d| d.name == name).unwrap(), &mut words)
        };
        let info = ContextInfo {
            model: "m".into(),
            context_limit: 100_000,
            encoding: "o200k_base".into(),
            exact: true,
            system_prompt_tokens: 0,
            memory_tokens: 0,
            tool_tokens: 0,
            output_reserve: 1000,
            compression: CompressionSettings {
                enabled: false,
                ..Default::default()
            },
        };
        let msgs = [TurnMessage {
            id: Some("u1"),
            role: Role::User,
            text: Cow::Borrowed("what time is it"),
            attachments: &[],
            rounds: &[],
        }];
        // The budget holds the two best-ranked: the `always` one, then the best score.
        let budget = cost("demo__current_time") + cost("demo__add_note");
        let sources = crate::context::plan::TurnSources {
            tools: &defs,
            tool_instructions: Some("Use tools."),
            tool_budget: Some(budget),
            items: Some(ItemsInput {
                chosen: &chosen,
                near_misses: &[],
                search: ItemSearch::Done,
            }),
            ..Default::default()
        };
        let input = TurnInput {
            info: &info,
            messages: &msgs,
            sources: sources.clone(),
        };
        let mut plan = plan_turn(&input, &mut words);
        let receipt = &plan.receipt;
        let builtin_cost = cost(&builtin[0].name)
            + cost(&builtin[1].name)
            + definition_tokens(&load_tools_definition(), &mut words)
            + words(None, "Use tools.");
        let tool_parts: Vec<(String, u32, Reason)> = receipt
            .parts
            .iter()
            .filter_map(|p| match &p.kind {
                PartKind::Tools { names } => Some((names.join(","), p.tokens, p.reason)),
                PartKind::Item(n) => Some((n.item.name.clone(), p.tokens, p.reason)),
                _ => None,
            })
            .collect();
        assert_eq!(
            tool_parts,
            [
                (
                    format!("{},{},{LOAD_TOOLS}", builtin[0].name, builtin[1].name),
                    builtin_cost,
                    Reason::Always
                ),
                ("add_note".to_owned(), cost("demo__add_note"), Reason::Agent),
                (
                    "current_time".to_owned(),
                    cost("demo__current_time"),
                    Reason::Always
                ),
            ]
        );
        let deferred = &receipt.left_out[0];
        assert_eq!(deferred.why, LeftOutWhy::ToolCap);
        assert_eq!(deferred.tokens, cost("demo__convert_units"));
        assert_eq!(deferred.item.as_ref().unwrap().item, tools("convert_units"));
        assert_eq!(receipt.totals.breakdown.tools, budget + builtin_cost);
        let offered: Vec<&str> = plan.request.tools.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            offered,
            [
                builtin[0].name.as_str(),
                builtin[1].name.as_str(),
                "demo__current_time",
                "demo__add_note",
                LOAD_TOOLS
            ]
        );

        // The model asks for a unit converter: found by its words, loaded, offered from now on.
        assert!(deferred_matching(&plan.receipt.left_out, "send an email", 5).is_empty());
        let found = deferred_matching(&plan.receipt.left_out, "I need to convert miles to km", 5);
        assert_eq!(found, [tools("convert_units")]);
        let before = plan.receipt.totals.counted_input_tokens;
        assert_eq!(load_tools(&mut plan.receipt, &found), found);
        assert!(plan.receipt.left_out.is_empty());
        assert_eq!(
            plan.receipt.totals.counted_input_tokens,
            before + cost("demo__convert_units")
        );
        let next = build_request(
            &plan.receipt,
            &Sources {
                model: "m",
                messages: &msgs,
                sources,
                current: CurrentReply::default(),
            },
        );
        assert!(next.tools.iter().any(|d| d.name == "demo__convert_units"));
        // Loading again changes nothing.
        assert!(load_tools(&mut plan.receipt, &found).is_empty());

        // Later in the session the loaded tool goes first, whatever the budget; the others get
        // what it leaves (here nothing: it costs more than the tool it displaced).
        let loaded = [tools("convert_units")];
        let later = TurnInput {
            sources: crate::context::plan::TurnSources {
                loaded_tools: &loaded,
                ..input.sources.clone()
            },
            ..input.clone()
        };
        let later = plan_turn(&later, &mut words);
        let names: Vec<&str> = later
            .request
            .tools
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert!(names.contains(&"demo__convert_units"), "{names:?}");
        assert!(!names.contains(&"demo__current_time"), "{names:?}");
        assert_eq!(later.receipt.left_out.len(), 2);

        // No budget: every tool item goes, and no loader is offered.
        let input = TurnInput {
            sources: crate::context::plan::TurnSources {
                tool_budget: None,
                ..input.sources
            },
            ..input
        };
        let open = plan_turn(&input, &mut words);
        assert!(open.receipt.left_out.is_empty());
        assert!(!open.request.tools.iter().any(|d| d.name == LOAD_TOOLS));
        assert_eq!(open.request.tools.len(), 5);
    }
}
