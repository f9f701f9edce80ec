//! Stores for measuring real devices: directory stores opened with `O_DIRECT` (the page cache
//! does not hide the device), a wrapper that counts what a store is asked to do (requests,
//! bytes, and seeks: requests that do not start where the previous one on that store ended),
//! and a wrapper that adds a fixed latency to every store request. `pir bench --oram
//! --oram-direct` and `--oram-store-latency-ms` use them
//! ([`crate::command::device_bench`]); nothing else does.
//!
//! `O_DIRECT` needs the buffer, the file offset and the length aligned to the device's
//! logical block; a sealed slot is `B + 28` bytes, so every request is widened to whole
//! [`ALIGN`]-byte blocks: a read reads the covering blocks and keeps its part, a write reads
//! the partial first and last blocks, patches them, and writes the covering blocks back. One
//! thread owns a store, so that read-modify-write is not racing another write.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pir_oram::{Extent, Geometry, OramError, SlotStore};

use crate::files::SLOT_FILE;

/// Alignment of `O_DIRECT` buffers, offsets and lengths: 4 KiB covers 512-byte and 4 KiB
/// logical blocks.
pub const ALIGN: usize = 4096;

/// A heap buffer whose usable part starts on an [`ALIGN`] boundary (over-allocated by
/// `ALIGN` and offset, so no `unsafe` allocation is needed).
#[derive(Default)]
struct Aligned {
    raw: Vec<u8>,
}

impl Aligned {
    /// A zeroed aligned slice of `len` bytes.
    fn get(&mut self, len: usize) -> Result<&mut [u8], OramError> {
        if self.raw.len() < len + ALIGN {
            self.raw = vec![0u8; len + ALIGN];
        }
        let at = self.raw.as_ptr().align_offset(ALIGN);
        if at >= ALIGN {
            return Err(OramError::Store("cannot align an O_DIRECT buffer".into()));
        }
        let out = &mut self.raw[at..at + len];
        out.fill(0);
        Ok(out)
    }
}

fn direct_error(path: &Path, e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) {
        format!(
            "{}: O_DIRECT is refused here ({e}): this file system (tmpfs, some network and \
             overlay file systems) cannot bypass the page cache; give --scratch a directory \
             on a disk (`findmnt -T DIR` shows its file system)",
            path.display()
        )
    } else {
        format!("{}: {e}", path.display())
    }
}

fn open_direct(path: &Path, create: bool) -> Result<File, String> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(path)
        .map_err(|e| direct_error(path, &e))
}

