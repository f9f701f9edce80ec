//! The ORAM core's cost per operation, without the block-store application around it: the
//! `pir bench --oram` round (fill every block once, then closed-loop rounds of uniformly random
//! 4 KiB reads and writes, half each, 32 in flight) driven through [`Client`] on one slot file
//! with one `pread`/`pwrite` per extent, as a directory store does. Prints one JSON row per
//! round with what the store moved per operation and how full the batches were, so two
//! schedules can be compared on the work they do, not only on the time it took; and where the
//! wall time per operation went (`wall_us_per_op`): in the store's batch reads (one-slot
//! extents), its shuffle reads, its writes, and the rest (`core`: sealing, opening,
//! scheduling). With one thread and 32 requests in flight every request of a step waits for
//! the whole step, so these shares are where requests wait.
//!
//! Uses only the `Client` and `Oram` calls every schedule has, so the same file builds against
//! older commits of the crate.
//!
//! `cargo run --release -p pir-oram --example oram_core_bench -- SIZE_MIB OPS ROUNDS [DIR]`

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::time::Instant;

use pir_oram::{reuse_buffer, Client, Extent, Geometry, Op, Oram, OramError, Request, SlotStore};
use rand::{Rng, RngCore};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// One sparse file of sealed slots, with the wall time spent in its calls: where a step's
/// time goes (the store's copies against the core's own work), for any schedule.
struct SlotFile {
    file: File,
    slot: u64,
    /// Seconds in reads of one-slot extents only (a batch's reads), in other reads (shuffle
    /// pieces), and in writes.
    batch_read_s: f64,
    shuffle_read_s: f64,
    write_s: f64,
}

