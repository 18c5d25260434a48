//! The validating readers the JSON walk could stand on, each alone over
//! the same body, for callgrind (`bench/json_walk.sh` prints the walk's
//! own figure; this prints what one candidate costs):
//!
//!   json_options MODE N [BODY]
//!
//! MODE: `serde` (serde_json validating into `IgnoredAny`: today's first
//! pass), `simd` (simd-json's stage 1 and tape, on a copy, with the
//! structural index it leaves in its buffers), `sonic` (sonic-rs
//! validating into `IgnoredAny`), `memmem` (one `memmem` pass for one
//! name: the needle search's unit). `bench/json_options.sh` runs each
//! twice and prints instructions per byte.

use std::hint::black_box;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().expect("usage: json_options MODE N [BODY]");
    let n: usize = args.next().and_then(|a| a.parse().ok()).expect("N");
    let path = args.next().unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/kube-1.24/renamed/027-get-foo-json/response.body"
        )
        .to_owned()
    });
    let body = std::fs::read(&path).expect("the body");
    let mut ok = 0usize;
    match mode.as_str() {
        "serde" => {
            for _ in 0..n {
                let b: &[u8] = black_box(&body);
                ok += usize::from(serde_json::from_slice::<serde::de::IgnoredAny>(b).is_ok());
            }
        }
        "simd" => {
            let mut buffers = simd_json::Buffers::new(body.len());
            let mut copy = Vec::with_capacity(body.len());
            for _ in 0..n {
                copy.clear();
                copy.extend_from_slice(black_box(&body));
                let good = simd_json::to_tape_with_buffers(&mut copy, &mut buffers).is_ok();
                ok += usize::from(good && !buffers.structural_indexes().is_empty());
            }
        }
        "sonic" => {
            for _ in 0..n {
                let b: &[u8] = black_box(&body);
                ok += usize::from(sonic_rs::from_slice::<serde::de::IgnoredAny>(b).is_ok());
            }
        }
        "memmem" => {
            let f = memchr::memmem::Finder::new("samplecontroller.team1.example.com");
            for _ in 0..n {
                ok += f.find_iter(black_box(&body)).count();
            }
        }
        m => panic!("unknown mode {m}"),
    }
    println!("{mode}: {n} passes over {} bytes, {ok}", body.len());
}
