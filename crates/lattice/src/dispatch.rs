//! The one place that maps a [`Scheme`] to its implementation ([`build_server`],
//! [`open_client`]), above every scheme: adding a single-server scheme means implementing the
//! traits of [`crate::single`] and adding one arm to each function here.

use pir_core::Error;

use crate::double::{DoublePirClient, DoublePirServer};
use crate::params::{Params, Scheme};
use crate::prg::Seed;
use crate::simple::{SimplePirClient, SimplePirServer};
use crate::single::{BuildInput, Saved, SingleClient, SingleServer};
use crate::wire::DbVersion;
use crate::ypir::{YpirClient, YpirServer, YpirSpClient, YpirSpServer};

/// [`build_server`], reusing `saved` offline work when it belongs to this database (else an
/// error: the caller recomputes). Also returns the offline work to save.
pub fn build_server_saved(
    params: Params,
    records: &[u8],
    seeds: [Seed; 2],
    version: DbVersion,
    saved: Option<Saved>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Box<dyn SingleServer>, Saved), Error> {
    let input = BuildInput {
        params,
        records,
        seeds,
        version,
        saved,
        progress,
    };
    match params.scheme {
        Scheme::SimplePir => boxed(SimplePirServer::build(input)),
        Scheme::DoublePir => boxed(DoublePirServer::build(input)),
        Scheme::Ypir => boxed(YpirServer::build(input)),
        Scheme::YpirSp => boxed(YpirSpServer::build(input)),
        Scheme::Inspire => boxed(crate::inspire::InspireServer::build(input)),
    }
}

/// A built server behind the common interface.
fn boxed<S: SingleServer + 'static>(
    built: Result<(S, Saved), Error>,
) -> Result<(Box<dyn SingleServer>, Saved), Error> {
    let (server, saved) = built?;
    Ok((Box::new(server), saved))
}

/// Packs `records` for `params.scheme` and computes its hint (`progress(done, total)` follows
/// that pass). Returns the server and the hint message clients download.
pub fn build_server(
    params: Params,
    records: &[u8],
    seeds: [Seed; 2],
    version: DbVersion,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Box<dyn SingleServer>, Vec<u8>), Error> {
    let (server, saved) = build_server_saved(params, records, seeds, version, None, progress)?;
    Ok((server, saved.hint))
}

/// A client of `scheme` from its hint message.
pub fn open_client(scheme: Scheme, hint: &[u8]) -> Result<Box<dyn SingleClient>, Error> {
    Ok(match scheme {
        Scheme::SimplePir => Box::new(SimplePirClient::new(hint)?),
        Scheme::DoublePir => Box::new(DoublePirClient::new(hint)?),
        Scheme::Ypir => Box::new(YpirClient::new(hint)?),
        Scheme::YpirSp => Box::new(YpirSpClient::new(hint)?),
        Scheme::Inspire => Box::new(crate::inspire::InspireClient::new(hint)?),
    })
}
