//! Stores on S3-compatible object storage: `--store s3://BUCKET/PREFIX`.
//!
//! The ORAM writes a level of a partition whole whenever it rebuilds it (and never writes part
//! of one), so each level region is one object, `PREFIX/p<partition>/l<level>r<region>`
//! (`partition` counted among the partitions of this store), written with one PUT; a slot is
//! read with one ranged GET of that object, and a rebuild reads a source level with one GET of
//! the whole object. `PREFIX/pir-oram-store` records the slot size and count, so a prefix is
//! never formatted twice nor opened with another shape.
//!
//! What the object store sees is what a directory store sees: sealed slots, which object and
//! byte range is read, which object is replaced, and when. Integrity and rollback detection are
//! the seals' (`pir_oram::seal`): every slot is bound to its partition, level, region, slot and
//! the epoch of the rebuild that wrote it, and the client state keeps the epochs, so a changed
//! object, an object moved to another name, or an older copy of an object put back fails
//! authentication when it is read. A missing object is an error, never zeros.
//!
//! Durability: a PUT is acknowledged once the object is stored (S3's contract), so
//! [`SlotStore::sync`] has nothing left to wait for: every write before it has returned.
//!
//! Credentials and endpoint come from the environment (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_S3`,
//! `AWS_DEFAULT_REGION`, web identity and container credentials: `object_store`'s
//! `AmazonS3Builder::from_env`) or, when the environment names no key, from the shared
//! credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`; profile
//! `AWS_PROFILE`, else `default`). Never from flags, and never written to the state.
//!
//! The calls are synchronous (the ORAM driver's contract); each blocks on the runtime the disk
//! was given, from a thread outside it, and sends its requests concurrently.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStore, PutOptions, PutPayload};
use pir_oram::{Extent, Geometry, OramError, SlotStore};

/// The object recording a store's shape.
pub const MARKER: &str = "pir-oram-store";
/// One request to an object store, boxed so it can run as a task.
type Request<T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = object_store::Result<T>> + Send>>;
/// Requests one store call keeps in flight.
const IN_FLIGHT: usize = 32;

/// Where one object store is: `s3://BUCKET/PREFIX` (the prefix may be empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Location {
    /// Bucket: 3 to 63 lowercase letters, digits, dots and dashes (S3's rule).
    pub bucket: String,
    /// Object name prefix, without leading or trailing `/`.
    pub prefix: String,
}