/// Checks that `dir` (existing) takes `O_DIRECT` reads and writes: a one-block file is
/// written, read back and removed. The error says why, and what to do, when it does not.
pub fn probe(dir: &Path) -> Result<(), String> {
    let path = dir.join(".o_direct_probe");
    let result = (|| {
        let file = open_direct(&path, true)?;
        let mut buffer = Aligned::default();
        let block = buffer.get(ALIGN).map_err(|e| e.to_string())?;
        block.fill(0x5a);
        file.write_all_at(block, 0)
            .and_then(|()| file.read_exact_at(block, 0))
            .map_err(|e| direct_error(&path, &e))
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// Directory stores (the `slots` files [`crate::FileStores::create`] made) opened with
/// `O_DIRECT`.
pub struct DirectStores {
    files: Vec<File>,
    dirs: Vec<PathBuf>,
    /// Each slot file's size: a widened write past it is cut back at the next sync.
    sizes: Vec<u64>,
    grown: Vec<bool>,
    dirty: Vec<bool>,
    slot_bytes: u64,
    buffer: Aligned,
}

fn io(dir: &Path, e: std::io::Error) -> OramError {
    OramError::Store(format!("{}: {e}", dir.join(SLOT_FILE).display()))
}

/// Reads `out.len()` bytes at `at`, zeros past the end of the file (widened reads may pass
/// it).
fn read_upto(file: &File, out: &mut [u8], at: u64) -> std::io::Result<()> {
    let mut done = 0;
    while done < out.len() {
        match file.read_at(&mut out[done..], at + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(())
}

impl DirectStores {
    /// Opens the existing slot files of `dirs` with `O_DIRECT` and checks their sizes.
    pub fn open(dirs: &[PathBuf], geometry: &Geometry) -> Result<DirectStores, OramError> {
        let mut files = Vec::with_capacity(dirs.len());
        let mut sizes = Vec::with_capacity(dirs.len());
        for (i, dir) in dirs.iter().enumerate() {
            let path = dir.join(SLOT_FILE);
            let file = open_direct(&path, false).map_err(OramError::Store)?;
            let len = file.metadata().map_err(|e| io(dir, e))?.len();
            let want = geometry.store_bytes(i as u32);
            if len != want {
                return Err(OramError::Store(format!(
                    "{} is {len} bytes, the ORAM needs {want}",
                    path.display()
                )));
            }
            files.push(file);
            sizes.push(want);
        }
        Ok(DirectStores {
            files,
            dirs: dirs.to_vec(),
            grown: vec![false; dirs.len()],
            dirty: vec![false; dirs.len()],
            sizes,
            slot_bytes: geometry.sealed_slot(),
            buffer: Aligned::default(),
        })
    }

    fn index(&self, store: u32) -> Result<usize, OramError> {
        let i = store as usize;
        if i < self.files.len() {
            Ok(i)
        } else {
            Err(OramError::Store(format!("no store {store}")))
        }
    }

    /// The byte range of an extent, and the aligned range covering it.
    fn span(&self, e: &Extent) -> (u64, u64, u64, u64) {
        let start = e.first_slot * self.slot_bytes;
        let end = start + u64::from(e.slots) * self.slot_bytes;
        let a = ALIGN as u64;
        (start, end, start / a * a, end.div_ceil(a) * a)
    }
}

impl SlotStore for DirectStores {
    fn read(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError> {
        for e in extents {
            let i = self.index(e.store)?;
            let (start, end, lo, hi) = self.span(e);
            let (file, dir) = (&self.files[i], &self.dirs[i]);
            let block = self.buffer.get((hi - lo) as usize)?;
            read_upto(file, block, lo).map_err(|err| io(dir, err))?;
            out.extend_from_slice(&block[(start - lo) as usize..(end - lo) as usize]);
        }
        Ok(())
    }

    fn write(&mut self, extent: Extent, bytes: &[u8]) -> Result<(), OramError> {
        let i = self.index(extent.store)?;
        let (start, end, lo, hi) = self.span(&extent);
        if bytes.len() as u64 != end - start {
            return Err(OramError::Store("a write of the wrong size".into()));
        }
        let (file, dir) = (&self.files[i], &self.dirs[i]);
        let block = self.buffer.get((hi - lo) as usize)?;
        let a = ALIGN;
        // The partial first and last blocks keep the bytes around the extent.
        if start != lo {
            read_upto(file, &mut block[..a], lo).map_err(|err| io(dir, err))?;
        }
        // (One block that is partial at both ends was read just above.)
        if end != hi && (block.len() > a || start == lo) {
            let len = block.len();
            read_upto(file, &mut block[len - a..], hi - a as u64).map_err(|err| io(dir, err))?;
        }
        block[(start - lo) as usize..(end - lo) as usize].copy_from_slice(bytes);
        file.write_all_at(block, lo).map_err(|err| io(dir, err))?;
        self.grown[i] |= hi > self.sizes[i];
        self.dirty[i] = true;
        Ok(())
    }

    fn sync(&mut self) -> Result<(), OramError> {
        for i in 0..self.files.len() {
            if self.grown[i] {
                // A widened write passed the end: back to the size the ORAM expects.
                self.files[i]
                    .set_len(self.sizes[i])
                    .map_err(|e| io(&self.dirs[i], e))?;
                self.grown[i] = false;
            }
            if self.dirty[i] {
                self.files[i]
                    .sync_data()
                    .map_err(|e| io(&self.dirs[i], e))?;
                self.dirty[i] = false;
            }
        }
        Ok(())
    }
}

/// What a store was asked to do, counted by [`Counted`].
#[derive(Debug, Default)]
pub struct IoCounts {
    reads: AtomicU64,
    writes: AtomicU64,
    seeks: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    syncs: AtomicU64,
}

/// A snapshot of [`IoCounts`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoStats {
    /// Read requests (one per extent).
    pub reads: u64,
    /// Write requests (one per extent).
    pub writes: u64,
    /// Requests, reads or writes, that did not start where the previous request on the same
    /// store ended (the first one on a store counts).
    pub seeks: u64,
    /// Slot bytes read.
    pub bytes_read: u64,
    /// Slot bytes written.
    pub bytes_written: u64,
    /// Syncs.
    pub syncs: u64,
}

impl IoCounts {
    /// The counts now.
    pub fn snapshot(&self) -> IoStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        IoStats {
            reads: get(&self.reads),
            writes: get(&self.writes),
            seeks: get(&self.seeks),
            bytes_read: get(&self.bytes_read),
            bytes_written: get(&self.bytes_written),
            syncs: get(&self.syncs),
        }
    }
}

impl std::ops::Sub for IoStats {
    type Output = IoStats;

    fn sub(self, before: IoStats) -> IoStats {
        IoStats {
            reads: self.reads - before.reads,
            writes: self.writes - before.writes,
            seeks: self.seeks - before.seeks,
            bytes_read: self.bytes_read - before.bytes_read,
            bytes_written: self.bytes_written - before.bytes_written,
            syncs: self.syncs - before.syncs,
        }
    }
}

/// A store that counts every request ([`IoCounts`]) and adds `latency` (microseconds,
/// changeable while it runs) before each call: a read of many extents, a write of many, and a
/// sync each take one added latency, as one round trip to every remote store at once does.
pub struct Counted<S> {
    inner: S,
    slot_bytes: u64,
    /// Per store: the byte just past the last request (`u64::MAX`: none yet).
    head: Vec<u64>,
    counts: Arc<IoCounts>,
    latency_us: Arc<AtomicU64>,
}

impl<S: SlotStore> Counted<S> {
    /// Wraps `inner` (slots of `slot_bytes`, `stores` stores); returns the counters and the
    /// latency knob with it.
    pub fn new(
        inner: S,
        slot_bytes: u64,
        stores: u32,
    ) -> (Counted<S>, Arc<IoCounts>, Arc<AtomicU64>) {
        let counts = Arc::new(IoCounts::default());
        let latency_us = Arc::new(AtomicU64::new(0));
        let store = Counted {
            inner,
            slot_bytes,
            head: vec![u64::MAX; stores as usize],
            counts: counts.clone(),
            latency_us: latency_us.clone(),
        };
        (store, counts, latency_us)
    }

    fn wait(&self) {
        let us = self.latency_us.load(Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
        }
    }

    fn note(&mut self, e: &Extent, write: bool) {
        let start = e.first_slot * self.slot_bytes;
        let len = u64::from(e.slots) * self.slot_bytes;
        if let Some(head) = self.head.get_mut(e.store as usize) {
            if *head != start {
                self.counts.seeks.fetch_add(1, Ordering::Relaxed);
            }
            *head = start + len;
        }
        let (count, bytes) = if write {
            (&self.counts.writes, &self.counts.bytes_written)
        } else {
            (&self.counts.reads, &self.counts.bytes_read)
        };
        count.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(len, Ordering::Relaxed);
    }
}

impl<S: SlotStore> SlotStore for Counted<S> {
    fn read(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError> {
        self.wait();
        for e in extents {
            self.note(e, false);
        }
        self.inner.read(extents, out)
    }

    fn read_reusing(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<usize, OramError> {
        self.wait();
        for e in extents {
            self.note(e, false);
        }
        self.inner.read_reusing(extents, out)
    }

    fn write(&mut self, extent: Extent, bytes: &[u8]) -> Result<(), OramError> {
        self.wait();
        self.note(&extent, true);
        self.inner.write(extent, bytes)
    }

    fn sync(&mut self) -> Result<(), OramError> {
        self.wait();
        self.counts.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync()
    }

    fn write_many(&mut self, writes: &[(Extent, &[u8])]) -> Result<(), OramError> {
        self.wait();
        for (e, _) in writes {
            self.note(e, true);
        }
        self.inner.write_many(writes)
    }
}