impl SlotStore for SlotFile {
    fn read(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError> {
        let start = Instant::now();
        let result = self.read_all(extents, out);
        let spent = start.elapsed().as_secs_f64();
        if extents.iter().all(|e| e.slots == 1) {
            self.batch_read_s += spent;
        } else {
            self.shuffle_read_s += spent;
        }
        result
    }

    fn read_reusing(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<usize, OramError> {
        let start = Instant::now();
        let result = self.read_into(extents, out);
        let spent = start.elapsed().as_secs_f64();
        if extents.iter().all(|e| e.slots == 1) {
            self.batch_read_s += spent;
        } else {
            self.shuffle_read_s += spent;
        }
        result
    }

    fn write(&mut self, extent: Extent, bytes: &[u8]) -> Result<(), OramError> {
        let start = Instant::now();
        let result = self
            .file
            .write_all_at(bytes, extent.first_slot * self.slot)
            .map_err(|err| OramError::Store(err.to_string()));
        self.write_s += start.elapsed().as_secs_f64();
        result
    }

    fn sync(&mut self) -> Result<(), OramError> {
        Ok(())
    }
}

impl SlotFile {
    fn read_all(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError> {
        for e in extents {
            let start = out.len();
            out.resize(start + (u64::from(e.slots) * self.slot) as usize, 0);
            self.file
                .read_exact_at(&mut out[start..], e.first_slot * self.slot)
                .map_err(|err| OramError::Store(err.to_string()))?;
        }
        Ok(())
    }
}

impl SlotFile {
    /// [`SlotStore::read_reusing`]: overwrites the front of `out` (zeroing only growth).
    fn read_into(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<usize, OramError> {
        let slots: u64 = extents.iter().map(|e| u64::from(e.slots)).sum();
        let buffer = reuse_buffer(out, (slots * self.slot) as usize);
        let mut at = 0;
        for e in extents {
            let len = (u64::from(e.slots) * self.slot) as usize;
            self.file
                .read_exact_at(&mut buffer[at..at + len], e.first_slot * self.slot)
                .map_err(|err| OramError::Store(err.to_string()))?;
            at += len;
        }
        Ok(at)
    }
}

/// CPU seconds of this process (user + system) from `/proc/self/stat`, NaN elsewhere.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) / 100.0,
        _ => f64::NAN,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: u64| -> Result<u64, Box<dyn std::error::Error>> {
        Ok(args
            .get(i)
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(default))
    };
    let (mib, ops, rounds) = (number(0, 1024)?, number(1, 20_000)?, number(2, 3)?);
    let dir = args
        .get(3)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let block = 4096u32;
    let g = Geometry::new(block, (mib << 20) / u64::from(block), 1)?;
    let path = dir.join(format!("oram_core_bench.{}", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    file.set_len(g.store_bytes(0))?;
    std::fs::remove_file(&path)?;
    let store = SlotFile {
        file,
        slot: g.sealed_slot(),
        batch_read_s: 0.0,
        shuffle_read_s: 0.0,
        write_s: 0.0,
    };
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let oram = Oram::create(g.clone(), &mut rng)?;
    let mut client = Client::new(oram, store, ChaCha20Rng::seed_from_u64(2));
    // Fill: every block written once, 256 at a time (as the block store's fill does).
    let fill = Instant::now();
    let mut id = 0u64;
    for first in (0..g.blocks).step_by(256) {
        for b in first..(first + 256).min(g.blocks) {
            let mut data = vec![0u8; block as usize];
            rng.fill_bytes(&mut data);
            client.oram.submit(Request {
                id,
                block: b,
                op: Op::Write(data),
            })?;
            id += 1;
        }
        while client.oram.pending_len() > 0 {
            client.step()?;
        }
    }
    let fill_s = fill.elapsed().as_secs_f64();
    for round in 0..rounds {
        let before = client.oram.traffic().clone();
        let store_before = (
            client.store.batch_read_s,
            client.store.shuffle_read_s,
            client.store.write_s,
        );
        let mut started: HashMap<u64, Instant> = HashMap::new();
        let mut latencies = Vec::with_capacity(ops as usize);
        let (mut next, mut steps, mut batches, mut short) = (0u64, 0u64, 0u64, 0u64);
        let cpu = cpu_seconds();
        let begin = Instant::now();
        while (latencies.len() as u64) < ops {
            while started.len() < 32 && next < ops {
                let target = rng.random_range(0..g.blocks);
                let op = if next.is_multiple_of(2) {
                    let mut data = vec![0u8; block as usize];
                    rng.fill_bytes(&mut data);
                    Op::Write(data)
                } else {
                    Op::Read
                };
                client.oram.submit(Request {
                    id: next,
                    block: target,
                    op,
                })?;
                started.insert(next, Instant::now());
                next += 1;
            }
            let pending = client.oram.pending_len();
            let answers = client.step()?;
            steps += 1;
            batches += u64::from(!answers.is_empty());
            short += u64::from(answers.len() < pending.min(32));
            for answer in answers {
                if let Some(t) = started.remove(&answer.id) {
                    latencies.push(t.elapsed());
                }
            }
        }
        let elapsed = begin.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        let t = client.oram.traffic();
        let per = |a: u64, b: u64| (a - b) as f64 / ops as f64;
        let us = |now: f64, then: f64| (now - then) * 1e6 / ops as f64;
        let s = &client.store;
        let (batch_read, shuffle_read, write) = (
            us(s.batch_read_s, store_before.0),
            us(s.shuffle_read_s, store_before.1),
            us(s.write_s, store_before.2),
        );
        let core = elapsed * 1e6 / ops as f64 - batch_read - shuffle_read - write;
        latencies.sort_unstable();
        let at = |f: f64| latencies[((latencies.len() - 1) as f64 * f) as usize].as_secs_f64();
        println!(
            "{{\"round\":{round},\"fill_s\":{fill_s:.1},\"ops_per_s\":{:.0},\"cpu_us_per_op\":{:.1},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"slots_read_per_op\":{:.1},\"extents_read_per_op\":{:.2},\"slots_written_per_op\":{:.1},\"extents_written_per_op\":{:.2},\"steps\":{steps},\"batches\":{batches},\"short_steps\":{short},\"cache\":{},\"wall_us_per_op\":{{\"batch_read\":{batch_read:.1},\"shuffle_read\":{shuffle_read:.1},\"write\":{write:.1},\"core\":{core:.1}}}}}",
            ops as f64 / elapsed,
            cpu * 1e6 / ops as f64,
            at(0.5) * 1e3,
            at(0.99) * 1e3,
            per(t.slots_read, before.slots_read),
            per(t.extents_read, before.extents_read),
            per(t.slots_written, before.slots_written),
            per(t.extents_written, before.extents_written),
            client.oram.cache_len(),
        );
    }
    Ok(())
}
