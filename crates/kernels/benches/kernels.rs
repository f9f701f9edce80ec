#![allow(missing_docs)] // criterion_group! generates undocumented items
#![allow(clippy::unwrap_used)] // a benchmark of fixed, valid shapes
//! Criterion benchmarks of the kernels themselves, per backend, on a 64 MiB region (past the
//! caches, so the plain read is the yardstick). Run with `cargo bench -p pir-kernels`; the
//! whole-system numbers against 1 GiB databases come from `pir bench`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pir_kernels::bench_support::pseudo_random;
use pir_kernels::russians::RussiansLayout;
use pir_kernels::{batch, memory, russians, xor, Backend, Selection};

const REGION: usize = 64 << 20;

fn kernels(c: &mut Criterion) {
    let region = pseudo_random(REGION, 1);
    let mut group = c.benchmark_group("kernels-64MiB");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(REGION as u64));
    for backend in Backend::available() {
        group.bench_with_input(
            BenchmarkId::new("read", backend.name()),
            &backend,
            |bench, &be| bench.iter(|| memory::read_with(be, &region)),
        );
        for b in [32usize, 4096] {
            let rows = REGION / b;
            let bits = pseudo_random(rows.div_ceil(8), 2);
            let chunks = [bits.as_slice()];
            let selection = Selection::new(&chunks);
            group.bench_with_input(
                BenchmarkId::new(format!("scan-b{b}"), backend.name()),
                &backend,
                |bench, &be| {
                    bench.iter(|| {
                        let mut acc = vec![0u8; b];
                        xor::scan_with(be, selection, &region, b, 0..rows, &mut acc);
                        acc
                    })
                },
            );
        }
        let b = 4096;
        let rows = REGION / b;
        let layout = RussiansLayout::new(rows, b, 1, 4).unwrap();
        let table = russians::build_parallel(layout, &region, &|_, _| {});
        let bits = pseudo_random(rows.div_ceil(8), 3);
        let chunks = [bits.as_slice()];
        group.bench_with_input(
            BenchmarkId::new("four-russians-t4-b4096", backend.name()),
            &backend,
            |bench, &be| {
                bench.iter(|| {
                    let mut acc = vec![0u8; b];
                    russians::scan_with(
                        be,
                        layout,
                        Selection::new(&chunks),
                        &table,
                        0..layout.super_groups(),
                        &mut acc,
                    );
                    acc
                })
            },
        );
        for (b, queries) in [(32usize, 64usize), (4096, 64)] {
            let rows = REGION / b;
            let bits: Vec<Vec<u8>> = (0..queries)
                .map(|q| pseudo_random(rows.div_ceil(8), 10 + q as u64))
                .collect();
            let chunks: Vec<[&[u8]; 1]> = bits.iter().map(|v| [v.as_slice()]).collect();
            let selections: Vec<Selection<'_>> = chunks.iter().map(|c| Selection::new(c)).collect();
            group.bench_with_input(
                BenchmarkId::new(format!("batch-x{queries}-b{b}"), backend.name()),
                &backend,
                |bench, &be| {
                    bench.iter(|| {
                        let mut accs = vec![0u8; queries * b];
                        batch::scan_with(be, &selections, &region, b, 0..rows, &mut accs);
                        accs
                    })
                },
            );
        }
    }
    group.finish();
}

/// One forward and one inverse negacyclic NTT at YPIR's `d = 2048` (first prime of `q2`).
fn ntt(c: &mut Criterion) {
    let table = pir_kernels::ntt::NttTable::new(268_369_921, 2048).unwrap();
    let poly: Vec<u32> = pseudo_random(2048 * 4, 3)
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) % 268_369_921)
        .collect();
    let mut group = c.benchmark_group("ntt-2048");
    for backend in Backend::available() {
        group.bench_function(BenchmarkId::new("forward+inverse", backend.name()), |b| {
            let mut x = poly.clone();
            b.iter(|| {
                table.forward(backend, &mut x);
                table.inverse(backend, &mut x);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, kernels, ntt);
criterion_main!(benches);
