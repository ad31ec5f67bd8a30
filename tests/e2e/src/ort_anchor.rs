//! The onnxruntime anchor of the embedding benchmarks: `tests/e2e/bench/ort_embed.py` (the same
//! converted model and tokenizer run by onnxruntime) as a child process, driven over stdin and
//! stdout, one command per line and one JSON answer per line, so that its passes alternate with
//! ours and both see the machine in the same state. The script's doc string lists the commands.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The running script; killed on drop.
pub struct OrtAnchor {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl OrtAnchor {
    /// Starts `python script model_dir [sentences]` (`sentences`: the file the `pass` and
    /// `query_load` commands read; `texts` needs none).
    pub fn start(
        python: impl AsRef<OsStr>,
        script: impl AsRef<OsStr>,
        model_dir: &Path,
        sentences: Option<&Path>,
    ) -> Result<Self> {
        let mut command = Command::new(python);
        command.arg(script).arg(model_dir);
        if let Some(sentences) = sentences {
            command.arg(sentences);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting ort_embed.py")?;
        let input = child.stdin.take().context("anchor stdin")?;
        let output = BufReader::new(child.stdout.take().context("anchor stdout")?);
        Ok(Self {
            child,
            input,
            output,
        })
    }

    /// Sends one command and reads its answer (an `{"error": …}` answer is an error).
    pub fn ask(&mut self, command: &str) -> Result<Value> {
        writeln!(self.input, "{command}")?;
        let mut line = String::new();
        if self.output.read_line(&mut line)? == 0 {
            bail!("ort_embed.py stopped (see its error above)");
        }
        let answer: Value = serde_json::from_str(&line)?;
        if let Some(error) = answer.get("error") {
            bail!("ort_embed.py: {error}");
        }
        Ok(answer)
    }

    /// The onnxruntime version the script runs.
    pub fn version(&mut self) -> Result<String> {
        Ok(self.ask("version")?["version"]
            .as_str()
            .unwrap_or("?")
            .to_owned())
    }
}

impl Drop for OrtAnchor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
