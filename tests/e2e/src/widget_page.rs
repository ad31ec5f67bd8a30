//! Reaching into `<glassbox-chat>` on a page driven by chromedriver: elements inside its shadow root,
//! and Chrome DevTools Protocol commands (performance metrics, scripts that run before the page's
//! own) sent through chromedriver's `goog/cdp/execute` endpoint.

use anyhow::{Context, Result, bail};
use fantoccini::Client;
use fantoccini::elements::{Element, ElementRef};
use serde_json::{Value, json};

use crate::Driver;

/// JavaScript expression for the widget's shadow root.
pub const SHADOW: &str = "document.querySelector('glassbox-chat').shadowRoot";

/// Script returning true once the widget says it is connected.
pub const CONNECTED: &str = "const r = document.querySelector('glassbox-chat')?.shadowRoot; return !!r?.querySelector('.gb-status[data-state=connected]');";

/// An element inside the widget's shadow root, usable with WebDriver (click, send keys).
pub async fn shadow_element(client: &Client, selector: &str) -> Result<Element> {
    let script = format!("return {SHADOW}.querySelector({selector:?});");
    let v = client.execute(&script, vec![]).await?;
    let Some(id) = v
        .as_object()
        .and_then(|o| o.values().next())
        .and_then(Value::as_str)
    else {
        bail!("no element {selector} in the widget: {v}");
    };
    Ok(Element::from_element_id(
        client.clone(),
        ElementRef::from(id.to_owned()),
    ))
}

/// Chrome DevTools Protocol commands for the page of one WebDriver session.
pub struct Cdp {
    http: reqwest::Client,
    url: String,
}

impl Cdp {
    /// Commands go to the page `client` drives, through `driver`.
    pub async fn new(driver: &Driver, client: &Client) -> Result<Self> {
        let session = client
            .session_id()
            .await?
            .context("the WebDriver session has no id")?;
        Ok(Self {
            http: reqwest::Client::new(),
            url: format!("{}/session/{session}/goog/cdp/execute", driver.url),
        })
    }

    /// Sends `method` with `params`; returns its result.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value> {
        let resp = self
            .http
            .post(&self.url)
            .json(&json!({"cmd": method, "params": params}))
            .send()
            .await
            .with_context(|| format!("CDP {method}"))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .with_context(|| format!("CDP {method}: reading the answer"))?;
        if !status.is_success() {
            bail!("CDP {method} failed ({status}): {}", body["value"]);
        }
        Ok(body["value"].clone())
    }

    /// Runs `source` in every document this page loads from now on, before the page's own scripts.
    pub async fn on_new_document(&self, source: &str) -> Result<()> {
        self.call(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": source}),
        )
        .await?;
        Ok(())
    }

    /// Starts collecting the page's performance metrics (once per loaded page, before
    /// [`Cdp::script_ms`]).
    pub async fn enable_metrics(&self) -> Result<()> {
        self.call("Performance.enable", json!({})).await?;
        Ok(())
    }

    /// Main-thread JavaScript (and WebAssembly) time of the page so far, in milliseconds:
    /// `ScriptDuration` of `Performance.getMetrics`.
    pub async fn script_ms(&self) -> Result<f64> {
        let metrics = self.call("Performance.getMetrics", json!({})).await?;
        metrics["metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["name"] == "ScriptDuration")
            .and_then(|m| m["value"].as_f64())
            .map(|s| s * 1e3)
            .context("no ScriptDuration in Performance.getMetrics")
    }

    /// A real (trusted) mouse-wheel turn at viewport point `(x, y)`; negative `delta_y` scrolls up.
    pub async fn wheel(&self, x: f64, y: f64, delta_y: f64) -> Result<()> {
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": delta_y}),
        )
        .await?;
        Ok(())
    }
}

/// Runs `script` in the page until it returns something truthy, for up to `timeout`; returns that
/// value. (`crate::wait_for` with a timeout of one's own, for waits that scale with a reply.)
pub async fn wait_for_within(
    client: &Client,
    what: &str,
    script: &str,
    timeout: std::time::Duration,
) -> Result<Value> {
    let start = std::time::Instant::now();
    loop {
        let v = client.execute(script, vec![]).await?;
        if !(v.is_null() || v == json!(false) || v == json!("") || v == json!(0)) {
            return Ok(v);
        }
        if start.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Lets each script wait up to `limit` (WebDriver's script timeout; chromedriver's default is 30 s)
/// to run: a page whose main thread is busy for long stretches, like a widget that renders slowly,
/// is measured rather than given up on.
pub async fn allow_slow_scripts(client: &Client, limit: std::time::Duration) -> Result<()> {
    client
        .update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
            Some(limit),
            None,
            None,
        ))
        .await?;
    Ok(())
}
