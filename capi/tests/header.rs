//! `include/sgemm_bi.h` is what cbindgen generates from this crate today. Regenerate it with
//! `SGEMM_BI_UPDATE_HEADER=1 cargo test -p sgemm-bi-capi --test header`.

mod support;

fn generate(root: &std::path::Path) -> String {
    let config = cbindgen::Config::from_file(root.join("capi/cbindgen.toml"))
        .expect("capi/cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("capi/src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn header_is_fresh() {
    let root = support::repo_root();
    let path = root.join("include/sgemm_bi.h");
    let fresh = generate(&root);
    if std::env::var("SGEMM_BI_UPDATE_HEADER").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &fresh).expect("write include/sgemm_bi.h");
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let line = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(fresh.lines().count()));
        panic!(
            "include/sgemm_bi.h is stale (first difference at line {}): regenerate it with \
             SGEMM_BI_UPDATE_HEADER=1 cargo test -p sgemm-bi-capi --test header",
            line + 1
        );
    }
}
