//! Reading a V8 CPU profile (CDP `Profiler.stop`, the `.cpuprofile` format): the stretches in which
//! the main thread was busy without a break, and where the time of the long ones went.

use std::collections::HashMap;

use serde::Deserialize;

/// A `.cpuprofile`: the call tree, and one sample (a leaf node) per tick.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuProfile {
    nodes: Vec<Node>,
    samples: Vec<u64>,
    time_deltas: Vec<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Node {
    id: u64,
    call_frame: CallFrame,
    #[serde(default)]
    children: Vec<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallFrame {
    function_name: String,
    url: String,
}

/// Where the busy stretches longer than a threshold spent their time.
#[derive(Debug, Default)]
pub struct BusySummary {
    /// Durations of the stretches over the threshold, in ms.
    pub stretches_ms: Vec<f64>,
    /// Self time per function within them, in ms, largest first.
    pub self_ms: Vec<(String, f64)>,
    /// Time per function anywhere on the stack within them, in ms, largest first.
    pub total_ms: Vec<(String, f64)>,
}

impl CpuProfile {
    /// Busy stretches (consecutive samples that are not `(idle)`) of at least `min_ms`.
    pub fn busy(&self, min_ms: f64) -> BusySummary {
        let index: HashMap<u64, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id, i))
            .collect();
        let mut parent = vec![None; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for c in &n.children {
                if let Some(&ci) = index.get(c) {
                    parent[ci] = Some(i);
                }
            }
        }
        let name = |i: usize| {
            let f = &self.nodes[i].call_frame;
            let file = f.url.rsplit('/').next().unwrap_or("");
            if file.is_empty() {
                f.function_name.clone()
            } else {
                format!("{} ({file})", f.function_name)
            }
        };
        let idle = |i: usize| self.nodes[i].call_frame.function_name == "(idle)";
        // Sample k lasts until the next one: time_deltas[k + 1].
        let dur = |k: usize| self.time_deltas.get(k + 1).copied().unwrap_or(0).max(0) as f64 / 1e3;
        let mut summary = BusySummary::default();
        let mut self_ms: HashMap<String, f64> = HashMap::new();
        let mut total_ms: HashMap<String, f64> = HashMap::new();
        let mut k = 0;
        while k < self.samples.len() {
            let Some(&leaf) = index.get(&self.samples[k]) else {
                k += 1;
                continue;
            };
            if idle(leaf) {
                k += 1;
                continue;
            }
            let start = k;
            let mut ms = 0.0;
            while k < self.samples.len() && index.get(&self.samples[k]).is_some_and(|&i| !idle(i)) {
                ms += dur(k);
                k += 1;
            }
            if ms < min_ms {
                continue;
            }
            summary.stretches_ms.push(ms);
            for s in start..k {
                let Some(&leaf) = index.get(&self.samples[s]) else {
                    continue;
                };
                *self_ms.entry(name(leaf)).or_default() += dur(s);
                let mut seen = std::collections::HashSet::new();
                let mut at = Some(leaf);
                while let Some(i) = at {
                    let n = name(i);
                    if seen.insert(n.clone()) {
                        *total_ms.entry(n).or_default() += dur(s);
                    }
                    at = parent[i];
                }
            }
        }
        let sorted = |m: HashMap<String, f64>| {
            let mut v: Vec<_> = m.into_iter().collect();
            v.sort_by(|a, b| b.1.total_cmp(&a.1));
            v
        };
        summary.self_ms = sorted(self_ms);
        summary.total_ms = sorted(total_ms);
        summary
    }
}