impl S3Location {
    /// Parses `s3://BUCKET` or `s3://BUCKET/PREFIX`; `None` if it is not one.
    pub fn parse(text: &str) -> Option<S3Location> {
        let rest = text.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = prefix.trim_end_matches('/');
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            && bucket.as_bytes()[0].is_ascii_alphanumeric()
            && bucket.as_bytes()[bucket.len() - 1].is_ascii_alphanumeric();
        // The prefix must be a path object_store keeps as written (no empty or `.` parts).
        let prefix_ok =
            prefix.is_empty() || ObjectPath::parse(prefix).is_ok_and(|p| p.as_ref() == prefix);
        (bucket_ok && prefix_ok).then(|| S3Location {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// `s3://BUCKET/PREFIX`, as parsed.
    pub fn to_text(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }

    fn object(&self, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }
}

/// One level region inside a partition's footprint.
#[derive(Clone, Copy, Debug)]
struct Region {
    start: u64,
    slots: u32,
    level: usize,
    region: u8,
}

/// Where each extent lives: the level regions of one partition's footprint, and the stores'
/// locations (no client: the mapping is tested without a server).
struct Layout {
    locations: Vec<S3Location>,
    geometry: Geometry,
    /// Regions of one partition, by start slot.
    regions: Vec<Region>,
}

/// Object-store-backed stores, one `s3://` location each.
pub struct S3Stores {
    layout: Layout,
    clients: Vec<Arc<dyn ObjectStore>>,
    runtime: tokio::runtime::Handle,
}

fn store_error(location: &S3Location, path: &ObjectPath, e: object_store::Error) -> OramError {
    match e {
        object_store::Error::NotFound { .. } => OramError::Store(format!(
            "s3://{}/{path} is missing: the object store lost or deleted it",
            location.bucket
        )),
        e => OramError::Store(format!("s3://{}/{path}: {e}", location.bucket)),
    }
}

impl S3Stores {
    /// Clients for `locations` (store `i` is `locations[i]`) with credentials and endpoint
    /// from the environment or the shared credentials file. Sends nothing yet.
    pub fn new(
        locations: &[S3Location],
        geometry: &Geometry,
        runtime: tokio::runtime::Handle,
    ) -> Result<S3Stores, OramError> {
        // object_store's HTTPS client uses rustls with the process's default provider: ring,
        // the workspace's one provider. Err means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut clients = Vec::with_capacity(locations.len());
        for location in locations {
            let store = configured_builder()?
                .with_bucket_name(&location.bucket)
                .build()
                .map_err(|e| OramError::Store(format!("{}: {e}", location.to_text())))?;
            clients.push(Arc::new(store) as Arc<dyn ObjectStore>);
        }
        Ok(S3Stores {
            layout: Layout::new(locations, geometry),
            clients,
            runtime,
        })
    }

    fn marker_text(&self, store: u32) -> String {
        let geometry = &self.layout.geometry;
        let slot = geometry.sealed_slot();
        format!(
            "pir-oram object store v1\nslot bytes {slot}\nslots {}\n",
            geometry.store_bytes(store) / slot
        )
    }

    fn stores(&self) -> impl Iterator<Item = (usize, &S3Location, Arc<dyn ObjectStore>)> {
        self.layout
            .locations
            .iter()
            .zip(&self.clients)
            .enumerate()
            .map(|(i, (l, c))| (i, l, c.clone()))
    }

    /// Formats empty stores: refuses a prefix that already holds one, then records the shape.
    pub fn format(&self) -> Result<(), OramError> {
        for (i, location, store) in self.stores() {
            let path = location.object(MARKER);
            let text = self.marker_text(i as u32);
            let head = GetOptions::default().with_head(true);
            let found = self.runtime.block_on(async {
                match store.get_opts(&path, head).await {
                    Ok(_) => Ok(true),
                    Err(object_store::Error::NotFound { .. }) => Ok(false),
                    Err(e) => Err(e),
                }
            });
            match found {
                Ok(true) => {
                    return Err(OramError::Store(format!(
                    "{} already holds an ORAM store ({MARKER} is there); refusing to overwrite it",
                    location.to_text()
                )))
                }
                Ok(false) => {}
                Err(e) => return Err(store_error(location, &path, e)),
            }
            let payload = PutPayload::from(text.into_bytes());
            self.runtime
                .block_on(store.put_opts(&path, payload, PutOptions::default()))
                .map_err(|e| store_error(location, &path, e))?;
        }
        Ok(())
    }

    /// Checks that every store holds a store of this shape.
    pub fn check(&self) -> Result<(), OramError> {
        for (i, location, store) in self.stores() {
            let path = location.object(MARKER);
            let bytes = self
                .runtime
                .block_on(async {
                    store
                        .get_opts(&path, GetOptions::default())
                        .await?
                        .bytes()
                        .await
                })
                .map_err(|e| store_error(location, &path, e))?;
            if bytes.as_ref() != self.marker_text(i as u32).as_bytes() {
                return Err(OramError::Store(format!(
                    "{} holds a store of another shape: a different store, or a damaged one",
                    location.to_text()
                )));
            }
        }
        Ok(())
    }
}

impl Layout {
    fn new(locations: &[S3Location], geometry: &Geometry) -> Layout {
        let mut regions = Vec::new();
        let mut start = 0u64;
        for level in 0..geometry.levels() {
            let slots = geometry.slots(level);
            for region in 0..2u8 {
                regions.push(Region {
                    start,
                    slots,
                    level,
                    region,
                });
                start += u64::from(slots);
            }
        }
        Layout {
            locations: locations.to_vec(),
            geometry: geometry.clone(),
            regions,
        }
    }

    /// The object and the byte range within it of an extent (which lies in one region).
    fn locate(&self, extent: &Extent) -> Result<(usize, ObjectPath, Range<u64>), OramError> {
        let outside = || OramError::Store(format!("extent {extent:?} is outside the store"));
        let footprint = self.geometry.partition_footprint();
        let local = extent.first_slot / footprint;
        let within = extent.first_slot % footprint;
        let store = extent.store as usize;
        let location = self.locations.get(store).ok_or_else(outside)?;
        if local >= u64::from(self.geometry.partitions_on(extent.store)) {
            return Err(outside());
        }
        let at = self.regions.partition_point(|r| r.start <= within);
        let region = at
            .checked_sub(1)
            .and_then(|i| self.regions.get(i))
            .ok_or_else(outside)?;
        let offset = within - region.start;
        if offset + u64::from(extent.slots) > u64::from(region.slots) {
            return Err(outside());
        }
        let slot = self.geometry.sealed_slot();
        let path = location.object(&format!("p{local}/l{}r{}", region.level, region.region));
        let start = offset * slot;
        Ok((store, path, start..start + u64::from(extent.slots) * slot))
    }

    /// Bytes of the region an extent starts in, when it covers that region whole.
    fn whole_region(&self, extent: &Extent) -> Result<(usize, ObjectPath), OramError> {
        let (store, path, range) = self.locate(extent)?;
        let within = extent.first_slot % self.geometry.partition_footprint();
        let whole = self
            .regions
            .iter()
            .any(|r| r.start == within && r.slots == extent.slots);
        if range.start != 0 || !whole {
            return Err(OramError::Store(format!(
                "a write of part of a level ({extent:?}); object stores take whole levels"
            )));
        }
        Ok((store, path))
    }
}

/// `AmazonS3Builder::from_env`, with the shared credentials file when the environment names
/// no key, and plain HTTP allowed when the endpoint given is `http://` (a local server: the
/// seals protect the slots, and SigV4 never sends the secret).
fn configured_builder() -> Result<AmazonS3Builder, OramError> {
    let mut builder = AmazonS3Builder::from_env();
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if env("AWS_ACCESS_KEY_ID").is_none() {
        let other = [
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        ]
        .iter()
        .any(|v| env(v).is_some())
            || env("AWS_SKIP_SIGNATURE").is_some_and(|v| v == "true");
        match shared_credentials()? {
            Some((id, secret, token)) => {
                builder = builder
                    .with_access_key_id(id)
                    .with_secret_access_key(secret);
                if let Some(token) = token {
                    builder = builder.with_token(token);
                }
            }
            // Without this, object_store would ask the EC2 metadata service, and wait.
            None if !other => {
                return Err(OramError::Store(
                    "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put \
                     them in ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE), or \
                     set AWS_SKIP_SIGNATURE=true for a public bucket"
                        .into(),
                ))
            }
            None => {}
        }
    }
    let endpoint = env("AWS_ENDPOINT_URL_S3")
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .or_else(|| env("AWS_ENDPOINT"));
    if endpoint.is_some_and(|e| e.starts_with("http://")) {
        builder = builder.with_allow_http(true);
    }
    Ok(builder)
}

/// Key id, secret and session token of the profile in the shared credentials file, if the
/// file exists and the profile has a key.
fn shared_credentials() -> Result<Option<(String, String, Option<String>)>, OramError> {
    let path = match std::env::var_os("AWS_SHARED_CREDENTIALS_FILE") {
        Some(path) => PathBuf::from(path),
        None => match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".aws").join("credentials"),
            None => return Ok(None),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(OramError::Store(format!("{}: {e}", path.display()))),
    };
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    Ok(parse_credentials(&text, &profile))
}

/// The INI-style credentials file: `[profile]` then `key = value` lines.
fn parse_credentials(text: &str, profile: &str) -> Option<(String, String, Option<String>)> {
    let (mut id, mut secret, mut token) = (None, None, None);
    let mut in_profile = false;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = name.trim() == profile;
        } else if let (true, Some((key, value))) = (in_profile, line.split_once('=')) {
            let value = Some(value.trim().to_string());
            match key.trim() {
                "aws_access_key_id" => id = value,
                "aws_secret_access_key" => secret = value,
                "aws_session_token" => token = value,
                _ => {}
            }
        }
    }
    Some((id?, secret?, token))
}

