//! The approval dialog: a tool call waits for the user's yes (the session's tool permission is
//! `ask`). It shows the oldest waiting call — the server and the tool's title and name, its
//! description, the arguments as formatted JSON, the tool's annotations labelled as the server's
//! claims, and what its definition costs in tokens — with Approve, Deny (an optional reason the
//! model is told) and "Allow for this session". It is an `alertdialog` that takes focus when a
//! call arrives, usable by keyboard alone; the answer goes to every tab. Loaded as a chunk: most
//! sessions never see it.

use glassbox_core::vocab::ApprovalDecision;
use glassbox_core::wire::ApprovalRequest;
use leptos::html;
use leptos::prelude::*;

use crate::chunks::lazy_panel_fn;
use crate::client::ChatClient;
use crate::words::{Word, Words, words};

lazy_panel_fn! {
    /// The dialog of the calls waiting for the user's yes.
    approval_dialog / preload_approval_dialog (client: ChatClient) => view! { <ApprovalDialog client=client /> }
}

/// What the server says about a tool, in words (its annotations; claims, not checked).
fn claims(w: Words, annotations: &serde_json::Value) -> Vec<String> {
    let flag = |key: &str| annotations.get(key).and_then(serde_json::Value::as_bool);
    let mut out = Vec::new();
    match flag("readOnlyHint") {
        Some(true) => out.push(w.get(Word::ClaimReadsOnly)),
        Some(false) => out.push(w.get(Word::ClaimMayChange)),
        None => {}
    }
    if flag("destructiveHint") == Some(true) {
        out.push(w.get(Word::ClaimMayDelete));
    }
    if flag("idempotentHint") == Some(true) {
        out.push(w.get(Word::ClaimSafeToRepeat));
    }
    match flag("openWorldHint") {
        Some(true) => out.push(w.get(Word::ClaimReachesOutside)),
        Some(false) => out.push(w.get(Word::ClaimStaysWithin)),
        None => {}
    }
    out
}

/// The arguments as the dialog shows them: indented JSON.
fn pretty(arguments: &serde_json::Value) -> String {
    serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string())
}

/// The dialog (shown while a call waits).
#[component]
pub fn ApprovalDialog(client: ChatClient) -> impl IntoView {
    let approvals = client.approvals;
    let current = Memo::new(move |_| approvals.with(|a| a.first().cloned()));
    let waiting = Memo::new(move |_| approvals.with(Vec::len));
    let reason = RwSignal::new(String::new());
    let approve_button: NodeRef<html::Button> = NodeRef::new();
    let w = words();
    // Each call is drawn anew (only `current` redraws it), so its Approve button is new: it takes
    // the focus, and a keyboard user answers at once.
    // The button may be built before it is in the document (the panel mounts once its code has
    // come): it is focused at the next frame, when it is.
    Effect::new(move |_| {
        if let Some(button) = approve_button.get() {
            reason.set(String::new());
            let focus = move || {
                let _ = button.focus();
            };
            if !crate::frame::next_frame(focus.clone()) {
                focus();
            }
        }
    });
    let answer = move |decision: ApprovalDecision| {
        let Some(request) = current.get_untracked() else {
            return;
        };
        let why = reason.get_untracked();
        let why = (decision == ApprovalDecision::Deny && !why.trim().is_empty()).then_some(why);
        client.approve(&request.approval_id, decision, why);
    };
    move || {
        current.get().map(|r: ApprovalRequest| {
            let name = format!("{}.{}", r.server, r.tool);
            let heading = r.title.clone().unwrap_or_else(|| r.tool.clone());
            // The words are read in their own closures: a change of language redraws them, not
            // the dialog (which would clear the reason and move the focus).
            let annotations = r.annotations.clone();
            let has_claims =
                untrack(|| annotations.as_ref().is_some_and(|a| !claims(w, a).is_empty()));
            let claims_line = move || {
                let said = annotations.as_ref().map(|a| claims(w, a)).unwrap_or_default();
                w.fill(Word::ApprovalClaims, &[("claims", said.join(", ").as_str())])
            };
            // The tool's name goes where the question's `{tool}` is, in bold.
            let ask = w.text(Word::ApprovalAsk);
            let before = move || {
                ask.with(|a| a.split_once("{tool}").map_or(a.clone(), |(b, _)| b.to_owned()))
            };
            let after = move || {
                ask.with(|a| a.split_once("{tool}").map_or(String::new(), |(_, x)| x.to_owned()))
            };
            let tokens = r.tokens.to_string();
            let cost = move || {
                let per = w.fill(Word::TokensPerRequest, &[("count", tokens.as_str())]);
                format!(" · {per}")
            };
            view! {
                <section
                    class="gb-approval-dialog"
                    part="approval-dialog"
                    role="alertdialog"
                    aria-modal="false"
                    aria-labelledby="gb-approval-title"
                    aria-describedby="gb-approval-description"
                    data-approval-id=r.approval_id.clone()
                    on:keydown=move |ev| {
                        if ev.key() == "Escape" {
                            ev.prevent_default();
                            answer(ApprovalDecision::Deny);
                        }
                    }
                >
                    <h2 id="gb-approval-title" class="gb-approval-title">
                        {super::icons::wrench(18)}
                        {before} <strong>{heading}</strong> {after}
                    </h2>
                    <p class="gb-approval-name">
                        <code>{name}</code>
                        <span class="gb-approval-cost">{cost}</span>
                    </p>
                    <p id="gb-approval-description" class="gb-approval-description">{r.description.clone()}</p>
                    <div class="gb-approval-arguments">
                        <span class="gb-approval-label">{w.text(Word::ApprovalWith)}</span>
                        <pre>{pretty(&r.arguments)}</pre>
                    </div>
                    {has_claims.then(|| view! {
                        <p class="gb-approval-claims">{claims_line}</p>
                    })}
                    <label class="gb-approval-reason-field">
                        {w.text(Word::ApprovalReason)}
                        <input
                            type="text"
                            maxlength="1000"
                            prop:value=move || reason.get()
                            on:input=move |ev| reason.set(event_target_value(&ev))
                        />
                    </label>
                    <div class="gb-approval-actions">
                        <button
                            class="gb-approve"
                            type="button"
                            node_ref=approve_button
                            on:click=move |_| answer(ApprovalDecision::Allow)
                        >
                            {w.text(Word::Approve)}
                        </button>
                        <button class="gb-deny" type="button" on:click=move |_| answer(ApprovalDecision::Deny)>
                            {w.text(Word::Deny)}
                        </button>
                        <button
                            class="gb-allow-session"
                            type="button"
                            on:click=move |_| answer(ApprovalDecision::AllowSession)
                        >
                            {w.text(Word::AllowForThisSession)}
                        </button>
                    </div>
                    {move || {
                        let more = waiting.get().saturating_sub(1);
                        (more > 0).then(|| view! {
                            <p class="gb-approval-more" role="status">
                                {w.fill(Word::ApprovalMoreWaiting, &[("count", more.to_string().as_str())])}
                            </p>
                        })
                    }}
                </section>
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_read_as_the_servers_claims() {
        let a = serde_json::json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false});
        assert_eq!(
            claims(Words::english_in_full(), &a),
            [
                "may change things",
                "may delete or overwrite",
                "stays within its own data"
            ]
        );
        assert!(claims(Words::english_in_full(), &serde_json::json!({})).is_empty());
        assert_eq!(pretty(&serde_json::json!({"a": 1})), "{\n  \"a\": 1\n}");
    }
}
