//! Stores on local directories: each holds one `slots` file of sealed slots.
//!
//! The file is created sparse at its full size; reads and writes are positioned
//! (`pread`/`pwrite`), one system call per extent, and [`SlotStore::sync`] is `fdatasync`.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use pir_oram::{Extent, Geometry, OramError, SlotStore};

/// The slot file inside a store directory.
pub const SLOT_FILE: &str = "slots";

/// Directory-backed stores, one file each.
pub struct FileStores {
    files: Vec<File>,
    dirs: Vec<PathBuf>,
    slot_bytes: u64,
    dirty: Vec<bool>,
}

fn io(dir: &Path, e: std::io::Error) -> OramError {
    OramError::Store(format!("{}: {e}", dir.join(SLOT_FILE).display()))
}

impl FileStores {
    /// Creates the slot files (which must not exist yet) for `geometry`.
    pub fn create(dirs: &[PathBuf], geometry: &Geometry) -> Result<(), OramError> {
        for (i, dir) in dirs.iter().enumerate() {
            std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dir.join(SLOT_FILE))
                .map_err(|e| io(dir, e))?;
            let len = geometry.store_bytes(i as u32);
            // Allocated now, so no ORAM write ever meets a full disk.
            crate::room::allocate(&file, len).map_err(|e| io(dir, e))?;
            file.set_len(len).map_err(|e| io(dir, e))?;
            file.sync_all().map_err(|e| io(dir, e))?;
        }
        Ok(())
    }

    /// Opens existing stores and checks their sizes.
    pub fn open(dirs: &[PathBuf], geometry: &Geometry) -> Result<FileStores, OramError> {
        let mut files = Vec::with_capacity(dirs.len());
        for (i, dir) in dirs.iter().enumerate() {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(dir.join(SLOT_FILE))
                .map_err(|e| io(dir, e))?;
            let len = file.metadata().map_err(|e| io(dir, e))?.len();
            let want = geometry.store_bytes(i as u32);
            if len != want {
                return Err(OramError::Store(format!(
                    "{} is {len} bytes, the ORAM needs {want}: a different store, or a damaged one",
                    dir.join(SLOT_FILE).display()
                )));
            }
            files.push(file);
        }
        Ok(FileStores {
            files,
            dirs: dirs.to_vec(),
            slot_bytes: geometry.sealed_slot(),
            dirty: vec![false; dirs.len()],
        })
    }

    fn file(&self, store: u32) -> Result<(&File, &Path), OramError> {
        match (
            self.files.get(store as usize),
            self.dirs.get(store as usize),
        ) {
            (Some(f), Some(d)) => Ok((f, d)),
            _ => Err(OramError::Store(format!("no store {store}"))),
        }
    }
}

impl SlotStore for FileStores {
    fn read(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError> {
        for e in extents {
            let (file, dir) = self.file(e.store)?;
            let start = out.len();
            let len = u64::from(e.slots) * self.slot_bytes;
            out.resize(start + len as usize, 0);
            file.read_exact_at(&mut out[start..], e.first_slot * self.slot_bytes)
                .map_err(|err| io(dir, err))?;
        }
        Ok(())
    }

    fn read_reusing(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<usize, OramError> {
        let total: u64 = extents.iter().map(|e| u64::from(e.slots)).sum::<u64>() * self.slot_bytes;
        let buffer = pir_oram::reuse_buffer(out, total as usize);
        let mut at = 0;
        for e in extents {
            let (file, dir) = self.file(e.store)?;
            let len = (u64::from(e.slots) * self.slot_bytes) as usize;
            file.read_exact_at(&mut buffer[at..at + len], e.first_slot * self.slot_bytes)
                .map_err(|err| io(dir, err))?;
            at += len;
        }
        Ok(at)
    }

    fn write(&mut self, extent: Extent, bytes: &[u8]) -> Result<(), OramError> {
        let (file, dir) = self.file(extent.store)?;
        if bytes.len() as u64 != u64::from(extent.slots) * self.slot_bytes {
            return Err(OramError::Store("a write of the wrong size".into()));
        }
        file.write_all_at(bytes, extent.first_slot * self.slot_bytes)
            .map_err(|err| io(dir, err))?;
        self.dirty[extent.store as usize] = true;
        Ok(())
    }

    fn sync(&mut self) -> Result<(), OramError> {
        for (i, dirty) in self.dirty.iter_mut().enumerate() {
            if *dirty {
                self.files[i]
                    .sync_data()
                    .map_err(|e| io(&self.dirs[i], e))?;
                *dirty = false;
            }
        }
        Ok(())
    }
}