impl S3Stores {
    /// Runs one request per job on the runtime, at most [`IN_FLIGHT`] at a time; replies in
    /// job order.
    fn run_all<T, F>(
        &self,
        jobs: Vec<(usize, ObjectPath, F)>,
    ) -> Vec<(usize, ObjectPath, Result<T, OramError>)>
    where
        T: Send + 'static,
        F: FnOnce(Arc<dyn ObjectStore>, ObjectPath) -> Request<T> + Send + 'static,
    {
        let permits = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
        self.runtime.block_on(async {
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|(store, path, request)| {
                    let client = self.clients[store].clone();
                    let permits = permits.clone();
                    let task_path = path.clone();
                    let handle = tokio::spawn(async move {
                        let _permit = permits.acquire_owned().await;
                        request(client, task_path).await
                    });
                    (store, path, handle)
                })
                .collect();
            let mut replies = Vec::with_capacity(handles.len());
            for (store, path, handle) in handles {
                let reply = match handle.await {
                    Ok(Ok(value)) => Ok(value),
                    Ok(Err(e)) => Err(store_error(&self.layout.locations[store], &path, e)),
                    Err(e) => Err(OramError::Store(format!(
                        "an object store request failed: {e}"
                    ))),
                };
                replies.push((store, path, reply));
            }
            replies
        })
    }
}

