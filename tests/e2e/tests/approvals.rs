//! The approval dialog in headless Chromium, against the repo's MCP server and the offline
//! provider (which calls a tool the message names): Approve runs the call, Deny with a reason tells
//! the model why, "Allow for this session" asks no more, and a call waiting across a reload is
//! asked again and runs once. The dialog takes the focus and names the server's claims.

use anyhow::Result;
use fantoccini::Client;
use glassbox_e2e::widget_page::{CONNECTED, shadow_element};
use glassbox_e2e::{ask_demo_config, in_browser, mcp_ready, start_server, wait_for};
use serde_json::json;

const ROOT: &str = "const r = document.querySelector('glassbox-chat').shadowRoot;";

async fn send(client: &Client, text: &str) -> Result<()> {
    let input = shadow_element(client, "textarea.gb-input").await?;
    input.send_keys(text).await?;
    input.send_keys("\u{E007}").await?; // Enter sends
    Ok(())
}

/// Waits for the dialog; returns what it shows.
async fn dialog(client: &Client, what: &str) -> Result<serde_json::Value> {
    wait_for(
        client,
        what,
        &format!(
            "{ROOT} const d = r.querySelector('.gb-approval-dialog'); if (!d) return null;
             return {{title: d.querySelector('.gb-approval-title').textContent,
                      name: d.querySelector('.gb-approval-name code').textContent,
                      cost: d.querySelector('.gb-approval-cost').textContent,
                      args: d.querySelector('.gb-approval-arguments pre').textContent,
                      claims: d.querySelector('.gb-approval-claims')?.textContent ?? '',
                      role: d.getAttribute('role')}};"
        ),
    )
    .await
}

/// Waits until `n` replies are complete; returns the last one's text.
async fn replies(client: &Client, n: usize) -> Result<String> {
    let v = wait_for(
        client,
        &format!("{n} complete replies"),
        &format!(
            "{ROOT} const m = [...r.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]')];
             return m.length >= {n} ? m[m.length - 1].textContent : null;"
        ),
    )
    .await?;
    Ok(v.as_str().unwrap_or_default().to_owned())
}

async fn click(client: &Client, selector: &str) -> Result<()> {
    shadow_element(client, selector).await?.click().await?;
    Ok(())
}

#[tokio::test]
async fn the_user_approves_denies_and_allows_tool_calls_in_the_widget() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let config = ask_demo_config(dir.path())?;
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
        ("GLASSBOX_CONFIG", config.as_str()),
        ("GLASSBOX_EMBEDDINGS", "off"),
    ])
    .await?;
    mcp_ready(&server).await?;
    let url = format!("http://{}/", server.addr);
    in_browser(url, "approvals", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;

        // Approve: the dialog names the tool, its arguments and the server's claims, and has the focus.
        send(&client, r#"What time is it in Tokyo? demo.current_time {"zone": "Asia/Tokyo"}"#).await?;
        let shown = dialog(&client, "the approval dialog").await?;
        assert_eq!(shown["role"], "alertdialog", "{shown}");
        assert!(shown["title"].as_str().unwrap_or_default().contains("Current time"), "{shown}");
        assert_eq!(shown["name"], "demo.current_time");
        assert!(shown["cost"].as_str().unwrap_or_default().contains("tokens per request"), "{shown}");
        assert!(shown["args"].as_str().unwrap_or_default().contains("\"zone\": \"Asia/Tokyo\""), "{shown}");
        assert!(shown["claims"].as_str().unwrap_or_default().contains("only reads"), "{shown}");
        // The dialog takes the focus (the composer had it), so the keyboard answers at once.
        wait_for(&client, "Approve to have the focus", &format!("{ROOT} return r.activeElement?.className === 'gb-approve';")).await?;
        click(&client, "button.gb-approve").await?;
        let reply = replies(&client, 1).await?;
        assert!(reply.contains("UTC+09:00"), "{reply}");
        wait_for(&client, "the decision in the history", &format!("{ROOT} return [...r.querySelectorAll('.gb-message.gb-approval')].some(a => a.textContent.includes('Allowed: demo.current_time'));")).await?;
        let open = client.execute(&format!("{ROOT} return !!r.querySelector('.gb-approval-dialog');"), vec![]).await?;
        assert_eq!(open, json!(false));
        // View context of that reply: the tools it was offered, each with its badge and cost.
        client
            .execute(&format!("{ROOT} [...r.querySelectorAll('.gb-view-context')].pop().click(); return true;"), vec![])
            .await?;
        let tools = wait_for(
            &client,
            "the Tools column of View context",
            &format!("{ROOT} const d = r.querySelector('dialog.gb-context-dialog'); const c = d && d.querySelector('.gb-item-column[data-column=tools]'); if (!c) return null; return [...c.querySelectorAll('.gb-item')].map(i => [i.querySelector('.gb-item-label').textContent, i.querySelector('.gb-item-badge').textContent, i.querySelector('.gb-item-tokens').textContent]);"),
        )
        .await?;
        let time = tools
            .as_array()
            .and_then(|t| t.iter().find(|i| i[0] == "demo.current_time"))
            .unwrap_or_else(|| panic!("no demo.current_time in the Tools column: {tools}"));
        assert_eq!(time[1], "Always", "{tools}");
        let cost: u32 = time[2].as_str().unwrap_or_default().trim_end_matches(" tokens").replace(',', "").parse().unwrap_or(0);
        assert!(cost > 20, "its definition's tokens: {tools}");
        client
            .execute(&format!("{ROOT} r.querySelector('dialog.gb-context-dialog').close(); return true;"), vec![])
            .await?;

        // Deny with a reason: the model is told, as data.
        send(&client, r#"Note this: demo.add_note {"text": "buy milk"}"#).await?;
        dialog(&client, "the dialog for add_note").await?;
        shadow_element(&client, ".gb-approval-reason-field input").await?.send_keys("not today").await?;
        click(&client, "button.gb-deny").await?;
        let reply = replies(&client, 2).await?;
        assert!(reply.contains("The user denied this call"), "{reply}");
        assert!(reply.contains("not today"), "{reply}");

        // Allow for this session: the next call of the same tool runs without a question.
        send(&client, "What did I note? demo.list_notes").await?;
        dialog(&client, "the dialog for list_notes").await?;
        click(&client, "button.gb-allow-session").await?;
        replies(&client, 3).await?;
        send(&client, "And now? demo.list_notes").await?;
        let reply = replies(&client, 4).await?;
        assert!(reply.contains("No notes yet."), "{reply}");
        let asked = client.execute(&format!("{ROOT} return !!r.querySelector('.gb-approval-dialog');"), vec![]).await?;
        assert_eq!(asked, json!(false), "allowed for the session: no question");

        // A call waiting across a reload is asked again there and runs once.
        send(&client, r#"demo.convert_units {"value": 1, "from": "mi", "to": "km"}"#).await?;
        dialog(&client, "the dialog for convert_units").await?;
        client.refresh().await?;
        wait_for(&client, "the widget to reconnect", CONNECTED).await?;
        let again = dialog(&client, "the dialog after the reload").await?;
        assert_eq!(again["name"], "demo.convert_units", "{again}");
        click(&client, "button.gb-approve").await?;
        let reply = replies(&client, 5).await?;
        assert!(reply.contains("1.609344"), "{reply}");
        Ok(())
    })
    .await
}
