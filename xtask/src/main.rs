//! `cargo xtask <command>`: build, serve, test and bench Glassbox. The only place that shells out.
//! Everything a command needs that is missing (wasm target, wasm-bindgen CLI, binaryen, Chromium) is
//! installed here, once, and said out loud.

mod build;
mod css;
mod files;
mod layers;
mod model;
mod npm_package;
mod postgres;
mod react;
mod run;
mod size;
mod sticky;
mod tools;
mod vocab;
mod wasm_split;

use anyhow::{Result, bail};

const USAGE: &str = "\
usage: cargo xtask <command>

  build            build the widget into dist/ (wasm32, wasm-bindgen, wasm-opt -Oz), its npm
                   packages into dist/npm/ (glassbox-chat, glassbox-react) and the React demo
                   into public/react/
  serve [--dev]    build what is needed and run the server with the demo page (GLASSBOX_* env applies):
                   an optimized server build; --dev runs the debug build the tests share (quicker to
                   rebuild while developing)
  test [FILTER]    run every test: unit, server integration, and the headless-Chromium end-to-end test
                   (FILTER: only tests whose name contains it, e.g. `cargo xtask test view_context`)
  bench gateway    added latency of our server vs the fake provider directly, on SQLite and on
                   PostgreSQL (one instance, two on one database: what each request costs it),
                   plus widget payload size
  bench embed      embedding speed vs onnxruntime on the same ONNX file, and top-10 vector search
  bench tokens     token counting in headless Chromium vs gpt-tokenizer and tiktoken (npm)
  bench render     long streamed replies and a 2,000-message history in headless Chromium: render
                   lag, longest task, script time per kB (args: --sizes 1,4,16,64 --history N --timeout S)
  bench context    planning one turn (receipt + request) for a 1,000-message session, the receipt's size,
                   one tool round's added latency over a plain reply (fake provider), topics, and
                   agents' items over 100 items / 1,000 chunks: cold indexing vs onnxruntime, the
                   warm request context, the preview round trip; MCP tools: a call's added latency
                   over stdio and HTTP, chat-ready with 0 and 5 servers, tool costs (`mcp`: that alone, `mcp-ready`: chat-ready alone);
                   the first token in sessions of 10 / 1,000 / 10,000 messages on SQLite, then on a
                   private PostgreSQL cluster (`growth`: that alone)
  bench size       what each entry point loads (the element inline and as a closed launcher, the meter
                   alone, its worker and vocabulary, the React package and demo): raw / gzip / brotli
  sticky train     train the learned reading of standing instructions on tests/fixtures and write
                   analysis/src/sticky/model.tsv (run after changing a fixture)
  sticky lofo      standing-instruction precision / recall on each fixture, trained without it
  sticky read FILE a labelled set not among the fixtures, read as the server reads (a new set's
                   first reading: the estimate for unseen phrasing); lists what it got wrong
  screenshot       make docs/screenshot.png (the README's picture) in headless Chromium: the demo
                   page with the demo agent, a tool call approved and answered
  layers           check that no crate has a cycle among its modules, at any depth (also run by
                   `test`); names the references that close each cycle
  model            provision the embedding model (all-MiniLM-L6-v2 as ONNX) into ~/.cache/glassbox/models
  setup            install the build and test tools (done automatically by the commands above)
";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["build"] => build::widget().map(|_| ()),
        ["serve"] => run::serve(false),
        ["serve", "--dev"] => run::serve(true),
        ["test"] => run::test(None),
        ["test", filter] => run::test(Some(filter)),
        ["bench", "gateway"] => run::bench_gateway(),
        ["bench", "embed"] => run::bench_embed(),
        ["bench", "tokens"] => run::bench_tokens(),
        ["bench", "render", rest @ ..] => run::bench_render(rest),
        ["bench", "context", rest @ ..] => run::bench_context(rest),
        ["bench", "size"] => build::widget().and_then(|dist| size::bench(&dist)),
        ["bench", other] => {
            bail!(
                "unknown benchmark {other:?}; available: gateway, embed, tokens, render, context, size\n\n{USAGE}"
            )
        }
        ["screenshot"] => run::screenshot(),
        ["layers"] => layers::check(),
        ["model"] => model::provision().map(|_| ()),
        ["sticky", "train"] => sticky::train_committed(),
        ["sticky", "lofo"] => sticky::leave_one_out(),
        ["sticky", "read", path] => sticky::read(path),
        ["setup"] => {
            tools::wasm_toolchain()?;
            tools::wasm_test_runner()?;
            tools::browser()?;
            model::provision()?;
            Ok(())
        }
        _ => {
            eprint!("{USAGE}");
            std::process::exit(2);
        }
    }
}
