//! Do this machine's cores share execution units? Times two loops that touch no memory beyond
//! L1, first on one thread, then on two threads at once (each thread the same loop):
//! - a vector-throughput loop (AVX2 XOR of an 8 KiB buffer into another, as the batched XOR
//!   kernels do), which slows down when another thread competes for the same core's vector
//!   units (SMT siblings, or a host that schedules two vCPUs on one physical core);
//! - a latency-bound multiply chain, which shares a core with almost no loss.
//!
//! On separate cores both ratios stay near 1.0. A vector ratio well above 1.0 with the chain
//! near 1.0 means compute-bound kernels (the batched pass) cannot scale 2x on two threads here,
//! whatever they do. `cargo run --release -p pir-kernels --example core_sharing -- [rounds]`
//! (default 8).
use std::time::Instant;

/// `acc ^= src` over 8 KiB, `iters` times; inlined into each caller so that it compiles with
/// the caller's target features.
#[inline(always)]
fn xor_loop(iters: usize) -> u8 {
    let src = vec![7u8; 8192];
    let mut acc = vec![1u8; 8192];
    for _ in 0..iters {
        for (a, s) in acc.iter_mut().zip(&src) {
            *a ^= *s;
        }
        std::hint::black_box(&mut acc);
    }
    acc[0]
}

/// [`xor_loop`] with AVX2 (the compiler vectorises the loop).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn vector_loop_avx2(iters: usize) -> u8 {
    xor_loop(iters)
}

fn vector_loop(iters: usize) -> u8 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just checked for AVX2.
        return unsafe { vector_loop_avx2(iters) };
    }
    xor_loop(iters)
}

/// A chain of dependent multiplies: bound by the multiplier's latency, not its throughput.
fn multiply_chain(iters: usize) -> u64 {
    let mut k = 1u64;
    for _ in 0..iters {
        k = k.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    }
    k
}

fn ms<R>(f: &(dyn Fn() -> R + Sync)) -> f64 {
    let t = Instant::now();
    std::hint::black_box(f());
    t.elapsed().as_secs_f64() * 1e3
}

/// (alone ms, slower of the two threads at once ms).
fn alone_and_paired<R>(f: &(dyn Fn() -> R + Sync)) -> (f64, f64) {
    let alone = ms(f);
    let paired = std::thread::scope(|scope| {
        let a = scope.spawn(|| ms(f));
        let b = scope.spawn(|| ms(f));
        a.join()
            .unwrap_or(f64::NAN)
            .max(b.join().unwrap_or(f64::NAN))
    });
    (alone, paired)
}

fn main() -> Result<(), String> {
    let rounds: usize = match std::env::args().nth(1) {
        Some(arg) => arg.parse().map_err(|e| format!("{arg}: {e}"))?,
        None => 8,
    };
    println!("round  vector alone ms  two at once  ratio  |  chain alone ms  two at once  ratio");
    for round in 0..rounds {
        let (va, vp) = alone_and_paired(&|| vector_loop(1_000_000));
        let (ca, cp) = alone_and_paired(&|| multiply_chain(600_000_000));
        println!(
            "{round:>5}  {va:>15.1}  {vp:>11.1}  {:>5.2}  |  {ca:>14.1}  {cp:>11.1}  {:>5.2}",
            vp / va,
            cp / ca
        );
    }
    Ok(())
}
