//! Compiles regroup's Kubernetes `.proto` subset (`proto/`) with protox (no
//! protoc needed) into a FileDescriptorSet that `src/rewrite/protobuf`
//! embeds with `include_bytes!`.

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from("proto");
    println!("cargo:rerun-if-changed=proto");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("proto/ is readable")
        .map(|e| e.expect("proto/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "proto"))
        .collect();
    files.sort();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let mut compiler = protox::Compiler::new([&dir]).expect("protox compiler");
    compiler.include_imports(true).include_source_info(false);
    for f in &files {
        let name = f.strip_prefix(&dir).expect("under proto/");
        if let Err(e) = compiler.open_file(name) {
            panic!("{}: {e}", f.display());
        }
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("k8s_descriptors.bin");
    std::fs::write(&out, compiler.encode_file_descriptor_set()).expect("write descriptors");
}