impl SlotStore for S3Stores {
    fn read(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError> {
        let mut jobs = Vec::with_capacity(extents.len());
        let mut wants = Vec::with_capacity(extents.len());
        for extent in extents {
            let (store, path, range) = self.layout.locate(extent)?;
            wants.push((range.end - range.start) as usize);
            // One ranged GET per extent: a slot, or a whole level for a rebuild.
            let options = GetOptions::default().with_range(Some(range));
            jobs.push((
                store,
                path,
                move |client: Arc<dyn ObjectStore>, path: ObjectPath| -> Request<_> {
                    Box::pin(async move { client.get_opts(&path, options).await?.bytes().await })
                },
            ));
        }
        for ((store, _, reply), want) in self.run_all(jobs).into_iter().zip(wants) {
            let bytes = reply?;
            if bytes.len() != want {
                return Err(OramError::ShortRead {
                    store: store as u32,
                    got: bytes.len(),
                    want,
                });
            }
            out.extend_from_slice(&bytes);
        }
        Ok(())
    }

    fn write(&mut self, extent: Extent, bytes: &[u8]) -> Result<(), OramError> {
        self.write_many(&[(extent, bytes)])
    }

    fn write_many(&mut self, writes: &[(Extent, &[u8])]) -> Result<(), OramError> {
        let slot = self.layout.geometry.sealed_slot();
        let mut jobs = Vec::with_capacity(writes.len());
        for (extent, bytes) in writes {
            if bytes.len() as u64 != u64::from(extent.slots) * slot {
                return Err(OramError::Store("a write of the wrong size".into()));
            }
            let (store, path) = self.layout.whole_region(extent)?;
            // One PUT per rebuilt level: the object is replaced whole.
            let payload = PutPayload::from(bytes.to_vec());
            jobs.push((
                store,
                path,
                move |client: Arc<dyn ObjectStore>, path: ObjectPath| -> Request<_> {
                    Box::pin(async move {
                        client
                            .put_opts(&path, payload, PutOptions::default())
                            .await
                            .map(|_| ())
                    })
                },
            ));
        }
        for (_, _, reply) in self.run_all(jobs) {
            reply?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), OramError> {
        // Every PUT has returned, and S3 acknowledges a PUT once the object is stored.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn locations_parse_strictly() {
        let l = S3Location::parse("s3://my-bucket/a/b/").unwrap();
        assert_eq!((l.bucket.as_str(), l.prefix.as_str()), ("my-bucket", "a/b"));
        assert_eq!(l.to_text(), "s3://my-bucket/a/b");
        assert_eq!(S3Location::parse("s3://abc").unwrap().to_text(), "s3://abc");
        for bad in [
            "s3://ab/p",
            "s3://Upper/p",
            "s3://-abc/p",
            "s3://abc//p",
            "s3://abc/a//b",
            "s3://abc/./p",
            "https://abc/p",
            "s3:///p",
        ] {
            assert!(S3Location::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn credentials_files_are_read_by_profile() {
        let text = "[default]\naws_access_key_id = A\naws_secret_access_key=B\n\n[other]\n\
                    aws_access_key_id = C\naws_secret_access_key = D\naws_session_token = T\n";
        assert_eq!(
            parse_credentials(text, "default"),
            Some(("A".into(), "B".into(), None))
        );
        assert_eq!(
            parse_credentials(text, "other"),
            Some(("C".into(), "D".into(), Some("T".into())))
        );
        assert_eq!(parse_credentials(text, "none"), None);
    }

    #[test]
    fn extents_map_to_objects_and_ranges() {
        let g = Geometry::new(512, 1000, 2).unwrap();
        let loc = S3Location::parse("s3://bucket/pre").unwrap();
        let s = Layout::new(&[loc.clone(), loc], &g);
        let slot = g.sealed_slot();
        let level = g.levels() - 1;
        let start = g.region_start(3, level, 1);
        let (store, path, range) = s
            .locate(&Extent {
                store: 1,
                first_slot: start + 2,
                slots: 1,
            })
            .unwrap();
        assert_eq!(store, 1);
        assert_eq!(path.as_ref(), format!("pre/p1/l{level}r1"));
        assert_eq!(range, 2 * slot..3 * slot);
        let whole = Extent {
            store: 1,
            first_slot: start,
            slots: g.slots(level),
        };
        assert!(s.whole_region(&whole).is_ok());
        let part = Extent { slots: 2, ..whole };
        assert!(s.whole_region(&part).is_err());
        let past = Extent {
            store: 0,
            first_slot: g.store_bytes(0) / slot,
            slots: 1,
        };
        assert!(s.locate(&past).is_err());
    }
}
