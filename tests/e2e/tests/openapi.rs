//! The server's `/openapi.json` is a valid OpenAPI 3.1 document by a third-party validator
//! (`@apidevtools/swagger-parser`, installed by `cargo xtask`), with every reference resolved.

use std::process::Command;

use glassbox_e2e::{node_modules, root, start_server};

#[tokio::test]
async fn the_description_is_valid_openapi() {
    let server = start_server(&[("GLASSBOX_EMBEDDINGS", "off")])
        .await
        .expect("server starts");
    let text = reqwest::get(format!("http://{}/openapi.json", server.addr))
        .await
        .expect("GET /openapi.json")
        .text()
        .await
        .expect("a body");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &text).expect("written");
    let out = Command::new("node")
        .arg(root().join("tests/e2e/fixtures/openapi-validate.cjs"))
        .arg(node_modules())
        .arg(&file)
        .output()
        .expect("node runs (installed by cargo xtask)");
    assert!(
        out.status.success(),
        "not valid OpenAPI: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a report");
    assert!(report["operations"].as_u64() >= Some(24), "{report}");
}
