//! `pir safebrowsing serve`: the list's buckets as the versions of a server kind on
//! `pir-host`.

use std::sync::Arc;

use anyhow::Result;
use pir_core::{Database, DbShape};
use pir_host::{Change, Opening, Started};
use pir_keys::SecretKey;
use pir_service::checklist::{download_envelope, Checklist, Role};
use pir_service::{Metrics, ReleaseInfo, ReleaseSet, ServedRelease};

use super::{open_database, SbServeArgs, SbServeSettings, PRIVACY};
use crate::list::{ListBucket, ListDatabase};

/// `pir safebrowsing serve`: resolves the settings, then prints them (`--print-config`) or
/// serves.
pub(super) async fn serve(flags: SbServeArgs) -> Result<()> {
    pir_host::serve_command(&flags.config, &flags, |settings: SbServeSettings| {
        let role = Role::of(usize::from(settings.server))?;
        Ok(Buckets { settings, role })
    })
    .await
}

/// One Checklist service per bucket of `list` (those served already, `at.served`, are reused).
fn bucket_services(
    list: &ListDatabase,
    role: Role,
    at: &Opening<'_, Checklist>,
) -> Result<Vec<ServedRelease<Checklist>>> {
    list.buckets()
        .iter()
        .map(|bucket| match at.reuse(&bucket.database_id) {
            Some(served) => Ok(ServedRelease::new(
                release_info(list, bucket),
                served.service.clone(),
            )),
            None => bucket_release(list, bucket, role, at.key_copy()?, at.metrics.clone()),
        })
        .collect()
}

/// The Checklist service of `bucket` of `list` as the server in `role` serves it, signing
/// with `key` and counting into `metrics`: one version of `pir safebrowsing serve` (public for
/// tests that run both servers in one process).
pub fn bucket_release(
    list: &ListDatabase,
    bucket: &ListBucket<'_>,
    role: Role,
    key: SecretKey,
    metrics: Arc<Metrics>,
) -> Result<ServedRelease<Checklist>> {
    let records = bucket.len() as u64;
    let params = pir_xor::checklist::Params::new(records, 32)?;
    let database = Database::from_bytes(DbShape::new(records, 32)?, bucket.records)?;
    let name = list.name().as_bytes().to_vec();
    let backend = Checklist::new(params, database, bucket.database_id, role, name)?;
    let service = backend.serve(key).with_metrics(metrics);
    Ok(ServedRelease::new(
        release_info(list, bucket),
        Arc::new(service),
    ))
}

/// A bucket's release: its database id, in the list's version, never expiring.
fn release_info(list: &ListDatabase, bucket: &ListBucket<'_>) -> ReleaseInfo {
    ReleaseInfo {
        id: bucket.database_id,
        version: list.version(),
        expires_unix: u64::MAX,
    }
}

/// `pir safebrowsing serve` as a server kind: the buckets of the list are the versions (a
/// reload keeps the buckets the new version still has and retires the others); server 0
/// also serves the list index as its download.
struct Buckets {
    settings: SbServeSettings,
    role: Role,
}

impl pir_host::Kind for Buckets {
    type Backend = Checklist;
    type Opened = ListDatabase;
    const WHAT: &'static str = "the Safe Browsing server";
    const UNIT: &'static str = "bucket(s)";

    fn open(&self, at: &Opening<'_, Checklist>) -> Result<pir_host::Versions<Self>> {
        let list = open_database(&self.settings.db)?;
        let services = bucket_services(&list, self.role, at)?;
        Ok((services, list))
    }

    fn installed(&self, set: &ReleaseSet<Checklist>, list: &ListDatabase) {
        if self.role == Role::Offline {
            set.set_download(Some(download_envelope(&list.index().encode())));
        }
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let (list, addr) = (started.opened, started.running.addr);
        vec![
            format!(
                "safebrowsing server {} ({}) serving list {:?} version {}: {} full hashes in {} \
                 bucket(s), database {} at https://{addr} with key {}",
                self.settings.server,
                if self.role == Role::Offline {
                    "offline: hints, refreshes, list index"
                } else {
                    "online: lookups"
                },
                list.name(),
                list.version(),
                list.len(),
                list.buckets().len(),
                hex::encode(&list.id()[..8]),
                started.key.public().fingerprint()
            ),
            super::lists_line(list),
            format!(
                "Checklist hints {} per client; buckets below {} records by DPF; health: \
                 https://{addr}/health (SIGHUP reloads the database)",
                pir_host::log::human(hint_bytes(list) as u64),
                list.dpf_below(),
            ),
            format!("privacy: {PRIVACY}"),
        ]
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        let list = change.opened;
        format!(
            "reloaded list {:?} version {}: {} full hashes, {} bucket(s) ({} new)",
            list.name(),
            list.version(),
            list.len(),
            list.buckets().len(),
            change.added.len()
        )
    }

    fn reload_failed(&self, _before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!("reload failed, still serving as before: {error:#}")
    }
}

/// The Checklist hints a client downloads for `list`: those of the buckets not looked up by
/// DPF.
fn hint_bytes(list: &ListDatabase) -> usize {
    list.buckets()
        .iter()
        .filter(|b| b.len() >= list.dpf_below())
        .map(|b| pir_xor::checklist::Params::new(b.len() as u64, 32).map_or(0, |p| p.hint_bytes()))
        .sum()
}
