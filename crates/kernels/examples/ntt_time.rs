//! Times the negacyclic NTT at d = 1024 and 2048 on every backend.
#![allow(clippy::unwrap_used)]
use pir_kernels::ntt::NttTable;
use pir_kernels::Backend;
use std::time::Instant;

fn main() {
    for d in [1024usize, 2048] {
        let table = NttTable::new(268_369_921, d).unwrap();
        let mut a: Vec<u32> = (0..d as u32).map(|i| i * 7919 % 268_369_921).collect();
        for backend in Backend::available() {
            let runs = 2000;
            let t = Instant::now();
            for _ in 0..runs {
                table.forward(backend, &mut a);
            }
            let f = t.elapsed() / runs;
            let t = Instant::now();
            for _ in 0..runs {
                table.inverse(backend, &mut a);
            }
            let i = t.elapsed() / runs;
            println!("d = {d} {backend:?}: forward {f:?}, inverse {i:?}");
        }
    }
}
